"""float16 conversion of parameter values: bit-exact with numpy's cast, and what it loses counted."""

import numpy as np
import pytest

from halfway.passes.float16 import values as float16_values
from halfway.passes.float16.values import Losses, to_float16


def _numpy_float16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float16)


def _assert_same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal bits, except that NaN payloads may differ (NaN stays NaN)."""
    assert got.dtype == np.float16 and got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    differ = np.flatnonzero(got.view(np.uint16)[~nan] != want.view(np.uint16)[~nan])
    assert differ.size == 0, list(zip(got[~nan][differ[:5]].tolist(), want[~nan][differ[:5]].tolist()))


def _rounding_edges() -> np.ndarray:
    """Every finite float16, the midpoints between neighbours (ties), one float32 step either
    side of them, and the same negated: where rounding to nearest even can go wrong."""
    every = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    mids = (every[:-1] + every[1:]) / 2  # exact: 12 significant bits
    beyond = np.float32(65504 + 8)  # the tie between 65504 and the next step, which is infinity
    edges = np.concatenate([every, mids, [beyond]])
    edges = np.concatenate([edges, np.nextafter(edges, np.float32(np.inf)), np.nextafter(edges, np.float32(0))])
    return np.concatenate([edges, -edges])


def test_conversion_is_bit_exact_with_numpy_at_every_rounding_edge():
    edges = _rounding_edges()
    ((got, _),) = to_float16([edges])
    _assert_same_bits(got, _numpy_float16(edges))


def test_conversion_is_bit_exact_with_numpy_on_any_bits():
    rng = np.random.default_rng(0)
    any_bits = rng.integers(0, 2**32, 1_000_000, dtype=np.uint32).view(np.float32)
    scaled = rng.standard_normal(1_000_000).astype(np.float32) * np.float32(10) ** rng.uniform(-12, 7, 1_000_000)
    specials = np.array([0, -0.0, np.inf, -np.inf, np.nan, -np.nan, np.finfo(np.float32).max,
                         np.finfo(np.float32).tiny, 2.0**-149, 2.0**-25, 2.0**-24, 2.0**-14, 65504, 65519.996, 65520],
                        np.float32)
    for values in (any_bits, scaled.astype(np.float32), specials):
        ((got, _),) = to_float16([values])
        _assert_same_bits(got, _numpy_float16(values))


def _expected_losses(x: np.ndarray) -> Losses:
    half = _numpy_float16(x)
    subnormal = (half != 0) & (np.abs(half) < np.float16(2.0**-14))
    return Losses(to_infinity=int(np.count_nonzero(np.isfinite(x) & np.isinf(half))),
                  to_zero=int(np.count_nonzero((x != 0) & (half == 0))),
                  to_subnormal=int(np.count_nonzero(subnormal)))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_arrays_across_chunks_and_threads(monkeypatch, threads):
    monkeypatch.setattr(float16_values, "CHUNK", 1000)
    monkeypatch.setattr(float16_values, "_threads", lambda: threads)
    rng = np.random.default_rng(threads)
    shapes = [(0,), (1,), (999,), (1000,), (7, 11, 13), (3001,), (2, 2500)]
    values = [(rng.standard_normal(s) * np.float32(10) ** rng.uniform(-9, 3, s)).astype(np.float32) for s in shapes]
    values[2][:3] = [7e4, 0, 1e-9]  # packed with other small arrays
    values[-1][0, :5] = [0, 1e5, -7e4, np.inf, 1e-9]  # converted in chunks of its own
    results = to_float16(values)
    assert len(results) == len(values)
    for x, (half, losses) in zip(values, results):
        _assert_same_bits(half, _numpy_float16(x))
        assert losses == _expected_losses(x)
    assert results[2][1].to_infinity == 1 and results[-1][1].to_infinity == 2
    assert results[2][1].to_zero >= 1 and results[-1][1].to_zero >= 1


def test_input_of_any_layout_and_float_width_is_read_as_float32():
    x = np.random.default_rng(3).standard_normal((6, 5)).astype(np.float32)
    ((strided, _), (wide, _)) = to_float16([x.T, x.astype(np.float64)])
    _assert_same_bits(strided, _numpy_float16(x.T))
    _assert_same_bits(wide, _numpy_float16(x))
