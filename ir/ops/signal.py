"""Schemas of the signal ops: dft, ONNX's DFT as halfway holds it, and mel_weight_matrix (ONNX's
MelWeightMatrix: [dft_length // 2 + 1, num_mel_bins] triangular filters between two frequencies,
the sizes known when it runs unless its inputs are constants).

dft:

X is [..., 1] (real) or [..., 2] (real and imaginary parts) along its last dim; the transform runs
along ``axis`` (an AxisTensor, computed at run time, replaces it) over ``dft_length`` points (0:
the axis' length, or 2 * (length - 1) for a one-sided inverse). Out is [..., 2], the frequencies
up to length // 2 + 1 when ``onesided``; an ``inverse`` of ``onesided`` frequencies is the real
signal, [..., 1]. The inverse divides by the length.
"""

from __future__ import annotations

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op
from .tensor import check_axis, scalar_input

__all__ = ["dft_length"]


def dft_length(length: int, given: int, inverse: bool, onesided: bool) -> int:
    """The points of the transform: ``given`` when > 0, else the axis' ``length`` (a one-sided
    inverse's 2 * (length - 1))."""
    if given > 0:
        return given
    return 2 * (length - 1) if inverse and onesided else length


def _infer_dft(ctx: InferContext) -> None:
    x = ctx.input("X")
    rank = len(x.shape)
    ctx.check(rank >= 2 and x.shape[-1] in (1, 2, -1), f"X must be [..., 1] or [..., 2], has shape {list(x.shape)}")
    ctx.check(ctx.attr("dft_length") >= 0, f"attr dft_length must be >= 0, got {ctx.attr('dft_length')}")
    inverse, onesided = ctx.attr("inverse"), ctx.attr("onesided")
    last = 1 if inverse and onesided else 2
    axis = scalar_input(ctx, "AxisTensor", "axis")
    if axis is None:
        ctx.set_output("Out", [-1] * (rank - 1) + [last], x.dtype)
        return
    axis = check_axis(ctx, axis, rank, "the axis")
    ctx.check(axis != rank - 1, "the axis must not be the last dim (it holds the real and imaginary parts)")
    out = list(x.shape[:-1]) + [last]
    if x.shape[axis] >= 0 or ctx.attr("dft_length"):
        n = dft_length(x.shape[axis], ctx.attr("dft_length"), inverse, onesided)
        out[axis] = n // 2 + 1 if onesided and not inverse else n
    ctx.set_output("Out", out, x.dtype)


register_op(OpSchema(
    "dft", inputs=[Slot("X"), Slot("AxisTensor", dispensable=True)], outputs=[Slot("Out")],
    attrs=[AttrSpec("axis", AttrType.INT, 1), AttrSpec("dft_length", AttrType.INT, 0),
           AttrSpec("inverse", AttrType.BOOLEAN, False), AttrSpec("onesided", AttrType.BOOLEAN, False)],
    infer=_infer_dft, keep_dtype_slots=("AxisTensor",),
    doc="The discrete Fourier transform of X along `axis` (the AxisTensor replaces it) over `dft_length` "
        "points; X and Out hold real and imaginary parts in their last dim (module docstring).",
))


_MEL_INPUTS = ("NumMelBins", "DftLength", "SampleRate", "LowerEdgeHertz", "UpperEdgeHertz")


def _infer_mel_weight_matrix(ctx: InferContext) -> None:
    for slot in _MEL_INPUTS:
        ctx.check(len(ctx.input(slot).shape) == 0 or list(ctx.input(slot).shape) == [1],
                  f"{slot} must be one value, has shape {list(ctx.input(slot).shape)}")
    bins, length = (ctx.input_value(slot) for slot in ("NumMelBins", "DftLength"))
    ctx.set_output("Out", [-1 if length is None else int(length.reshape(-1)[0]) // 2 + 1,
                           -1 if bins is None else int(bins.reshape(-1)[0])], DType(ctx.attr("out_dtype")))


register_op(OpSchema(
    "mel_weight_matrix", inputs=[Slot(slot) for slot in _MEL_INPUTS], outputs=[Slot("Out")],
    attrs=[AttrSpec("out_dtype", AttrType.INT, int(DType.float32))], infer=_infer_mel_weight_matrix,
    dtype_slots=("LowerEdgeHertz",), keep_dtype_slots=("NumMelBins", "DftLength", "SampleRate"),
    doc="The [DftLength // 2 + 1, NumMelBins] weights of NumMelBins triangular filters spaced evenly on the "
        "mel scale from LowerEdgeHertz to UpperEdgeHertz at SampleRate, as ONNX's MelWeightMatrix.",
))
