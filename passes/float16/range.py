"""Range safety of a float16 transpile: what would overflow, what would flush to zero.

float16 holds magnitudes up to 65504; below 2**-14 it keeps fewer bits (subnormals) and below
2**-25 it rounds to zero. Three checks keep the float16 program finite where the float32 one is:

* a float32 parameter with a value float16 cannot hold (it would round to infinity: 65520 and
  up) is *pinned*: every op reading it stays float32, unless it is a *mask constant*;
* a mask constant is a parameter whose values beyond float16's range are all at least
  ``MASK_MAGNITUDE`` (2**24) in magnitude: there float32 cannot count by ones, so a model uses
  such a value only as "infinity" (``torch.finfo.min`` or ``-1e9`` filling masked attention
  scores). Its float16 copy holds half of ``limit`` (16376 by default) in their place, not
  -65504 or infinity: a score plus one or two masks stays within ``limit``, so a fully masked
  row keeps float32's uniform softmax instead of becoming NaN (-inf minus -inf), and
  calibration (run with the held values) pins nothing for it, while ``exp(-16376)`` is as zero
  as ``exp(-3.4e38)``;
* with calibration feeds, the float32 program runs once and every var whose max |value| exceeds
  ``limit`` is pinned (its writer and its readers stay float32), and so is every op whose
  float32-accumulated sum may exceed ``limit``: for convolutions and matrix products with a
  parameter weight, max |input| times the largest sum of |weight| one output adds up;
* parameters that are converted count their values that become subnormal or zero.

The first and the last are counted while the parameters are converted (``values``).

Calibration runs the float32 program on the reference evaluator (``halfway.ir.evaluate``),
which records every var's range as it is computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import numpy as np

from ...ir.block import Block
from ...ir.errors import HalfwayError, PassError
from ...ir.evaluate import evaluate
from ...ir.operator import Operator
from ...ir.program import Program
from ...ir.scope import Scope
from .lists import FLOAT16_MAX
from .policy import float_var
from .values import Losses

__all__ = ["MASK_MAGNITUDE", "clamp_mask_constants", "parameter_pins", "calibrate", "calibration_pins",
           "ACCUMULATING"]

MASK_MAGNITUDE = float(2 ** 24)
"""From this magnitude on, float32 values are spaced more than 1 apart: a parameter value beyond
float16's range and at least this large stands for infinity (a mask fill)."""

ACCUMULATING: Mapping[str, tuple[str, str]] = {
    "conv2d": ("Input", "Filter"),
    "depthwise_conv2d": ("Input", "Filter"),
    "fused_conv2d": ("Input", "Filter"),
    "fused_conv2d_pool": ("Input", "Filter"),
    "conv2d_transpose": ("Input", "Filter"),
    "conv3d": ("Input", "Filter"),
    "conv3d_transpose": ("Input", "Filter"),
    "matmul_v2": ("X", "Y"),
    "mul": ("X", "Y"),
    "fc": ("Input", "W"),
}
"""Op type -> (data slot, weight slot) of the ops whose accumulation is bounded by weight sums."""


def _max_abs(value: np.ndarray) -> float:
    finite = np.abs(value[np.isfinite(value)]) if value.size else value
    return float(finite.max()) if finite.size else 0.0


def clamp_mask_constants(scope: Scope, float16_copies: Mapping[str, tuple[np.ndarray, Losses]],
                         limit: float) -> tuple[dict[str, tuple[np.ndarray, Losses]], dict[str, int]]:
    """The float16 copies with the mask constants' huge values held at +-``limit / 2`` (see the
    module docstring), and how many values each clamped parameter had clamped."""
    copies, clamped = dict(float16_copies), {}
    for name, (_, losses) in float16_copies.items():
        if not losses.to_infinity:
            continue
        value = scope.get(name)
        huge = np.isfinite(value) & (np.abs(value) > FLOAT16_MAX)
        if np.abs(value[huge]).min() < MASK_MAGNITUDE:
            continue
        copy = np.where(huge, np.clip(value, -limit / 2, limit / 2), value).astype(np.float16)
        copies[name] = (copy, attrs.evolve(losses, to_infinity=0))
        clamped[name] = int(np.count_nonzero(huge))
    return copies, clamped


def parameter_pins(scope: Scope, float16_copies: Mapping[str, tuple[np.ndarray, Losses]]
                   ) -> tuple[dict[str, str], dict[str, int]]:
    """Pins for the float32 parameters whose float16 copies turned finite values infinite, and
    how many such values each holds."""
    pins, counts = {}, {}
    for name, (_, losses) in float16_copies.items():
        if losses.to_infinity:
            pins[name] = (f"parameter {name!r} holds {losses.to_infinity} values beyond float16's range "
                          f"(max |x| = {_max_abs(scope.get(name)):.4g})")
            counts[name] = losses.to_infinity
    return pins, counts


def calibrate(program: Program, scope: Scope, feeds: Sequence[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """Run ``program`` on each feed and return the max finite |value| of every floating var."""
    block = program.global_block()
    ranges: dict[str, float] = {}

    def record(name: str, value: np.ndarray) -> None:
        if np.issubdtype(value.dtype, np.floating) and float_var(block, name) is not None:
            ranges[name] = max(ranges.get(name, 0.0), _max_abs(value))

    for i, feed in enumerate(feeds):
        try:
            evaluate(program, feed, [], scope, observe=record)
        except HalfwayError as e:
            raise PassError(f"pass 'float16': running the float32 program on calibration feed #{i} failed: "
                            f"{e}") from e
        for name, value in feed.items():
            record(name, np.asarray(value))
    return ranges


def calibration_pins(block: Block, scope: Scope, ranges: Mapping[str, float],
                     limit: float) -> tuple[dict[str, str], dict[int, str]]:
    """(pinned vars, pinned op indices) for the measured ``ranges`` (see the module docstring)."""
    pinned_vars = {name: f"{name!r} reaches max |x| = {value:.4g} on the calibration feeds (limit {limit:.6g})"
                   for name, value in ranges.items() if value > limit and block.has_var(name)}
    pinned_ops = {}
    for index, op in enumerate(block.ops):
        bound = _accumulation_bound(op, scope, ranges)
        if bound is not None and bound > limit:
            pinned_ops[index] = (f"its float32 sums may reach {bound:.4g} on the calibration feeds "
                                 f"(limit {limit:.6g})")
    return pinned_vars, pinned_ops


def _accumulation_bound(op: Operator, scope: Scope, ranges: Mapping[str, float]) -> float | None:
    if op.type not in ACCUMULATING:
        return None
    data_slot, weight_slot = ACCUMULATING[op.type]
    data, weight = op.input(data_slot), op.input(weight_slot)
    value = scope.find(weight[0]) if weight else None
    if not data or data[0] not in ranges or value is None or not np.issubdtype(value.dtype, np.floating):
        return None
    return ranges[data[0]] * _largest_weight_sum(op, np.abs(value.astype(np.float64)))


def _largest_weight_sum(op: Operator, weight: np.ndarray) -> float:
    """The largest sum of |weight| that one output element accumulates."""
    if op.type in ("conv2d_transpose", "conv3d_transpose"):
        return float(weight.sum(axis=(0, *range(2, weight.ndim))).max()) if weight.ndim > 2 else float(weight.sum())
    if op.type in ("conv2d", "depthwise_conv2d", "fused_conv2d", "fused_conv2d_pool", "conv3d"):
        return float(weight.reshape(weight.shape[0], -1).sum(axis=1).max())
    if op.type == "matmul_v2":
        axis = -1 if op.attr("trans_y", False) else -2
        return float(weight.sum(axis=axis if weight.ndim > 1 else 0).max())
    if op.type == "mul":
        cols = op.attr("y_num_col_dims", 1)
        rows = int(np.prod(weight.shape[:cols]))
        return float(weight.reshape(rows, -1).sum(axis=0).max())
    return float(weight.sum(axis=0).max())
