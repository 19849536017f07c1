"""What the fusion passes share: where an op's channels are and whether an add is a per-channel bias.

A bias add is ``elementwise_add(X, b)`` whose ``b`` broadcasts (under Paddle's ``axis`` rule)
to C values along X's channel dim and 1 everywhere else: ``[C]`` with axis on the channel dim,
``[1, C, 1, 1]`` for NCHW (as Paddle 3 exports write it after folding the reshape), ``[C]``
with axis -1 when the channels are last.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.operator import Operator
from ..ir.ops.math import numpy_operand_shapes
from ..ir.schema import InferError
from .rewrite import RewriteContext

__all__ = ["CONVS", "conv_channel_dim", "is_channel_bias", "channel_vector", "is_pointwise"]

CONVS = ("conv2d", "depthwise_conv2d")


def conv_channel_dim(conv: Operator) -> int:
    """The channel dim of a conv's 4-D output."""
    return 3 if conv.attr("data_format") == "NHWC" else 1


def is_pointwise(conv: Operator, w_shape: Sequence[int]) -> bool:
    """Whether ``conv`` (filter shape ``w_shape``) is an ungrouped, unpadded 1x1 convolution: a
    matrix product over channels at each (strided) pixel."""
    unpadded = conv.attr("padding_algorithm") in ("SAME", "VALID") or not any(conv.attr("paddings"))
    return len(w_shape) == 4 and tuple(w_shape[2:]) == (1, 1) and conv.attr("groups") == 1 and unpadded


def is_channel_bias(x_shape: Sequence[int], b_shape: Sequence[int], axis: int, channel_dim: int) -> bool:
    """Whether adding ``b`` to ``x`` (Paddle's ``axis``) adds one value per channel of ``x``."""
    channels = x_shape[channel_dim] if 0 <= channel_dim < len(x_shape) else -1
    if channels < 0 or len(b_shape) > len(x_shape):
        return False
    try:
        _, aligned = numpy_operand_shapes(x_shape, b_shape, axis)
    except InferError:
        return False
    aligned = (1,) * (len(x_shape) - len(aligned)) + tuple(aligned)
    return all(d == (channels if i == channel_dim else 1) for i, d in enumerate(aligned))


def channel_vector(ctx: RewriteContext, bias: str) -> str | None:
    """A 1-D var holding the per-channel bias ``bias``: itself when 1-D, else a reshaped copy
    as a new parameter (None when its value is not in the scope)."""
    shape = ctx.var(bias).shape or ()
    if len(shape) == 1:
        return bias
    value = ctx.value(bias)
    return ctx.new_param(f"{bias}.vector", value.reshape(-1)) if value is not None else None
