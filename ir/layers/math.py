"""Layer functions of the math ops: ``elementwise_add(x, y, axis=-1, act=None)``, ``relu(x)``,
``leaky_relu(x, alpha=0.02)``, ``equal(x, y)``, ``logical_not(x)``,
``reduce_mean(input, dim=None, keep_dim=False)``, ``scale``, ``clip``, ``cast``, ``sums``,
``mean``, ``pow``.

The elementwise, activation, comparison and reduce functions are generated from the family
tables of ``halfway.ir.ops.families``: an activation's parameters are its row's attrs with their
defaults.
Every function takes ``name``, the prefix of its output var's name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..attrs import AttrType
from ..builder import append_op, apply_act
from ..dtypes import DType
from ..ops.families import BINARY, COMPARE, REDUCE, UNARY
from ..ops.family import Elementwise
from ..variable import Variable

__all__ = [*BINARY, *UNARY, *COMPARE, *REDUCE, "clip", "scale", "sums", "cast", "mean", "pow"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)
_PY_TYPES = {AttrType.FLOAT: float, AttrType.BOOLEAN: bool, AttrType.INT: int}
_Param = inspect.Parameter


def _out(op_type: str, inputs: dict[str, Any], attrs: dict[str, Any], name: str | None) -> Variable:
    return append_op(op_type, inputs, attrs, name=name)["Out"][0]


def _named(fn: Callable[..., Variable], op_type: str, doc: str) -> Callable[..., Variable]:
    fn.__name__ = fn.__qualname__ = op_type
    fn.__doc__ = doc
    return fn


def _elementwise(op_type: str, doc: str) -> Callable[..., Variable]:
    def layer(x: Variable, y: Variable, axis: int = -1, act: str | None = None,
              name: str | None = None) -> Variable:
        return apply_act(_out(op_type, {"X": x, "Y": y}, {"axis": axis}, name), act)

    return _named(layer, op_type, f"Out = {doc}. Y (or X, whichever has fewer dims) aligns with the other "
                                  f"from dim ``axis``; -1 aligns the last dims as numpy does. ``act``: an "
                                  f"activation op type to apply to Out.")


def _comparison(op_type: str, row: Elementwise) -> Callable[..., Variable]:
    def layer(x: Variable, y: Variable, name: str | None = None) -> Variable:
        attrs = {"axis": -1} if row.axis else {}
        return _out(op_type, {"X": x, "Y": y}, attrs, name)

    def layer_not(x: Variable, name: str | None = None) -> Variable:
        return _out(op_type, {"X": x}, {}, name)

    if row.arity == 1:
        return _named(layer_not, op_type, f"Out = {row.doc}, a bool tensor.")
    return _named(layer, op_type, f"Out = {row.doc}, a bool tensor (x and y broadcast as numpy does).")


def _activation(op_type: str, entry: Elementwise) -> Callable[..., Variable]:
    signature = inspect.Signature(
        [_Param("x", _Param.POSITIONAL_OR_KEYWORD, annotation=Variable)]
        + [_Param(a.name, _Param.POSITIONAL_OR_KEYWORD, default=a.default, annotation=_PY_TYPES[a.type])
           for a in entry.attrs]
        + [_Param("name", _Param.KEYWORD_ONLY, default=None, annotation=str | None)],
        return_annotation=Variable)

    def layer(*args: Any, **kwargs: Any) -> Variable:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        x, name = values.pop("x"), values.pop("name")
        return _out(op_type, {"X": x}, values, name)

    layer.__signature__ = signature  # type: ignore[attr-defined]
    return _named(layer, op_type, f"Out = {entry.doc}.")


def _reduce(op_type: str, doc: str) -> Callable[..., Variable]:
    def layer(input: Variable, dim: int | Sequence[int] | None = None, keep_dim: bool = False,
              name: str | None = None) -> Variable:
        dims = [dim] if isinstance(dim, int) else list(dim or [])
        attrs = {"dim": dims or [0], "keep_dim": keep_dim, "reduce_all": not dims}
        return _out(op_type, {"X": input}, attrs, name)

    return _named(layer, op_type, f"Out = {doc} of ``input`` over ``dim`` (an int or a list; negative "
                                  f"counts from the end; None: all dims, giving shape [] unless keep_dim).")


for _type, _row in BINARY.items():
    globals()[_type] = _elementwise(_type, _row.doc)
for _type, _row in UNARY.items():
    globals()[_type] = _activation(_type, _row)
for _type, _row in COMPARE.items():
    globals()[_type] = _comparison(_type, _row)
for _type, _reduction in REDUCE.items():
    globals()[_type] = _reduce(_type, _reduction.doc)
del _type, _row, _reduction


def _scalar_or_tensor(value: float | Variable, slot: str, attr: str,
                      placeholder: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inputs, attrs) for a scalar given as a number (attr ``attr``) or a one-value Variable
    (input ``slot``, with ``placeholder`` in the attr)."""
    if isinstance(value, Variable):
        return {slot: value}, {attr: placeholder}
    return {}, {attr: float(value)}


def clip(x: Variable, min: float | Variable, max: float | Variable, name: str | None = None) -> Variable:
    """Out = min(max(x, min), max); a bound may be a one-value Variable."""
    low_in, low_attr = _scalar_or_tensor(min, "Min", "min", -_FLOAT32_MAX)
    high_in, high_attr = _scalar_or_tensor(max, "Max", "max", _FLOAT32_MAX)
    return _out("clip", {"X": x, **low_in, **high_in}, {**low_attr, **high_attr}, name)


def scale(x: Variable, scale: float | Variable = 1.0, bias: float = 0.0, bias_after_scale: bool = True,
          act: str | None = None, name: str | None = None) -> Variable:
    """Out = scale * x + bias (or scale * (x + bias) when not ``bias_after_scale``)."""
    scale_in, scale_attr = _scalar_or_tensor(scale, "ScaleTensor", "scale", 1.0)
    attrs = {**scale_attr, "bias": bias, "bias_after_scale": bias_after_scale}
    return apply_act(_out("scale", {"X": x, **scale_in}, attrs, name), act)


def pow(x: Variable, factor: float | Variable = 1.0, name: str | None = None) -> Variable:
    """Out = x ** factor."""
    factor_in, factor_attr = _scalar_or_tensor(factor, "FactorTensor", "factor", 1.0)
    return _out("pow", {"X": x, **factor_in}, factor_attr, name)


def sums(input: Sequence[Variable], name: str | None = None) -> Variable:
    """The elementwise sum of ``input`` (Paddle's ``sum`` op; the vars share one shape)."""
    return _out("sum", {"X": list(input)}, {}, name)


def cast(x: Variable, dtype: Any, name: str | None = None) -> Variable:
    """``x`` converted to ``dtype`` (a DType, its name, or a numpy dtype)."""
    attrs = {"in_dtype": int(x.tensor_dtype), "out_dtype": int(DType.from_any(dtype))}
    return _out("cast", {"X": x}, attrs, name)


def mean(x: Variable, name: str | None = None) -> Variable:
    """The mean of all elements of ``x``, a 0-d var."""
    return _out("mean", {"X": x}, {}, name)
