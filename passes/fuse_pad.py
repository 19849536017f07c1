"""fuse_pad: a constant pad of the spatial dims before a conv or a pool -> the conv's or pool's paddings.

TensorFlow's "SAME" padding is asymmetric where the window is even or strided; its ONNX exports
(tf2onnx, Keras) write it as a Pad before the Conv or pool, which costs a copy of the input:

    x -> pad([0,0, 0,0, 0,1, 0,1]) -> conv2d(paddings [0, 0]) -> y     becomes     x -> conv2d(paddings [0, 1, 0, 1]) -> y

Rules (the pads the pad's ``paddings`` attr, or its Paddings tensor where its value is known before
run time: a constant after ``fold_constants``, or arithmetic on the static dims of a shape,
``passes.static_values``):

1. pad of value 0 + conv2d / depthwise_conv2d / fused_conv2d -> the conv, the pads added to its own;
2. pad of value 0 + average pool2d, counting its padding (``exclusive`` false) or without padding
   of its own -> the pool with the pads, counting them;
3. pad of value -inf (or float32's lowest) + max pool2d -> the pool with the pads.

Each declines when the pad touches the batch or channel dim, the op's padding is not explicit
(``SAME``; ``VALID`` counts as no padding), or a pool is global, adaptive or rounds up
(``ceil_mode``: its last window may then start in the padding, which the pool drops and the
pad's values do not).
"""

from __future__ import annotations

import numpy as np

from ..ir.operator import Operator
from ..ir.ops.window import pad_pairs
from ..ir.program import Program
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dims import probe_dims
from .fuse_channels import conv_channel_dim
from .pattern import pattern
from .rewrite import Decline, RewriteContext, Rule, Rules, apply_rules, copy_op
from .static_values import static_value

__all__ = ["RULES", "fuse_pad"]

_LOWEST = float(np.finfo(np.float32).min)
_DEPTH = 12
"""How many ops deep the pads' arithmetic may be (TensorFlow's "SAME" from a shape: about ten)."""


def _pads(ctx: RewriteContext, pad: Operator) -> list[int]:
    """The pad's [before_0, after_0, ...] as numbers; raises Decline when they are not known."""
    tensor = pad.input("Paddings")
    if not tensor:
        return list(pad.attr("paddings"))
    value = static_value(ctx.block, ctx.scope, ctx.state, tensor[0], depth=_DEPTH)
    if value is None:
        raise Decline(f"the pads {tensor[0]} are computed at run time")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _spatial_pads(ctx: RewriteContext, pad: Operator, op: Operator, channel_dim: int) -> tuple[tuple[int, int], ...]:
    """The pad's (before, after) for the op's two spatial dims; raises Decline when it pads another."""
    pads = _pads(ctx, pad)
    pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(len(pads) // 2)]
    spatial = (1, 2) if channel_dim == 3 else (2, 3)
    if len(pairs) != 4 or any(pairs[i] != (0, 0) for i in range(4) if i not in spatial):
        raise Decline(f"the pad {pads} is not of the two spatial dims of a 4-D input")
    if op.attr("padding_algorithm") == "SAME":
        raise Decline(f"{op.type}'s padding is SAME, not explicit")
    own = pad_pairs(op.attr("paddings"), 2) if op.attr("padding_algorithm") == "EXPLICIT" else ((0, 0), (0, 0))
    return tuple((pairs[d][0] + mine[0], pairs[d][1] + mine[1]) for d, mine in zip(spatial, own))


def _padded(op: Operator, x: str, pairs: tuple[tuple[int, int], ...], **attrs: object) -> Operator:
    slot = "Input" if "Input" in op.inputs else "X"
    return copy_op(op, inputs={slot: [x]}, attrs={"paddings": [p for pair in pairs for p in pair],
                                                  "padding_algorithm": "EXPLICIT", **attrs})


def _fuse_conv(ctx: RewriteContext, *, conv: Operator, pad: Operator, x: str) -> Operator | Decline:
    """Case 1."""
    if pad.attr("pad_value") != 0:
        return ctx.decline(f"the pad's value is {pad.attr('pad_value')}, not the conv's 0")
    return _padded(conv, x, _spatial_pads(ctx, pad, conv, conv_channel_dim(conv)))


def _fuse_pool(ctx: RewriteContext, *, pool: Operator, pad: Operator, x: str) -> Operator | Decline:
    """Cases 2 and 3."""
    if pool.attr("global_pooling") or pool.attr("adaptive") or pool.attr("ceil_mode"):
        return ctx.decline("the pool is global, adaptive or rounds up (ceil_mode)")
    pairs = _spatial_pads(ctx, pad, pool, 3 if pool.attr("data_format") == "NHWC" else 1)
    kind, value = pool.attr("pooling_type"), pad.attr("pad_value")
    if kind == "max" and (value == -np.inf or value <= _LOWEST):
        return _padded(pool, x, pairs)
    own = any(pool.attr("paddings")) and pool.attr("padding_algorithm") == "EXPLICIT"
    if kind == "avg" and value == 0 and not (own and pool.attr("exclusive")):
        return _padded(pool, x, pairs, exclusive=False)
    return ctx.decline(f"a {kind} pool's padding differs from the pad's value {value} (or its own pads are "
                       f"exclusive)")


RULES = Rules([
    # pad(0) + conv2d -> conv2d(paddings)
    Rule(pattern("conv:conv2d|depthwise_conv2d|fused_conv2d(Input=pad:pad(X=x, ...), ...)"), _fuse_conv,
         "pad + conv2d -> conv2d"),
    # pad + pool2d -> pool2d(paddings)
    Rule(pattern("pool:pool2d(X=pad:pad(X=x, ...))"), _fuse_pool, "pad + pool2d -> pool2d"),
])


@register_pass("fuse_pad")
def fuse_pad(program: Program, scope: Scope | None = None, options: None = None) -> PassResult:
    """Fold constant pads of the spatial dims into the conv or pool after them."""
    table = probe_dims(program.global_block(), scope)
    counts = apply_rules(program, RULES, name="fuse_pad", scope=scope, state=table).counts
    return PassResult(program, counts.total() > 0, {"rewrites": counts.total(), **counts})
