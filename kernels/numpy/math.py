"""numpy kernels of the math ops (schemas in ``halfway.ir.ops.math``).

``KERNELS`` maps every math op type to its factory and dtypes, one comment line per entry, and
one loop registers them. The factories come from a few makers:

- ``binary(fn)``: elementwise X, Y. The operands' numpy shapes under Paddle's ``axis`` rule
  (``numpy_operand_shapes``) are computed at prepare time; a call reshapes (a view) and lets
  numpy broadcast.
- ``unary(fn)``: X -> Out with the op's attrs bound as keyword arguments of ``fn`` (named as
  the schema names them), float attrs as scalars of the kernel dtype.
- ``reduction(fn)``: ``dim`` / ``reduce_all`` / ``keep_dim`` resolved to numpy axes; sums,
  means and products accumulate in the wider of X's and Out's dtypes, then write ``out_dtype``.

Float16: the registry widens by default (float16 storage, float32 arithmetic). Entries marked
``exact_half`` run on the float16 arrays as they are: each is a single correctly rounded IEEE
operation (+ - * /, sqrt, max/min, abs, relu, a cast) that numpy's float16 loops compute in
float32 and round once, which is bit-identical to widening and narrowing (float32's 24 bits are
at least 2 * 11 + 2, so the double rounding is innocuous) without the two copies.

Integer kernels follow Paddle's C++ ones: ``elementwise_div`` truncates toward zero and rejects a
zero divisor, integer powers go through ``std::pow`` in double, and float attrs or scalar tensors
of an int kernel (scale, bias, clip bounds, pow factor) are cast to its dtype, truncated toward
zero (and saturated where they lie outside it). Every kernel returns a new array, never an input,
unless its spec says it may write in place (``KernelSpec.inplace``): then binary ufuncs, unary
ufuncs, relu, relu6 and scale write into X.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from halfway.ir.dtypes import DType
from halfway.ir.errors import HalfwayError
from halfway.ir.ops.math import numpy_operand_shapes
from halfway.kernels.registry import KernelFactory, KernelSpec, register_kernel

__all__ = ["KERNELS", "Entry", "binary", "unary", "reduction", "erfc"]

Kernel = Callable[..., Any]
FLOATS = (DType.float32, DType.float16)
NUMBERS = FLOATS + (DType.int32, DType.int64)
CAST_DTYPES = (DType.bool, DType.int8, DType.uint8, DType.int16, DType.int32, DType.int64,
               DType.float16, DType.float32, DType.float64, DType.bfloat16)


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

    def make(spec: KernelSpec) -> Kernel:
        x, y = spec.input("X").shape, spec.input("Y").shape
        xs, ys = numpy_operand_shapes(x, y, spec.attrs["axis"])
        fn = floats if spec.dtype.is_floating or ints is None else ints
        if spec.inplace and isinstance(fn, np.ufunc) and xs == tuple(x) == tuple(spec.output("Out").shape):
            return lambda a, b: fn(a, b.reshape(ys), out=a)
        if (xs, ys) == (tuple(x), tuple(y)):
            return fn
        return lambda a, b: fn(a.reshape(xs), b.reshape(ys))

    return make


def _divide_toward_zero(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C++ integer division: the quotient truncated toward zero; a zero divisor is an error."""
    if not np.all(y):
        raise HalfwayError("integer division by zero (Y holds a 0)")
    return np.floor_divide(x - np.fmod(x, y), y)  # x - fmod(x, y) is an exact multiple of y


def _power_via_double(x: np.ndarray, y: np.ndarray | np.generic) -> np.ndarray:
    """Paddle's integer power: ``std::pow`` in double, converted back to X's int dtype."""
    return np.power(x.astype(np.float64), y).astype(x.dtype)


# -- unary --------------------------------------------------------------------------------------
def unary(fn: Callable[..., np.ndarray]) -> KernelFactory:
    """A factory for the X -> Out op computing ``fn(X, **attrs)``; in place (``out=X``) where the
    spec allows it and ``fn`` takes an ``out`` (ufuncs do)."""
    writes_out = isinstance(fn, np.ufunc) or "out" in inspect.signature(fn).parameters

    def make(spec: KernelSpec) -> Kernel:
        dtype = spec.dtype.numpy
        attrs = {name: _scalar(v, dtype) if isinstance(v, float) else v for name, v in spec.attrs.items()}
        bound = functools.partial(fn, **attrs) if attrs else fn
        if spec.inplace and writes_out and len(spec.input("X").shape) > 0:
            return lambda x: bound(x, out=x)
        return bound

    return make


def _relu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    return np.maximum(x, 0, out=out)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) from exp(-|x|): nothing overflows and tiny results keep their precision."""
    e = np.exp(-np.abs(x))
    inv = 1 / (1 + e)
    return np.where(x >= 0, inv, e * inv)


def _swish(x: np.ndarray, beta: np.generic) -> np.ndarray:
    return x * _sigmoid(beta * x)


def _silu(x: np.ndarray) -> np.ndarray:
    return x * _sigmoid(x)


def _relu6(x: np.ndarray, threshold: np.generic, out: np.ndarray | None = None) -> np.ndarray:
    return np.clip(x, 0, threshold, out=out)


def _leaky_relu(x: np.ndarray, alpha: np.generic) -> np.ndarray:
    return np.where(x > 0, x, alpha * x)


def _hard_swish(x: np.ndarray, threshold: np.generic, scale: np.generic, offset: np.generic) -> np.ndarray:
    return x * np.clip(x + offset, 0, threshold) / scale


def _hard_sigmoid(x: np.ndarray, slope: np.generic, offset: np.generic) -> np.ndarray:
    return np.clip(slope * x + offset, 0, 1)


def _softplus(x: np.ndarray, beta: np.generic, threshold: np.generic) -> np.ndarray:
    bx = beta * x
    return np.where(bx > threshold, x, np.logaddexp(0, bx) / beta)


_TWO_SQRT_2_OVER_PI = 2 * math.sqrt(2 / math.pi)


def _gelu(x: np.ndarray, approximate: bool) -> np.ndarray:
    """x * Phi(x): exact through ``erfc`` in float64, or Paddle's tanh approximation
    0.5 x (1 + tanh(u)), written x * sigmoid(2u) to avoid 1 + tanh's cancellation."""
    if approximate:
        return x * _sigmoid(_TWO_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
    wide = x.astype(np.float64)
    return (0.5 * wide * erfc(wide * -math.sqrt(0.5))).astype(x.dtype)


# Numerical Recipes' erfcc (Chebyshev fit, W. H. Press et al., 2nd ed., section 6.2), highest power first.
_ERFC_COEFFS = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
                0.37409196, 1.00002368, -1.26551223)


def erfc(x: np.ndarray) -> np.ndarray:
    """The complementary error function of a float64 array, with a relative error below 1.2e-7
    everywhere (so ``erfc(-x / sqrt(2)) / 2`` is the normal CDF to float32 precision even far
    into its lower tail)."""
    z = np.abs(x)
    t = 1 / (1 + 0.5 * z)
    poly = np.zeros_like(t)
    for c in _ERFC_COEFFS:
        poly *= t
        poly += c
    tail = t * np.exp(poly - z * z)
    return np.where(x >= 0, tail, 2 - tail)


# -- reductions ---------------------------------------------------------------------------------
def reduction(fn: Callable[..., Any], *, accumulates: bool = True) -> KernelFactory:
    """A factory for the reduce op computing ``fn(X, axis=..., keepdims=...)``; ``accumulates``:
    ``fn`` takes a ``dtype`` to accumulate in (sum, mean, prod; not max, min)."""

    def make(spec: KernelSpec) -> Kernel:
        x, out = spec.input("X"), spec.output("Out").dtype.numpy
        rank, dims = len(x.shape), spec.attrs["dim"]
        if spec.attrs["reduce_all"] or not dims:
            axes = tuple(range(rank))
        else:
            axes = tuple(sorted({d % rank for d in dims})) if rank else ()
        options: dict[str, Any] = {"axis": axes, "keepdims": spec.attrs["keep_dim"]}
        if accumulates:
            options["dtype"] = np.promote_types(x.dtype.numpy, out)
        return lambda a: np.asarray(fn(a, **options), dtype=out)

    return make


def _mean(spec: KernelSpec) -> Kernel:
    return lambda x: np.asarray(np.mean(x, dtype=x.dtype))


# -- scale, clip, pow, sum, cast ----------------------------------------------------------------
def _scale(spec: KernelSpec) -> Kernel:
    read = _scalar_reader(spec, [("ScaleTensor", "scale")])
    bias = _scalar(spec.attrs["bias"], spec.dtype.numpy)
    after = spec.attrs["bias_after_scale"]
    inplace = spec.inplace and len(spec.input("X").shape) > 0

    def scale(x: np.ndarray, *tensor: np.ndarray) -> np.ndarray:
        (factor,) = read(*tensor)
        target = x if inplace else None
        if after:
            out = np.multiply(x, factor, out=target)
            if bias:
                out += bias
            return out
        out = np.add(x, bias, out=target)
        out *= factor
        return out

    return scale


def _clip(spec: KernelSpec) -> Kernel:
    read = _scalar_reader(spec, [("Min", "min"), ("Max", "max")])

    def clip(x: np.ndarray, *tensors: np.ndarray) -> np.ndarray:
        low, high = read(*tensors)
        if low > high:
            raise HalfwayError(f"clip: min ({low}) must not exceed max ({high})")
        return np.clip(x, low, high)

    return clip


def _pow(spec: KernelSpec) -> Kernel:
    read = _scalar_reader(spec, [("FactorTensor", "factor")])
    power = np.power if spec.dtype.is_floating else _power_via_double
    return lambda x, *tensor: power(x, *read(*tensor))


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


KERNELS: dict[str, Entry] = {
    # X + Y, Y broadcast into X from dim axis (Paddle's rule; so for every elementwise_* op)
    "elementwise_add": Entry(binary(np.add), NUMBERS, exact_half=True),
    # X - Y
    "elementwise_sub": Entry(binary(np.subtract), NUMBERS, exact_half=True),
    # X * Y
    "elementwise_mul": Entry(binary(np.multiply), NUMBERS, exact_half=True),
    # X / Y; integers truncate toward zero
    "elementwise_div": Entry(binary(np.divide, _divide_toward_zero), NUMBERS, exact_half=True),
    # max(X, Y)
    "elementwise_max": Entry(binary(np.maximum), NUMBERS, exact_half=True),
    # min(X, Y)
    "elementwise_min": Entry(binary(np.minimum), NUMBERS, exact_half=True),
    # X ** Y; integers through double
    "elementwise_pow": Entry(binary(np.power, _power_via_double), NUMBERS),
    # max(X, 0)
    "relu": Entry(unary(_relu), exact_half=True),
    # min(max(X, 0), threshold)
    "relu6": Entry(unary(_relu6)),
    # X where X > 0, else alpha * X
    "leaky_relu": Entry(unary(_leaky_relu)),
    # 1 / (1 + exp(-X)), overflow-free
    "sigmoid": Entry(unary(_sigmoid)),
    # tanh(X)
    "tanh": Entry(unary(np.tanh)),
    # X * min(max(X + offset, 0), threshold) / scale
    "hard_swish": Entry(unary(_hard_swish)),
    # min(max(slope * X + offset, 0), 1)
    "hard_sigmoid": Entry(unary(_hard_sigmoid)),
    # X * sigmoid(beta * X)
    "swish": Entry(unary(_swish)),
    # X * sigmoid(X)
    "silu": Entry(unary(_silu)),
    # X * Phi(X), exact (erfc in float64) or the tanh approximation
    "gelu": Entry(unary(_gelu)),
    # log(1 + exp(beta * X)) / beta, or X where beta * X > threshold
    "softplus": Entry(unary(_softplus)),
    # exp(X)
    "exp": Entry(unary(np.exp)),
    # log(X)
    "log": Entry(unary(np.log)),
    # sqrt(X)
    "sqrt": Entry(unary(np.sqrt), exact_half=True),
    # |X|, ints too
    "abs": Entry(unary(np.abs), NUMBERS, exact_half=True),
    # the sum over dim; bool and int32 sum to int64 unless out_dtype says otherwise
    "reduce_sum": Entry(reduction(np.sum), NUMBERS + (DType.bool,)),
    # the mean over dim
    "reduce_mean": Entry(reduction(np.mean)),
    # the maximum over dim
    "reduce_max": Entry(reduction(np.max, accumulates=False), NUMBERS, exact_half=True),
    # the minimum over dim
    "reduce_min": Entry(reduction(np.min, accumulates=False), NUMBERS, exact_half=True),
    # the product over dim
    "reduce_prod": Entry(reduction(np.prod), NUMBERS),
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


def _register() -> None:
    for op_type, entry in KERNELS.items():
        factory = _zero_d_safe(entry.factory)
        native = (DType.float16,) if entry.exact_half and DType.float16 in entry.dtypes else ()
        register_kernel(op_type, dtypes=[d for d in entry.dtypes if d not in native])(factory)
        if native:
            register_kernel(op_type, dtypes=native)(factory)


_register()
