"""Reading Paddle 3's PIR program JSON (``model.json``, as ``paddle.jit.save`` writes it) into
plain records: one ``PirOp`` per op, attrs decoded to Python values, result types decoded.

The file is one JSON object ``{"base_code": {"magic": "pir", ...}, "program": {"regions":
[{"blocks": [{"ops": [...]}]}]}}`` with short keys: ``#`` an op name or a kind, ``%`` a value id,
``I`` operands (``{"%": 0}`` is a missing one), ``O`` results (``{"%": id, "TT": type}``), ``A``
attrs (``{"N": name, "AT": {"#": kind, "D": data}}``). Parameters (``"#": "p"``) carry
``A = [is_distributed, is_parameter, need_clip, name]`` and one result. Op names carry a dialect
number: ``1.conv2d`` is ``pd_op.conv2d``, ``0.combine`` is ``builtin.combine``.

The structure is checked as it is read, so that a malformed file is a SerdeError naming the op
(its index and name) and the value id at fault: every record of the kind and type above; value
ids positive ints, each the result of one op, every operand the result of an op before it;
scalar attrs of their kind's type (``a_i32`` an int, ``a_str`` a string, ...); dims ints of -1
or more; attrs and types nested at most ``MAX_DEPTH`` deep.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NoReturn

from ...ir.dtypes import DType
from ...ir.errors import SerdeError

__all__ = ["PirOp", "PirType", "read_program", "MISSING", "MAX_DEPTH"]

MISSING = 0
"""The value id PIR writes for an operand that is not given."""
MAX_DEPTH = 32
"""How deep attrs (arrays of arrays) and types (vectors of vectors) may nest."""

_DIALECTS = {"0": "builtin", "1": "pd_op"}
_DTYPES = {"f16": DType.float16, "bf16": DType.bfloat16, "f32": DType.float32, "f64": DType.float64,
           "i8": DType.int8, "ui8": DType.uint8, "i16": DType.int16, "i32": DType.int32, "i64": DType.int64,
           "bool": DType.bool}
_INT, _FLOAT = "an int", "a number"
_SCALAR_KINDS = {"a_str": "a string", "a_dtype": "a string", "a_bool": "a bool", "a_i32": _INT, "a_i64": _INT,
                 "a_f32": _FLOAT, "a_f64": _FLOAT}
"""Scalar attr kinds -> what their data must be."""


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
    """The ops of the program's first block, in order.

    Raises:
        SerdeError: naming ``source`` (and the op and value id) for a file that is not PIR JSON,
            is malformed (see the module docstring), or whose program has more than one region
            or block.
    """
    try:
        data = json.loads(text)
    except RecursionError:
        raise SerdeError(f"{source}: not a PIR program: its JSON nests too deeply") from None
    except ValueError as e:
        raise SerdeError(f"{source}: not JSON ({e})") from None
    base = data.get("base_code") if isinstance(data, dict) else None
    if not isinstance(base, dict) or base.get("magic") != "pir":
        raise SerdeError(f"{source}: not a Paddle PIR program (no base_code.magic 'pir')")
    return _Reader(source).program(data)


class _Reader:
    """The checks of one file's records, and where a problem is (the op being read)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.where = "program"
        self.defined: dict[int, int] = {}
        """Value id -> the index of the op whose result it is."""

    def fail(self, problem: str) -> NoReturn:
        raise SerdeError(f"{self.source}: {self.where}: malformed PIR program: {problem}")

    def program(self, data: dict[str, Any]) -> list[PirOp]:
        regions = self.items(self.record(data.get("program"), "program", dict).get("regions"), "program.regions")
        if len(regions) != 1:
            self.fail(f"{len(regions)} regions; halfway reads one region of one block (control flow is not "
                      f"supported)")
        blocks = self.items(self.record(regions[0], "region", dict).get("blocks"), "region.blocks")
        if len(blocks) != 1:
            self.fail(f"{len(blocks)} blocks; halfway reads one region of one block (control flow is not supported)")
        raw_ops = self.items(self.record(blocks[0], "block", dict).get("ops"), "block.ops")
        return [self.op(raw, index) for index, raw in enumerate(raw_ops)]

    # -- records ---------------------------------------------------------------------------------
    def record(self, value: Any, what: str, kind: type) -> Any:
        if not isinstance(value, kind) or isinstance(value, bool):
            self.fail(f"{what} is {_shown(value)}, not {'an object' if kind is dict else 'a list'}")
        return value

    def items(self, value: Any, what: str) -> list[Any]:
        items: list[Any] = self.record(value, what, list)
        return items

    def op(self, raw: Any, index: int) -> PirOp:
        self.where = f"op #{index}"
        raw = self.record(raw, "the op", dict)
        kind = raw.get("#")
        if not isinstance(kind, str) or not kind:
            self.fail(f"its name ('#') is {_shown(kind)}, not a string")
        dialect, _, short = kind.partition(".")
        name = "parameter" if kind == "p" else f"{_DIALECTS.get(dialect, dialect)}.{short}"
        self.where = f"op #{index} {name}"
        results = raw.get("O", [])
        results = self.items(results if isinstance(results, list) else [results], "its results ('O')")
        inputs = [self.operand(item) for item in self.items(raw.get("I", []), "its operands ('I')")]
        outputs = [self.result(item, index) for item in results]
        types = [self.type(self.record(item, "a result", dict).get("TT"), 0) for item in results]
        if kind == "p":
            return PirOp("parameter", [], outputs, types, {"name": self.parameter_name(raw, outputs)})
        attrs = {}
        for item in self.items(raw.get("A", []), "its attrs ('A')"):
            item = self.record(item, "an attr", dict)
            attr_name = item.get("N")
            if not isinstance(attr_name, str):
                self.fail(f"an attr's name ('N') is {_shown(attr_name)}, not a string")
            attrs[attr_name] = self.attr(item.get("AT"), attr_name, 0)
        return PirOp(name, inputs, outputs, types, attrs)

    def parameter_name(self, raw: dict[str, Any], outputs: list[int]) -> str:
        facts = raw.get("A")
        if not isinstance(facts, list) or len(facts) < 4 or not isinstance(facts[3], str) or not facts[3]:
            self.fail(f"a parameter's 'A' is {_shown(facts)}, not [is_distributed, is_parameter, need_clip, name]")
        if len(outputs) != 1:
            self.fail(f"a parameter has {len(outputs)} results; it has one")
        name: str = facts[3]
        return name

    # -- values ----------------------------------------------------------------------------------
    def value_id(self, raw: Any, what: str) -> int:
        value = self.record(raw, what, dict).get("%")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            self.fail(f"{what}'s value id ('%') is {_shown(value)}, not a non-negative int")
        return value

    def operand(self, raw: Any) -> int:
        value = self.value_id(raw, "an operand")
        if value != MISSING and value not in self.defined:
            self.fail(f"operand %{value} is not the result of an op before it")
        return value

    def result(self, raw: Any, index: int) -> int:
        value = self.value_id(raw, "a result")
        if value == MISSING:
            self.fail(f"a result has value id %{MISSING}, which marks a missing operand")
        if value in self.defined:
            self.fail(f"value %{value} is also the result of op #{self.defined[value]}")
        self.defined[value] = index
        return value

    def type(self, raw: Any, depth: int) -> PirType:
        if not raw:
            return PirType(None, ())
        if depth > MAX_DEPTH:
            self.fail(f"a result type nests more than {MAX_DEPTH} deep")
        raw = self.record(raw, "a result type", dict)
        kind, data = raw.get("#"), raw.get("D")
        if not isinstance(kind, str):
            self.fail(f"a result type's kind ('#') is {_shown(kind)}, not a string")
        if kind.endswith(".t_vec"):
            return PirType(None, (), tuple(self.type(item, depth + 1) for item in self.items(data, "a vector type")))
        if not kind.endswith(".t_dtensor"):
            return PirType(None, ())
        if not isinstance(data, list) or len(data) < 2 or not isinstance(data[0], dict):
            self.fail(f"a dense tensor type's data is {_shown(data)}, not [dtype, dims, ...]")
        code = data[0].get("#")
        dims = self.items(data[1], "a dense tensor type's dims")
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= -1 for d in dims):
            self.fail(f"a dense tensor type's dims {_shown(dims)} are not ints of -1 or more")
        dtype = _DTYPES.get(code.split(".t_", 1)[-1]) if isinstance(code, str) else None
        return PirType(dtype, tuple(dims))

    def attr(self, raw: Any, name: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            self.fail(f"attr {name!r} nests more than {MAX_DEPTH} deep")
        raw = self.record(raw, f"attr {name!r}", dict)
        kind, data = raw.get("#"), raw.get("D")
        if not isinstance(kind, str):
            self.fail(f"attr {name!r} has kind ('#') {_shown(kind)}, not a string")
        short = kind.split(".", 1)[-1]
        if short == "a_array":
            return [self.attr(item, name, depth + 1) for item in self.items(data, f"attr {name!r}")]
        if short == "a_intarray":
            values = self.items(data, f"attr {name!r}")
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                self.fail(f"attr {name!r} ({kind}) is {_shown(values)}, not a list of ints")
            return values
        wanted = _SCALAR_KINDS.get(short)
        if wanted is not None and not _is(data, wanted):
            self.fail(f"attr {name!r} ({kind}) is {_shown(data)}, not {wanted}")
        return data


def _is(value: Any, wanted: str) -> bool:
    if wanted == "a string":
        return isinstance(value, str)
    if wanted == "a bool":
        return isinstance(value, bool)
    number = (int, float) if wanted == _FLOAT else (int,)
    return (isinstance(value, number) and not isinstance(value, bool)) or (wanted == _FLOAT and value is None)


def _shown(value: Any) -> str:
    """A value as an error shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
