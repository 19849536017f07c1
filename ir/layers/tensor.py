"""Layer functions of the tensor ops: concat, split, reshape, flatten, transpose, squeeze, unsqueeze,
fill_constant, assign, slice, shape.

Each appends one op with Paddle's attrs; the output comes from the schema's inference. Reshape-like
layers create no XShape output (it only serves training). ``feed``/``fetch`` ops are wired by
``save_inference_model``, not by layer functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..builder import append_op
from ..dtypes import DType
from ..variable import Variable

__all__ = ["concat", "split", "reshape", "flatten", "transpose", "squeeze", "unsqueeze", "fill_constant",
           "assign", "slice", "shape"]


def _out(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None) -> Variable:
    return append_op(op_type, inputs, attrs)["Out"][0]


def concat(input: Sequence[Variable], axis: int = 0) -> Variable:
    return _out("concat", {"X": list(input)}, {"axis": axis})


def split(input: Variable, num_or_sections: int | Sequence[int], dim: int = -1) -> list[Variable]:
    """Split ``input`` along ``dim`` into ``num_or_sections`` equal pieces, or pieces of the listed
    sizes (one of them may be -1: the rest). Returns the pieces in order."""
    if isinstance(num_or_sections, int):
        attrs, count = {"num": num_or_sections, "sections": []}, num_or_sections
    else:
        attrs, count = {"num": 0, "sections": list(num_or_sections)}, len(num_or_sections)
    return append_op("split", {"X": input}, {"axis": dim, **attrs}, outputs={"Out": max(count, 0)})["Out"]


def reshape(x: Variable, shape: Sequence[int] | Variable) -> Variable:
    """Reshape ``x``; in a list ``shape`` 0 copies the input dim and one -1 takes the rest. A
    Variable ``shape`` (a 1-D int tensor) is read at run time."""
    if isinstance(shape, Variable):
        return _out("reshape2", {"X": x, "Shape": shape})
    return _out("reshape2", {"X": x}, {"shape": list(shape)})


def flatten(x: Variable, start_axis: int = 1, stop_axis: int = -1) -> Variable:
    """Merge dims ``start_axis``..``stop_axis`` (inclusive) into one."""
    return _out("flatten_contiguous_range", {"X": x}, {"start_axis": start_axis, "stop_axis": stop_axis})


def transpose(x: Variable, perm: Sequence[int]) -> Variable:
    return _out("transpose2", {"X": x}, {"axis": list(perm)})


def squeeze(input: Variable, axes: Sequence[int] = ()) -> Variable:
    """Drop the size-1 dims in ``axes`` (all size-1 dims when empty)."""
    return _out("squeeze2", {"X": input}, {"axes": list(axes)})


def unsqueeze(input: Variable, axes: Sequence[int]) -> Variable:
    """Insert size-1 dims, one axis after another (each counted in the rank reached so far)."""
    return _out("unsqueeze2", {"X": input}, {"axes": list(axes)})


def fill_constant(shape: Sequence[int], dtype: Any, value: float) -> Variable:
    """A ``dtype`` tensor of ``shape`` filled with ``value``. As Paddle does, ``str_value`` carries
    the exact value, so int64 values beyond float32's precision survive."""
    dtype = DType.from_any(dtype)
    exact = str(float(value)) if dtype.is_floating else str(int(value))
    return _out("fill_constant", {}, {"shape": list(shape), "dtype": dtype.value, "value": float(value),
                                      "str_value": exact})


def assign(x: Variable) -> Variable:
    return _out("assign", {"X": x})


def slice(input: Variable, axes: Sequence[int], starts: Sequence[int], ends: Sequence[int]) -> Variable:
    """``input[starts:ends]`` along ``axes`` (numpy clamping; negative indices count from the end)."""
    return _out("slice", {"Input": input}, {"axes": list(axes), "starts": list(starts), "ends": list(ends),
                                            "infer_flags": [1] * len(axes)})


def shape(input: Variable) -> Variable:
    """The dims of ``input`` as an int32 vector."""
    return _out("shape", {"Input": input})
