"""simplify_shapes: reshapes to a run-time shape that only copies their input's own dims become
plain reshapes, and the shape arithmetic behind them dies.

Exporters write ``x.view(x.size()[:-1] + (heads, head_dim))`` as

    x ─ shape ─ cast ─ slice ─┐
                 [12, 64] ────┴─ concat ─ reshape2(x, Shape=·)

halfway imports it as written (the batch and sequence dims are symbolic), and the executor
computes the shape arithmetic on the host when it prepares the program for given feed shapes.
This pass follows those values symbolically instead: each entry of a small integer vector is a
known int or "dim ``i`` of var ``v``" (``shape``, ``cast``, ``assign``, ``slice`` and ``gather``
with constant positions, ``unsqueeze2``/``squeeze2`` of one value, ``concat`` of vectors,
integer parameters). A ``reshape2`` whose ``Shape`` is such a vector becomes ``reshape2`` with the
``shape`` attr when every entry is an int, or dim ``j`` of its own input at position ``j`` (Paddle's
0: copy that dim), with at most one other unknown entry (then -1: the rest). The ops that only
fed it are removed by ``dce``. Reshapes whose shape mixes other vars' dims keep their tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from halfway.ir.block import Block
from halfway.ir.operator import Operator
from halfway.ir.program import Program
from halfway.ir.scope import Scope
from halfway.passes.base import PassResult, register_pass

__all__ = ["simplify_shapes"]

Dim = int | tuple[str, int]
"""A known size, or dim ``axis`` of var ``name``: ``(name, axis)``."""
Value = list[Dim] | Dim
"""A 1-D integer vector's entries, or a 0-d integer's."""

_SMALL = 16
"""The longest integer vector followed (shapes have a handful of entries)."""


@register_pass("simplify_shapes", needs_scope=True)
def simplify_shapes(program: Program, scope: Scope | None, options: None = None) -> PassResult:
    """Reshapes to run-time shapes made of known sizes and their input's own dims -> attr reshapes."""
    block = program.global_block()
    values: dict[str, Value] = {}
    rewritten = 0
    for op in block.ops:
        if op.type == "reshape2" and op.input("Shape") and not op.input("ShapeTensor"):
            target = _target(values.get(op.input("Shape")[0]), op.input("X")[0])
            if target is not None:
                op.set_input("Shape", [])
                op.set_attr("shape", target)
                rewritten += 1
        found = _value(block, scope, op, values)
        if found is not None:
            values[op.output_names()[0]] = found
    return PassResult(program, modified=rewritten > 0, stats={"reshapes_simplified": rewritten})


def _target(value: Value | None, x: str) -> list[int] | None:
    """The reshape2 ``shape`` attr equal to ``value`` for input ``x``, or None."""
    if not isinstance(value, list):
        return None
    target: list[int] = []
    unknown = 0
    for position, dim in enumerate(value):
        if isinstance(dim, int):
            if dim == 0:
                return None  # ONNX's 0 may mean a literal 0 (allowzero); Paddle's copies
            target.append(dim)
        elif dim == (x, position):
            target.append(0)
        else:
            target.append(-1)
            unknown += 1
    return target if unknown == 0 or (unknown == 1 and target.count(-1) == 1) else None


def _value(block: Block, scope: Scope | None, op: Operator, values: dict[str, Value]) -> Value | None:
    """The symbolic value of ``op``'s first output, when it is a small integer vector we follow."""
    t = op.type
    if t == "shape":
        name = op.input("Input")[0]
        shape = block.var(name).shape or ()
        return [d if d >= 0 else (name, i) for i, d in enumerate(shape)]
    found = [_input(block, scope, n, values) for n in op.input_names()]
    inputs = [v for v in found if v is not None]
    if not inputs or len(inputs) < len(found):
        return None
    first = inputs[0]
    if t in ("cast", "assign") and _integer(block, op.output_names()[0]):
        return first
    vectors = [v for v in inputs if isinstance(v, list)]
    if t == "concat" and op.attr("axis") == 0 and len(vectors) == len(inputs):
        return [d for v in vectors for d in v]
    if t == "unsqueeze2" and not isinstance(first, list) and list(op.attr("axes")) in ([0], [-1]):
        return [first]
    if t == "squeeze2" and isinstance(first, list) and len(first) == 1:
        return first[0]
    if t == "slice" and isinstance(first, list) and len(inputs) == 1:
        return _sliced(op, first)
    if t == "gather" and isinstance(first, list) and len(inputs) == 2 and op.attr("axis") == 0:
        return _gathered(first, inputs[1])
    return None


def _input(block: Block, scope: Scope | None, name: str, values: dict[str, Value]) -> Value | None:
    if name in values:
        return values[name]
    var = block.find_var(name)
    if scope is None or var is None or not var.persistable or block.producers(name):
        return None
    value = scope.find(name)
    if value is None or value.dtype.kind not in "iu" or value.ndim > 1 or value.size > _SMALL:
        return None
    return [int(v) for v in value] if value.ndim else int(value)


def _integer(block: Block, name: str) -> bool:
    dtype = block.var(name).dtype
    return dtype is not None and np.dtype(dtype.numpy).kind in "iu"


def _sliced(op: Operator, vector: list[Dim]) -> Value | None:
    if list(op.attr("axes")) != [0]:
        return None
    start, end = op.attr("starts")[0], op.attr("ends")[0]
    part = vector[start:end]
    if op.attr("decrease_axis"):
        return part[0] if len(part) == 1 else None
    return part


def _gathered(vector: list[Dim], index: Value) -> Value | None:
    picks: Sequence[Dim] = index if isinstance(index, list) else [index]
    if not all(isinstance(i, int) and -len(vector) <= i < len(vector) for i in picks):
        return None
    chosen = [vector[i] for i in picks if isinstance(i, int)]
    return chosen if isinstance(index, list) else chosen[0]
