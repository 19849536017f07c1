"""``channels_last``: runs of convolutions and pools move to NHWC, so that each reads its input
where the previous one wrote it.

On tensor cores (NVIDIA, float16) an NCHW convolution of some size reads a channels-last copy of
its input, one launch and one pass over the tensor each (VGG-19 at batch 1: 15 of its 42
launches). This pass gives such convolutions NHWC tensors to begin with:

1. The members: ungrouped ``conv2d`` / ``fused_conv2d`` / ``fused_conv2d_pool`` in NCHW whose input has a multiple of 8
   channels (whole 16-byte chunks of float16, as the tensor cores read them) or fewer than 8 (a
   stem, whose few channels are gathered a pixel at a time in either layout), and max or avg
   ``pool2d`` in NCHW, all 4-D.
2. Members join a group where one reads another's output (its Input, ResidualData or X).
3. A group's edges: each var a member reads from outside the group (fed, or written by another
   op) becomes NHWC through a ``transpose2`` before its first member reader; each member output
   that an op outside the group reads, or that is fetched or fed to another block, goes back to
   NCHW through a ``transpose2`` after its writer (under its own name, so fetches keep it). An
   edge whose move only shifts dims of size 1 (a global pool's [N, 1, 1, C]) is a ``reshape2``
   instead, which moves no data.
4. A group changes only where it has more convolutions than edges: each edge is a transpose,
   each convolution a copy saved.
5. Then a transpose back to NCHW that only ``flatten_contiguous_range`` (dims 1 to 3) reads, for
   ``fc`` layers of parameter weights (VGG's classifier), goes: the flatten reads the NHWC tensor
   and each fc a new parameter of its weight's rows in NHWC order (with the scope holding them).

Members take ``data_format`` NHWC and their vars inside the group NHWC shapes. It is not in the
default pipeline: numpy and devices without tensor cores gain nothing from the layout.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from ..ir.block import Block
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .pattern import pattern
from .rewire import Guard
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules, copy_op

__all__ = ["ChannelsLastOptions", "channels_last"]

_CONVS = ("conv2d", "fused_conv2d", "fused_conv2d_pool")
_READS = {"conv2d": ("Input",), "fused_conv2d": ("Input", "ResidualData"), "fused_conv2d_pool": ("Input",),
          "pool2d": ("X",)}
"""Each member type's slots that read activations (which take the member's layout)."""
_WRITES = {"conv2d": "Output", "fused_conv2d": "Output", "fused_conv2d_pool": "Output", "pool2d": "Out"}
TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


@attrs.frozen
class ChannelsLastOptions:
    """``fetch_names``: vars that must keep their NCHW values besides the program's fetch targets."""

    fetch_names: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@register_pass("channels_last", options=ChannelsLastOptions)
def channels_last(program: Program, scope: Scope | None, options: ChannelsLastOptions) -> PassResult:
    """Move groups of NCHW convolutions and pools to NHWC, with transposes at their edges."""
    guard = Guard.of(program, options.fetch_names, "channels_last")
    block = program.global_block()
    members = [op for op in block.ops if _member(block, op)]
    stats = {"groups": 0, "convs": 0, "pools": 0, "transposes": 0, "reshapes": 0, "folded_into_fc": 0}
    for group in _groups(block, members):
        inputs, outputs = _edges(block, guard, group)
        convs = sum(op.type in _CONVS for op in group)
        if convs <= len(inputs) + len(outputs):
            continue
        for edge in _rewrite(program, block, group, inputs, outputs):
            stats["transposes" if edge.type == "transpose2" else "reshapes"] += 1
        stats["groups"] += 1
        stats["convs"] += convs
        stats["pools"] += len(group) - convs
    if stats["groups"]:
        folded = apply_rules(program, FOLDS, name="channels_last", scope=scope, state=guard).counts
        stats["transposes"] -= sum(folded.values())
        stats["folded_into_fc"] = sum(folded.values())
    return PassResult(program, modified=stats["groups"] > 0, stats=stats)


def _member(block: Block, op: Operator) -> bool:
    """Whether ``op`` may join a group (the module docstring's rule 1)."""
    if op.type not in _READS or op.attr("data_format") != "NCHW":
        return False
    shape = block.var(op.input(_READS[op.type][0])[0]).shape or ()
    if len(shape) != 4:
        return False
    if op.type == "pool2d":
        return op.attr("pooling_type") in ("max", "avg")
    channels = shape[1]
    return op.attr("groups") == 1 and channels > 0 and (channels % 8 == 0 or channels < 8)


def _activations(op: Operator) -> Iterator[str]:
    for slot in _READS[op.type]:
        yield from op.input(slot)


def _output(op: Operator) -> str:
    return op.output(_WRITES[op.type])[0]


def _groups(block: Block, members: list[Operator]) -> list[list[Operator]]:
    """Members joined where one reads another's output, each group in program order."""
    parent = {id(op): id(op) for op in members}

    def root(key: int) -> int:
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    writers = {_output(op): op for op in members}
    for op in members:
        for name in _activations(op):
            writer = writers.get(name)
            if writer is not None:
                parent[root(id(op))] = root(id(writer))
    groups: dict[int, list[Operator]] = {}
    for op in members:
        groups.setdefault(root(id(op)), []).append(op)
    return list(groups.values())


def _edges(block: Block, guard: Guard, group: list[Operator]) -> tuple[list[str], list[str]]:
    """The vars members read from outside the group, and the members' outputs read outside it."""
    inside = {id(op) for op in group}
    written = {_output(op) for op in group}
    inputs = list(dict.fromkeys(n for op in group for n in _activations(op) if n not in written))
    outputs = []
    for name in written:
        readers = block.uses(name)
        outside = [(op, slot) for op, slot, *_ in readers if id(op) not in inside or slot not in _READS[op.type]]
        if outside or guard.kept(name):
            outputs.append(name)
    return inputs, outputs


def _rewrite(program: Program, block: Block, group: list[Operator], inputs: list[str],
             outputs: list[str]) -> list[Operator]:
    """Rename the group's edges to NHWC twins, add the ops that move them, and switch the members;
    returns the added ops."""
    twins = {name: _twin(program, block, name) for name in [*inputs, *outputs]}
    for op in group:
        for slot in _READS[op.type]:
            op.set_input(slot, [twins.get(n, n) for n in op.input(slot)])
        out = _output(op)
        if out in twins:
            op.set_output(_WRITES[op.type], [twins[out]])
        else:
            _permute(block, out)
        op.set_attr("data_format", "NHWC")
    added = []
    for name in inputs:
        first = next(op for op in group if twins[name] in _activations(op))
        added.append(block.insert_op(block.ops.index(first), _move(block, name, twins[name], TO_NHWC)))
    for name in outputs:
        writer = next(op for op in group if _output(op) == twins[name])
        added.append(block.insert_op(block.ops.index(writer) + 1, _move(block, twins[name], name, TO_NCHW)))
    return added


def _move(block: Block, source: str, target: str, perm: list[int]) -> Operator:
    """``target = transpose2(source, perm)``, or a ``reshape2`` where the dims of more than one
    element keep their order (and are known)."""
    shape = block.var(source).shape or ()
    kept = [i for i in perm[1:] if shape[i] != 1]
    if kept == sorted(kept) and all(shape[i] > 0 for i in perm[1:]):
        return Operator("reshape2", {"X": [source]}, {"Out": [target]}, {"shape": [0, *(shape[i] for i in perm[1:])]})
    return Operator("transpose2", {"X": [source]}, {"Out": [target]}, {"axis": perm})


def _twin(program: Program, block: Block, name: str) -> str:
    """A new var holding ``name``'s value in NHWC."""
    var = block.var(name)
    twin = program.unique_name(f"{name}.nhwc")
    block.create_var(twin, dtype=var.dtype, shape=_nhwc(var.shape))
    return twin


def _permute(block: Block, name: str) -> None:
    block.var(name).set_shape(_nhwc(block.var(name).shape))


def _nhwc(shape: tuple[int, ...] | None) -> list[int] | None:
    return None if shape is None else [shape[i] for i in TO_NHWC]


def _fold_into_fc(ctx: RewriteContext, *, fc: Operator, flat: Operator, t: Operator, src: str,
                  w: str) -> list[Operator] | Decline:
    """Rule 5: ``fc(flatten(transpose2(src, NHWC -> NCHW)))`` -> ``fc'(flatten(src))``."""
    guard = ctx.state
    shape = ctx.var(src).shape or ()
    moved, flattened = t.output("Out")[0], flat.output("Out")[0]
    if list(t.attr("axis")) != TO_NCHW or len(shape) != 4 or any(d <= 0 for d in shape[1:]):
        return ctx.decline(f"the transpose is not NHWC -> NCHW of a known [N, H, W, C] (shape {list(shape)})")
    if flat.attr("start_axis") != 1 or flat.attr("stop_axis") not in (3, -1) or fc.attr("in_num_col_dims") != 1:
        return ctx.decline("the flatten does not make [N, C*H*W] rows for the fc")
    for name, reader in ((moved, flat), (flattened, fc)):
        if guard.kept(name) or [use[0] for use in ctx.block.uses(name)] != [reader]:
            return ctx.decline(f"{name} is read elsewhere or kept")
    weight = ctx.value(w)
    _, h, width, c = shape
    if weight is None or weight.ndim != 2 or weight.shape[0] != h * width * c:
        return ctx.decline(f"the scope holds no [{h * width * c}, K] value for {w}")
    rows = weight.reshape(c, h, width, -1).transpose(1, 2, 0, 3).reshape(weight.shape)
    return [copy_op(flat, inputs={"X": [src]}), copy_op(fc, inputs={"W": [ctx.new_param(f"{w}.nhwc", rows)]})]


FOLDS = Rules([
    # fc(flatten(transpose2(x, [0, 3, 1, 2]))) -> fc(flatten(x)) with its weight's rows reordered
    Rule(pattern("fc:fc(Input=flat:flatten_contiguous_range(X=t:transpose2(X=src)), W=w:param, ...)"), _fold_into_fc,
         "transpose2 to NCHW + flatten + fc -> flatten + fc of reordered rows"),
])
