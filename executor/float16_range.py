"""float16's range, checked around the runs of a float16 program, so that a value float16 cannot
hold is an error naming the var and the op instead of an infinity or a NaN in the results.

1. A feed that a cast narrows from float32 (or float64) into float16 is checked before the run:
   a finite value beyond ±65504 would become an infinity there; an infinity or a NaN fed is the
   feed's own, which float16 holds as it is.
2. After the run, the fetched floating arrays are checked for infinities and NaNs. Only when one
   holds some (and the feeds hold none) is the program evaluated again, op by op, on the numpy
   reference evaluator, to find the first op whose output went non-finite from finite inputs: a
   float16 output whose float32 counterpart (the op run on its inputs upcast to float32) is
   finite is an overflow, and an error; a float32 op (``log(0)``) is what the float32 program
   computes too, and the results are returned as they are.

A run pays one min/max pass over each narrowed feed and each floating fetch; intermediates are
looked at only on the failure path. ``check_float16_range=False`` on ``Executor.prepare`` skips
both checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from attrs import frozen

from ..ir.dtypes import DType
from ..ir.errors import HalfwayError
from ..ir.evaluate import evaluate_op
from ..ir.operator import Operator
from ..ir.schema import TensorInfo

__all__ = ["FLOAT16_MAX", "Float16RangeError", "Float16Range", "float16_range"]

FLOAT16_MAX = float(np.finfo(np.float16).max)
_NARROWED = (DType.float32, DType.float64)
_SKIP_HINT = "(pass check_float16_range=False to prepare, or --no-float16-check, to skip this check)"


class Float16RangeError(HalfwayError):
    """A float16 program met a value beyond float16's range: a feed, or an op that overflowed."""


@frozen
class Narrowing:
    """A feed (at ``index`` in feed order) that the op ``where`` casts into float16."""

    index: int
    name: str
    where: str


class Float16Range:
    """The checks of one prepared float16 program (see the module docstring)."""

    def __init__(self, ops: Sequence[Operator], parameters: Mapping[str, np.ndarray],
                 narrowings: Sequence[Narrowing], fetch_names: Sequence[str]) -> None:
        self._ops = list(ops)
        self._parameters = parameters
        self._narrowings = list(narrowings)
        self._fetch_names = list(fetch_names)

    def check_feeds(self, feeds: Sequence[np.ndarray]) -> None:
        """Float16RangeError when a narrowed feed holds a finite value beyond float16's range,
        naming the one farthest out. Infinities and NaNs are the feed's own: float16 holds them
        as they are, as ONNX's Cast does."""
        for narrowing in self._narrowings:
            value = feeds[narrowing.index]
            if not value.size or _within(float(np.fmax.reduce(value, axis=None)),
                                         float(np.fmin.reduce(value, axis=None))):
                continue
            finite = np.isfinite(value)
            top = float(np.max(value, where=finite, initial=-np.inf))
            bottom = float(np.min(value, where=finite, initial=np.inf))
            if not _within(top, bottom):
                raise Float16RangeError(
                    f"feed {narrowing.name!r} holds {top if top >= -bottom else bottom:.6g}, beyond float16's range "
                    f"(±{FLOAT16_MAX:g}), and {narrowing.where} casts it to float16: it would become inf; feed "
                    f"values within the range, or run the float32 program {_SKIP_HINT}")

    def check_fetches(self, feeds: Mapping[str, np.ndarray], results: Sequence[np.ndarray]) -> None:
        """Float16RangeError when a fetched array holds inf/NaN that a float16 op brought in."""
        bad = [name for name, value in zip(self._fetch_names, results) if not _finite(value)]
        if not bad or not all(_finite(value) for value in feeds.values()):
            return
        try:
            found, op = self._origin(feeds)
        except HalfwayError:  # the reference evaluator cannot run the program: blame no op
            found, op = True, None
        if not found:
            return
        where = (f"op #{op.index} {op.describe()} overflowed float16's range (±{FLOAT16_MAX:g}) where its float32 "
                 f"counterpart is finite" if op is not None else "a float16 op overflowed on the device")
        raise Float16RangeError(f"fetch {bad[0]!r} holds inf/NaN: {where}; keep that op float32 (the float16 "
                                f"transpile's black_list, or calibration_feeds) {_SKIP_HINT}")

    def _origin(self, feeds: Mapping[str, np.ndarray]) -> tuple[bool, Operator | None]:
        """(whether float16 is to blame, the op) for the first op whose output went non-finite
        from finite inputs; (True, None) when the reference evaluator finds no such op."""
        values: dict[str, np.ndarray] = {**self._parameters, **feeds}
        with np.errstate(all="ignore"):
            for op in self._ops:
                outputs = evaluate_op(op, values)
                values.update(outputs)
                broken = [name for name, value in outputs.items() if not _finite(value)]
                if broken:
                    return self._float16_overflow(op, values, broken), op
        return True, None

    def _float16_overflow(self, op: Operator, values: Mapping[str, np.ndarray], broken: Sequence[str]) -> bool:
        """Whether ``op``'s non-finite outputs are float16 values its float32 counterpart computes finite."""
        if not any(values[name].dtype == np.float16 for name in broken):
            return False
        if op.type == "cast":  # a finite input cast to float16 overflowed
            return True
        wide = {name: values[name].astype(np.float32) if values[name].dtype == np.float16 else values[name]
                for name in op.input_names()}
        return all(_finite(value) for value in evaluate_op(op, wide).values())


def _within(top: float, bottom: float) -> bool:
    """Whether the largest and smallest values fit float16 (NaN, where every value is one, fits)."""
    return not (top > FLOAT16_MAX or bottom < -FLOAT16_MAX)


def float16_range(ops: Sequence[Operator], infos: Mapping[str, TensorInfo], parameters: Mapping[str, np.ndarray],
                  feed_names: Sequence[str], fetch_names: Sequence[str]) -> Float16Range | None:
    """The checks for a program running ``ops``; None when it holds no float16 value."""
    if not any(info.dtype == DType.float16 for info in infos.values()):
        return None
    index = {name: i for i, name in enumerate(feed_names)}
    narrowings = [Narrowing(index[op.input("X")[0]], op.input("X")[0], f"op #{op.index} {op.describe()}")
                  for op in ops if op.type == "cast" and op.input("X")[0] in index
                  and infos[op.input("X")[0]].dtype in _NARROWED and infos[op.output("Out")[0]].dtype == DType.float16]
    return Float16Range(ops, parameters, narrowings, fetch_names)


def _finite(value: np.ndarray) -> bool:
    """No inf or NaN in a floating array (two reductions, no temporary array)."""
    if value.dtype.kind != "f" or not value.size:
        return True
    return bool(np.isfinite(value.max()) and np.isfinite(value.min()))
