"""The row types of the op family tables (``halfway.ir.ops.families``) and what is read from them.

A row is everything halfway knows of one elementwise or reduce op: its attrs, its math once as an
expression (``halfway.ir.ops.expr``) that every backend renders, its dtypes, its float16 class,
whether a conv or matmul epilogue may absorb it, and its ONNX counterpart. Schemas, layer
functions, kernels (numpy, OpenCL, the compiled epilogues), the fusion passes' lists, the float16
lists and the one-to-one ONNX converters are derived from rows.

Epilogues (``Absorb``): ``fused_conv2d`` names the activation in ``fuse_activation`` and carries
its parameters in ``fuse_alpha`` / ``fuse_beta``, Paddle's fused ops' way, where 0 stands for a
default. ``unfused`` reads such a pair back as the plain op it computes; ``fused_params`` writes
an op's attrs as a pair, and gives None where reading the pair back would not give the op again,
so no pass or kernel needs to know what 0 means for which activation.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from attrs import field, frozen

from ..dtypes import DType
from ..schema import AttrSpec
from .expr import Expr
from .numpy_render import numpy_function, reduction_function

__all__ = ["Float16", "Absorb", "Onnx", "Elementwise", "Reduction", "fused_params", "unfused", "same_attrs",
           "FLOATS", "INTS", "NUMBERS", "ALL_DTYPES"]

Attrs = Mapping[str, Any]
FLOATS = (DType.float32, DType.float16)
INTS = (DType.int32, DType.int64, DType.int8, DType.uint8, DType.int16, DType.uint16, DType.uint32, DType.uint64)
NUMBERS = FLOATS + INTS
ALL_DTYPES = NUMBERS + (DType.bool,)


class Float16(enum.Enum):
    """How the float16 transpile treats an op (TVM's mixed-precision classes): ALWAYS runs it in
    float16, NEVER keeps it in float32, FOLLOW runs it in the dtype of its floating inputs."""

    ALWAYS = "always"
    NEVER = "never"
    FOLLOW = "follow"


@frozen
class Absorb:
    """A conv / matmul epilogue may compute this op.

    ``alpha`` / ``beta``: the attrs ``fuse_alpha`` / ``fuse_beta`` carry, 0 standing for the attr's
    default. ``encode`` / ``decode`` replace that reading where Paddle's fused ops read the pair
    otherwise: ``encode(attrs)`` gives the pair (None where it cannot), ``decode(alpha, beta)`` the
    (op type, attrs) the pair computes.
    """

    alpha: str | None = None
    beta: str | None = None
    encode: Callable[[Attrs], tuple[float, float] | None] | None = None
    decode: Callable[[float, float], tuple[str, dict[str, Any]]] | None = None


@frozen
class Onnx:
    """The one-to-one ONNX op: its name and, per attr of ours, (the ONNX attr, ONNX's default)."""

    name: str
    attrs: Mapping[str, tuple[str, float]] = field(factory=dict)


@frozen
class Elementwise:
    """One elementwise op: unary (X -> Out) or binary (X, Y -> Out, Paddle's broadcasting).

    ``expr`` is the math, of ``X`` (and ``Y``) and the attrs. ``numpy`` is its numpy rendering
    (``halfway.ir.ops.numpy_render``), made from it: ``numpy(x[, y], **attrs)`` (float attrs
    arrive as scalars of the kernel dtype; a unary function that takes ``out`` may write in
    place). ``ints`` replaces it for int dtypes where integer math differs (C++'s truncating
    division, a zero divisor refused). ``exact_half``: float16 runs on the float16 arrays as
    they are (one correctly rounded operation), not widened. ``out_dtype``: Out's dtype where it
    is not X's (bool for comparisons). ``axis``: the op has Paddle's ``axis`` attr.
    """

    name: str
    arity: int
    doc: str
    expr: Expr
    attrs: tuple[AttrSpec, ...] = ()
    dtypes: tuple[DType, ...] = FLOATS
    exact_half: bool = False
    float16: Float16 = Float16.FOLLOW
    float16_reason: str = ""
    absorb: Absorb | None = None
    onnx: Onnx | None = None
    ints: Callable[..., np.ndarray] | None = None
    out_dtype: DType | None = None
    axis: bool = False
    numpy: Callable[..., np.ndarray] = field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        inputs = ("x", "y")[:self.arity]
        object.__setattr__(self, "numpy", numpy_function(self.name, self.expr, inputs, [a.name for a in self.attrs]))

    def defaults(self) -> dict[str, Any]:
        return {a.name: a.default for a in self.attrs}


@frozen
class Reduction:
    """One reduce op over the dims in attr ``dim``: an accumulator ``X``, starting at ``init``,
    takes each element ``Y`` as ``combine`` (one binary primitive), and Out is ``finish`` of the
    accumulator and the count ``N`` (None: the accumulator). ``numpy(x, axis=, keepdims=[,
    dtype=])`` is its numpy rendering; ``accumulates``: it takes the ``dtype`` to accumulate in
    (sums, means, products)."""

    name: str
    doc: str
    combine: Expr
    init: float
    finish: Expr | None = None
    accumulates: bool = True
    dtypes: tuple[DType, ...] = NUMBERS
    exact_half: bool = False
    float16: Float16 = Float16.FOLLOW
    float16_reason: str = ""
    onnx: Onnx | None = None
    numpy: Callable[..., Any] = field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "numpy", reduction_function(self.name, self.combine, self.finish, self.accumulates,
                                                               self.init))


def unfused(row: Elementwise, alpha: float, beta: float) -> tuple[str, dict[str, Any]]:
    """The op (type, attrs) that an epilogue naming ``row`` with ``fuse_alpha``, ``fuse_beta``
    computes."""
    absorb = row.absorb
    assert absorb is not None, f"{row.name} is not absorbable"
    if absorb.decode is not None:
        return absorb.decode(alpha, beta)
    attrs = row.defaults()
    for attr, value in ((absorb.alpha, alpha), (absorb.beta, beta)):
        if attr is not None and value != 0:
            attrs[attr] = float(value)
    return row.name, attrs


def fused_params(row: Elementwise, attrs: Attrs) -> tuple[float, float] | None:
    """(fuse_alpha, fuse_beta) of an epilogue computing op ``row`` with ``attrs``, or None where
    the row is not absorbable or no pair reads back as these attrs."""
    absorb = row.absorb
    if absorb is None:
        return None
    if absorb.encode is not None:
        pair = absorb.encode(attrs)
    else:
        alpha, beta = (float(attrs[a]) if a is not None else 0.0 for a in (absorb.alpha, absorb.beta))
        pair = (alpha, beta)
    if pair is None:
        return None
    op_type, back = unfused(row, *pair)
    return pair if op_type == row.name and same_attrs(back, attrs) else None


def same_attrs(a: Attrs, b: Attrs) -> bool:
    """Whether ``a``'s attrs equal ``b``'s as float32 (the attrs' stored precision)."""
    return all(k in b and np.float32(v) == np.float32(b[k]) for k, v in a.items())
