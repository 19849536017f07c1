"""A custom op with its own OpenCL kernel: ``quick_gelu``, CLIP's ``x * sigmoid(1.702 * x)`` in
one pass over memory instead of three ops.

    python examples/custom_opencl_op.py [OUT_DIR]

1. Register the op: a schema and numpy kernels (float32; float16 storage with float32 math).
2. Give it an OpenCL kernel with ``halfway.opencl_kernel``: OpenCL C written in the common
   header's T / LOAD / STORE, so the one text runs float32, float16 storage and native float16.
3. Register a replacement pass, ``fuse_quick_gelu``: ``x * sigmoid(1.702 * x)`` -> quick_gelu,
   with the scaling as Paddle's ``scale`` or as a product with a constant (what exporters write),
   in either operand order.
4. Build a CLIP-style MLP (two residual blocks of fc -> quick GELU -> fc), transpile it with the
   pass and the default pipeline, then to float16; run both on OpenCL with ``strict=True`` (no op
   may fall back to numpy) and check them against numpy float32 math.

Results (the input, the parameters, numpy's reference and both OpenCL outputs) go to
OUT_DIR/results.npz.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import halfway
from halfway import layers
from halfway.executor import Executor, OpenCLPlace
from halfway.ir import initializers
from halfway.ir.builder import create_parameter
from halfway.ir.dtypes import DType
from halfway.ir.operator import Operator
from halfway.ir.schema import OpSchema, Slot, register_op, same_as
from halfway.kernels.opencl.custom import Input, Output, Size, numel
from halfway.kernels.registry import KernelSpec, register_kernel
from halfway.passes import PassManager, RewriteContext, Rule, Rules, register_rules
from halfway.passes.commute import commuted
from halfway.passes.fuse_activations import check_constant
from halfway.passes.pattern import Pattern, op, var
from halfway.passes.rewrite import Decline

ALPHA = 1.702

# -- 1. the op: schema and numpy kernels ----------------------------------------------------------
register_op(OpSchema("quick_gelu", inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X", "Out"),
                     doc=f"Out = X * sigmoid({ALPHA} * X) (CLIP's GELU approximation)."))


def quick_gelu_reference(x: np.ndarray) -> np.ndarray:
    """The op's math in numpy, in x's dtype."""
    return x / (1 + np.exp(x.dtype.type(-ALPHA) * x))


@register_kernel("quick_gelu", "numpy", dtypes=[DType.float32, DType.float16])
def quick_gelu_numpy(spec: KernelSpec) -> object:
    return quick_gelu_reference  # float16 tensors are widened to float32 around it


# -- 2. its OpenCL kernel -------------------------------------------------------------------------
QUICK_GELU_CL = """
__kernel void quick_gelu(__global const T* x, __global T* out, int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    REAL v = LOAD(x, i);
    STORE(out, i, v / (R(1) + exp(R(-%r) * v)));
}
""" % ALPHA

halfway.opencl_kernel("quick_gelu", QUICK_GELU_CL, "quick_gelu", args=[Input("X"), Output("Out"), Size("X")],
                      global_size=lambda spec: [numel(spec.input("X"))])


# -- 3. the replacement pass ----------------------------------------------------------------------
def _scaled_x() -> list:
    """1.702 * x: Paddle's scale, or a product with a constant in either order."""
    return [op("scale", "scaled", X=var("x")),
            *commuted("elementwise_mul", [var("x")], [var("alpha", persistable=True)])]


def quick_gelu(ctx: RewriteContext, *, out: Operator, x: str, scaled: Operator | None = None,
               alpha: str | None = None) -> Operator | Decline:
    if scaled is not None and (scaled.attr("bias") != 0 or abs(scaled.attr("scale") - ALPHA) > 1e-6 * ALPHA):
        return ctx.decline(f"scale({scaled.attr('scale')}, bias {scaled.attr('bias')}) is not {ALPHA} * x")
    if alpha is not None:
        check_constant(ctx, alpha, ALPHA, "the sigmoid's scale")
    if ctx.var(x).shape != ctx.var(out.output("Out")[0]).shape:
        return ctx.decline("the product broadcasts x to another shape")
    return Operator("quick_gelu", {"X": [x]}, {"Out": out.output("Out")})


RULES = Rules([
    # x * sigmoid(1.702 * x) -> quick_gelu
    *(Rule(Pattern(p), quick_gelu, "x * sigmoid(1.702 x) -> quick_gelu")
      for p in commuted("elementwise_mul", [var("x")], [op("sigmoid", X=s) for s in _scaled_x()], name="out")),
])
register_rules("fuse_quick_gelu", RULES, "Replace x * sigmoid(1.702 * x) by one quick_gelu.", needs_scope=True)


# -- 4. a model, transpiled and run on OpenCL -----------------------------------------------------
def build_model(width: int = 64, hidden: int = 256) -> tuple[halfway.Program, halfway.Scope, str]:
    """x -> x + fc2(quick_gelu(fc1(x))), twice: the first GELU written with scale (as Paddle
    writes it), the second with a product by a constant (as an ONNX export does)."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 7, width])
        alpha = create_parameter("alpha", [1], initializer=initializers.Constant(ALPHA))
        for block, scaled in enumerate((lambda h: layers.scale(h, ALPHA), lambda h: layers.elementwise_mul(h, alpha))):
            h = layers.fc(x, hidden, num_flatten_dims=2, name=f"fc{block}a")
            gelu = layers.elementwise_mul(h, layers.sigmoid(scaled(h)))
            x = layers.elementwise_add(x, layers.fc(gelu, width, num_flatten_dims=2, name=f"fc{block}b"))
    scope = halfway.init_scope(prog, seed=0)
    return prog, scope, x.name


def numpy_model(x: np.ndarray, scope: halfway.Scope) -> np.ndarray:
    """The MLP in numpy float32, from the scope's weights."""
    for block in range(2):
        w1, b1, w2, b2 = (scope.find(f"fc{block}{layer}.{param}_0") for layer in "ab" for param in "wb")
        x = x + quick_gelu_reference(x @ w1 + b1) @ w2 + b2
    return x


def main(out_dir: Path) -> None:
    prog, scope, out = build_model()
    fused = PassManager(before=["fuse_quick_gelu"], count_ops=True).run(prog, scope, fetch=[out])
    print("ops:", [o.type for o in fused.program.global_block().ops if o.type not in ("feed", "fetch")])
    half, report = halfway.float16_transpile(fused.program, fused.scope)
    print("float16 ops:", [o.type for o in half.global_block().ops if o.type not in ("feed", "fetch")])

    x = np.random.default_rng(0).standard_normal((2, 7, 64)).astype(np.float32)
    want = numpy_model(x, scope)
    place = OpenCLPlace(strict=True)
    results = {"x": x, "numpy": want, **{name: scope.find(name) for name in scope}}
    for label, program in (("float32", fused.program), ("float16", half)):
        prepared = Executor(place).prepare(program, {"x": x}, [out], fused.scope)
        kernels = sorted({str(key) for _, op_type, key in prepared.report.kernels if op_type == "quick_gelu"})
        (got,) = prepared.run({"x": x})
        error = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        print(f"{label} on {prepared.report.device} ({prepared.report.float16_mode} mode): kernels {kernels}, "
              f"numpy fallbacks {len(prepared.report.fallbacks)}, max error / max |y| = {error:.2e}")
        results[f"opencl_{label}"] = got
    np.savez(out_dir / "results.npz", **results)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(sys.argv[1] if len(sys.argv) > 1 else scratch)
        target.mkdir(parents=True, exist_ok=True)
        main(target)
