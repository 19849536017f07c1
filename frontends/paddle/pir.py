"""Reading Paddle 3's PIR program JSON (``model.json``, as ``paddle.jit.save`` writes it) into
plain records: one ``PirOp`` per op, attrs decoded to Python values, result types decoded.

The file is one JSON object ``{"base_code": {"magic": "pir", ...}, "program": {"regions":
[{"blocks": [{"ops": [...]}]}]}}`` with short keys: ``#`` an op name or a kind, ``%`` a value id,
``I`` operands (``{"%": 0}`` is a missing one), ``O`` results (``{"%": id, "TT": type}``), ``A``
attrs (``{"N": name, "AT": {"#": kind, "D": data}}``). Parameters (``"#": "p"``) carry
``A = [is_distributed, is_parameter, need_clip, name]`` and one result. Op names carry a dialect
number: ``1.conv2d`` is ``pd_op.conv2d``, ``0.combine`` is ``builtin.combine``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...ir.dtypes import DType
from ...ir.errors import SerdeError

__all__ = ["PirOp", "PirType", "read_program", "MISSING"]

MISSING = 0
"""The value id PIR writes for an operand that is not given."""

_DIALECTS = {"0": "builtin", "1": "pd_op"}
_DTYPES = {"f16": DType.float16, "bf16": DType.bfloat16, "f32": DType.float32, "f64": DType.float64,
           "i8": DType.int8, "ui8": DType.uint8, "i16": DType.int16, "i32": DType.int32, "i64": DType.int64,
           "bool": DType.bool}


@dataclass(frozen=True)
class PirType:
    """A result's declared type: a dense tensor's dtype and dims (-1 unknown), or a vector of them."""

    dtype: DType | None
    shape: tuple[int, ...]
    items: tuple[PirType, ...] = ()


@dataclass
class PirOp:
    """One op of the program: its full name (``pd_op.conv2d``), operand ids (MISSING where absent),
    result ids and types, and attrs as Python values. A parameter is ``name == "parameter"`` with
    its name in ``attrs["name"]``."""

    name: str
    inputs: list[int]
    outputs: list[int]
    types: list[PirType]
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def short(self) -> str:
        """The name without its dialect: ``conv2d``."""
        return self.name.split(".", 1)[-1]


def read_program(text: str, source: str) -> list[PirOp]:
    """The ops of the program's first block, in order. SerdeError naming ``source`` for a file that
    is not PIR JSON, or one whose program has more than one region or block."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise SerdeError(f"{source}: not JSON ({e})") from None
    if not isinstance(data, dict) or data.get("base_code", {}).get("magic") != "pir":
        raise SerdeError(f"{source}: not a Paddle PIR program (no base_code.magic 'pir')")
    try:
        regions = data["program"]["regions"]
        if len(regions) != 1 or len(regions[0]["blocks"]) != 1:
            raise SerdeError(f"{source}: the program has {len(regions)} region(s); halfway reads one region of "
                             f"one block (control flow is not supported)")
        return [_op(raw) for raw in regions[0]["blocks"][0]["ops"]]
    except (KeyError, TypeError, IndexError, ValueError) as e:
        raise SerdeError(f"{source}: malformed PIR program ({type(e).__name__}: {e})") from None


def _op(raw: dict[str, Any]) -> PirOp:
    results = raw.get("O", [])
    results = results if isinstance(results, list) else [results]
    outputs = [int(r["%"]) for r in results]
    types = [_type(r.get("TT")) for r in results]
    if raw["#"] == "p":
        return PirOp("parameter", [], outputs, types, {"name": raw["A"][3]})
    dialect, _, name = raw["#"].partition(".")
    attrs = {a["N"]: _attr(a["AT"]) for a in raw.get("A", [])}
    return PirOp(f"{_DIALECTS.get(dialect, dialect)}.{name}", [int(i["%"]) for i in raw.get("I", [])], outputs,
                 types, attrs)


def _attr(value: dict[str, Any]) -> Any:
    kind, data = value["#"], _data(value)
    if kind.endswith(".a_array"):
        return [_attr(item) for item in data]
    if kind.endswith(".a_intarray"):
        return [int(d) for d in data]
    return data


def _type(raw: dict[str, Any] | None) -> PirType:
    if not raw:
        return PirType(None, ())
    kind, data = raw["#"], _data(raw)
    if kind.endswith(".t_vec"):
        return PirType(None, (), tuple(_type(item) for item in data))
    if kind.endswith(".t_dtensor"):
        code = data[0]["#"].split(".t_", 1)[-1]
        return PirType(_DTYPES.get(code), tuple(int(d) for d in data[1]))
    return PirType(None, ())


def _data(raw: dict[str, Any]) -> Any:
    """An attr's or a type's ``D``: JSON of its kind's form (malformed data fails in read_program)."""
    return raw.get("D")
