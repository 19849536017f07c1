"""ONNX tensors and element types read defensively: every count, size and dtype is checked
against the message before numpy sees it, so a malformed initializer is one clear error naming
the tensor rather than a numpy or onnx exception."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError

__all__ = ["TensorError", "tensor_array", "elem_dtype", "read_external_data"]


class TensorError(HalfwayError):
    """A tensor or element type of an ONNX model that cannot be read; the caller adds the file."""


def elem_dtype(elem_type: int, what: str) -> DType:
    """The halfway dtype of ONNX element type ``elem_type`` (of ``what``, for the message)."""
    try:
        return DType.from_any(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError, HalfwayError):
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else "unknown"
        raise TensorError(f"{what} has element type {elem_type} ({name}), which halfway cannot hold") from None


def tensor_array(tensor: TensorProto, what: str) -> np.ndarray:
    """The value of ``tensor`` (external data already read), after checking that its data type
    is known, its dims are sizes and its data holds exactly one value per element."""
    if tensor.HasField("segment"):
        raise TensorError(f"{what} is a segment of a larger tensor; segmented tensors are not supported")
    try:
        np_dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        raise TensorError(f"{what} has data type {tensor.data_type}, which is not an ONNX tensor type") from None
    if tensor.data_type in (TensorProto.UNDEFINED, TensorProto.STRING) or np_dtype.kind == "O":
        raise TensorError(f"{what} has data type {TensorProto.DataType.Name(tensor.data_type)}, which halfway "
                          f"cannot hold")
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise TensorError(f"{what} has dims {dims}, which hold a negative size")
    numel = math.prod(dims)
    _check_count(tensor, np_dtype, numel, dims, what)
    try:
        return numpy_helper.to_array(tensor)
    except Exception as e:  # onnx's own conversion failure, named
        raise TensorError(f"{what} cannot be read: {type(e).__name__}: {e}") from None


def _check_count(tensor: TensorProto, np_dtype: np.dtype, numel: int, dims: list[int], what: str) -> None:
    name = TensorProto.DataType.Name(tensor.data_type)
    if tensor.HasField("raw_data"):
        expected = numel * np_dtype.itemsize
        if len(tensor.raw_data) != expected:
            raise TensorError(f"{what} is {name} of dims {dims}: its raw data should be {expected} bytes, "
                              f"but it is {len(tensor.raw_data)}")
        return
    field = helper.tensor_dtype_to_field(tensor.data_type)
    count = len(getattr(tensor, field))
    per_element = 2 if np_dtype.kind == "c" else 1
    if count != numel * per_element:
        raise TensorError(f"{what} is {name} of dims {dims} ({numel} elements), but its {field} holds {count} "
                          f"values")


def read_external_data(tensor: TensorProto, base: Path, what: str) -> None:
    """Read ``tensor``'s external data (a file inside ``base``, the model's folder) into its
    raw_data, checking the location, offset and length against the file first."""
    entries = {entry.key: entry.value for entry in tensor.external_data}
    location = entries.get("location", "")
    if not location or os.path.isabs(location) or "\0" in location:
        raise TensorError(f"{what} keeps its data in external file {location!r}: expected a path relative to the "
                          f"model's folder (without NUL bytes)")
    root = os.path.realpath(base)
    file = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, file]) != root:
        raise TensorError(f"{what} keeps its data in external file {location!r}, which is outside the model's "
                          f"folder {base}")
    if not os.path.isfile(file):
        raise TensorError(f"{what} keeps its data in external file {location!r}, which is missing or not a "
                          f"regular file (looked in {base})")
    offset, length = _entry_int(entries, "offset", what), _entry_int(entries, "length", what)
    size = os.path.getsize(file)
    end = size if length is None else (offset or 0) + length
    if (offset or 0) > size or end > size:
        raise TensorError(f"{what}: external file {location!r} is {size} bytes; the tensor's data would end "
                          f"at byte {end}")
    try:
        with open(file, "rb") as f:
            f.seek(offset or 0)
            tensor.raw_data = f.read(end - (offset or 0))
    except OSError as e:
        raise TensorError(f"{what}: cannot read external file {location!r} ({e.strerror or e})") from None
    tensor.data_location = TensorProto.DEFAULT
    del tensor.external_data[:]


def _entry_int(entries: dict[str, str], key: str, what: str) -> int | None:
    if key not in entries:
        return None
    try:
        value = int(entries[key])
    except ValueError:
        value = -1
    if value < 0:
        raise TensorError(f"{what}: external data {key} {entries[key]!r} is not a byte count")
    return value
