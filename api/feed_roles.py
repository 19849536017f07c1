"""What each input of a model is for, read from its program, so that generated feeds are values
the model can take and fed ids are checked before a run.

An integer input is, in this order:

1. a mask (``MASK``) when its name holds ``mask``;
2. token type ids (``TYPE_IDS``) when its name ends in ``type_ids`` or is ``segment_ids``;
3. position ids (``POSITIONS``) when its name ends in ``position_ids``;
4. ids (``IDS``) when it indexes an embedding table: the ``Index``/``Ids`` of a gather,
   gather_nd or lookup_table_v2 whose table is a parameter, through ops that pass ids on
   unchanged (reshapes, integer casts); its rows are the table's dim the ids index (a gather's
   ``axis``);
5. a mask when it is cast to a float or bool type (through the same ops): a 0/1 weighting;
6. else plain values (``VALUES``).

A bool input whose name holds ``mask`` is a mask; float inputs are values. The embedding table
found (step 4) is recorded for every kind: its rows bound ids and positions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from attrs import frozen

from ..ir.block import Block
from ..ir.dtypes import DType
from ..ir.errors import FeedError
from ..ir.program import Program

__all__ = ["Role", "IDS", "MASK", "TYPE_IDS", "POSITIONS", "VALUES", "feed_roles", "input_role", "check_ids"]

IDS, MASK, TYPE_IDS, POSITIONS, VALUES = "ids", "mask", "type_ids", "positions", "values"

PASS_THROUGH = frozenset({"unsqueeze2", "squeeze2", "reshape2", "flatten_contiguous_range", "assign", "cast"})
"""Ops that hand an input's ids on unchanged (a cast only to another integer type)."""
LOOKUPS = {"gather": ("X", "Index"), "gather_nd": ("X", "Index"), "lookup_table_v2": ("W", "Ids")}
"""Embedding lookups: op type -> (table slot, ids slot)."""


@frozen
class Role:
    """What an input is for (``kind``), and the embedding table it indexes, if any, with its rows."""

    kind: str
    table: str | None = None
    rows: int | None = None


@frozen
class _Reach:
    """What an input's values reach through ``PASS_THROUGH`` ops."""

    table: str | None
    rows: int | None
    weights: bool


def feed_roles(program: Program, feed_names: Sequence[str]) -> dict[str, Role]:
    """The role of each of ``feed_names`` (see the module docstring)."""
    return {name: input_role(program, name) for name in feed_names}


def input_role(program: Program, name: str) -> Role:
    """The role of the input ``name`` of ``program``."""
    block = program.global_block()
    dtype = block.var(name).dtype
    if dtype is None or dtype.is_floating:
        return Role(VALUES)
    if dtype is DType.bool:
        return Role(MASK if "mask" in name.lower() else VALUES)
    reach = _reach(block, name)
    return Role(_int_kind(name.lower(), reach), reach.table, reach.rows)


def _int_kind(name: str, reach: _Reach) -> str:
    if "mask" in name:
        return MASK
    if name.endswith("type_ids") or name == "segment_ids":
        return TYPE_IDS
    if name.endswith("position_ids"):
        return POSITIONS
    if reach.table is not None:
        return IDS
    return MASK if reach.weights else VALUES


def _reach(block: Block, name: str) -> _Reach:
    """The first embedding table ``name`` indexes, and whether it is cast to a float or bool."""
    pending, seen, weights = [name], {name}, False
    while pending:
        current = pending.pop(0)
        for op, slot, _ in block.var(current).uses():
            table_slot, ids_slot = LOOKUPS.get(op.type, ("", ""))
            if slot == ids_slot and op.input(table_slot):
                table = block.var(op.input(table_slot)[0])
                axis = int(op.attr("axis") or 0) if op.type == "gather" and not op.input("Axis") else 0
                if table.persistable and table.shape and -len(table.shape) <= axis < len(table.shape):
                    return _Reach(table.name, int(table.shape[axis]), weights)
            if op.type not in PASS_THROUGH:
                continue
            outputs = [out for out in op.output_names() if out not in seen]
            dtypes = [block.var(out).dtype for out in outputs]
            if op.type == "cast" and any(d is not None and (d.is_floating or d is DType.bool) for d in dtypes):
                weights = True
                continue
            seen.update(outputs)
            pending.extend(outputs)
    return _Reach(None, None, weights)


def check_ids(roles: Mapping[str, Role], feeds: Mapping[str, np.ndarray]) -> None:
    """FeedError naming the input when fed ids fall outside the embedding table they index
    (``[-rows, rows)``, as ONNX's Gather takes them); ``roles`` as ``feed_roles`` gives them.

    Raises:
        FeedError: naming the input, the table and the largest (or smallest) id.
    """
    for name, value in feeds.items():
        role = roles.get(name)
        if role is None or role.rows is None or not isinstance(value, np.ndarray) or value.dtype.kind not in "iu" \
                or not value.size:
            continue
        low, high = int(value.min()), int(value.max())
        if low < -role.rows or high >= role.rows:
            bad = high if high >= role.rows else low
            raise FeedError(f"input {name!r}: id {bad} is outside the {role.rows} rows of the embedding table "
                            f"{role.table!r} it indexes; give ids in [0, {role.rows})")
