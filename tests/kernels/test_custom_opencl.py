"""Custom OpenCL kernels (``halfway.opencl_kernel``) against numpy math: in float32, float16
storage and native float16 (where the device has cl_khr_fp16), constants prepared once from
parameters, and the errors of a kernel that does not build or does not fit its op; and
examples/custom_opencl_op.py on the default device."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway.executor import Executor, OpenCLPlace
from halfway.ir.attrs import AttrType
from halfway.ir.builder import append_op, program_guard
from halfway.ir.dtypes import DType
from halfway.ir.errors import HalfwayError, KernelNotFoundError
from halfway.ir.schema import AttrSpec, OpSchema, Slot, register_op, same_as
from halfway.kernels.opencl.custom import Attr, Constant, CustomKernelError, Input, Output, Size, numel, opencl_kernel
from halfway.kernels.registry import register_kernel
from tests.support.oprun import run_op

pytestmark = pytest.mark.opencl

ROOT = Path(__file__).parent.parent.parent
RNG = np.random.default_rng(11)

AFFINE_ROWS = """
__kernel void affine_rows(__global const T* x, __global const T* b, __global T* out, float alpha, int rows,
                          int cols) {
    int r = get_global_id(0), c = get_global_id(1);
    if (r >= rows || c >= cols) return;
    int i = r * cols + c;
    STORE(out, i, LOAD(x, i) * (REAL)alpha + LOAD(b, c));
}
"""
AFFINE_ARGS = [Input("X"), Input("B"), Output("Out"), Attr("alpha"), Size("X", 0), Size("X", -1)]


def affine_rows_op() -> None:
    """affine_rows: Out[r, c] = X[r, c] * alpha + B[c]."""
    register_op(OpSchema("affine_rows", inputs=[Slot("X"), Slot("B", dispensable=True)], outputs=[Slot("Out")],
                         attrs=[AttrSpec("alpha", AttrType.FLOAT, 1.0), AttrSpec("axes", AttrType.INTS, [0])],
                         infer=same_as("X", "Out")))


def affine_rows_kernel(source=AFFINE_ROWS, args=AFFINE_ARGS, **options) -> None:
    options = {"global_size": lambda spec: spec.input("X").shape, "local_size": (2, 4), **options}
    opencl_kernel("affine_rows", source, "affine_rows", args=args, **options)


def run_affine(place: OpenCLPlace, dtype: type, shape=(5, 7), sign: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(OpenCL's output, numpy's float32 math on the same inputs; ``sign`` flips alpha)."""
    x, b = RNG.standard_normal(shape).astype(dtype), RNG.standard_normal(shape[-1]).astype(dtype)
    ran = run_op("affine_rows", {"X": x, "B": b}, {"alpha": -1.5}, place=place)
    assert ran.report.fallbacks == [] and [str(k) for k in ran.kernels] == [f"affine_rows/opencl/{np.dtype(dtype)}"]
    return ran.out, x.astype(np.float32) * np.float32(-1.5 * sign) + b.astype(np.float32)


@pytest.mark.parametrize("dtype, precision, mode", [(np.float32, "normal", "float32"),
                                                    (np.float16, "normal", "storage"),
                                                    (np.float16, "high", "float32")])
def test_one_source_runs_float32_and_float16_storage(dtype, precision, mode):
    modes = []
    affine_rows_op()
    affine_rows_kernel(source=lambda spec, given: modes.append(given) or AFFINE_ROWS)
    place = OpenCLPlace(precision=precision, strict=True)
    if dtype == np.float16 and precision == "normal" and place.runtime.mode.value != "storage":
        pytest.skip(f"{place.runtime.caps.name} runs float16 in {place.runtime.mode.value} mode")
    got, want = run_affine(place, dtype)
    assert modes == [mode] and got.dtype == dtype
    tol = 1e-6 if dtype == np.float32 else 1e-3
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol * np.abs(want).max())


def test_native_float16_where_the_device_has_cl_khr_fp16():
    place = OpenCLPlace(precision="low", strict=True)
    if not place.runtime.caps.fp16:
        pytest.skip(f"{place.runtime.caps.name} has no cl_khr_fp16: float16 runs in storage mode there")
    modes = []
    affine_rows_op()
    affine_rows_kernel(source=lambda spec, given: modes.append(given) or AFFINE_ROWS)
    got, want = run_affine(place, np.float16)
    assert modes == ["native"]
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=4e-3, atol=4e-3 * np.abs(want).max())


def test_integer_dtypes_compute_in_their_own_type(place):
    modes = []
    register_op(OpSchema("twice", inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X", "Out")))
    source = """__kernel void twice(__global const T* x, __global T* out, int n) {
        int i = get_global_id(0);
        if (i < n) STORE(out, i, LOAD(x, i) * 2);
    }"""
    opencl_kernel("twice", lambda spec, given: modes.append(given) or source, "twice",
                  args=[Input("X"), Output("Out"), Size("X")], global_size=lambda spec: [numel(spec.input("X"))],
                  dtypes=[DType.int32, DType.int64])
    for dtype in (np.int32, np.int64):
        x = RNG.integers(-2**30, 2**30, (3, 11)).astype(dtype)
        ran = run_op("twice", {"X": x}, place=OpenCLPlace(strict=True))
        np.testing.assert_array_equal(ran.out, x * 2)
        assert ran.out.dtype == dtype
    assert modes == ["integer", "integer"]


def test_each_variant_compiles_once(place):
    affine_rows_op()
    affine_rows_kernel()
    run_affine(place, np.float32)
    built = place.runtime.compiled_programs
    run_affine(place, np.float32, shape=(3, 9))  # same source and options: the cached program
    assert place.runtime.compiled_programs == built


def test_defines_select_the_variant():
    affine_rows_op()
    source = AFFINE_ROWS.replace("(REAL)alpha", "(REAL)(SIGN * alpha)")
    affine_rows_kernel(source=source, defines=lambda spec: {"SIGN": "-1.0f"})
    got, want = run_affine(OpenCLPlace(strict=True), np.float32, sign=-1.0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


# -- constants prepared once from parameters ------------------------------------------------------
DENSE_T = """
__kernel void dense_t(__global const T* x, __global const T* wt, __global T* out, int k, int n) {
    int row = get_global_id(0), col = get_global_id(1);
    if (col >= n) return;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) acc += (float)LOAD(x, row * k + j) * (float)LOAD(wt, col * k + j);
    STORE(out, row * n + col, acc);
}
"""


def _infer_dense(ctx) -> None:
    x, w = ctx.input("X"), ctx.input("W")
    ctx.set_output("Out", (x.shape[0], w.shape[1]), x.dtype)


def dense_t_op(calls: list) -> None:
    """dense_t: Out = X @ W, its OpenCL kernel reading W transposed (rows of W.T, packed at prepare)."""
    register_op(OpSchema("dense_t", inputs=[Slot("X"), Slot("W")], outputs=[Slot("Out")], infer=_infer_dense))
    register_kernel("dense_t", "numpy")(lambda spec: lambda x, w: (x.astype(np.float32) @ w).astype(x.dtype))

    def transposed(spec):
        calls.append(spec.dtype)
        w = spec.constant("W")
        return None if w is None else w.T

    opencl_kernel("dense_t", DENSE_T, "dense_t", args=[Input("X"), Constant("wt"), Output("Out"), Size("X", 1),
                                                        Size("Out", 1)],
                  global_size=lambda spec: spec.output("Out").shape, constants={"wt": transposed})


def dense_program(x_shape, w: np.ndarray, *, w_fed: bool = False) -> tuple[halfway.Program, halfway.Scope, str]:
    prog, scope = halfway.Program(), halfway.Scope()
    block = prog.global_block()
    with program_guard(prog):
        x = block.create_var("x", dtype=w.dtype, shape=x_shape)
        wv = block.create_var("w", dtype=w.dtype, shape=w.shape, persistable=not w_fed)
        out = append_op("dense_t", {"X": [x], "W": [wv]})["Out"][0]
    if not w_fed:
        scope.set("w", w)
    return prog, scope, out.name


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_constant_is_packed_once_from_the_parameter(place, dtype):
    calls = []
    dense_t_op(calls)
    x, w = RNG.standard_normal((3, 6)).astype(dtype), RNG.standard_normal((6, 5)).astype(dtype)
    prog, scope, out = dense_program(x.shape, w)
    prepared = Executor(OpenCLPlace(strict=True)).prepare(prog, {"x": x}, [out], scope)
    want = x.astype(np.float64) @ w.astype(np.float64)
    tol = 1e-5 if dtype == np.float32 else 2e-3
    for _ in range(2):
        (got,) = prepared.run({"x": x})
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * np.abs(want).max())
    assert got.dtype == dtype and calls == [DType.from_any(dtype)]  # at prepare, not per run


def test_constant_of_a_fed_tensor_falls_back_or_is_refused():
    calls = []
    dense_t_op(calls)
    x, w = RNG.standard_normal((3, 6)).astype(np.float32), RNG.standard_normal((6, 5)).astype(np.float32)
    prog, scope, out = dense_program(x.shape, w, w_fed=True)
    with pytest.raises(KernelNotFoundError, match="constant 'wt' needs a parameter whose value is known at prepare"):
        Executor(OpenCLPlace(strict=True)).prepare(prog, {"x": x, "w": w}, [out], scope)
    prepared = Executor(OpenCLPlace()).prepare(prog, {"x": x, "w": w}, [out], scope)
    assert [t for _, t, _ in prepared.report.fallbacks] == ["dense_t"]
    np.testing.assert_allclose(prepared.run({"x": x, "w": w})[0], x @ w, rtol=1e-5, atol=1e-5)


# -- errors ---------------------------------------------------------------------------------------
def test_a_build_failure_shows_the_build_log_and_names_the_op(place):
    affine_rows_op()
    affine_rows_kernel(source=AFFINE_ROWS.replace("int i = r * cols + c;", "int i = r * cols + undeclared_name;"))
    with pytest.raises(CustomKernelError) as failed:
        run_affine(place, np.float32)
    message = str(failed.value)
    assert "affine_rows" in message and "OpenCL kernel 'affine_rows' failed to build for float32" in message
    assert "undeclared_name" in message and "error" in message  # the compiler's log


@pytest.mark.parametrize("options, match", [
    ({"global_size": lambda spec: [2.5]}, r"global_size must be 1 to 3 non-negative integers, got \[2.5\]"),
    ({"global_size": (1, 2, 3, 4)}, "global_size must be 1 to 3 non-negative integers"),
    ({"local_size": (4,)}, r"local_size \[4\] must be as many positive sizes as global_size \[5, 7\]"),
    ({"local_size": (64, 1024)}, r"local_size \[64, 1024\] holds 65536 work-items; .* allows at most"),
])
def test_wrong_work_sizes_are_named(place, options, match):
    affine_rows_op()
    affine_rows_kernel(**options)
    with pytest.raises(CustomKernelError, match=match):
        run_affine(place, np.float32)


def test_a_missing_argument_is_named(place):
    affine_rows_op()
    affine_rows_kernel(args=AFFINE_ARGS[:-1])
    with pytest.raises(CustomKernelError, match=r"takes 6 arguments but args gives 5: \(Input\(slot='X'"):
        run_affine(place, np.float32)


def test_a_list_attr_is_no_scalar_argument(place):
    affine_rows_op()
    affine_rows_kernel(args=[*AFFINE_ARGS[:3], Attr("axes"), *AFFINE_ARGS[4:]])
    with pytest.raises(CustomKernelError, match=r"argument Attr\(name='axes', .*\) is \(0,\), not a scalar"):
        run_affine(place, np.float32)


def test_an_absent_optional_input_is_named(place):
    affine_rows_op()
    affine_rows_kernel()
    with pytest.raises(CustomKernelError, match=r"argument Input\(slot='B', index=0\) is missing: the op has X\[0\]"):
        run_op("affine_rows", {"X": np.ones((2, 3), np.float32)}, place=place)


def test_a_kernel_name_the_source_lacks_is_named(place):
    affine_rows_op()
    opencl_kernel("affine_rows", AFFINE_ROWS, "affine", args=AFFINE_ARGS, global_size=lambda spec: [1])
    with pytest.raises(CustomKernelError, match="defines no kernel of that name; it defines affine_rows"):
        run_affine(place, np.float32)


@pytest.mark.parametrize("args, match", [
    ([Input("Y")], r"Input\(slot='Y', index=0\) names no input slot or attr of affine_rows; it has X, B"),
    ([Attr("beta")], "names no attr slot or attr of affine_rows; it has alpha, axes"),
    ([Constant("packed")], r"Constant\(name='packed'\) names no constant; constants: none"),
    (["X"], "argument 'X' is none of Input, Output, Attr, Size, Constant or a numpy scalar"),
])
def test_arguments_are_checked_against_the_schema_when_registered(args, match):
    affine_rows_op()
    with pytest.raises(CustomKernelError, match=match):
        opencl_kernel("affine_rows", AFFINE_ROWS, "affine_rows", args=args, global_size=(1,))


def test_build_errors_are_halfway_errors():
    assert issubclass(CustomKernelError, HalfwayError) and halfway.opencl_kernel is opencl_kernel


# -- the example ----------------------------------------------------------------------------------
def quick_gelu(x: np.ndarray) -> np.ndarray:
    return x * (1 / (1 + np.exp(-1.702 * x)))


def test_quick_gelu_example_runs_strict_on_opencl(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "custom_opencl_op.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "ops: ['fc', 'quick_gelu', 'fc', 'fc', 'quick_gelu', 'fc']" in run.stdout
    assert "kernels ['quick_gelu/opencl/float16'], numpy fallbacks 0" in run.stdout
    results = np.load(tmp_path / "results.npz")
    x = results["x"].astype(np.float64)
    for block in range(2):
        w1, b1, w2, b2 = (results[f"fc{block}{layer}.{param}_0"].astype(np.float64) for layer in "ab" for param in "wb")
        x = x + quick_gelu(x @ w1 + b1) @ w2 + b2
    scale = np.abs(x).max()
    np.testing.assert_allclose(results["opencl_float32"], x, rtol=1e-5, atol=1e-5 * scale)
    np.testing.assert_allclose(results["opencl_float16"], x, rtol=1e-2, atol=1e-2 * scale)
