"""swiglu (``ir/ops/gated.py`` and its numpy kernel) against numpy: float32 through the compiled
silu loop and without it, float16 widened, and the shape check; fc's gated epilogue the same over
the halves of its product."""

from __future__ import annotations

import numpy as np
import pytest

import halfway
from halfway.kernels.numpy import jit
from tests.support.oprun import float16_tolerance, run_op

RNG = np.random.default_rng(11)


def _want(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    wide = gate.astype(np.float64)
    return wide / (1 + np.exp(-wide)) * up.astype(np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("compiled", [True, False])
def test_swiglu_is_silu_of_x_times_y(dtype, compiled, monkeypatch):
    if not compiled:
        monkeypatch.setattr(jit, "JIT", False)
    gate, up = (RNG.standard_normal((2, 5, 33)) * 6).astype(dtype), RNG.standard_normal((2, 5, 33)).astype(dtype)
    ran = run_op("swiglu", {"X": gate, "Y": up})
    assert ran.out.dtype == dtype and ran.out.shape == gate.shape
    tol = 2 * float16_tolerance() if dtype is np.float16 else 1e-6
    np.testing.assert_allclose(ran.out.astype(np.float64), _want(gate, up), rtol=tol, atol=tol)


def test_swiglu_needs_operands_of_one_shape():
    with pytest.raises(halfway.HalfwayError, match="must have X's shape"):
        run_op("swiglu", {"X": RNG.standard_normal((2, 4)).astype(np.float32),
                          "Y": RNG.standard_normal((4,)).astype(np.float32)})


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("bias", [True, False])
def test_a_gated_fc_is_swiglu_of_its_products_halves(dtype, bias):
    x, w = RNG.standard_normal((2, 3, 16)).astype(dtype), RNG.standard_normal((16, 10)).astype(dtype)
    inputs = {"Input": x, "W": w, **({"Bias": RNG.standard_normal(10).astype(dtype)} if bias else {})}
    ran = run_op("fc", inputs, {"in_num_col_dims": 2, "activation_type": "swiglu"}, params=("W", "Bias"))
    product = x.astype(np.float64) @ w + (inputs["Bias"] if bias else 0)
    assert ran.out.dtype == dtype and ran.out.shape == (2, 3, 5)
    tol = 4 * float16_tolerance() if dtype is np.float16 else 1e-5
    np.testing.assert_allclose(ran.out.astype(np.float64), _want(product[..., :5], product[..., 5:]), rtol=tol,
                               atol=tol)


def test_a_gated_fc_needs_an_even_width():
    with pytest.raises(halfway.HalfwayError, match="needs W of an even number of columns"):
        run_op("fc", {"Input": RNG.standard_normal((2, 4)).astype(np.float32),
                      "W": RNG.standard_normal((4, 7)).astype(np.float32)}, {"activation_type": "swiglu"})
