"""Element types and variable kinds, with Paddle's enum values and the mapping to numpy.

``DType`` members carry the wire value of ``VarType.Type`` and are named as numpy names them, so
``DType.float16.numpy == np.dtype("float16")`` and ``DType.from_any("float16") is DType.float16``.
"""

from __future__ import annotations

import builtins
import enum
from typing import Any

import numpy as np

from .errors import IRError

__all__ = ["DType", "VarKind", "FLOATING"]


class DType(enum.IntEnum):
    """Tensor element types (values are ``VarType.Type`` on the wire)."""

    bool = 0
    int16 = 1
    int32 = 2
    int64 = 3
    float16 = 4
    float32 = 5
    float64 = 6
    size_t = 19
    uint8 = 20
    int8 = 21
    bfloat16 = 22
    complex64 = 23
    complex128 = 24
    float8_e4m3fn = 32
    float8_e5m2 = 33
    uint16 = 36
    uint32 = 37
    uint64 = 38

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype holding this type (bfloat16 as its uint16 bits; size_t as uint64)."""
        try:
            return _TO_NUMPY[self]
        except KeyError:
            raise IRError(f"dtype {self.name} has no numpy equivalent") from None

    @property
    def itemsize(self) -> int:
        return 1 if self in (DType.float8_e4m3fn, DType.float8_e5m2) else self.numpy.itemsize

    @property
    def is_floating(self) -> builtins.bool:  # `bool` in this class body is DType.bool
        return self in FLOATING

    @classmethod
    def from_any(cls, value: Any) -> DType:
        """Accept a DType, its name ("float16", "fp16"), a wire value, or a numpy dtype-like."""
        if isinstance(value, DType):
            return value
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            try:
                return cls(int(value))
            except ValueError:
                raise IRError(f"unknown dtype value {value}") from None
        if isinstance(value, str) and value in _ALIASES:
            return _ALIASES[value]
        if isinstance(value, str) and value in cls.__members__:
            return cls[value]
        try:
            np_dtype = np.dtype(value)
        except TypeError:
            raise IRError(f"unknown dtype {value!r}; expected one of {', '.join(cls.__members__)}") from None
        try:
            return _FROM_NUMPY[np_dtype]
        except KeyError:
            raise IRError(f"numpy dtype {np_dtype} has no halfway equivalent") from None


FLOATING = frozenset({DType.float16, DType.float32, DType.float64, DType.bfloat16})

_TO_NUMPY = {
    DType.bool: np.dtype(np.bool_),
    DType.int16: np.dtype(np.int16),
    DType.int32: np.dtype(np.int32),
    DType.int64: np.dtype(np.int64),
    DType.float16: np.dtype(np.float16),
    DType.float32: np.dtype(np.float32),
    DType.float64: np.dtype(np.float64),
    DType.size_t: np.dtype(np.uint64),
    DType.uint8: np.dtype(np.uint8),
    DType.int8: np.dtype(np.int8),
    DType.bfloat16: np.dtype(np.uint16),
    DType.complex64: np.dtype(np.complex64),
    DType.complex128: np.dtype(np.complex128),
    DType.uint16: np.dtype(np.uint16),
    DType.uint32: np.dtype(np.uint32),
    DType.uint64: np.dtype(np.uint64),
}
_FROM_NUMPY = {
    np_dtype: dtype
    for dtype, np_dtype in _TO_NUMPY.items()
    if dtype not in (DType.bfloat16, DType.size_t)
}
_ALIASES = {"fp16": DType.float16, "fp32": DType.float32, "fp64": DType.float64, "bf16": DType.bfloat16,
            "half": DType.float16, "float": DType.float32, "double": DType.float64}


class VarKind(enum.IntEnum):
    """What a variable holds (``VarType.Type`` values that are not element types)."""

    DENSE_TENSOR = 7
    SELECTED_ROWS = 8
    FEED_MINIBATCH = 9
    FETCH_LIST = 10
    STEP_SCOPES = 11
    LOD_RANK_TABLE = 12
    DENSE_TENSOR_ARRAY = 13
    PLACE_LIST = 14
    READER = 15
    RAW = 17
    TUPLE = 18
    STRING = 25
    STRINGS = 26
    VOCAB = 27
    FEED_LIST = 28
    PSTRING = 29
    SPARSE_COO = 30
    SPARSE_CSR = 31

    @property
    def has_tensor(self) -> bool:
        """Whether vars of this kind carry an element type and dims."""
        return self in (VarKind.DENSE_TENSOR, VarKind.SELECTED_ROWS, VarKind.DENSE_TENSOR_ARRAY)
