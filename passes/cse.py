"""``cse``: ops of block 0 that compute what an earlier op computed -> its readers read that.

    m1 = where(c, zero_1, ninf_1)      ─ sdpa (layer 0)
    m2 = where(c, zero_2, ninf_2)      ─ sdpa (layer 1)      becomes     m1 = where(c, zero_1, ninf_1) ─ both

Exporters write what every layer shares (the attention mask from the model's mask, the rotary
tables, a shape) once per layer; one forward sweep keeps the first of each and sends the readers
of a later twin to it. Two ops are twins when they have one type, one set of attrs and read the
same vars in each input slot, where parameters of at most ``SMALL_PARAM_BYTES`` holding equal
values (one dtype, shape and bytes) count as the same var: the per-layer copies of a scalar
constant an export makes. A twin's own twins then follow in the same sweep.

An op is left alone (neither kept as the first nor merged) when it has side effects
(``dce.has_side_effects``), is random, has sub-blocks or no outputs, writes a persistable, fed,
fetched var, a var of another block or one that has other writers, or reads a var some op writes
twice (its value depends on where it is read).
"""

from __future__ import annotations

from collections.abc import Hashable

from ..ir.block import Block
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.schema import RANDOM_OPS
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dce import has_side_effects
from .rewire import Guard, remove_unused_vars, sole_writer

__all__ = ["SMALL_PARAM_BYTES", "cse"]

SMALL_PARAM_BYTES = 256
"""Parameters up to this size compare by value (the scalars and short vectors exports repeat)."""


@register_pass("cse")
def cse(program: Program, scope: Scope | None = None, options: None = None) -> PassResult:
    """Send the readers of ops that repeat an earlier op's computation to that op's outputs."""
    guard = Guard.of(program, (), "cse")
    block = program.global_block()
    first: dict[Hashable, Operator] = {}
    merged = 0
    for op in list(block.ops):
        if not _mergeable(block, op, guard):
            continue
        key = _key(block, scope, op)
        if key is None:
            continue
        twin = first.setdefault(key, op)
        if twin is not op:
            _merge(block, op, twin, guard)
            merged += 1
    return PassResult(program, modified=merged > 0, stats={"ops_merged": merged})


def _mergeable(block: Block, op: Operator, guard: Guard) -> bool:
    outputs = op.output_names()
    if not outputs or has_side_effects(op) or op.type in RANDOM_OPS:
        return False
    return all(not guard.kept(n) and not block.var(n).persistable and sole_writer(block, n) is op
               and n not in op.input_names() for n in outputs)


def _key(block: Block, scope: Scope | None, op: Operator) -> Hashable | None:
    """What the op computes: its type, attrs, the vars it reads and its output slots; None when
    a var it reads has several writers."""
    inputs = []
    for slot, names in sorted(op.inputs.items()):
        if any(len(block.producers(n)) > 1 for n in names):
            return None
        inputs.append((slot, tuple(_var_key(block, scope, n) for n in names)))
    attrs = tuple(sorted((name, attr.type, repr(attr.value)) for name, attr in op.typed_attrs().items()))
    outputs = tuple(sorted((slot, len(names)) for slot, names in op.outputs.items()))
    return op.type, tuple(inputs), attrs, outputs


def _var_key(block: Block, scope: Scope | None, name: str) -> Hashable:
    """A small parameter by its value, any other var by its name."""
    var = block.find_var(name)
    value = scope.find(name) if scope is not None and var.persistable and not block.producers(name) else None
    if value is None or value.nbytes > SMALL_PARAM_BYTES:
        return name
    return "value", str(value.dtype), value.shape, value.tobytes()


def _merge(block: Block, op: Operator, twin: Operator, guard: Guard) -> None:
    """The readers of ``op``'s outputs read ``twin``'s; ``op`` and its outputs go."""
    for slot, names in op.outputs.items():
        for name, kept in zip(names, twin.outputs[slot]):
            for reader in {id(r): r for r, _, _ in block.uses(name)}.values():
                reader.rename_input(name, kept)
    outputs = op.output_names()
    block.remove_op(op)
    remove_unused_vars(block, outputs, guard)
