"""Tensor op schemas (ir/ops/tensor.py) and their layer functions (ir/layers/tensor.py).

Inferred shapes are checked against the shape of the numpy result of the op on random inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import OpenCLPlace
from halfway.ir.attrs import AttrType
from halfway.ir.builder import create_parameter
from halfway.ir.dtypes import DType
from halfway.ir.initializers import Constant
from halfway.ir.schema import InferContext, InferError, TensorInfo, get_schema
from halfway.ir.serde import program_from_bytes, program_to_bytes
from tests.support.oprun import run_op

RNG = np.random.default_rng(0)
FIXTURES = Path(__file__).parent.parent / "fixtures" / "paddle"


def f32(*shape: int) -> TensorInfo:
    return TensorInfo(tuple(shape), DType.float32)


def i32(*shape: int) -> TensorInfo:
    return TensorInfo(tuple(shape), DType.int32)


def rand(shape: Sequence[int]) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def infer(op_type: str, inputs: Mapping[str, TensorInfo | list[TensorInfo]], attrs: Mapping[str, Any] | None = None,
          values: Mapping[str, list[np.ndarray | None]] | None = None) -> dict[str, list[TensorInfo]]:
    schema = get_schema(op_type)
    slots = {slot: list(v) if isinstance(v, list) else [v] for slot, v in inputs.items()}
    ctx = InferContext(schema, slots, attrs or {}, values)
    schema.infer(ctx)
    return ctx.outputs


def out_shape(op_type: str, inputs: Mapping[str, Any], attrs: Mapping[str, Any] | None = None,
              values: Mapping[str, list[np.ndarray | None]] | None = None) -> tuple[int, ...]:
    return infer(op_type, inputs, attrs, values)["Out"][0].shape


def fails(match: str, op_type: str, inputs: Mapping[str, Any], attrs: Mapping[str, Any] | None = None,
          values: Mapping[str, list[np.ndarray | None]] | None = None) -> None:
    with pytest.raises(InferError, match=match):
        infer(op_type, inputs, attrs, values)


# -- feed / fetch -------------------------------------------------------------------------------------
def test_feed_fetch_schemas_infer_nothing_and_need_col() -> None:
    feed, fetch = get_schema("feed"), get_schema("fetch")
    assert feed.infer is None and fetch.infer is None
    assert feed.decisive_slots == () and fetch.decisive_slots == ("X",)
    assert feed.attr_spec("col").required and feed.attr_spec("col").type is AttrType.INT
    assert [s.name for s in feed.inputs] == ["X"] and [s.name for s in fetch.outputs] == ["Out"]


# -- concat -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shapes, axis", [
    ([(2, 3), (5, 3)], 0),
    ([(2, 3, 4), (2, 1, 4), (2, 7, 4)], 1),
    ([(3, 2, 5), (3, 2, 1)], -1),
    ([(4,)], 0),
])
def test_concat_matches_numpy(shapes: list[tuple[int, ...]], axis: int) -> None:
    expected = np.concatenate([rand(s) for s in shapes], axis=axis).shape
    assert out_shape("concat", {"X": [f32(*s) for s in shapes]}, {"axis": axis}) == expected


def test_concat_unknown_dims() -> None:
    assert out_shape("concat", {"X": [f32(-1, 3), f32(2, 3)]}, {"axis": 0}) == (-1, 3)
    assert out_shape("concat", {"X": [f32(-1, 3), f32(2, 4)]}, {"axis": 1}) == (2, 7)
    assert out_shape("concat", {"X": [f32(2, 3), f32(2, 4)], "AxisTensor": i32(1)}) == (-1, -1)
    known = {"AxisTensor": [np.array([1], np.int32)]}
    assert out_shape("concat", {"X": [f32(2, 3), f32(2, 4)], "AxisTensor": i32(1)}, values=known) == (2, 7)


def test_concat_errors() -> None:
    fails(r"X\[1\] has rank 1, X\[0\] has rank 2", "concat", {"X": [f32(2, 3), f32(3)]})
    fails(r"disagree on dim 1 \(concat axis 0\): sizes \[3, 4\]", "concat", {"X": [f32(2, 3), f32(2, 4)]})
    fails(r"attr 'axis' = 2 is out of range \[-2, 1\]", "concat", {"X": [f32(2, 3)]}, {"axis": 2})
    fails(r"X\[1\] is float16, X\[0\] is float32", "concat",
          {"X": [f32(2, 3), TensorInfo((2, 3), DType.float16)]})
    fails("input 'AxisTensor' must be int32 or int64, got float32", "concat",
          {"X": [f32(2, 3)], "AxisTensor": f32(1)})


# -- split --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, axis, num, sections", [
    ((4, 6, 5), 1, 3, []),
    ((4, 6, 5), -3, 2, []),
    ((3, 9), -1, 0, [2, -1, 3]),
    ((7, 2), 0, 0, [1, 6]),
    ((7, 2), 0, 0, [-1, 0, 3]),
])
def test_split_matches_numpy(shape: tuple[int, ...], axis: int, num: int, sections: list[int]) -> None:
    x = rand(shape)
    if num:
        pieces = np.split(x, num, axis=axis)
    else:
        sizes = [x.shape[axis] - sum(s for s in sections if s != -1) if s == -1 else s for s in sections]
        pieces = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    outs = infer("split", {"X": f32(*shape)}, {"axis": axis, "num": num, "sections": sections})["Out"]
    assert [o.shape for o in outs] == [p.shape for p in pieces]


def test_split_unknown_dims() -> None:
    def shapes(x: TensorInfo, attrs: dict, **inputs: Any) -> list[tuple[int, ...]]:
        values = {k: [np.array([v], np.int32) if v is not None else None for v in vs]
                  for k, vs in inputs.pop("values", {}).items()}
        return [o.shape for o in infer("split", {"X": x, **inputs}, attrs, values)["Out"]]

    assert shapes(f32(-1, 4), {"num": 2}) == [(-1, 4), (-1, 4)]
    assert shapes(f32(-1, 4), {"sections": [2, 3]}) == [(2, 4), (3, 4)]
    assert shapes(f32(-1, 4), {"sections": [2, -1]}) == [(2, 4), (-1, 4)]
    assert shapes(f32(6, 4), {"num": 3, "axis": 1}, AxisTensor=i32(1)) == [(-1, -1)] * 3
    tensors = {"SectionsTensorList": [i32(1), i32(1)]}
    assert shapes(f32(6, 4), {}, **tensors) == [(-1, 4), (-1, 4)]
    assert shapes(f32(6, 4), {}, **tensors, values={"SectionsTensorList": [2, None]}) == [(2, 4), (-1, 4)]
    assert shapes(f32(6, 4), {}, **tensors, values={"SectionsTensorList": [2, -1]}) == [(2, 4), (4, 4)]


def test_split_errors() -> None:
    fails("attr 'num' = 4 does not divide the split dim of size 6", "split", {"X": f32(6, 2)}, {"num": 4})
    fails(r"sections \[2, 3\] sum to 5, the split dim has size 6", "split", {"X": f32(6)}, {"sections": [2, 3]})
    fails(r"may hold -1 \(infer\) only once", "split", {"X": f32(6)}, {"sections": [-1, -1]})
    fails(r"sections \[4, 5, -1\] exceed", "split", {"X": f32(6)}, {"sections": [4, 5, -1]})
    fails("needs exactly one of attr 'num'", "split", {"X": f32(6)}, {"num": 2, "sections": [3, 3]})
    fails("needs exactly one of attr 'num'", "split", {"X": f32(6)})
    fails(r"attr 'axis' = 2 is out of range", "split", {"X": f32(6, 2)}, {"num": 2, "axis": 2})


# -- reshape2 -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, target", [
    ((2, 3, 4), [0, -1]),
    ((2, 3, 4), [-1]),
    ((2, 3, 4), [4, 0, 2]),
    ((6, 5), [3, -1, 5]),
    ((8,), [1, 8, 1, 1]),
    ((2, 3, 4), [0, 0, 2, 2]),
    ((1,), []),
])
def test_reshape2_matches_numpy(shape: tuple[int, ...], target: list[int]) -> None:
    numpy_target = [shape[i] if d == 0 else d for i, d in enumerate(target)]
    expected = rand(shape).reshape(numpy_target).shape
    outs = infer("reshape2", {"X": f32(*shape)}, {"shape": target})
    assert outs["Out"][0] == TensorInfo(expected, DType.float32)
    assert outs["XShape"][0].shape == (0, *shape)


def test_reshape2_unknown_dims() -> None:
    assert out_shape("reshape2", {"X": f32(-1, 3, 4)}, {"shape": [0, -1]}) == (-1, 12)
    assert out_shape("reshape2", {"X": f32(-1, 3, 4)}, {"shape": [-1, 6]}) == (-1, 6)
    assert out_shape("reshape2", {"X": f32(2, -1)}, {"shape": [0, 3, -1]}) == (2, 3, -1)
    x, shape = f32(2, 3, 4), {"shape": [1, 1]}
    assert out_shape("reshape2", {"X": x, "Shape": i32(3)}, shape) == (-1, -1, -1)
    assert out_shape("reshape2", {"X": x, "Shape": i32(2)}, shape,
                     {"Shape": [np.array([0, -1], np.int32)]}) == (2, 12)
    tensors = {"X": x, "Shape": i32(2), "ShapeTensor": [i32(1), i32(1)]}
    assert out_shape("reshape2", tensors, shape) == (-1, -1)
    assert out_shape("reshape2", tensors, shape, {"ShapeTensor": [np.array([4]), None]}) == (4, -1)
    assert out_shape("reshape2", tensors, shape, {"ShapeTensor": [np.array([4]), np.array([-1])]}) == (4, 6)


def test_reshape2_errors() -> None:
    x = {"X": f32(2, 3, 4)}
    fails(r"shape \[-1, -1\] may hold -1 \(infer\) only once", "reshape2", x, {"shape": [-1, -1]})
    fails(r"cannot reshape X of shape \[2, 3, 4\] into \[5, 5\]: element counts differ", "reshape2", x,
          {"shape": [5, 5]})
    fails(r"shape\[3\] = 0 copies input dim 3, but X has rank 3", "reshape2", x, {"shape": [1, 1, 1, 0]})
    fails(r"shape\[0\] = -2: dims must be > 0", "reshape2", x, {"shape": [-2, 12]})
    fails(r"into \[5, -1\]: no size for the -1 dim", "reshape2", x, {"shape": [5, -1]})
    fails("input 'Shape' must be a 1-D tensor of known length", "reshape2", {**x, "Shape": i32(-1)})
    fails(r"ShapeTensor\[0\] must hold one value, has shape \[2\]", "reshape2", {**x, "ShapeTensor": [i32(2)]})


# -- flatten_contiguous_range / transpose2 / squeeze2 / unsqueeze2 ------------------------------------
@pytest.mark.parametrize("shape, start, stop", [
    ((2, 3, 4, 5), 1, 2), ((2, 3, 4, 5), 0, -1), ((2, 3, 4, 5), -2, -1), ((2, 3, 4, 5), 2, 2), ((7,), 0, 0),
    ((3, 1, 5), 1, 1),
])
def test_flatten_matches_numpy(shape: tuple[int, ...], start: int, stop: int) -> None:
    lo, hi = start % len(shape), stop % len(shape)
    expected = rand(shape).reshape(*shape[:lo], -1, *shape[hi + 1:]).shape
    outs = infer("flatten_contiguous_range", {"X": f32(*shape)}, {"start_axis": start, "stop_axis": stop})
    assert outs["Out"][0].shape == expected and outs["XShape"][0].shape == (0, *shape)


def test_flatten_unknown_dims_defaults_and_errors() -> None:
    assert out_shape("flatten_contiguous_range", {"X": f32(-1, 3, 4)}, {"stop_axis": -1}) == (-1, 12)
    assert out_shape("flatten_contiguous_range", {"X": f32(2, -1, 4)}, {"stop_axis": -1}) == (2, -1)
    assert out_shape("flatten_contiguous_range", {"X": f32(2, 3, 4)}) == (2, 3, 4)  # Paddle default 1..1
    assert out_shape("flatten_contiguous_range", {"X": f32()}, {"start_axis": 0, "stop_axis": -1}) == (1,)
    fails(r"attr 'start_axis' \(2\) comes after attr 'stop_axis' \(1\)", "flatten_contiguous_range",
          {"X": f32(2, 3, 4)}, {"start_axis": 2, "stop_axis": 1})
    fails(r"attr 'stop_axis' = 3 is out of range \[-3, 2\]", "flatten_contiguous_range", {"X": f32(2, 3, 4)},
          {"stop_axis": 3})


@pytest.mark.parametrize("shape, perm", [((2, 3, 4), [2, 0, 1]), ((2, 3, 4, 5), [0, 2, 3, 1]),
                                         ((2, 3), [-1, 0]), ((5,), [0])])
def test_transpose2_matches_numpy(shape: tuple[int, ...], perm: list[int]) -> None:
    outs = infer("transpose2", {"X": f32(*shape)}, {"axis": perm})
    assert outs["Out"][0].shape == np.transpose(rand(shape), perm).shape
    assert outs["XShape"][0].shape == (0, *shape)


def test_transpose2_unknown_dims_and_errors() -> None:
    assert out_shape("transpose2", {"X": f32(-1, 3, 4)}, {"axis": [1, 2, 0]}) == (3, 4, -1)
    fails(r"attr 'axis' = \[0, 0, 1\] is not a permutation of the 3 axes", "transpose2", {"X": f32(2, 3, 4)},
          {"axis": [0, 0, 1]})
    fails(r"attr 'axis' = \[1, 0\] is not a permutation of the 3 axes", "transpose2", {"X": f32(2, 3, 4)},
          {"axis": [1, 0]})
    fails(r"attr 'axis' entry = 3 is out of range", "transpose2", {"X": f32(2, 3, 4)}, {"axis": [0, 1, 3]})
    with pytest.raises(halfway.SchemaError, match="needs attr"):
        infer("transpose2", {"X": f32(2, 3)})


@pytest.mark.parametrize("shape, axes", [((1, 3, 1, 5), []), ((1, 3, 1, 5), [0]), ((1, 3, 1, 5), [-2, 0]),
                                         ((2, 1, 1), [1, 1]), ((1, 1), [])])
def test_squeeze2_matches_numpy(shape: tuple[int, ...], axes: list[int]) -> None:
    outs = infer("squeeze2", {"X": f32(*shape)}, {"axes": axes})
    assert outs["Out"][0].shape == np.squeeze(rand(shape), axis=tuple(set(axes)) or None).shape
    assert outs["XShape"][0].shape == (0, *shape)


def test_squeeze2_paddle_rules() -> None:
    assert out_shape("squeeze2", {"X": f32(2, 3, 1)}, {"axes": [0, 2]}) == (2, 3)  # a non-1 dim is kept
    assert out_shape("squeeze2", {"X": f32(-1, 3, 1)}, {"axes": [0]}) == (3, 1)  # a named -1 dim goes
    assert out_shape("squeeze2", {"X": f32(-1, 3, 1)}) == (-1, 3)  # an unnamed -1 dim stays
    assert out_shape("squeeze2", {"X": f32()}, {"axes": [0]}) == ()
    fails(r"attr 'axes' entry = -4 is out of range \[-3, 2\]", "squeeze2", {"X": f32(1, 3, 1)}, {"axes": [-4]})


@pytest.mark.parametrize("shape, axes", [((3, 4), [0]), ((3, 4), [-1]), ((3, 4), [0, 2]), ((3, 4), [1, 1]),
                                         ((5,), [1, -1, 0]), ((2, 3), [2, 0, 4]), ((), [0, 0])])
def test_unsqueeze2_matches_sequential_expand_dims(shape: tuple[int, ...], axes: list[int]) -> None:
    x = rand(shape)
    for a in axes:
        x = np.expand_dims(x, a)
    outs = infer("unsqueeze2", {"X": f32(*shape)}, {"axes": axes})
    assert outs["Out"][0].shape == x.shape and outs["XShape"][0].shape == (0, *shape)


def test_unsqueeze2_tensors_unknown_dims_and_errors() -> None:
    assert out_shape("unsqueeze2", {"X": f32(-1, 4)}, {"axes": [1]}) == (-1, 1, 4)
    assert out_shape("unsqueeze2", {"X": f32(3, 4), "AxesTensor": i32(2)}) == (-1, -1, -1, -1)
    assert out_shape("unsqueeze2", {"X": f32(3, 4), "AxesTensor": i32(2)},
                     values={"AxesTensor": [np.array([0, -1])]}) == (1, 3, 4, 1)
    assert out_shape("unsqueeze2", {"X": f32(3, 4), "AxesTensorList": [i32(1)]},
                     values={"AxesTensorList": [np.array([1])]}) == (3, 1, 4)
    fails(r"attr 'axes' entry = 3 is out of range \[-3, 2\]", "unsqueeze2", {"X": f32(3, 4)}, {"axes": [3]})


# -- fill_constant / assign / shape -------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [-1, DType.int64.value, DType.float32.value])
def test_fill_any_like_takes_x_shape_not_its_values(dtype: int) -> None:
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    got = run_op("fill_any_like", {"X": x}, {"value": 1.0, "dtype": dtype}).out
    expected = np.ones_like(x, dtype=x.dtype if dtype == -1 else DType(dtype).numpy)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_fill_any_like_rejects_an_unknown_dtype() -> None:
    with pytest.raises(InferError, match="attr 'dtype' = 99 is neither -1"):
        infer("fill_any_like", {"X": TensorInfo((2,), DType.float32)}, {"dtype": 99})


@pytest.mark.parametrize("shape, dtype, value", [([2, 3], "float32", 1.5), ([4], "int64", 7), ([], "float16", 0),
                                                 ([1, 0, 3], "int32", -2), ([2], "bool", 1)])
def test_fill_constant_matches_numpy(shape: list[int], dtype: str, value: float) -> None:
    expected = np.full(shape, value, dtype=dtype)
    info = infer("fill_constant", {}, {"shape": shape, "dtype": DType.from_any(dtype).value, "value": value})
    assert info["Out"][0] == TensorInfo(expected.shape, DType.from_any(expected.dtype))


def test_fill_constant_shape_tensors_and_errors() -> None:
    assert out_shape("fill_constant", {}) == ()
    assert out_shape("fill_constant", {"ShapeTensor": i32(3)}) == (-1, -1, -1)
    assert out_shape("fill_constant", {"ShapeTensor": i32(2)}, values={"ShapeTensor": [np.array([2, 5])]}) == (2, 5)
    assert out_shape("fill_constant", {"ShapeTensorList": [i32(1), i32(1)]}, {"shape": [-1, 4]},
                     {"ShapeTensorList": [None, np.array([4])]}) == (-1, 4)
    fails(r"attr 'dtype' = 99 is not a VarType.Type value \(e.g. 5 = float32", "fill_constant", {}, {"dtype": 99})
    fails(r"shape \[2, -3\] must not hold negative dims", "fill_constant", {}, {"shape": [2, -3]})
    fails("attr 'str_value' = 'abc' is not a number", "fill_constant", {}, {"str_value": "abc"})
    fails(r"input 'ValueTensor' must hold one value, has shape \[2\]", "fill_constant", {"ValueTensor": f32(2)})
    fails("input 'ShapeTensor' must be int32 or int64, got float32", "fill_constant", {"ShapeTensor": f32(2)})


def test_assign_and_shape() -> None:
    x = TensorInfo((2, -1, 3), DType.float16)
    assert infer("assign", {"X": x})["Out"] == [x]
    assert infer("assign", {}) == {}
    assert get_schema("assign").inplace == {"X": "Out"}
    for shape in [(2, 3, 4), (5,), ()]:
        expected = np.array(rand(shape).shape, dtype=np.int32)
        assert infer("shape", {"Input": f32(*shape)})["Out"] == [TensorInfo(expected.shape, DType.int32)]


# -- slice --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, axes, starts, ends, decrease", [
    ((5, 6, 7), [0], [1], [4], []),
    ((5, 6, 7), [1, 2], [-3, 2], [100, -1], []),
    ((5, 6, 7), [-1, 0], [-100, 0], [3, 1], [0]),
    ((5, 6, 7), [2], [4], [4], []),
    ((5, 6, 7), [0, 1, 2], [4, 5, 6], [5, 6, 7], [0, 1, 2]),
    ((4, 3), [1], [10], [20], []),
])
def test_slice_matches_numpy(shape: tuple[int, ...], axes: list[int], starts: list[int], ends: list[int],
                             decrease: list[int]) -> None:
    index: list[Any] = [slice(None)] * len(shape)
    for a, s, e in zip(axes, starts, ends):
        index[a] = slice(s, e)
    for a in decrease:
        index[a] = index[a].start if index[a].start >= 0 else index[a].start + shape[a]
    expected = rand(shape)[tuple(index)].shape
    attrs = {"axes": axes, "starts": starts, "ends": ends, "decrease_axis": decrease}
    assert out_shape("slice", {"Input": f32(*shape)}, attrs) == expected


@pytest.mark.parametrize("axes,starts,ends,strides", [
    ([0, 2], [0, -1], [5, -8], [2, -2]), ([1], [10], [-100], [-1]), ([-1], [1], [2**31 - 1], [3])])
def test_strided_slice_matches_python_slices(axes: list[int], starts: list[int], ends: list[int],
                                             strides: list[int]) -> None:
    x = rand((5, 6, 7))
    index: list[Any] = [slice(None)] * 3
    for a, s, e, st in zip(axes, starts, ends, strides):
        index[a] = slice(s, e, st)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "strides": strides}
    assert out_shape("strided_slice", {"Input": f32(5, 6, 7)}, attrs) == x[tuple(index)].shape
    assert out_shape("strided_slice", {"Input": f32(-1, 6, 7)}, attrs)[0] == -1


def test_strided_slice_rejects_zero_strides_and_wide_decreases() -> None:
    attrs = {"axes": [0], "starts": [0], "ends": [4], "strides": [0]}
    fails("holds a 0", "strided_slice", {"Input": f32(5, 6)}, attrs)
    fails("sliced size is 2, not 1", "strided_slice", {"Input": f32(5, 6)},
          {**attrs, "strides": [2], "ends": [3], "decrease_axis": [0]})


def test_slice_unknown_dims() -> None:
    x, attrs = f32(-1, 6, 7), {"axes": [0, 1], "starts": [1, 1], "ends": [3, 3]}
    assert out_shape("slice", {"Input": x}, attrs) == (-1, 2, 7)
    assert out_shape("slice", {"Input": x}, {**attrs, "infer_flags": [1, -1]}) == (-1, -1, 7)
    assert out_shape("slice", {"Input": x, "StartsTensor": i32(2)}, attrs) == (-1, -1, 7)
    lists = {"Input": x, "StartsTensorList": [i32(1), i32(1)], "EndsTensorList": [i32(1), i32(1)]}
    values = {"StartsTensorList": [None, np.array([2])], "EndsTensorList": [None, np.array([-1])]}
    assert out_shape("slice", lists, {**attrs, "infer_flags": [-1, -1]}, values) == (-1, 3, 7)
    assert out_shape("slice", {"Input": x}, {**attrs, "decrease_axis": [0]}) == (2, 7)


def test_slice_errors() -> None:
    x = {"Input": f32(5, 6)}
    fails(r"axis 1 \(size 6\): end 1 comes before start 4", "slice", x, {"axes": [1], "starts": [4], "ends": [1]})
    fails(r"ends \[3\] has 1 entries, attr 'axes' has 2", "slice", x,
          {"axes": [0, 1], "starts": [0, 0], "ends": [3]})
    fails(r"attr 'decrease_axis' drops axis 0, whose sliced size is 3, not 1", "slice", x,
          {"axes": [0], "starts": [0], "ends": [3], "decrease_axis": [0]})
    fails(r"attr 'axes' entry = 2 is out of range \[-2, 1\]", "slice", x, {"axes": [2], "starts": [0], "ends": [1]})
    fails(r"attr 'axes' = \[0, -2\] repeats an axis", "slice", x, {"axes": [0, -2], "starts": [0, 0], "ends": [1, 1]})
    fails("input 'StartsTensor' must be int32 or int64", "slice", {**x, "StartsTensor": f32(1)},
          {"axes": [0], "ends": [1]})


# -- gather -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, index_shape, axis", [((5, 3), (4,), 0), ((5, 3, 2), (7,), 1), ((5, 3), (), 0),
                                                      ((5, 3, 2), (2,), -1), ((5, 3), (6, 1), 0)])
def test_gather_matches_numpy(shape: tuple[int, ...], index_shape: tuple[int, ...], axis: int) -> None:
    index = RNG.integers(0, shape[axis], size=index_shape)
    expected = np.take(rand(shape), index.reshape(-1) if index.ndim == 2 else index, axis=axis).shape
    assert out_shape("gather", {"X": f32(*shape), "Index": i32(*index_shape)}, {"axis": axis}) == expected


def test_gather_unknown_dims_and_errors() -> None:
    assert out_shape("gather", {"X": f32(-1, 3), "Index": i32(-1)}) == (-1, 3)
    assert out_shape("gather", {"X": f32(5, 3), "Index": i32(4), "Axis": i32(1)}) == (-1, -1)
    fails("input 'Index' must be int32 or int64, got float32", "gather", {"X": f32(5, 3), "Index": f32(4)})
    fails(r"input 'Index' must be 0-d, 1-D or \[N, 1\], got shape \[2, 3\]", "gather",
          {"X": f32(5, 3), "Index": i32(2, 3)})


# -- schemas' dtype roles -----------------------------------------------------------------------------
@pytest.mark.parametrize("op_type, kept", [
    ("concat", ("AxisTensor",)), ("split", ("AxisTensor", "SectionsTensorList")),
    ("reshape2", ("Shape", "ShapeTensor")), ("unsqueeze2", ("AxesTensor", "AxesTensorList")),
    ("fill_constant", ("ValueTensor", "ShapeTensor", "ShapeTensorList")),
    ("slice", ("StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList")), ("gather", ("Index", "Axis")),
])
def test_index_tensors_keep_their_dtype(op_type: str, kept: tuple[str, ...]) -> None:
    schema = get_schema(op_type)
    assert schema.keep_dtype_slots == kept
    assert not set(kept) & set(schema.decisive_slots)


def test_xshape_outputs_are_dispensable() -> None:
    for op_type in ["reshape2", "transpose2", "squeeze2", "unsqueeze2", "flatten_contiguous_range"]:
        assert get_schema(op_type).output_slot("XShape").dispensable


def test_paddle_exported_ops_infer_their_declared_shapes() -> None:
    program = program_from_bytes((FIXTURES / "resnet_tiny.pdmodel").read_bytes())
    block = program.global_block()
    checked = 0
    for op in block.ops:
        schema = get_schema(op.type)
        if op.type not in ("reshape2", "flatten_contiguous_range") or schema.infer is None:
            continue
        inputs = {slot: [TensorInfo(block.find_var(n).shape, block.find_var(n).dtype) for n in names]
                  for slot, names in op.inputs.items()}
        ctx = InferContext(schema, inputs, dict(op.attrs))
        schema.infer(ctx)
        for slot, names in op.outputs.items():
            assert [ctx.outputs[slot][i].shape for i in range(len(names))] == [block.find_var(n).shape for n in names]
            checked += 1
    assert checked >= 2


# -- layer functions ----------------------------------------------------------------------------------
def build() -> halfway.Program:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [-1, 3, 4, 5])
        bias = create_parameter("conv2d.b", [3], initializer=Constant(0.5))
        b = layers.reshape(bias, [1, 3, 1, 1])
        t = layers.transpose(x, [0, 2, 3, 1])
        f = layers.flatten(t, start_axis=1)
        a, c = layers.split(f, [20, -1], dim=1)
        j = layers.concat([c, a], axis=-1)
        s = layers.slice(j, axes=[1], starts=[-10], ends=[1000])
        u = layers.unsqueeze(s, [1, -1])
        q = layers.squeeze(u, [1])
        k = layers.fill_constant([2, 3], "int64", 2**40 + 1)
        layers.assign(q)
        layers.shape(k)
        assert [v.shape for v in (b, t, f, a, c, j, s, u, q)] == [
            (1, 3, 1, 1), (-1, 4, 5, 3), (-1, 60), (-1, 20), (-1, 40), (-1, 60), (-1, 10), (-1, 1, 10, 1),
            (-1, 10, 1)]
        assert (k.shape, k.dtype) == ((2, 3), DType.int64)
    return prog


def test_layers_build_paddle_ops() -> None:
    prog = build()
    ops = prog.global_block().ops
    assert [op.type for op in ops] == [
        "reshape2", "transpose2", "flatten_contiguous_range", "split", "concat", "slice", "unsqueeze2", "squeeze2",
        "fill_constant", "assign", "shape"]
    by_type = {op.type: op for op in ops}
    assert by_type["reshape2"].attr("shape") == (1, 3, 1, 1)
    assert by_type["reshape2"].output("XShape") == ()
    assert (by_type["split"].attr("num"), by_type["split"].attr("sections"), by_type["split"].attr("axis")) == (
        0, (20, -1), 1)
    assert len(by_type["split"].output("Out")) == 2
    assert by_type["slice"].attr("infer_flags") == (1,)
    fill = by_type["fill_constant"]
    assert fill.attr("dtype") == DType.int64.value and fill.attr("str_value") == str(2**40 + 1)
    assert fill.attr_type("shape") is AttrType.LONGS
    shape_out = prog.global_block().find_var(by_type["shape"].output("Out")[0])
    assert (shape_out.shape, shape_out.dtype) == ((2,), DType.int32)
    again = program_from_bytes(program_to_bytes(prog))
    assert program_to_bytes(again) == program_to_bytes(prog)


def test_layers_init_scope_is_reproducible() -> None:
    prog = build()
    first, second = halfway.init_scope(prog, seed=0), halfway.init_scope(prog, seed=0)
    (name,) = [v.name for v in prog.persistable_vars()]
    assert first.get(name).shape == (3,)
    np.testing.assert_array_equal(first.get(name), np.full(3, 0.5, np.float32))
    np.testing.assert_array_equal(first.get(name), second.get(name))


def test_layer_errors_name_the_op() -> None:
    with halfway.program_guard(halfway.Program()):
        x = layers.data("x", [2, 3])
        with pytest.raises(InferError, match=r"^concat: inputs 'X' disagree on dim 1"):
            layers.concat([x, layers.data("y", [2, 4])], axis=0)
        with pytest.raises(InferError, match="^split: attr 'num' = 2 does not divide"):
            layers.split(x, 2)


# -- bitcast ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("place", [None, pytest.param("opencl", marks=pytest.mark.opencl)])
def test_bitcast_reads_the_bits_as_another_type_of_the_size(place):
    x = np.array([[1.0, -2.5, np.inf], [0.0, 3e-39, np.nan]], np.float32)
    ran = run_op("bitcast", {"X": x}, {"out_dtype": int(halfway.DType.int32)},
                 place=OpenCLPlace() if place else None)
    assert ran.out.dtype == np.int32 and ran.report.fallbacks == []
    np.testing.assert_array_equal(ran.out, x.view(np.int32))


def test_bitcast_to_another_size_is_refused_naming_both():
    with pytest.raises(halfway.HalfwayError, match=r"float32 \(4 bytes\), out_dtype int64 \(8 bytes\)"):
        run_op("bitcast", {"X": np.zeros(3, np.float32)}, {"out_dtype": int(halfway.DType.int64)})
