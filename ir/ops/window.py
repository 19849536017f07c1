"""The geometry the ops over channels and sliding windows share: ``window_geometry`` (conv, pool),
the (batch, channels, spatial dims) of a channels-first or channels-last shape, and the attrs and
checks of those ops' schemas.

Sliding-window ops share one geometry rule, which kernels and passes call too, so inference and
execution cannot disagree on padding:

* ``paddings`` holds 2 values (symmetric ``[pad_h, pad_w]``) or 4 (``[top, bottom, left,
  right]``); ``padding_algorithm`` EXPLICIT uses them, VALID pads nothing, SAME pads so that
  ``out = ceil(in / stride)`` (odd totals put the extra pixel after) and, as Paddle does,
  ignores ``dilations``;
* ``out = (in + before + after - (dilation * (k - 1) + 1)) // stride + 1``; pool2d's
  ``ceil_mode`` adds ``stride - 1`` before dividing (Paddle's rule: no PyTorch-style clamp);
* a filter is ``[C_out, C_in / groups, kh, kw]`` (``[C_in, C_out / groups, kh, kw]`` for
  conv2d_transpose; ``[C_out, C_in / groups, kd, kh, kw]`` for conv3d) whatever ``data_format``
  is; "AnyLayout" reads as channels-first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..attrs import AttrType
from ..schema import AttrSpec, InferContext, InferError, TensorInfo

__all__ = ["Window", "window_geometry", "pad_pairs", "infer_window", "ranked", "split_channels",
           "join_channels", "same_dim", "check_vector", "layout_attr", "window_attrs"]


_CHANNEL_LAYOUTS = ("NCHW", "NHWC", "AnyLayout")


class Window(NamedTuple):
    """The resolved geometry of a 2-D sliding window: per spatial dim, the (before, after)
    padding, the dilation actually used, and the output size (-1 where the input's is; SAME
    padding of such a dim reads (0, 0) until its size is known)."""

    pads: tuple[tuple[int, int], ...]
    dilations: tuple[int, ...]
    out: tuple[int, ...]


def pad_pairs(paddings: Sequence[int], ndim: int) -> tuple[tuple[int, int], ...]:
    """Paddle's ``paddings`` as (before, after) per spatial dim: ``ndim`` symmetric values or
    ``2 * ndim`` values ``[d0_before, d0_after, d1_before, d1_after, ...]``."""
    values = list(paddings)
    if any(p < 0 for p in values):
        raise InferError(f"paddings must be >= 0, got {values}")
    if len(values) == ndim:
        return tuple((p, p) for p in values)
    if len(values) == 2 * ndim:
        return tuple((values[2 * i], values[2 * i + 1]) for i in range(ndim))
    raise InferError(f"paddings must have {ndim} (symmetric) or {2 * ndim} (before/after per dim) values, "
                     f"got {len(values)}: {values}")


def _same_pads(size: int, kernel: int, stride: int) -> tuple[int, int]:
    if size < 0:
        return (0, 0)
    total = max((-(-size // stride) - 1) * stride + kernel - size, 0)
    return (total // 2, total - total // 2)


def window_geometry(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                    dilations: Sequence[int], paddings: Sequence[int], algorithm: str = "EXPLICIT",
                    ceil_mode: bool = False, transposed: bool = False) -> Window:
    """Resolve padding and output sizes of a sliding window over ``sizes`` (see the module
    docstring). ``transposed``: the output of conv2d_transpose, ``(in - 1) * stride - before
    - after + dilation * (k - 1) + 1``, before any output_size/output_padding.

    Raises:
        InferError: bad attr lengths or values, or a window larger than the padded input.
    """
    n = len(sizes)
    for name, values in (("kernel size", kernel), ("strides", strides), ("dilations", dilations)):
        if len(values) != n or any(v <= 0 for v in values):
            raise InferError(f"{name} must be {n} positive values, got {list(values)}")
    explicit = pad_pairs(paddings, n) if algorithm == "EXPLICIT" else ((0, 0),) * n
    pads, dils, out = [], [], []
    for i, (size, k, s) in enumerate(zip(sizes, kernel, strides)):
        pad, d = explicit[i], dilations[i]
        if algorithm == "SAME":
            pad, d = _same_pads(size, k, s), 1
        pads.append(pad)
        dils.append(d)
        extent = d * (k - 1) + 1
        if size < 0:
            out.append(-1)
        elif transposed:
            out.append((size - 1) * s - pad[0] - pad[1] + extent)
        else:
            span = size + pad[0] + pad[1] - extent + (s - 1 if ceil_mode else 0)
            if span < 0:
                raise InferError(f"spatial dim {i}: the window ({extent} with dilation) is larger than the "
                                 f"padded input ({size} + {pad[0]} + {pad[1]})")
            out.append(span // s + 1)
    return Window(tuple(pads), tuple(dils), tuple(out))


def infer_window(ctx: InferContext, sizes: Sequence[int], kernel: Sequence[int], dilations: Sequence[int],
            ceil_mode: bool = False, transposed: bool = False) -> Window:
    try:
        return window_geometry(sizes, kernel, ctx.attr("strides"), dilations, ctx.attr("paddings"),
                               ctx.attr("padding_algorithm"), ceil_mode, transposed)
    except InferError as e:
        return ctx.fail(f"{e} (input spatial dims {list(sizes)})")


def ranked(ctx: InferContext, slot: str, *ranks: int) -> TensorInfo:
    info = ctx.input(slot)
    ctx.check(len(info.shape) in ranks, f"{slot} must have rank {' or '.join(map(str, ranks))}, "
                                        f"got shape {list(info.shape)}")
    return info


def split_channels(shape: tuple[int, ...], channel_last: bool) -> tuple[int, int, tuple[int, ...]]:
    """(batch, channels, spatial dims) of an NC... or N...C shape."""
    if channel_last:
        return shape[0], shape[-1], shape[1:-1]
    return shape[0], shape[1], shape[2:]


def join_channels(n: int, c: int, spatial: Sequence[int], channel_last: bool) -> tuple[int, ...]:
    return (n, *spatial, c) if channel_last else (n, c, *spatial)


def same_dim(a: int, b: int) -> bool:
    return a < 0 or b < 0 or a == b


def check_vector(ctx: InferContext, slot: str, size: int) -> None:
    """Input ``slot``, when present, is a 1-D tensor of ``size`` elements."""
    if ctx.has_input(slot):
        shape = ctx.input(slot).shape
        ctx.check(len(shape) == 1 and same_dim(shape[0], size),
                  f"{slot} must have shape [{size}], got {list(shape)}")


def layout_attr(name: str = "data_format", default: str = "NCHW") -> AttrSpec:
    return AttrSpec(name, AttrType.STRING, default, choices=_CHANNEL_LAYOUTS)


def window_attrs(dims: int = 2) -> list[AttrSpec]:
    """strides, paddings, padding_algorithm and data_format of a window over ``dims`` spatial dims
    (2: NCHW or NHWC; 3: NCDHW or NDHWC)."""
    layout = layout_attr() if dims == 2 else AttrSpec("data_format", AttrType.STRING, "NCDHW",
                                                      choices=("NCDHW", "NDHWC"))
    return [
        AttrSpec("strides", AttrType.INTS, [1] * dims),
        AttrSpec("paddings", AttrType.INTS, [0] * dims),
        AttrSpec("padding_algorithm", AttrType.STRING, "EXPLICIT", choices=("EXPLICIT", "SAME", "VALID")),
        layout,
    ]
