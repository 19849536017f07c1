"""Scores an op selects by order stay float32.

TopK (``top_k_v2``) picks the largest values of its X: in float16, scores closer than float16's
spacing (2**-11 near 1, as a detector's sigmoid scores often are) round to one value and their
order is lost, so the float16 program selects other detections than the float32 one. Its X is
pinned float32, and so is every var X is a view of (a reshape or flatten between the scores'
op and TopK): the op that computes the scores, and the selection, run float32.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...ir.block import Block
from ...ir.schema import get_schema, has_schema

__all__ = ["ORDERED_INPUTS", "selection_pins"]

ORDERED_INPUTS: Mapping[str, tuple[str, str]] = {
    # top_k_v2's X: near-tied scores keep their order
    "top_k_v2": ("X", "selects by order: float16 rounding ties near-equal scores and reorders the selection"),
}
"""Op type -> (the input slot it orders, why that input stays float32)."""


def selection_pins(block: Block) -> dict[str, str]:
    """Var name -> why it stays float32: the ``ORDERED_INPUTS`` of the block's ops, and back
    through the ops whose output there is a view of an input (``OpSchema.views``)."""
    pins: dict[str, str] = {}
    for op in block.ops:
        slot, why = ORDERED_INPUTS.get(op.type, ("", ""))
        pending = list(op.input(slot)) if slot else []
        while pending:
            name = pending.pop()
            if name in pins:
                continue
            pins[name] = f"{op.type}'s {slot}: {why}"
            for producer, out_slot, _ in block.producers(name):
                views = get_schema(producer.type).views if has_schema(producer.type) else {}
                if out_slot in views:
                    pending.extend(producer.input(views[out_slot]))
    return pins
