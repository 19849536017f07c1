"""numpy kernels of the math ops (schemas in ``halfway.ir.ops.math``).

``KERNELS`` maps every math op type to its factory and dtypes and one loop registers them: the
family rows' (``halfway.ir.ops.families``: their numpy math, dtypes and ``exact_half``) through
a few makers, and the other math ops one comment line per entry:

- ``binary(fn)``: elementwise X, Y (comparisons too). The operands' numpy shapes under Paddle's
  ``axis`` rule (``numpy_operand_shapes``) are computed at prepare time; a call reshapes (a view)
  and lets numpy broadcast.
- ``unary(fn)``: X -> Out with the op's attrs bound as keyword arguments of ``fn`` (named as
  the schema names them), float attrs as scalars of the kernel dtype.
- ``reduction(fn)``: ``dim`` / ``reduce_all`` / ``keep_dim`` resolved to numpy axes; sums,
  means and products accumulate in the wider of X's and Out's dtypes, then write ``out_dtype``.

Float16: the registry widens by default (float16 storage, float32 arithmetic). Entries marked
``exact_half`` run on the float16 arrays as they are: each is a single correctly rounded IEEE
operation (+ - * /, sqrt, max/min, abs, relu, a comparison, a cast) that numpy's float16 loops compute in
float32 and round once, which is bit-identical to widening and narrowing (float32's 24 bits are
at least 2 * 11 + 2, so the double rounding is innocuous) without the two copies.

Integer kernels follow Paddle's C++ ones: ``elementwise_div`` truncates toward zero and rejects a
zero divisor, integer powers go through ``std::pow`` in double, and float attrs or scalar tensors
of an int kernel (scale, bias, clip bounds, pow factor) are cast to its dtype, truncated toward
zero (and saturated where they lie outside it). Every kernel returns a new array, never an input,
unless its spec says it may write in place (``KernelSpec.inplace``): then binary ufuncs, unary
ufuncs, the rows' functions that take ``out`` and scale write into X.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.ops.expr import Expr, X
from ...ir.ops.families import BINARY, COMPARE, REDUCE, UNARY
from ...ir.ops.family import FLOATS, INTS, NUMBERS, Elementwise, Reduction
from ...ir.ops.math import numpy_operand_shapes
from ...ir.ops.numpy_math import power_via_double
from ...ir.reference import reduction_kernel
from ..registry import KernelFactory, KernelSpec, register_kernel
from .jit import compiled_unary
from .pointwise import binary_expr, row_expr, with_pointwise

__all__ = ["KERNELS", "Entry", "binary", "unary", "reduction"]

Kernel = Callable[..., Any]
CAST_DTYPES = (DType.bool, *INTS, DType.float16, DType.float32, DType.float64, DType.bfloat16)


# -- scalars ------------------------------------------------------------------------------------
def _scalar(value: Any, dtype: np.dtype) -> np.generic:
    """``value`` as a ``dtype`` scalar, as C++'s ``static_cast<T>``: a float for an int dtype is
    truncated toward zero, and saturated at the dtype's range (where the cast is undefined)."""
    if dtype.kind == "f":
        return dtype.type(value)
    info = np.iinfo(dtype)
    value = value.item() if isinstance(value, np.generic) else value
    return dtype.type(int(min(max(value, info.min), info.max)))


def _scalar_reader(spec: KernelSpec, pairs: Sequence[tuple[str, str]]) -> Callable[..., list[np.generic]]:
    """For (slot, attr) pairs of an op whose scalar attrs a one-value tensor may replace: a
    function taking the tensors given (in slot order) and returning one scalar per pair."""
    dtype = spec.dtype.numpy
    fixed = [None if spec.has_input(slot) else _scalar(spec.attrs[attr], dtype) for slot, attr in pairs]

    def read(*tensors: np.ndarray) -> list[np.generic]:
        given = iter(tensors)
        return [_scalar(next(given).reshape(-1)[0], dtype) if v is None else v for v in fixed]

    return read


# -- elementwise binary ---------------------------------------------------------------------------
def binary(floats: Callable[[np.ndarray, np.ndarray], np.ndarray],
           ints: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None) -> KernelFactory:
    """A factory for the elementwise op computing ``floats(X, Y)`` (``ints`` for int dtypes)."""

    def kernel(spec: KernelSpec) -> Kernel:
        x, y = spec.input("X").shape, spec.input("Y").shape
        xs, ys = numpy_operand_shapes(x, y, spec.attrs.get("axis", -1))
        fn = floats if spec.dtype.is_floating or ints is None else ints
        if spec.inplace and isinstance(fn, np.ufunc) and xs == tuple(x) == tuple(spec.output("Out").shape):
            return (lambda a, b: fn(a, b, out=a)) if ys == tuple(y) else lambda a, b: fn(a, b.reshape(ys), out=a)
        if (xs, ys) == (tuple(x), tuple(y)):
            return fn
        return lambda a, b: fn(a.reshape(xs), b.reshape(ys))

    def make(spec: KernelSpec) -> Kernel:
        shapes = {tuple(spec.input("X").shape), tuple(spec.input("Y").shape), tuple(spec.output("Out").shape)}
        return with_pointwise(kernel(spec), binary_expr(spec.op_type, spec.dtype, len(shapes) == 1))

    return make


# -- unary --------------------------------------------------------------------------------------
def unary(fn: Callable[..., np.ndarray]) -> KernelFactory:
    """A factory for the X -> Out op computing ``fn(X, **attrs)``; in place (``out=X``) where the
    spec allows it and ``fn`` takes an ``out`` (ufuncs do). Where ``jit.compiled_unary`` has a
    one-pass loop for the op, float32 arrays go through it and others through ``fn``."""
    writes_out = isinstance(fn, np.ufunc) or "out" in inspect.signature(fn).parameters

    def kernel(spec: KernelSpec) -> Kernel:
        dtype = spec.dtype.numpy
        attrs = {name: _scalar(v, dtype) if isinstance(v, float) else v for name, v in spec.attrs.items()}
        bound = functools.partial(fn, **attrs) if attrs else fn
        inplace = spec.inplace and len(spec.input("X").shape) > 0
        compiled = compiled_unary(spec.op_type, spec.attrs) if spec.dtype is DType.float32 else None
        if compiled is not None:
            return _through_loop(compiled, bound, inplace)
        if inplace and writes_out:
            return lambda x: bound(x, out=x)
        return bound

    return lambda spec: with_pointwise(kernel(spec), row_expr(spec.op_type, spec.attrs, spec.dtype))


def _through_loop(loop: Callable[[np.ndarray, np.ndarray], bool], fallback: Kernel, inplace: bool) -> Kernel:
    def run(x: np.ndarray) -> np.ndarray:
        out = x if inplace else np.empty_like(x)
        return out if loop(out, x) else fallback(x)

    return run



# -- reductions ---------------------------------------------------------------------------------
def reduction(fn: Callable[..., Any], *, accumulates: bool = True) -> KernelFactory:
    """A factory for the reduce op computing ``fn(X, axis=..., keepdims=...)``; ``accumulates``:
    ``fn`` takes a ``dtype`` to accumulate in (sum, mean, prod; not max, min). The dims are the
    attr's, or the DimTensor's read at run time."""

    def make(spec: KernelSpec) -> Kernel:
        return reduction_kernel(fn, accumulates, spec.attrs, spec.input("X"), spec.output("Out").dtype,
                                bool(spec.inputs.get("DimTensor")))

    return make


def _mean(spec: KernelSpec) -> Kernel:
    return lambda x: np.asarray(np.mean(x, dtype=x.dtype))


# -- scale, clip, pow, sum, cast ----------------------------------------------------------------
def _scale(spec: KernelSpec) -> Kernel:
    read = _scalar_reader(spec, [("ScaleTensor", "scale"), ("BiasTensor", "bias")])
    after = spec.attrs["bias_after_scale"]
    inplace = spec.inplace and len(spec.input("X").shape) > 0

    def scale(x: np.ndarray, *tensors: np.ndarray) -> np.ndarray:
        factor, bias = read(*tensors)
        target = x if inplace else None
        if after:
            out = np.multiply(x, factor, out=target)
            if bias:
                out += bias
            return out
        out = np.add(x, bias, out=target)
        out *= factor
        return out

    if spec.dtype is not DType.float32 or spec.has_input("ScaleTensor") or spec.has_input("BiasTensor"):
        return scale
    factor, bias = read()
    return with_pointwise(scale, _scale_expr(factor, bias, after))


def _scale_expr(factor: np.generic, bias: np.generic, after: bool) -> Expr:
    """scale's math with its numbers, as its kernel computes it (no add of a zero bias after)."""
    if not after:
        return (X + float(bias)) * float(factor)
    return X * float(factor) + float(bias) if bias else X * float(factor)


def _clip(spec: KernelSpec) -> Kernel:
    read = _scalar_reader(spec, [("Min", "min"), ("Max", "max")])

    def clip(x: np.ndarray, *tensors: np.ndarray) -> np.ndarray:
        low, high = read(*tensors)
        if low > high:
            raise HalfwayError(f"clip: min ({low}) must not exceed max ({high})")
        return np.clip(x, low, high)

    return clip


def _pow(spec: KernelSpec) -> Kernel:
    if spec.dtype.is_floating and not spec.has_input("FactorTensor"):
        by_multiplies = _small_power(float(spec.attrs["factor"]))
        if by_multiplies is not None:
            return by_multiplies
    read = _scalar_reader(spec, [("FactorTensor", "factor")])
    power = np.power if spec.dtype.is_floating else power_via_double
    return lambda x, *tensor: power(x, *read(*tensor))


def _small_power(factor: float) -> Kernel | None:
    """x ** factor as multiplies (2, 3, 4) or a square root (0.5, -0.5) for the floating factors
    today's models use (GELU's x ** 3, RMS norm's x ** 2, layer norm's ** -0.5): ``np.power``
    calls libm's ``pow`` per element, several times slower. None for other factors."""
    if factor == 2:
        return np.square
    if factor == 3:
        return lambda x: np.multiply(np.square(x), x)
    if factor == 4:
        return lambda x: np.square(np.square(x))
    if factor == 0.5:
        return np.sqrt
    if factor == -0.5:
        return lambda x: np.reciprocal(np.sqrt(x))
    return None


def _sum(spec: KernelSpec) -> Kernel:
    def add_n(*xs: np.ndarray) -> np.ndarray:
        out = xs[0] + xs[1] if len(xs) > 1 else xs[0].copy()
        for x in xs[2:]:
            out += x
        return out

    return add_n


def _cast(spec: KernelSpec) -> Kernel:
    """Out = X as ``out_dtype`` (numpy's conversions: C++'s for floats to ints, != 0 for bool);
    bfloat16 (held as uint16 bits) goes through float32, rounding to nearest even."""
    src, dst = spec.dtype, spec.output("Out").dtype
    if src is dst:
        return np.copy
    if src is DType.bfloat16:
        return lambda x: (x.astype(np.uint32) << 16).view(np.float32).astype(dst.numpy, copy=False)
    if dst is DType.bfloat16:
        return lambda x: _float32_to_bfloat16(x.astype(np.float32, copy=False))
    return lambda x: x.astype(dst.numpy)


def _float32_to_bfloat16(x: np.ndarray) -> np.ndarray:
    bits = x.view(np.uint32)
    rounded = ((bits + (0x7FFF + ((bits >> 16) & 1))) >> 16).astype(np.uint16)
    quiet_nan = ((bits >> 16) & 0x8000 | 0x7FC0).astype(np.uint16)
    return np.where(np.isnan(x), quiet_nan, rounded)


# -- the table ------------------------------------------------------------------------------------
class Entry(NamedTuple):
    """How an op's kernels are made: the factory, the dtypes, and whether float16 runs natively
    (``exact_half``, see the module docstring) rather than widened."""

    factory: KernelFactory
    dtypes: tuple[DType, ...] = FLOATS
    exact_half: bool = False


def _elementwise_entry(row: Elementwise) -> Entry:
    factory = binary(row.numpy, row.ints) if row.arity == 2 else unary(row.numpy)
    return Entry(factory, row.dtypes, row.exact_half)


def _reduce_entry(row: Reduction) -> Entry:
    return Entry(reduction(row.numpy, accumulates=row.accumulates), row.dtypes, row.exact_half)


KERNELS: dict[str, Entry] = {
    **{name: _elementwise_entry(row) for name, row in {**BINARY, **UNARY, **COMPARE}.items()},
    **{name: _reduce_entry(row) for name, row in REDUCE.items()},
    # the mean of all of X, 0-d
    "mean": Entry(_mean),
    # min(max(X, min), max), bounds from the attrs or the Min/Max tensors
    "clip": Entry(_clip, NUMBERS),
    # scale * X + bias, or scale * (X + bias); ScaleTensor replaces scale
    "scale": Entry(_scale, NUMBERS),
    # X ** factor; FactorTensor replaces factor
    "pow": Entry(_pow, NUMBERS),
    # the elementwise sum of the X tensors
    "sum": Entry(_sum, NUMBERS),
    # X converted to out_dtype
    "cast": Entry(_cast, CAST_DTYPES, exact_half=True),
}
"""Op type -> Entry(factory, dtypes, exact_half) of every math op."""


def _zero_d_safe(factory: KernelFactory) -> KernelFactory:
    """numpy ufuncs return scalars, not arrays, for 0-d operands: wrap a 0-d output in an array."""

    def make(spec: KernelSpec) -> Kernel:
        kernel = factory(spec)
        if len(spec.output("Out").shape) > 0:
            return kernel
        return lambda *args: np.asarray(kernel(*args))

    return make


def _with_float64(dtypes: tuple[DType, ...]) -> tuple[DType, ...]:
    """numpy runs float64 wherever it runs float32 (ONNX models compute in double at times)."""
    return dtypes + (DType.float64,) if DType.float32 in dtypes and DType.float64 not in dtypes else dtypes


def _register() -> None:
    for op_type, entry in KERNELS.items():
        factory = _zero_d_safe(entry.factory)
        native = (DType.float16,) if entry.exact_half and DType.float16 in entry.dtypes else ()
        register_kernel(op_type, dtypes=[d for d in _with_float64(entry.dtypes) if d not in native])(factory)
        if native:
            register_kernel(op_type, dtypes=native)(factory)


_register()
