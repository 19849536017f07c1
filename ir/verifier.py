"""The verifier: one public function, ``verify(program)``, that checks a program is consistent.

It collects every problem it finds and raises one ``VerifyError`` listing them (the first
``MAX_REPORTED``). Each problem names the block, op index, op type, slot and var, then prints the
op in the text form with ``CONTEXT`` ops either side::

    program failed verification: 1 problem

    [1/1] block 0, op #3 relu, input slot 'X', var 'd': read before it is defined (it is not persistable, not a feed target, and no earlier op of block 0 writes it; op #4 relu writes it later)
             #1   (Out=%a) = relu(X=%x)
             #2   (Out=%b) = relu(X=%a)
          >> #3   (Out=%c) = relu(X=%d)
             #4   (Out=%d) = relu(X=%c)
             #5   (Out=%fetch) = fetch(X=%d) {col=0}

The checks, in the order a block is walked:

1. Blocks: ``idx`` is the block's position, block 0 has parent -1, every other parent is an
   existing block and the parent chain ends at block 0; ``forward_block_idx`` is -1 or a block.
2. Op types have a schema (``halfway.ir.schema``); ``feed`` and ``fetch`` fall back to a built-in
   one when none is registered.
3. Slots: every slot is one the schema names; a slot that is not duplicable holds at most one
   var; a slot that is not dispensable is present and not empty (inputs and outputs alike).
4. Attrs: required attrs are present; declared attrs have a compatible type
   (``compatible_attr_types``) and respect ``choices``. Attrs the schema does not declare
   (Paddle's ``op_callstack``, ``op_role``, ...) are ignored. BLOCK/BLOCKS attrs name existing
   blocks whose parent is the op's block.
5. Def before use: every var an op reads or writes is declared in its block or an ancestor, and
   every var it reads is defined when it runs: persistable, a FEED_MINIBATCH/FETCH_LIST var, a
   feed target (an ``Out`` of a ``feed`` op, a block-0 var marked ``need_check_feed`` as
   ``layers.data`` declares them, or a name passed as ``feed_names``), written by an earlier op
   of the block, or declared in an ancestor block. Program order is then a valid execution order, so there is no cycle.
6. Writers: a var has at most one *defining* writer; any number of ops may also update it in
   place, an in-place update being an op that reads the var it writes (batch_norm writes
   ``MeanOut`` = ``Mean``). One op may not write a var twice. The FETCH_LIST var, which every
   ``fetch`` op writes, is exempt.
7. Feed and fetch: only in block 0; a ``feed`` op reads the FEED_MINIBATCH var ``feed`` and
   writes one var, a ``fetch`` op reads one var and writes the FETCH_LIST var ``fetch``; each
   carries an INT ``col``, and the cols of the feed ops (of the fetch ops) are 0..n-1, each once.
8. Shapes and dtypes (``check_shapes``): the schema's ``infer`` runs on the declared dtype and
   dims of the op's inputs, and each output's declared dtype and dims must agree with it (a dim of
   -1 on either side matches anything; ranks must be equal). Leniency: Paddle declares some unused
   outputs with placeholder dims (XShape ``[0, ...]``, SavedMean ``[]``), so an output that no op
   reads and whose declared dims are empty or start with 0 is not compared. Ops whose inputs lack
   a declared dtype, or that already have a problem, are not inferred.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

from .attrs import AttrType, normalize
from .block import Block
from .dtypes import VarKind
from .errors import HalfwayError, IRError, SchemaError, VerifyError
from .operator import Operator
from .program import FEED_VAR, FETCH_VAR, Program
from .schema import AttrSpec, InferContext, OpSchema, Slot, TensorInfo, compatible_attr_types, get_schema, has_schema
from .text import op_to_text
from .variable import Variable

__all__ = ["verify"]

MAX_REPORTED = 20
CONTEXT = 2
_NEIGHBOUR_WIDTH = 160
_ALWAYS_DEFINED = (VarKind.FEED_MINIBATCH, VarKind.FETCH_LIST)

# used for feed/fetch when no schema is registered for them
_BUILTIN = {
    "feed": OpSchema("feed", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=[AttrSpec("col", AttrType.INT)]),
    "fetch": OpSchema("fetch", inputs=[Slot("X")], outputs=[Slot("Out")], attrs=[AttrSpec("col", AttrType.INT)]),
}
_IO_VARS = {"feed": ("X", FEED_VAR, VarKind.FEED_MINIBATCH), "fetch": ("Out", FETCH_VAR, VarKind.FETCH_LIST)}


class _Problem(NamedTuple):
    block: int
    op_index: int | None
    where: str
    message: str


class _Problems:
    """The problems found so far, each tied to a block and (usually) an op."""

    def __init__(self) -> None:
        self.items: list[_Problem] = []

    def block(self, block: Block | int, message: str) -> None:
        idx = block if isinstance(block, int) else block.idx
        self.items.append(_Problem(idx, None, f"block {idx}", message))

    def op(self, block: Block, index: int, op: Operator, message: str, *, side: str = "",
           slot: str | None = None, var: str | None = None, attr: str | None = None) -> None:
        where = f"block {block.idx}, op #{index} {op.type}"
        if slot is not None:
            where += f", {side} slot {slot!r}"
        if attr is not None:
            where += f", attr {attr!r}"
        if var is not None:
            where += f", var {var!r}"
        self.items.append(_Problem(block.idx, index, where, message))


def verify(program: Program, *, feed_names: Iterable[str] = (), check_shapes: bool = True) -> None:
    """Check ``program`` (see the module docstring for the rules). ``feed_names`` count as
    defined in block 0 like the targets of feed ops (the executor feeds them directly).

    Raises:
        VerifyError: listing every problem found (the first ``MAX_REPORTED``), each with the
            block, op index, op type, slot and var it concerns and the ops around it.
    """
    problems = _Problems()
    if _check_blocks(program, problems):
        read_anywhere = {name for op in program.all_ops() for name in op.input_names()}
        for block in program.blocks:
            fed = set(feed_names) if block.idx == 0 else set()
            _check_block(program, block, problems, read_anywhere, check_shapes, fed)
        _check_feed_fetch(program, problems)
    if problems.items:
        raise VerifyError(_report(program, problems.items))


# -- blocks ------------------------------------------------------------------------------------------
def _check_blocks(program: Program, problems: _Problems) -> bool:
    """Block indices and parents; False when they are too broken to walk the blocks."""
    count = len(program.blocks)
    if not count:
        problems.block(0, "the program has no blocks (it needs at least the global block 0)")
    for position, block in enumerate(program.blocks):
        if block.idx != position:
            problems.block(position, f"the block at position {position} says its idx is {block.idx}")
        if block.forward_block_idx != -1 and not 0 <= block.forward_block_idx < count:
            problems.block(position, f"forward_block_idx {block.forward_block_idx} is not a block "
                                     f"(the program has {count})")
    if program.blocks and program.blocks[0].parent_idx != -1:
        problems.block(0, f"the global block must have parent -1, not {program.blocks[0].parent_idx}")
    for position, block in enumerate(program.blocks[1:], start=1):
        chain, parent = [position], block.parent_idx
        while parent > 0 and parent < count and parent not in chain:
            chain.append(parent)
            parent = program.blocks[parent].parent_idx
        if not 0 <= block.parent_idx < count:
            problems.block(position, f"parent_idx {block.parent_idx} is not a block (the program has {count})")
        elif parent != 0:
            path = " -> ".join(map(str, chain + [parent]))
            problems.block(position, f"the parent chain does not reach block 0 ({path})")
    return not problems.items


# -- one block ---------------------------------------------------------------------------------------
def _check_block(program: Program, block: Block, problems: _Problems, read_anywhere: set[str],
                 check_shapes: bool, fed: set[str]) -> None:
    defined = _initially_defined(program, block) | fed
    for index, op in enumerate(block.ops):
        before = len(problems.items)
        schema = _schema(block, index, op, problems)
        if schema is not None:
            _check_slots(block, index, op, schema, problems)
            _check_attrs(block, index, op, schema, problems)
        _check_sub_blocks(program, block, index, op, problems)
        _check_reads(block, index, op, defined, problems)
        for slot, names in op.outputs.items():
            for name in names:
                if _lookup(block, name) is None:
                    problems.op(block, index, op, f"not declared in block {block.idx} or its parents"
                                f"{_near(block, name)}", side="output", slot=slot, var=name)
        defined.update(op.output_names())
        if check_shapes and schema is not None and schema.infer is not None and len(problems.items) == before:
            _check_shapes(block, index, op, schema, problems, read_anywhere)
    _check_writers(block, problems)


def _initially_defined(program: Program, block: Block) -> set[str]:
    defined = {v.name for v in block.vars.values()
               if v.persistable or v.kind in _ALWAYS_DEFINED or (block.idx == 0 and v.need_check_feed)}
    ancestor = block.parent
    while ancestor is not None:
        defined.update(ancestor.vars)
        ancestor = ancestor.parent
    if block.idx == 0:
        defined.update(name for op in block.ops if op.type == "feed" for name in op.output("Out"))
    return defined


def _lookup(block: Block, name: str) -> Variable | None:
    try:
        return block.find_var(name)
    except IRError:
        return None


def _near(block: Block, name: str) -> str:
    import difflib

    names = [n for b in _self_and_ancestors(block) for n in b.vars]
    close = difflib.get_close_matches(name, names, n=3)
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


def _self_and_ancestors(block: Block) -> Iterator[Block]:
    current: Block | None = block
    while current is not None:
        yield current
        current = current.parent


def _schema(block: Block, index: int, op: Operator, problems: _Problems) -> OpSchema | None:
    if has_schema(op.type):
        return get_schema(op.type)
    if op.type in _BUILTIN:
        return _BUILTIN[op.type]
    try:
        get_schema(op.type)
    except SchemaError as e:
        problems.op(block, index, op, str(e))
    return None


def _check_slots(block: Block, index: int, op: Operator, schema: OpSchema, problems: _Problems) -> None:
    for side, given, declared in (("input", op.inputs, schema.inputs), ("output", op.outputs, schema.outputs)):
        names = [s.name for s in declared]
        for slot in given:
            if slot not in names:
                problems.op(block, index, op, f"{op.type} has no {side} slot {slot!r} "
                            f"(its {side} slots: {', '.join(names) or 'none'})", side=side, slot=slot)
        for spec in declared:
            held = given.get(spec.name, ())
            if len(held) > 1 and not spec.duplicable:
                problems.op(block, index, op, f"holds {len(held)} vars {list(held)}, but the slot takes one",
                            side=side, slot=spec.name)
            if not held and not spec.dispensable:
                state = "empty" if spec.name in given else "missing"
                problems.op(block, index, op, f"is {state}, but {op.type} requires it", side=side, slot=spec.name)


def _check_attrs(block: Block, index: int, op: Operator, schema: OpSchema, problems: _Problems) -> None:
    typed = op.typed_attrs()
    for required in schema.attrs:
        if required.required and required.name not in typed:
            problems.op(block, index, op, f"is required ({required.type.name}) but missing", attr=required.name)
    for name, attr in typed.items():
        spec = schema.attr_spec(name)
        if spec is None:
            continue
        if not compatible_attr_types(spec.type, attr.type):
            problems.op(block, index, op, f"is {attr.type.name} = {attr.value!r}, but the schema declares "
                        f"{spec.type.name}", attr=name)
        elif spec.choices is not None and attr.value not in _normalized_choices(spec):
            problems.op(block, index, op, f"= {attr.value!r} is not one of {list(spec.choices)}", attr=name)


def _normalized_choices(spec: AttrSpec) -> list[object]:
    choices = []
    for choice in spec.choices or ():
        try:
            choices.append(normalize(spec.type, choice))
        except IRError:
            choices.append(choice)
    return choices


def _check_sub_blocks(program: Program, block: Block, index: int, op: Operator, problems: _Problems) -> None:
    for name, attr in op.typed_attrs().items():
        if attr.type not in (AttrType.BLOCK, AttrType.BLOCKS):
            continue
        for sub in (attr.value,) if attr.type is AttrType.BLOCK else attr.value:
            if not 0 <= sub < len(program.blocks):
                problems.op(block, index, op, f"names block {sub}, but the program has "
                            f"{len(program.blocks)} blocks", attr=name)
            elif program.blocks[sub].parent_idx != block.idx:
                problems.op(block, index, op, f"names block {sub}, whose parent is block "
                            f"{program.blocks[sub].parent_idx}, not this op's block {block.idx}", attr=name)


def _check_reads(block: Block, index: int, op: Operator, defined: set[str], problems: _Problems) -> None:
    for slot, names in op.inputs.items():
        for name in names:
            if _lookup(block, name) is None:
                problems.op(block, index, op, f"not declared in block {block.idx} or its parents"
                            f"{_near(block, name)}", side="input", slot=slot, var=name)
            elif name not in defined:
                later = [f"#{w.index} {w.type}" for w, _, _ in block.producers(name) if w.index > index]
                hint = f"; op {later[0]} writes it later" if later else ""
                problems.op(block, index, op, f"read before it is defined (it is not persistable, not a feed "
                            f"target, and no earlier op of block {block.idx} writes it{hint})",
                            side="input", slot=slot, var=name)


def _check_writers(block: Block, problems: _Problems) -> None:
    writers: dict[str, list[Operator]] = {}
    for op in block.ops:
        for name in op.output_names():
            writers.setdefault(name, []).append(op)
    for name, ops in writers.items():
        var = _lookup(block, name)
        if var is not None and var.kind is VarKind.FETCH_LIST:
            continue
        for op in {id(op): op for op in ops if ops.count(op) > 1}.values():
            slots = [slot for slot, names in op.outputs.items() if name in names]
            problems.op(block, op.index, op, f"written twice by this op (slots {', '.join(slots)})", var=name)
        defining = list({id(op): op for op in ops if name not in op.input_names()}.values())
        for extra in defining[1:]:
            first = defining[0]
            problems.op(block, extra.index, extra, f"also written by op #{first.index} {first.type}; a var has "
                        f"one defining writer, other writers must update it in place (read it too, as "
                        f"batch_norm's MeanOut = Mean)", side="output",
                        slot=next(s for s, n in extra.outputs.items() if name in n), var=name)


# -- feed / fetch ------------------------------------------------------------------------------------
def _check_feed_fetch(program: Program, problems: _Problems) -> None:
    for block in program.blocks[1:]:
        for index, op in enumerate(block.ops):
            if op.type in _IO_VARS:
                problems.op(block, index, op, f"{op.type} ops belong in block 0")
    block = program.global_block()
    for op_type, (list_slot, list_name, list_kind) in _IO_VARS.items():
        other_slot = "Out" if list_slot == "X" else "X"
        cols: dict[int, int] = {}
        for index, op in enumerate(block.ops):
            if op.type != op_type:
                continue
            side = "input" if list_slot == "X" else "output"
            names = op.input(list_slot) if list_slot == "X" else op.output(list_slot)
            var = _lookup(block, names[0]) if len(names) == 1 else None
            if len(names) != 1 or names[0] != list_name or var is None or var.kind is not list_kind:
                problems.op(block, index, op, f"must hold the {list_kind.name} var {list_name!r}, holds "
                            f"{list(names)}" + (f" of kind {var.kind.name}" if var is not None else ""),
                            side=side, slot=list_slot)
            held = op.output(other_slot) if other_slot == "Out" else op.input(other_slot)
            if len(held) != 1:
                problems.op(block, index, op, f"must hold exactly one var, holds {list(held)}",
                            side="output" if other_slot == "Out" else "input", slot=other_slot)
            if op.has_attr("col") and op.attr_type("col") in (AttrType.INT, AttrType.LONG):
                col = op.attr("col")
                if col in cols:
                    problems.op(block, index, op, f"= {col} is also the col of op #{cols[col]}", attr="col")
                cols.setdefault(col, index)
        expected = set(range(len(cols)))
        if set(cols) != expected:
            problems.block(block, f"the cols of the {op_type} ops are {sorted(cols)}; expected "
                                  f"0..{len(cols) - 1}, each once")


# -- shapes ------------------------------------------------------------------------------------------
def _check_shapes(block: Block, index: int, op: Operator, schema: OpSchema, problems: _Problems,
                  read_anywhere: set[str]) -> None:
    inputs: dict[str, list[TensorInfo]] = {}
    for slot, names in op.inputs.items():
        infos = [_tensor_info(block.find_var(name)) for name in names]
        if any(info is None for info in infos):
            return
        inputs[slot] = infos  # type: ignore[assignment]
    try:
        ctx = InferContext(schema, inputs, op.attrs)
        schema.infer(ctx)  # type: ignore[misc]
    except HalfwayError as e:
        problems.op(block, index, op, f"shape inference failed: {e}")
        return
    except Exception as e:  # a broken infer function must not hide the other problems
        problems.op(block, index, op, f"shape inference raised {type(e).__name__}: {e} (a bug in the schema "
                    f"of {op.type}?)")
        return
    for slot, outputs in ctx.outputs.items():
        names = op.output(slot)
        for name, inferred in zip(names, outputs):
            var = block.find_var(name)
            declared = _tensor_info(var)
            if inferred is None or declared is None:
                continue
            if name not in read_anywhere and (not declared.shape or declared.shape[0] == 0):
                continue
            if not _agree(declared, inferred):
                problems.op(block, index, op, f"declared {_info_text(declared)}, but {op.type}'s schema infers "
                            f"{_info_text(inferred)}", side="output", slot=slot, var=name)


def _tensor_info(var: Variable) -> TensorInfo | None:
    if not var.kind.has_tensor or var.dtype is None or var.shape is None:
        return None
    return TensorInfo(var.shape, var.dtype)


def _agree(declared: TensorInfo, inferred: TensorInfo) -> bool:
    if declared.dtype != inferred.dtype or len(declared.shape) != len(inferred.shape):
        return False
    return all(a == b or a == -1 or b == -1 for a, b in zip(declared.shape, inferred.shape))


def _info_text(info: TensorInfo) -> str:
    return f"{info.dtype.name}[{', '.join(map(str, info.shape))}]"


# -- the report --------------------------------------------------------------------------------------
def _report(program: Program, items: list[_Problem]) -> str:
    plural = "s" if len(items) != 1 else ""
    lines = [f"program failed verification: {len(items)} problem{plural}"]
    shown = items[:MAX_REPORTED]
    for number, problem in enumerate(shown, start=1):
        lines.append("")
        lines.append(f"[{number}/{len(items)}] {problem.where}: {problem.message}")
        if problem.op_index is not None:
            lines.extend(_context(program.blocks[problem.block], problem.op_index))
    if len(items) > len(shown):
        lines.append("")
        lines.append(f"... and {len(items) - len(shown)} more problems (the first {len(shown)} are shown)")
    return "\n".join(lines)


def _context(block: Block, index: int) -> list[str]:
    ops = block.ops
    lines = []
    for i in range(max(0, index - CONTEXT), min(len(ops), index + CONTEXT + 1)):
        text = f"#{i:<3} {op_to_text(ops[i])}"
        if i != index and len(text) > _NEIGHBOUR_WIDTH:
            text = text[:_NEIGHBOUR_WIDTH - 3] + "..."
        lines.append(("      >> " if i == index else "         ") + text)
    return lines
