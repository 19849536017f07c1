"""The narrow and unsigned integer element types (int8, uint8, int16, uint16, uint32, uint64):
the family rows' numpy kernels, casts, data movement and max pooling against numpy's integer
math; an ONNX model of them against onnx's reference; on OpenCL they run on numpy, named in the
report; the float16 transpile leaves them alone."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import halfway
from halfway import layers
from halfway.executor import Executor, OpenCLPlace
from halfway.ir import DType
from halfway.ir.errors import KernelNotFoundError
from tests.support.oprun import run_op

RNG = np.random.default_rng(11)
NARROW = [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64]


def _ints(dtype: type, shape: tuple[int, ...], low: int = 1) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(max(info.min, -100) if low < 0 else low, min(info.max, 100), shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("dtype", NARROW)
@pytest.mark.parametrize("op_type, math", [("elementwise_add", np.add), ("elementwise_sub", np.subtract),
                                           ("elementwise_mul", np.multiply), ("elementwise_max", np.maximum),
                                           ("elementwise_mod", np.mod), ("less_than", np.less)])
def test_binary_rows_compute_in_the_integer_type(op_type, math, dtype):
    x, y = _ints(dtype, (3, 4)), _ints(dtype, (4,))
    with np.errstate(over="ignore"):
        want = math(x, y)  # wraps around where it overflows, as C does
    ran = run_op(op_type, {"X": x, "Y": y})
    assert ran.kernel_dtypes == [DType.from_any(dtype)]
    np.testing.assert_array_equal(ran.out, want)
    assert ran.out.dtype == want.dtype


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_integer_division_truncates_toward_zero_in_narrow_types(dtype):
    x, y = _ints(dtype, (20,), low=-1), _ints(dtype, (20,))
    x[0], y[0] = -7, 2
    np.testing.assert_array_equal(run_op("elementwise_div", {"X": x, "Y": y}).out, (np.trunc(x / y)).astype(dtype))


@pytest.mark.parametrize("dtype", NARROW)
def test_casts_reductions_and_movement_keep_the_type(dtype):
    x = _ints(dtype, (2, 3, 4))
    np.testing.assert_array_equal(run_op("cast", {"X": x}, {"in_dtype": DType.from_any(dtype), "out_dtype": DType.float32}).out,
                                  x.astype(np.float32))
    np.testing.assert_array_equal(run_op("reduce_max", {"X": x}, {"dim": [1]}).out, x.max(axis=1))
    ran = run_op("transpose2", {"X": x}, {"axis": [2, 0, 1]})
    np.testing.assert_array_equal(ran.out, x.transpose(2, 0, 1))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_max_pooling_of_bytes_and_average_refused(dtype):
    x = _ints(dtype, (1, 2, 5, 5), low=-1)
    attrs = {"pooling_type": "max", "ksize": [2, 2], "strides": [1, 1], "paddings": [1, 1]}
    out = run_op("pool2d", {"X": x}, attrs).out
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.iinfo(dtype).min)
    want = np.max([padded[:, :, i:i + 6, j:j + 6] for i in (0, 1) for j in (0, 1)], axis=0)
    np.testing.assert_array_equal(out, want)
    with pytest.raises(KernelNotFoundError, match="avg pooling of"):
        run_op("pool2d", {"X": x}, {**attrs, "pooling_type": "avg"})


@pytest.mark.parametrize("elem", [TensorProto.INT8, TensorProto.UINT16, TensorProto.UINT64])
def test_onnx_model_of_narrow_integers_matches_the_reference(elem):
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "b"], ["m"]),
             helper.make_node("ReduceMin", ["m"], ["out"], keepdims=0)]
    graph = helper.make_graph(nodes, "ints", [helper.make_tensor_value_info(n, elem, [3, 4]) for n in "ab"],
                              [helper.make_tensor_value_info("out", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    feeds = {"a": _ints(dtype, (3, 4)), "b": _ints(dtype, (3, 4))}
    program, names, fetches, scope = halfway.load(model)
    (got,) = Executor().run(program, {n: feeds[n] for n in names}, fetches, scope)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.opencl
def test_opencl_runs_integer_ops_on_numpy_and_says_so():
    x, y = _ints(np.int8, (3, 5)), _ints(np.int8, (3, 5))
    ran = run_op("elementwise_add", {"X": x, "Y": y}, place=OpenCLPlace())
    assert [reason for _, _, reason in ran.report.fallbacks] == ["no opencl kernel for int8"]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(ran.out, x + y)


def test_float16_transpile_leaves_integer_vars_alone():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3], dtype="float32")
        q = layers.data("q", [2, 3], dtype="uint8")
        total = layers.elementwise_add(q, q)
        out = layers.elementwise_add(layers.relu(x), layers.cast(total, "float32"))
    scope = halfway.init_scope(prog)
    half, report = halfway.float16_transpile(prog, scope, fetch_names=[out.name])
    assert half.global_block().var(total.name).dtype is DType.uint8
    assert all("uint8" not in (c.from_dtype, c.to_dtype) for c in report.casts)
    feed = {"x": RNG.standard_normal((2, 3)).astype(np.float32), "q": _ints(np.uint8, (2, 3))}
    (got,) = Executor().run(half, feed, [out.name], scope)
    np.testing.assert_allclose(got, np.maximum(feed["x"], 0) + (feed["q"] + feed["q"]).astype(np.float32),
                               rtol=1e-3, atol=1e-3)
