"""A custom op end to end: ``custom_addn`` sums N same-shaped tensors in one kernel.

    python examples/custom_addn.py [OUT_DIR]

1. Register the op: a schema (slots, attrs ``input_num`` / ``op_kind``, shape inference) and
   numpy kernels for float32 and float16 (float16 storage, float32 accumulation).
2. Register a replacement pass, ``fuse_addn``: rewrite rules turning chains and trees of
   ``elementwise_add`` over same-shaped tensors into one ``custom_addn``.
3. Build a small multi-branch CNN whose branches are summed by elementwise_adds, run the
   default pipeline plus ``fuse_addn`` on it, run it, and check it against numpy; do the same
   for a float16 program.
4. Save the transpiled model and load it again: ``custom_addn`` and its attrs travel in the
   .pdmodel like any op's. A process that loads it without registering the op gets a clear
   error naming the missing registration.

Results (inputs and outputs) go to OUT_DIR/results.npz so a test can check them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import halfway
from halfway import layers
from halfway.executor import Executor
from halfway.ir.attrs import AttrType
from halfway.ir.dtypes import DType
from halfway.ir.operator import Operator
from halfway.ir.schema import AttrSpec, InferContext, OpSchema, Slot, register_op
from halfway.kernels.registry import KernelSpec, register_kernel
from halfway.passes import Decline, PassManager, RewriteContext, Rule, Rules, pattern, register_rules


# -- 1. the op: schema and kernels ----------------------------------------------------------------
def _infer_addn(ctx: InferContext) -> None:
    xs = ctx.inputs("X")
    ctx.check(len(xs) == ctx.attr("input_num"), f"input_num is {ctx.attr('input_num')} but X has {len(xs)} vars")
    ctx.check(all(x == xs[0] for x in xs), f"all X must have one shape and dtype, got {xs}")
    ctx.set_output("Out", xs[0].shape, xs[0].dtype)


register_op(OpSchema(
    "custom_addn", inputs=[Slot("X", duplicable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("input_num", AttrType.INT), AttrSpec("op_kind", AttrType.STRING, "sum", choices=("sum", "mean"))],
    infer=_infer_addn, doc="Out = X[0] + ... + X[input_num - 1] (op_kind sum) or their mean (op_kind mean).",
))


def _addn(spec: KernelSpec, accumulate: type) -> object:
    scale = 1.0 / spec.attrs["input_num"] if spec.attrs["op_kind"] == "mean" else 1.0
    out_dtype = spec.output("Out").dtype.numpy

    def run(*xs: np.ndarray) -> np.ndarray:
        total = xs[0].astype(accumulate)
        for x in xs[1:]:
            total += x
        if scale != 1.0:
            total *= accumulate(scale)
        return total.astype(out_dtype, copy=False)

    return run


@register_kernel("custom_addn", "numpy", dtypes=[DType.float32])
def addn_float32(spec: KernelSpec) -> object:
    return _addn(spec, np.float32)


@register_kernel("custom_addn", "numpy", dtypes=[DType.float16])
def addn_float16(spec: KernelSpec) -> object:
    return _addn(spec, np.float32)  # float16 in and out, float32 sums


# -- 2. the replacement pass ----------------------------------------------------------------------
def _same_shapes(ctx: RewriteContext, names: list[str], out: str) -> bool:
    target = ctx.var(out)
    return all(ctx.var(n).shape == target.shape and ctx.var(n).dtype is target.dtype for n in names)


def _addn_op(ctx: RewriteContext, inputs: list[str], top: Operator) -> Operator | Decline:
    out = top.output("Out")[0]
    if top.attr("axis") != -1 or not _same_shapes(ctx, inputs, out):
        return ctx.decline("the add broadcasts: its operands differ in shape or dtype")
    return Operator("custom_addn", {"X": inputs}, {"Out": out}, {"input_num": len(inputs), "op_kind": "sum"})


def _summands(op: Operator) -> list[str]:
    return list(op.input("X")) if op.type == "custom_addn" else [*op.input("X"), *op.input("Y")]


def merge_sum(ctx: RewriteContext, *, top: Operator, left: Operator | None = None, right: Operator | None = None,
              a: str | None = None, b: str | None = None) -> Operator | Decline:
    """Operands in order: a captured inner op's summands replace its output."""
    if (left is not None and left.type == "custom_addn" and left.attr("op_kind") != "sum") or (
            right is not None and right.type == "custom_addn" and right.attr("op_kind") != "sum"):
        return ctx.decline("a custom_addn that does not sum")
    inputs = (_summands(left) if left is not None else [a]) + (_summands(right) if right is not None else [b])
    return _addn_op(ctx, inputs, top)


_SUM = "elementwise_add|custom_addn(...)"
RULES = Rules([
    # (x + y) + (z + w), addn(...) + addn(...) and the like -> custom_addn
    Rule(pattern(f"top:elementwise_add(X=left:{_SUM}, Y=right:{_SUM})"), merge_sum, "sum + sum -> custom_addn"),
    # (x + y) + b, addn(...) + b -> custom_addn
    Rule(pattern(f"top:elementwise_add(X=left:{_SUM}, Y=b)"), merge_sum, "sum + b -> custom_addn"),
    # a + (x + y), a + addn(...) -> custom_addn
    Rule(pattern(f"top:elementwise_add(X=a, Y=right:{_SUM})"), merge_sum, "a + sum -> custom_addn"),
])
register_rules("fuse_addn", RULES, "Replace sums of same-shaped tensors by one custom_addn.")


# -- 3. a model, transpiled and run ---------------------------------------------------------------
def build_model() -> tuple[halfway.Program, halfway.Scope, str]:
    """x -> 3 conv/bn/relu branches; out = x + b1 + b2 + b3 (three elementwise_adds)."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4, 8, 8])
        branches = [layers.batch_norm(layers.conv2d(x, 4, k, padding=k // 2), act="relu") for k in (1, 3, 5)]
        out = x
        for branch in branches:
            out = layers.elementwise_add(out, branch)
    scope = halfway.init_scope(prog, seed=0)
    return prog, scope, out.name


def float16_sum(n: int) -> tuple[halfway.Program, list[str], str]:
    """((x0 + x1) + (x2 + x3)) + x4 ... over float16 inputs (a tree, not a chain)."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        xs = [layers.data(f"h{i}", [3, 5], dtype="float16") for i in range(n)]
        pairs = [layers.elementwise_add(xs[i], xs[i + 1]) for i in range(0, n - 1, 2)]
        out = pairs[0]
        for p in pairs[1:] + xs[len(pairs) * 2:]:
            out = layers.elementwise_add(out, p)
    return prog, [x.name for x in xs], out.name


def main(out_dir: Path) -> None:
    rng = np.random.default_rng(0)
    results: dict[str, np.ndarray] = {}

    prog, scope, out = build_model()
    fused = PassManager(after=["fuse_addn"], count_ops=True).run(prog, scope, fetch=[out])
    for record in fused.records:
        print(f"{record.name:16s} {record.op_delta}")
    addn = [o for o in fused.program.global_block().ops if o.type == "custom_addn"]
    print("custom_addn ops:", [(o.attr("input_num"), o.attr("op_kind")) for o in addn])
    x = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    (want,) = Executor().run(prog, {"x": x}, [out], scope)
    (got,) = Executor().run(fused.program, {"x": x}, [out], fused.scope)
    print("float32 model: max |transpiled - original| =", float(np.max(np.abs(got - want))))
    results.update(x=x, model_original=want, model_transpiled=got)

    half, names, half_out = float16_sum(5)
    half_fused = PassManager("fuse_addn").run(half)
    feeds = {n: rng.standard_normal((3, 5)).astype(np.float16) for n in names}
    (got16,) = Executor().run(half_fused.program, feeds, [half_out])
    print("float16 sum of 5 inputs, ops:", [o.type for o in half_fused.program.global_block().ops], got16.dtype)
    results.update({f"h{i}": feeds[n] for i, n in enumerate(names)}, float16_sum=got16)

    # -- 4. save, load, and load where the op is unknown --
    model = out_dir / "addn_model"
    halfway.save_inference_model(model, ["x"], [out], fused.program, fused.scope)
    loaded, feed_names, fetch_names, loaded_scope = halfway.load_inference_model(model)
    op = next(o for o in loaded.global_block().ops if o.type == "custom_addn")
    print("reloaded attrs:", {name: (attr.type.name, attr.value) for name, attr in op.typed_attrs().items()})
    (again,) = Executor().run(loaded, {"x": x}, fetch_names, loaded_scope)
    results["model_reloaded"] = again

    probe = ("import halfway\nprogram, *_ = halfway.load_inference_model(r'%s')\n"
             "try:\n    halfway.verify(program)\nexcept halfway.HalfwayError as e:\n    print(e)\n" % model)
    unknown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    print("without the registration:", next(line for line in unknown.splitlines() if "custom_addn" in line).strip())
    np.savez(out_dir / "results.npz", **results)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        target = Path(sys.argv[1])
        target.mkdir(parents=True, exist_ok=True)
        main(target)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
