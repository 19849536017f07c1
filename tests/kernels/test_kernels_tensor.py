"""numpy kernels of the tensor ops (kernels/numpy/tensor.py), run through the executor.

Each op runs on every dtype it is registered for, on random inputs with odd shapes and the attr
corner cases of the op, against a reference written here in numpy and, where ONNX has the same op,
``onnx.reference.ReferenceEvaluator``. These ops only move data, so every comparison is bit-exact
(NaN, -0.0 and float16 subnormals included) and float16 runs its own, unwidened kernel.

Feeds and parameters are read-only arrays, so a kernel that wrote into an input would raise;
``run`` also checks their bytes are unchanged after the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import halfway
from halfway.executor import Executor
from halfway.ir.builder import append_op, program_guard
from halfway.ir.dtypes import DType
from halfway.ir.errors import HalfwayError
from halfway.ir.schema import TensorInfo
from halfway.kernels.numpy.tensor import DATA_DTYPES
from halfway.kernels.registry import KernelSpec, find_kernel
from tests.support.oprun import Ran, read_only
from tests.support.oprun import run_op as run

RNG = np.random.default_rng(7)
OPS = ["concat", "split", "reshape2", "flatten_contiguous_range", "transpose2", "squeeze2", "unsqueeze2",
       "fill_constant", "assign", "slice", "shape", "gather"]
DTYPES = [d.numpy for d in DATA_DTYPES]
SOME_DTYPES = [np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.int64), np.dtype(np.bool_)]
ONNX_DTYPES = [np.dtype(np.float32), np.dtype(np.int64)]


# -- inputs and running ------------------------------------------------------------------------------
def sample(shape: Sequence[int], dtype: Any = np.float32) -> np.ndarray:
    """Random values of ``dtype``; floating arrays of 6+ elements hold NaN, +-inf, -0.0 and a
    float16 subnormal, so bit-exact comparisons see them."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(RNG.random(shape) < 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dtype)
    values = RNG.standard_normal(shape).astype(dtype)
    if values.size >= 6:
        flat = values.reshape(-1)
        flat[RNG.choice(flat.size, 6, replace=False)] = [np.nan, np.inf, -np.inf, -0.0, 3e-6, -65504.0]
    return values


def index_array(values: Sequence[int] | int, dtype: Any = np.int64) -> np.ndarray:
    return np.asarray(values, dtype=dtype)


def assert_bits(actual: Any, expected: np.ndarray) -> None:
    """Same dtype, same shape, same bytes (so NaN == NaN and -0.0 != 0.0)."""
    expected = np.asarray(expected)
    assert isinstance(actual, np.ndarray), f"expected an ndarray, got {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype}, expected {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape}, expected {expected.shape}"
    as_bytes = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in (actual, expected)]
    np.testing.assert_array_equal(*as_bytes)


def check(ran: Ran, expected: np.ndarray, dtype: Any) -> None:
    """``ran`` ran the ``dtype`` kernel and its Out is ``expected``, bit for bit."""
    assert ran.kernels[0].dtype is DType.from_any(dtype), ran.kernels
    assert_bits(ran.out, expected)


def onnx_run(op_type: str, inputs: Sequence[np.ndarray | None], outputs: int = 1, **attrs: Any) -> list[np.ndarray]:
    """Run one ONNX op (opset 18) through the reference evaluator; None skips an optional input."""
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(inputs)]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, [f"out{i}" for i in range(outputs)], **attrs)], "one_op",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in zip(names, inputs) if a is not None],
        [helper.make_tensor_value_info(f"out{i}", TensorProto.UNDEFINED, None) for i in range(outputs)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return ReferenceEvaluator(model).run(None, {n: a for n, a in zip(names, inputs) if a is not None})


# -- registration ------------------------------------------------------------------------------------
@pytest.mark.parametrize("op_type", OPS)
def test_registered_for_every_data_dtype_and_float16_unwidened(op_type: str) -> None:
    factory = find_kernel(op_type, "numpy", DType.float32)
    for dtype in DATA_DTYPES:
        assert find_kernel(op_type, "numpy", dtype) is factory, f"{op_type}/{dtype.name} is wrapped"


# -- concat ------------------------------------------------------------------------------------------
CONCAT_CASES = [
    ([(2, 3), (4, 3)], 0),
    ([(2, 3, 1), (2, 3, 5), (2, 3, 2)], -1),
    ([(3,)], 0),
    ([(2, 0, 3), (2, 4, 3), (2, 1, 3)], 1),
    ([(1, 2, 3, 4), (1, 2, 5, 4)], -2),
]


def concat_reference(xs: list[np.ndarray], axis: int) -> np.ndarray:
    """Rows of the inputs moved to the front, stacked, moved back."""
    rows = [row for x in xs for row in np.moveaxis(x, axis, 0)]
    shape = list(xs[0].shape)
    shape[axis] = len(rows)
    out = np.empty([len(rows), *np.delete(shape, axis % len(shape))], xs[0].dtype)
    for i, row in enumerate(rows):
        out[i] = row
    return np.moveaxis(out, 0, axis)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes,axis", CONCAT_CASES)
def test_concat(shapes: list[tuple[int, ...]], axis: int, dtype: np.dtype) -> None:
    xs = [sample(s, dtype) for s in shapes]
    ran = run("concat", {"X": xs}, {"axis": axis})
    check(ran, concat_reference(xs, axis), dtype)
    if dtype in ONNX_DTYPES:
        assert_bits(ran.out, onnx_run("Concat", xs, axis=axis)[0])


@pytest.mark.parametrize("dtype", SOME_DTYPES)
@pytest.mark.parametrize("fed", [True, False])
def test_concat_axis_tensor_overrides_attr(dtype: np.dtype, fed: bool) -> None:
    xs = [sample((2, 3, 4), dtype), sample((2, 5, 4), dtype)]
    ran = run("concat", {"X": xs, "AxisTensor": index_array([-2], np.int32)}, {"axis": 0},
              params=() if fed else ("AxisTensor",))
    check(ran, concat_reference(xs, 1), dtype)


# -- split -------------------------------------------------------------------------------------------
SPLIT_CASES = [
    ((2, 6, 5), {"axis": 1, "num": 3}),
    ((3, 4, 7), {"axis": -1, "sections": [2, -1, 1]}),
    ((4, 3), {"axis": 0, "sections": [0, 4]}),
    ((5, 2), {"axis": 0, "num": 1}),
    ((1, 2, 9), {"axis": 2, "sections": [-1]}),
]


def split_reference(x: np.ndarray, axis: int, sizes: Sequence[int]) -> list[np.ndarray]:
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return [np.take(x, np.arange(lo, hi), axis=axis) for lo, hi in zip(starts[:-1], starts[1:])]


def split_sizes(dim: int, attrs: Mapping[str, Any]) -> list[int]:
    if attrs.get("num"):
        return [dim // attrs["num"]] * attrs["num"]
    rest = dim - sum(s for s in attrs["sections"] if s != -1)
    return [rest if s == -1 else s for s in attrs["sections"]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,attrs", SPLIT_CASES)
def test_split(shape: tuple[int, ...], attrs: dict[str, Any], dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    sizes = split_sizes(shape[attrs["axis"]], attrs)
    ran = run("split", {"X": x}, attrs, outputs={"Out": len(sizes)})
    expected = split_reference(x, attrs["axis"], sizes)
    assert ran.kernels[0].dtype is DType.from_any(dtype)
    assert len(ran.outputs["Out"]) == len(expected)
    for piece, reference in zip(ran.outputs["Out"], expected):
        assert_bits(piece, reference)
        assert piece.size == 0 or np.shares_memory(piece, ran.inputs["X"][0])
    if dtype in ONNX_DTYPES and 0 not in sizes:
        pieces = onnx_run("Split", [x, index_array(sizes)], len(sizes), axis=attrs["axis"])
        for piece, reference in zip(ran.outputs["Out"], pieces):
            assert_bits(piece, reference)


@pytest.mark.parametrize("dtype", SOME_DTYPES)
def test_split_tensors_override_attrs(dtype: np.dtype) -> None:
    x = sample((3, 8, 2), dtype)
    sections = [index_array([3], np.int32), index_array([-1], np.int32), index_array([1], np.int32)]
    ran = run("split", {"X": x, "AxisTensor": index_array([1]), "SectionsTensorList": sections},
              {"axis": 0, "sections": [1, 1, 1]}, outputs={"Out": 3})
    for piece, reference in zip(ran.outputs["Out"], split_reference(x, 1, [3, 4, 1])):
        assert_bits(piece, reference)


def test_split_rejects_sections_that_do_not_fit_at_run_time() -> None:
    sections = [index_array([3], np.int32), index_array([4], np.int32)]
    with pytest.raises(HalfwayError, match=r"sections \[3, 4\] do not split a dim of size 6"):
        run("split", {"X": sample((6,)), "SectionsTensorList": sections}, {"sections": [1, 1]}, outputs={"Out": 2})


# -- reshape2 ----------------------------------------------------------------------------------------
RESHAPE_CASES = [
    ((2, 3, 4), [0, -1], (2, 12)),
    ((2, 3, 4), [-1], (24,)),
    ((2, 3, 4), [4, 0, 2], (4, 3, 2)),
    ((2, 3, 4), [1, -1, 1, 2], (1, 12, 1, 2)),
    ((6,), [2, 3], (2, 3)),
    ((1, 1), [], ()),
    ((0, 5), [0, 5, -1], (0, 5, 1)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,target,expected_shape", RESHAPE_CASES)
def test_reshape2_is_a_view(shape: tuple[int, ...], target: list[int], expected_shape: tuple[int, ...],
                            dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    ran = run("reshape2", {"X": x}, {"shape": target})
    check(ran, np.ravel(x).reshape(expected_shape), dtype)
    assert np.shares_memory(ran.out, ran.inputs["X"][0]) or x.size == 0
    if dtype in ONNX_DTYPES and x.size:
        assert_bits(ran.out, onnx_run("Reshape", [x, index_array(target)])[0])


@pytest.mark.parametrize("dtype", SOME_DTYPES)
@pytest.mark.parametrize("fed", [True, False])
def test_reshape2_shape_tensors(dtype: np.dtype, fed: bool) -> None:
    """ShapeTensor wins over Shape, which wins over the attr; all read 0 and -1 as the attr."""
    x = sample((2, 3, 4), dtype)
    params = () if fed else ("Shape", "ShapeTensor")
    by_shape = run("reshape2", {"X": x, "Shape": index_array([0, -1, 2], np.int32)}, {"shape": [24]}, params=params)
    check(by_shape, x.reshape(2, 6, 2), dtype)
    listed = [index_array([-1]), index_array([0])]
    by_list = run("reshape2", {"X": x, "Shape": index_array([24]), "ShapeTensor": listed}, {"shape": [24]},
                  params=params)
    check(by_list, x.reshape(8, 3), dtype)


def test_reshape2_returns_none_for_xshape() -> None:
    ran = run("reshape2", {"X": sample((2, 3))}, {"shape": [3, 2]}, outputs={"Out": 1, "XShape": 1})
    assert ran.outputs["XShape"] == [None]
    assert_bits(ran.out, ran.inputs["X"][0].reshape(3, 2))


def test_reshape2_rejects_a_copied_dim_beyond_the_rank_at_run_time() -> None:
    with pytest.raises(HalfwayError, match=r"copies \(0\) a dim beyond the rank"):
        run("reshape2", {"X": sample((6,)), "Shape": index_array([2, 0, 3])})


# -- flatten_contiguous_range / transpose2 / squeeze2 / unsqueeze2 -----------------------------------
FLATTEN_CASES = [((2, 3, 4, 5), 1, 2), ((2, 3, 4, 5), 0, -1), ((2, 3, 4, 5), -2, -1), ((3, 4), 1, 1), ((), 0, -1),
                 ((2, 0, 3), 0, 1)]


def flatten_reference(x: np.ndarray, start: int, stop: int) -> np.ndarray:
    if x.ndim == 0:
        return x.reshape(1)
    start, stop = start % x.ndim, stop % x.ndim
    merged = int(np.prod(x.shape[start:stop + 1]))
    return np.ravel(x).reshape(x.shape[:start] + (merged,) + x.shape[stop + 1:])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,start,stop", FLATTEN_CASES)
def test_flatten_contiguous_range(shape: tuple[int, ...], start: int, stop: int, dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    ran = run("flatten_contiguous_range", {"X": x}, {"start_axis": start, "stop_axis": stop})
    check(ran, flatten_reference(x, start, stop), dtype)
    assert np.shares_memory(ran.out, ran.inputs["X"][0]) or x.size == 0
    if dtype in ONNX_DTYPES and start == 1 and stop == -1:
        assert_bits(ran.out, onnx_run("Flatten", [x], axis=1)[0])


TRANSPOSE_CASES = [((2, 3, 4), [2, 0, 1]), ((2, 3, 4, 5), [0, 2, 3, 1]), ((3, 4), [-1, 0]), ((5,), [0]), ((), [])]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,perm", TRANSPOSE_CASES)
def test_transpose2_is_a_view(shape: tuple[int, ...], perm: list[int], dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    ran = run("transpose2", {"X": x}, {"axis": perm})
    normalized = [p % len(shape) for p in perm]
    expected = np.empty([shape[p] for p in normalized], dtype)
    for index in np.ndindex(*shape):
        expected[tuple(index[p] for p in normalized)] = x[index]
    check(ran, expected, dtype)
    assert np.shares_memory(ran.out, ran.inputs["X"][0])
    if dtype in ONNX_DTYPES and shape:
        assert_bits(ran.out, onnx_run("Transpose", [x], perm=normalized)[0])


SQUEEZE_CASES = [((1, 3, 1, 4), [], (3, 4)), ((1, 3, 1, 4), [0, 2], (3, 4)), ((1, 3, 1, 4), [1, -2], (1, 3, 4)),
                 ((2, 1), [-1], (2,)), ((1, 1, 1), [], ()), ((), [], ())]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axes,expected_shape", SQUEEZE_CASES)
def test_squeeze2_keeps_named_dims_that_are_not_1(shape: tuple[int, ...], axes: list[int],
                                                   expected_shape: tuple[int, ...], dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    ran = run("squeeze2", {"X": x}, {"axes": axes})
    check(ran, np.ravel(x).reshape(expected_shape), dtype)
    assert np.shares_memory(ran.out, ran.inputs["X"][0])
    ones = [a for a in axes if shape[a] == 1]
    if dtype in ONNX_DTYPES and shape and (not axes or ones == axes):
        assert_bits(ran.out, onnx_run("Squeeze", [x, index_array(axes) if axes else None])[0])


UNSQUEEZE_CASES = [((3, 4), [0]), ((3, 4), [-1]), ((3, 4), [0, 2]), ((3, 4), [2, 0]), ((3, 4), [1, 1]), ((), [0, -1]),
                   ((2, 3), [-3, 3])]


def unsqueeze_reference(x: np.ndarray, axes: Sequence[int]) -> np.ndarray:
    for axis in axes:
        x = np.expand_dims(x, axis)
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axes", UNSQUEEZE_CASES)
def test_unsqueeze2_inserts_one_axis_at_a_time(shape: tuple[int, ...], axes: list[int], dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    ran = run("unsqueeze2", {"X": x}, {"axes": axes})
    check(ran, unsqueeze_reference(x, axes), dtype)
    assert np.shares_memory(ran.out, ran.inputs["X"][0])
    if dtype in ONNX_DTYPES and axes == sorted(axes) and min(axes) >= 0 and len(set(axes)) == len(axes):
        assert_bits(ran.out, onnx_run("Unsqueeze", [x, index_array(axes)])[0])


@pytest.mark.parametrize("dtype", SOME_DTYPES)
@pytest.mark.parametrize("fed", [True, False])
def test_unsqueeze2_axes_tensors(dtype: np.dtype, fed: bool) -> None:
    """AxesTensor wins over AxesTensorList, which wins over the attr."""
    x = sample((3, 4), dtype)
    params = () if fed else ("AxesTensor", "AxesTensorList")
    listed = [index_array([2], np.int32), index_array([0], np.int32)]
    check(run("unsqueeze2", {"X": x, "AxesTensorList": listed}, {"axes": [1]}, params=params),
          x[None, :, :, None], dtype)
    check(run("unsqueeze2", {"X": x, "AxesTensor": index_array([1, -1]), "AxesTensorList": listed}, {"axes": [1]},
              params=params), x[:, None, :, None], dtype)


# -- fill_constant -----------------------------------------------------------------------------------
FILL_CASES = [
    # (dtype, attrs, expected value as the output dtype)
    (np.float32, {"value": 1.25}, np.float32(1.25)),
    (np.float32, {"value": 3.0, "str_value": "0.1"}, np.float32(0.1)),
    (np.float32, {"str_value": "-inf"}, np.float32(-np.inf)),
    (np.float64, {"str_value": "nan"}, np.float64(np.nan)),
    (np.float64, {"str_value": "0.1"}, np.float64(0.1)),
    (np.float16, {"value": 0.1}, np.float32(0.1).astype(np.float16)),
    (np.float16, {"str_value": "1e-7"}, np.float32(1e-7).astype(np.float16)),
    (np.float16, {"str_value": "inf"}, np.float16(np.inf)),
    (np.int32, {"value": 2.7}, np.int32(2)),
    (np.int32, {"value": -2.7}, np.int32(-2)),
    (np.int32, {"str_value": "-7.9"}, np.int32(-7)),
    (np.int64, {"str_value": "9007199254740993"}, np.int64(9007199254740993)),
    (np.int64, {"str_value": "1e3"}, np.int64(1000)),
    (np.uint8, {"value": 255.0}, np.uint8(255)),
    (np.int8, {"value": -128.0}, np.int8(-128)),
    (np.bool_, {"value": 0.5}, np.bool_(True)),
    (np.bool_, {"value": 0.0}, np.bool_(False)),
]


@pytest.mark.parametrize("dtype,attrs,value", FILL_CASES)
@pytest.mark.parametrize("shape", [[2, 3], [], [0, 4], [1, 1, 5]])
def test_fill_constant(dtype: Any, attrs: dict[str, Any], value: np.generic, shape: list[int]) -> None:
    dtype = np.dtype(dtype)
    ran = run("fill_constant", {}, {"dtype": DType.from_any(dtype).value, "shape": shape, **attrs})
    expected = np.empty(shape, dtype)
    expected[...] = value
    check(ran, expected, dtype)
    if dtype in ONNX_DTYPES:
        constant = helper.make_tensor("value", helper.np_dtype_to_tensor_dtype(dtype), [1], [value])
        assert_bits(ran.out, onnx_run("ConstantOfShape", [index_array(shape)], value=constant)[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int64])
@pytest.mark.parametrize("fed", [True, False])
def test_fill_constant_tensors_override_attrs(dtype: Any, fed: bool) -> None:
    """ValueTensor beats str_value beats value; ShapeTensor beats ShapeTensorList beats shape."""
    dtype = np.dtype(dtype)
    attrs = {"dtype": DType.from_any(dtype).value, "shape": [7], "value": 1.0, "str_value": "2.0"}
    params = () if fed else ("ValueTensor", "ShapeTensor", "ShapeTensorList")
    listed = [index_array([2], np.int32), index_array([3], np.int32)]
    ran = run("fill_constant", {"ValueTensor": np.array([5.75], np.float32), "ShapeTensorList": listed}, attrs,
              params=params)
    check(ran, np.full((2, 3), np.float32(5.75), dtype), dtype)
    ran = run("fill_constant", {"ShapeTensor": index_array([4, 1]), "ShapeTensorList": listed}, attrs, params=params)
    check(ran, np.full((4, 1), 2, dtype), dtype)


def test_fill_constant_returns_a_fresh_array_every_run() -> None:
    prog = halfway.Program()
    with program_guard(prog):
        out = append_op("fill_constant", {}, {"dtype": DType.float32.value, "shape": [3], "value": 1.0})["Out"][0]
    prepared = Executor().prepare(prog, [], [out.name], halfway.Scope())
    first = prepared.run({})[0]
    first[...] = 9.0
    assert_bits(prepared.run({})[0], np.ones(3, np.float32))


@pytest.mark.parametrize("dtype,attrs,match", [
    (np.int32, {"str_value": "nan"}, "value nan cannot fill a int32 tensor"),
    (np.int8, {"value": 200.0}, r"value 200.0 is out of the range of int8 \[-128, 127\]"),
])
def test_fill_constant_rejects_values_the_dtype_cannot_hold(dtype: Any, attrs: dict[str, Any], match: str) -> None:
    with pytest.raises(HalfwayError, match=match):
        run("fill_constant", {}, {"dtype": DType.from_any(dtype).value, "shape": [2], **attrs})


# -- assign / shape ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 3), (3, 1, 5)])
def test_assign_copies(shape: tuple[int, ...], dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    ran = run("assign", {"X": x})
    check(ran, x, dtype)
    assert not np.shares_memory(ran.out, ran.inputs["X"][0]) and ran.out.flags.writeable
    if dtype in ONNX_DTYPES:
        assert_bits(ran.out, onnx_run("Identity", [x])[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 5), (), (0, 7), (4,)])
def test_shape_is_int32(shape: tuple[int, ...], dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    ran = run("shape", {"Input": x})
    assert ran.kernels == []  # computed when the program is prepared, from the fed shape
    assert_bits(ran.out, np.array(list(shape), dtype=np.int32).reshape(len(shape)))
    assert_bits(ran.out, onnx_run("Shape", [x])[0].astype(np.int32))


# -- slice -------------------------------------------------------------------------------------------
SLICE_CASES = [
    ((4, 5, 6), {"axes": [0, 2], "starts": [1, -3], "ends": [3, 100]}),
    ((4, 5, 6), {"axes": [1], "starts": [-100], "ends": [-1]}),
    ((4, 5, 6), {"axes": [-1, 0], "starts": [10, 0], "ends": [20, 4]}),
    ((4, 5, 6), {"axes": [1], "starts": [2], "ends": [3], "decrease_axis": [1]}),
    ((4, 5), {"axes": [0, 1], "starts": [-1, 0], "ends": [4, 1], "decrease_axis": [0, 1]}),
    ((1, 5, 3), {"axes": [1], "starts": [0], "ends": [2], "decrease_axis": [0]}),
    ((7,), {"axes": [0], "starts": [3], "ends": [3]}),
    ((3, 4), {"axes": [1], "starts": [0], "ends": [2147483647], "infer_flags": [1]}),
]


def slice_reference(x: np.ndarray, attrs: Mapping[str, Any]) -> np.ndarray:
    """Python's range slicing picks the kept indices of each axis; decreased axes are squeezed."""
    out = x
    for axis, start, end in zip(attrs["axes"], attrs["starts"], attrs["ends"]):
        kept = list(range(x.shape[axis]))[start:end]
        out = np.take(out, np.array(kept, dtype=np.int64), axis=axis)
    return out.reshape([d for i, d in enumerate(out.shape) if i not in {a % x.ndim for a in
                                                                          attrs.get("decrease_axis", [])}])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,attrs", SLICE_CASES)
def test_slice_is_a_view(shape: tuple[int, ...], attrs: dict[str, Any], dtype: np.dtype) -> None:
    x = sample(shape, dtype)
    ran = run("slice", {"Input": x}, attrs)
    check(ran, slice_reference(x, attrs), dtype)
    assert ran.out.size == 0 or np.shares_memory(ran.out, ran.inputs["Input"][0])
    if dtype in ONNX_DTYPES and not attrs.get("decrease_axis"):
        expected = onnx_run("Slice", [x, index_array(attrs["starts"]), index_array(attrs["ends"]),
                                      index_array(attrs["axes"])])[0]
        assert_bits(ran.out, expected)


@pytest.mark.parametrize("dtype", SOME_DTYPES)
def test_strided_slice_is_a_view_matching_onnx(dtype: np.dtype) -> None:
    x = sample((5, 6, 7), dtype)
    attrs = {"axes": [0, 2], "starts": [-1, 1], "ends": [-2**31, 7], "strides": [-2, 3]}
    ran = run("strided_slice", {"Input": x}, attrs)
    check(ran, x[::-2, :, 1:7:3], dtype)
    assert np.shares_memory(ran.out, ran.inputs["Input"][0])
    if dtype in ONNX_DTYPES:
        expected = onnx_run("Slice", [x, index_array([-1, 1]), index_array([-2**31, 7]), index_array([0, 2]),
                                      index_array([-2, 3])])[0]
        assert_bits(ran.out, expected)
    decreased = run("strided_slice", {"Input": x}, {**attrs, "starts": [2, 1], "ends": [1, 7], "decrease_axis": [0]})
    check(decreased, x[2, :, 1:7:3], dtype)


@pytest.mark.parametrize("dtype", SOME_DTYPES)
@pytest.mark.parametrize("fed", [True, False])
def test_slice_bound_tensors_override_attrs(dtype: np.dtype, fed: bool) -> None:
    """<Bound>Tensor wins over <Bound>TensorList, which wins over the attr."""
    x = sample((4, 5, 6), dtype)
    attrs = {"axes": [0, -1], "starts": [0, 0], "ends": [1, 1], "decrease_axis": [0]}
    params = () if fed else ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")
    inputs = {"Input": x, "StartsTensor": index_array([2, -4]), "EndsTensorList": [index_array([3]), index_array([5])],
              "StartsTensorList": [index_array([0]), index_array([0])]}
    ran = run("slice", inputs, attrs, params=params)
    check(ran, x[2, :, 2:5], dtype)
    assert np.shares_memory(ran.out, ran.inputs["Input"][0])


@pytest.mark.parametrize("bounds,match", [
    ({"StartsTensor": index_array([3]), "EndsTensor": index_array([1])}, "axis 0 .size 5.: end 1 comes before start 3"),
    ({"StartsTensor": index_array([1]), "EndsTensor": index_array([4])}, "drops axis 0, whose sliced size is 3"),
])
def test_slice_rejects_bad_bounds_at_run_time(bounds: dict[str, np.ndarray], match: str) -> None:
    attrs = {"axes": [0], "starts": [0], "ends": [1], "decrease_axis": [0]}
    with pytest.raises(HalfwayError, match=match):
        run("slice", {"Input": sample((5, 2)), **bounds}, attrs)


def test_slice_rejects_bound_tensors_of_the_wrong_length() -> None:
    """Inference catches this unless the bound tensor's length is unknown at prepare time, so
    the kernel is called directly here."""
    spec = KernelSpec("slice", DType.float32, {"axes": [0], "starts": [], "ends": [], "decrease_axis": []},
                      {"Input": (TensorInfo((5, 2), DType.float32),), "StartsTensor": (TensorInfo((-1,), DType.int64),),
                       "EndsTensor": (TensorInfo((-1,), DType.int64),)}, {"Out": (TensorInfo((-1, 2), DType.float32),)})
    kernel = find_kernel("slice", "numpy", DType.float32)(spec)
    x = sample((5, 2))
    assert_bits(kernel(x, index_array([1]), index_array([3])), x[1:3])
    with pytest.raises(HalfwayError, match=r"starts \[1, 2\] and ends \[4\] must have one entry per axis of \[0\]"):
        kernel(x, index_array([1, 2]), index_array([4]))


# -- gather ------------------------------------------------------------------------------------------
GATHER_CASES = [
    ((5, 3), [4, 0, 0, 2], 0),
    ((2, 6, 3), [[5], [1], [5]], 1),
    ((2, 6, 3), 2, -1),
    ((4,), [], 0),
    ((3, 4), [3, 2, 1, 0, 3], -1),
]


def gather_reference(x: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(x, axis, 0)
    picked = np.stack([moved[int(i)] for i in index.reshape(-1)]) if index.size else moved[:0]
    picked = picked[0] if index.ndim == 0 else picked
    return np.moveaxis(picked, 0, axis) if index.ndim else picked


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape,index,axis", GATHER_CASES)
def test_gather(shape: tuple[int, ...], index: Any, axis: int, index_dtype: Any, dtype: np.dtype) -> None:
    x, idx = sample(shape, dtype), index_array(index, index_dtype)
    ran = run("gather", {"X": x, "Index": idx}, {"axis": axis})
    check(ran, gather_reference(x, idx, axis), dtype)
    if dtype in ONNX_DTYPES and idx.ndim < 2:
        assert_bits(ran.out, onnx_run("Gather", [x, idx], axis=axis)[0])


@pytest.mark.parametrize("dtype", SOME_DTYPES)
@pytest.mark.parametrize("fed", [True, False])
def test_gather_axis_tensor_overrides_attr(dtype: np.dtype, fed: bool) -> None:
    x, idx = sample((3, 4, 2), dtype), index_array([1, 3, 1], np.int32)
    ran = run("gather", {"X": x, "Index": idx, "Axis": index_array([1])}, {"axis": 0}, params=() if fed else ("Axis",))
    check(ran, gather_reference(x, idx, 1), dtype)


@pytest.mark.parametrize("index", [[0, 4], [-5]])
def test_gather_rejects_indices_out_of_range(index: list[int]) -> None:
    with pytest.raises(HalfwayError, match=rf"index {index[-1]} is out of range \[-4, 4\) for axis 0"):
        run("gather", {"X": sample((4, 2)), "Index": index_array(index)})


def test_gather_counts_negative_indices_from_the_end() -> None:
    x, idx = sample((4, 2)), index_array([-1, 0, -4])
    check(run("gather", {"X": x, "Index": idx}), x[[3, 0, 0]], np.dtype(np.float32))


# -- run-time shapes and aliasing across ops ---------------------------------------------------------
def test_shapes_known_only_at_run_time_flow_through_the_reshape_family() -> None:
    """A fed Shape tensor leaves every later shape unknown at prepare time, so the kernels take
    their run-time paths: flatten, squeeze2, unsqueeze2, split, slice, concat."""
    x = read_only(sample((2, 3, 4), np.float16))
    prog = halfway.Program()
    block = prog.global_block()
    with program_guard(prog):
        xv = block.create_var("x", dtype=x.dtype, shape=x.shape)
        sv = block.create_var("s", dtype=np.int32, shape=(4,))
        tv = block.create_var("t", dtype=np.int64, shape=(2,))
        r = append_op("reshape2", {"X": xv, "Shape": sv})["Out"][0]
        flat = append_op("flatten_contiguous_range", {"X": r}, {"start_axis": 1, "stop_axis": 2})["Out"][0]
        squeezed = append_op("squeeze2", {"X": r}, {"axes": [0, 2]})["Out"][0]
        unsq = append_op("unsqueeze2", {"X": squeezed}, {"axes": [-1]})["Out"][0]
        pieces = append_op("split", {"X": r}, {"axis": 1, "sections": [-1, 1]}, outputs={"Out": 2})["Out"]
        sliced = append_op("slice", {"Input": r}, {"axes": [3], "starts": [-2], "ends": [99]})["Out"][0]
        joined = append_op("concat", {"X": [r, r]}, {"axis": -1})["Out"][0]
        filled = append_op("fill_constant", {"ShapeTensor": tv}, {"dtype": DType.float16.value, "value": 2.5})["Out"][0]
    assert r.shape == (-1, -1, -1, -1)
    fetched = [flat, squeezed, unsq, *pieces, sliced, joined, filled]
    feed = {"x": x, "s": read_only(index_array([1, 6, 1, -1], np.int32)), "t": read_only(index_array([3, 2]))}
    prepared = Executor().prepare(prog, list(feed), fetched, halfway.Scope())
    flat_o, sq_o, unsq_o, p0, p1, sl_o, cat_o, fill_o = prepared.run(feed)
    r_ref = x.reshape(1, 6, 1, 4)
    assert_bits(flat_o, r_ref.reshape(1, 6, 4))
    assert_bits(sq_o, r_ref.reshape(6, 4))
    assert_bits(unsq_o, r_ref.reshape(6, 4, 1))
    assert_bits(p0, r_ref[:, :5])
    assert_bits(p1, r_ref[:, 5:])
    assert_bits(sl_o, r_ref[..., 2:])
    assert_bits(cat_o, np.concatenate([r_ref, r_ref], axis=-1))
    assert_bits(fill_o, np.full((3, 2), 2.5, np.float16))
    for view in (flat_o, sq_o, unsq_o, p0, p1, sl_o):
        assert np.shares_memory(view, x)
    assert [key.dtype for _, _, key in prepared.report.kernels] == [DType.float16] * 8


def test_views_of_a_feed_never_let_it_change() -> None:
    """reshape2 -> transpose2 -> slice -> unsqueeze2 -> squeeze2 -> flatten hands views of the feed
    down the chain; assign and concat copy. The feed is read-only (a write would raise) and its
    bytes are checked after the run."""
    x = read_only(sample((2, 3, 4), np.float32))
    before = x.copy()
    prog = halfway.Program()
    block = prog.global_block()
    with program_guard(prog):
        v = block.create_var("x", dtype=x.dtype, shape=x.shape)
        outs = {}
        v = outs["reshape2"] = append_op("reshape2", {"X": v}, {"shape": [4, 6]})["Out"][0]
        v = outs["transpose2"] = append_op("transpose2", {"X": v}, {"axis": [1, 0]})["Out"][0]
        v = outs["slice"] = append_op("slice", {"Input": v}, {"axes": [0], "starts": [1], "ends": [5]})["Out"][0]
        v = outs["unsqueeze2"] = append_op("unsqueeze2", {"X": v}, {"axes": [0]})["Out"][0]
        v = outs["squeeze2"] = append_op("squeeze2", {"X": v}, {"axes": []})["Out"][0]
        outs["assign"] = append_op("assign", {"X": v})["Out"][0]
        outs["concat"] = append_op("concat", {"X": [v, v]}, {"axis": 0})["Out"][0]
        outs["flatten"] = append_op("flatten_contiguous_range", {"X": v}, {"start_axis": 0, "stop_axis": 1})["Out"][0]
    got = dict(zip(outs, Executor().run(prog, {"x": x}, list(outs.values()))))
    expected = before.reshape(4, 6).T[1:5]
    for name in ("slice", "squeeze2", "assign"):
        assert_bits(got[name], expected)
    assert_bits(got["flatten"], expected.reshape(-1))
    assert_bits(got["concat"], np.concatenate([expected, expected]))
    for name in ("reshape2", "transpose2", "slice", "unsqueeze2", "squeeze2"):
        assert np.shares_memory(got[name], x) and not got[name].flags.writeable, name
    for name in ("assign", "concat", "flatten"):  # flatten of a non-contiguous view must copy
        assert not np.shares_memory(got[name], x), name
    assert_bits(x, before)


@pytest.mark.parametrize("shape_at", ["attr", "tensor"])
def test_fill_constant_refuses_a_huge_shape_before_allocating(shape_at: str) -> None:
    from halfway.ir.limits import TensorSizeError

    shape = [100000, 100000]
    inputs = {"ShapeTensor": index_array(shape)} if shape_at == "tensor" else {}
    with pytest.raises(TensorSizeError, match=r"fill_constant.*: a float32 tensor of shape \[100000, 100000\] "
                                              r"would take 40,000,000,000 bytes"):
        run("fill_constant", inputs, {"dtype": DType.float32.value, "shape": shape, "value": 1.0})
