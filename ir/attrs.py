"""Typed op attributes: one normalised Python form per ``AttrType``.

Values are stored immutably — lists become tuples, FLOAT values are rounded to float32 as the
wire holds them — so an attr read back equals the one written and clones never alias.

| AttrType | Python value |            | AttrType | Python value        |
|----------|--------------|------------|----------|---------------------|
| INT      | int (int32)  |            | INTS     | tuple[int]          |
| LONG     | int (int64)  |            | LONGS    | tuple[int]          |
| FLOAT    | float (f32)  |            | FLOATS   | tuple[float]        |
| FLOAT64  | float        |            | FLOAT64S | tuple[float]        |
| STRING   | str          |            | STRINGS  | tuple[str]          |
| BOOLEAN  | bool         |            | BOOLEANS | tuple[bool]         |
| BLOCK    | int (index)  |            | BLOCKS   | tuple[int]          |
| VAR      | str (name)   |            | VARS     | tuple[str]          |
| SCALAR   | bool, int, float or complex | SCALARS | tuple of those |
"""

from __future__ import annotations

import enum
import math
from typing import Any, NamedTuple

import numpy as np

from .errors import IRError

__all__ = ["AttrType", "Attr", "normalize", "infer_type"]


class AttrType(enum.IntEnum):
    INT = 0
    FLOAT = 1
    STRING = 2
    INTS = 3
    FLOATS = 4
    STRINGS = 5
    BOOLEAN = 6
    BOOLEANS = 7
    BLOCK = 8
    LONG = 9
    BLOCKS = 10
    LONGS = 11
    FLOAT64S = 12
    VAR = 13
    VARS = 14
    FLOAT64 = 15
    SCALAR = 16
    SCALARS = 17

    @property
    def is_list(self) -> bool:
        return self in _LIST_OF


class Attr(NamedTuple):
    type: AttrType
    value: Any


_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_LIST_OF = {
    AttrType.INTS: AttrType.INT,
    AttrType.FLOATS: AttrType.FLOAT,
    AttrType.STRINGS: AttrType.STRING,
    AttrType.BOOLEANS: AttrType.BOOLEAN,
    AttrType.BLOCKS: AttrType.BLOCK,
    AttrType.LONGS: AttrType.LONG,
    AttrType.FLOAT64S: AttrType.FLOAT64,
    AttrType.VARS: AttrType.VAR,
    AttrType.SCALARS: AttrType.SCALAR,
}


def _integer(value: Any, bounds: tuple[int, int]) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise TypeError(f"expected an integer, got {value!r}")
    number = int(value)
    if not bounds[0] <= number <= bounds[1]:
        raise ValueError(f"{number} does not fit in {'int32' if bounds == _INT32 else 'int64'}")
    return number


def _real(value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _float32(value: Any) -> float:
    value = _real(value)
    if math.isfinite(value) and abs(value) > float(np.finfo(np.float32).max):
        raise ValueError(f"{value} overflows float32")
    return float(np.float32(value))


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {value!r}")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"expected a bool, got {value!r}")
    return bool(value)


def _scalar(value: Any) -> bool | int | float | complex:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return _integer(value, _INT64)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (complex, np.complexfloating)):
        return complex(value)
    raise TypeError(f"expected a bool, int, float or complex scalar, got {value!r}")


_SCALAR_NORMALIZERS = {
    AttrType.INT: lambda v: _integer(v, _INT32),
    AttrType.LONG: lambda v: _integer(v, _INT64),
    AttrType.BLOCK: lambda v: _integer(v, _INT32),
    AttrType.FLOAT: _float32,
    AttrType.FLOAT64: _real,
    AttrType.STRING: _string,
    AttrType.VAR: _string,
    AttrType.BOOLEAN: _boolean,
    AttrType.SCALAR: _scalar,
}


def normalize(attr_type: AttrType, value: Any) -> Any:
    """Return ``value`` in the canonical form of ``attr_type``; raise IRError if it does not fit."""
    try:
        element = _LIST_OF.get(attr_type)
        if element is None:
            return _SCALAR_NORMALIZERS[attr_type](value)
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise TypeError(f"expected a list, got {value!r}")
        return tuple(_SCALAR_NORMALIZERS[element](v) for v in value)
    except (TypeError, ValueError) as e:
        raise IRError(f"invalid {attr_type.name} attr value: {e}") from None


def infer_type(value: Any) -> AttrType:
    """Pick the AttrType a plain Python value most naturally has (for attrs no schema declares)."""
    if isinstance(value, (bool, np.bool_)):
        return AttrType.BOOLEAN
    if isinstance(value, (int, np.integer)):
        return AttrType.INT if _INT32[0] <= value <= _INT32[1] else AttrType.LONG
    if isinstance(value, (float, np.floating)):
        return AttrType.FLOAT
    if isinstance(value, str):
        return AttrType.STRING
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
        if not items:
            raise IRError("cannot infer the type of an empty list attr; pass attr_type")
        kinds = {infer_type(v) for v in items}
        if kinds <= {AttrType.INT, AttrType.LONG}:
            return AttrType.LONGS if AttrType.LONG in kinds else AttrType.INTS
        if len(kinds) == 1:
            (kind,) = kinds
            for list_type, element in _LIST_OF.items():
                if element is kind:
                    return list_type
    raise IRError(f"cannot infer an attr type for {value!r}; pass attr_type")
