"""The cos and sin tables of a rotary embedding as exports write them -> as ``rotary_embedding``
reads them (``fuse_rotary``).

An export multiplies x [B, H, S, D] by tables of the rotated width w that broadcast over the
heads, [b, 1, S, w] (b is 1 or B): the unsqueeze2 at axis 1 of a [b, S, w] table t, or a
parameter of that shape. Each entry of a pair (the halves of w, or the even and odd entries when
interleaved) holds the same angle, so the op's [b, S, w / 2] table is one of them:

1. t is a parameter whose halves are equal: a new parameter holding one;
2. t holds rows of such a parameter [P, w] picked by position ids [B, S] (``gather_nd`` of the
   ids unsqueezed, as embeddings import): that half of the parameter, indexed by the ids
   (the op's PositionIds);
3. t is computed from concat(a, a) along its last axis by elementwise ops that keep the halves
   equal (unary ops such as cos and sin, casts, and arithmetic with one-element operands):
   rotate-half's duplicated frequencies. The op reads t's first half, a slice (``cse`` makes it one
   slice for every layer). Interleaved tables computed at run time decline.

Cos and sin must take the same form, with the same ids.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from ..ir.operator import Operator
from ..ir.ops.families import UNARY
from .rewire import sole_writer
from .rewrite import Decline, RewriteContext

__all__ = ["Tables", "half_tables"]

_BINARY = frozenset({"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div"})
_DEPTH = 8


@attrs.frozen
class Tables:
    """The op's Cos and Sin, its PositionIds (None: tables of [b, S, w / 2]) and the ops that make
    the tables (slices), to run before it."""

    cos: str
    sin: str
    ids: str | None
    ops: tuple[Operator, ...] = ()


def half_tables(ctx: RewriteContext, cos: str, sin: str, width: int, interleaved: bool) -> Tables:
    """The op's tables for an export's ``cos`` and ``sin`` [b, 1, S, width] (module docstring)."""
    found = [_half(ctx, name, width, interleaved) for name in (cos, sin)]
    (c, c_ids, c_ops), (s, s_ids, s_ops) = found
    if c_ids != s_ids:
        raise Decline(f"cos and sin are not picked by the same position ids ({c_ids}, {s_ids})")
    return Tables(c, s, c_ids, (*c_ops, *s_ops))


def _half(ctx: RewriteContext, name: str, width: int, interleaved: bool) -> tuple[str, str | None, list[Operator]]:
    shape = tuple(ctx.var(name).shape or ())
    if len(shape) != 4 or shape[1] != 1 or shape[3] != width:
        raise Decline(f"the table {name} {list(shape)} is not [batch or 1, 1, sequence, {width}] (broadcast over "
                      f"the heads of x [batch, heads, sequence, size])")
    value = ctx.value(name) if ctx.var(name).persistable else None
    if value is not None:
        return _half_param(ctx, name, value[:, 0], interleaved), None, []
    writer = sole_writer(ctx.block, name)
    if writer is None or writer.type != "unsqueeze2" or list(writer.attr("axes")) != [1]:
        raise Decline(f"the table {name} is neither a parameter nor the unsqueeze2 at axis 1 of a [b, S, w] table")
    return _rows(ctx, writer.input("X")[0], width, interleaved)


def _rows(ctx: RewriteContext, table: str, width: int, interleaved: bool) -> tuple[str, str | None, list[Operator]]:
    """Cases 1 to 3 for the [b, S, width] ``table``."""
    var = ctx.var(table)
    value = ctx.value(table) if var.persistable else None
    if value is not None:
        return _half_param(ctx, table, value, interleaved), None, []
    writer = sole_writer(ctx.block, table)
    picked = _picked(ctx, writer) if writer is not None else None
    if picked is not None:
        source, ids = picked
        return _half_param(ctx, source, ctx.values(source)[0], interleaved), ids, []
    if interleaved:
        raise Decline(f"the interleaved table {table} is computed at run time")
    if not _duplicated(ctx, table, _DEPTH):
        raise Decline(f"the table {table} is not computed from concat(a, a) by elementwise ops (its halves may "
                      f"differ)")
    half = ctx.new_var(f"{table}.half", like=table, shape=[*(var.shape or ())[:-1], width // 2])
    cut = Operator("slice", {"Input": [table]}, {"Out": [half]},
                   {"axes": [2], "starts": [0], "ends": [width // 2], "infer_flags": [], "decrease_axis": []})
    return half, None, [cut]


def _picked(ctx: RewriteContext, writer: Operator) -> tuple[str, str] | None:
    """Case 2: (the parameter, the position ids) where ``writer`` gathers rows of a parameter."""
    if writer.type != "gather_nd":
        return None
    source, index = writer.input("X")[0], writer.input("Index")[0]
    lifted = sole_writer(ctx.block, index)
    if not ctx.var(source).persistable or len(ctx.var(source).shape or ()) != 2 or lifted is None:
        return None
    ids = lifted.input("X")[0] if lifted.type == "unsqueeze2" else None
    if ids is None or list(lifted.attr("axes")) != [len(ctx.var(ids).shape or ())] or len(ctx.var(ids).shape or ()) != 2:
        return None
    return source, ids


def _half_param(ctx: RewriteContext, name: str, value: np.ndarray, interleaved: bool) -> str:
    """Cases 1 and 2: a new parameter holding one entry of each pair of ``value``'s last axis."""
    first, second = (value[..., 0::2], value[..., 1::2]) if interleaved else np.split(value, 2, axis=-1)
    if not np.array_equal(first, second):
        raise Decline(f"the table {name} holds different values in the two entries of a pair")
    return ctx.new_param(f"{name}.half", np.ascontiguousarray(first))


def _duplicated(ctx: RewriteContext, name: str, depth: int) -> bool:
    """Case 3: whether ``name`` is concat(a, a) along its last axis, through elementwise ops that
    keep its halves equal."""
    writer = sole_writer(ctx.block, name)
    if writer is None or depth == 0:
        return False
    if writer.type == "concat":
        parts, rank = writer.input("X"), len(ctx.var(name).shape or ())
        return len(parts) == 2 and parts[0] == parts[1] and writer.attr("axis") in (-1, rank - 1)
    if writer.type in UNARY or writer.type in ("scale", "cast"):
        return _duplicated(ctx, writer.input("X")[0], depth - 1)
    if writer.type not in _BINARY:
        return False
    x, y = writer.input("X")[0], writer.input("Y")[0]
    if _one_element(ctx, y):
        return _duplicated(ctx, x, depth - 1)
    return _one_element(ctx, x) and _duplicated(ctx, y, depth - 1)


def _one_element(ctx: RewriteContext, name: str) -> bool:
    shape = tuple(ctx.var(name).shape or ())
    return all(d == 1 for d in shape) and math.prod(shape) == 1
