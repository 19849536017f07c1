"""The float16 op policy: which ops always run float16, which never do, and why.

TVM's mixed-precision pass names the three classes this module uses:

* ALWAYS (``DEFAULT_WHITE_LIST``): run float16 whatever their inputs are; their inputs are cast.
  These are the compute-heavy ops whose float16 kernels pay off and whose float16 kernels
  accumulate in float32, so storing operands and results in float16 costs little accuracy.
* NEVER (``DEFAULT_BLACK_LIST``): stay float32; their float16 inputs are cast back.
* FOLLOW (everything else): run in the dtype of their floating inputs.

The family rows (``halfway.ir.ops.families``) and the transformer ops (``halfway.ir.ops.attention``)
carry their class and its reason; the lists here gather them and add the other ops.

A reduction (``LARGE_REDUCTIONS``) over more than ``max_float16_reduction`` elements also stays
float32, however it is classed: its sum can exceed float16's range even when every element fits.
Softmax is not black-listed by default (the numpy kernel computes it in float32 and its output is
in [0, 1]); add ``"softmax"`` to the black list where a backend computes it in half precision.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...ir.ops.attention import FLOAT16_CLASSES
from ...ir.ops.families import BINARY, float16_classes
from ...ir.ops.family import Float16

__all__ = ["DEFAULT_WHITE_LIST", "DEFAULT_BLACK_LIST", "LARGE_REDUCTIONS", "FLOAT16_MAX", "FLOAT16_TINY"]

FLOAT16_MAX = 65504.0
"""The largest finite float16."""

FLOAT16_TINY = 2.0 ** -14
"""The smallest normal float16 (about 6.1e-5); below it values lose precision, below
``2 ** -25`` (about 3e-8) they round to zero."""

_FAMILIES = {**float16_classes(), **FLOAT16_CLASSES}

DEFAULT_WHITE_LIST: Mapping[str, str] = {
    **{op: why for op, (kind, why) in _FAMILIES.items() if kind is Float16.ALWAYS},
    "conv2d": "convolution: float16 halves the bytes of the dominant op; accumulates in float32",
    "depthwise_conv2d": "convolution: float16 halves the bytes of the dominant op; accumulates in float32",
    "fused_conv2d": "convolution: float16 halves the bytes of the dominant op; accumulates in float32",
    "fused_conv2d_pool": "convolution: float16 halves the bytes of the dominant op; accumulates in float32",
    "conv2d_transpose": "convolution: float16 halves the bytes of the dominant op; accumulates in float32",
    "conv3d": "convolution: float16 halves the bytes of the dominant op; accumulates in float32",
    "conv3d_transpose": "convolution: float16 halves the bytes of the dominant op; accumulates in float32",
    "matmul_v2": "matrix product: bandwidth bound, accumulates in float32",
    "mul": "matrix product: bandwidth bound, accumulates in float32",
    "fc": "matrix product: bandwidth bound, accumulates in float32",
}
"""Op type -> why it always runs float16 (the family rows classed ALWAYS, and the convolutions and
matrix products)."""

DEFAULT_BLACK_LIST: Mapping[str, str] = {
    **{op: why for op, (kind, why) in _FAMILIES.items() if kind is Float16.NEVER},
    "pow": BINARY["elementwise_pow"].float16_reason,
    "bitcast": "reads the bits of X: a float16 X holds other bits",
}
"""Op type -> why it stays float32 (the family rows classed NEVER, pow and bitcast)."""

LARGE_REDUCTIONS: frozenset[str] = frozenset({"reduce_sum", "reduce_mean", "mean", "sum"})
"""Ops whose sum over many elements can exceed float16's range (``max_float16_reduction``)."""
