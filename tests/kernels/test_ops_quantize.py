"""Linear quantization (``ir/ops/quantize.py``, its numpy kernels and ONNX converters): per-tensor,
per-axis and blocked QuantizeLinear / DequantizeLinear, DynamicQuantizeLinear, MatMulInteger and
QLinearMatMul against onnx's reference; a zero point of another type than out_dtype refused."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

import halfway
from halfway.executor import Executor
from halfway.frontends.onnx.context import ConversionError
from tests.support.node_model import node_model

RNG = np.random.default_rng(23)


def _halfway(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    prog, names, fetches, scope = halfway.load(model)
    return Executor().run(prog, {n: feeds[n] for n in names}, fetches, scope)


def _run_both(op_type: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], outputs: int = 1,
              opset: int = 21, **attrs: object) -> list[tuple[np.ndarray, np.ndarray]]:
    model = node_model(op_type, feeds, consts, outputs, opset, **attrs)
    return list(zip(_halfway(model, feeds), ReferenceEvaluator(model).run(None, feeds), strict=True))


def _assert_equal(pairs: list[tuple[np.ndarray, np.ndarray]]) -> None:
    for got, want in pairs:
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


CASES = [  # (scale shape, zero point shape, attrs): per tensor, per axis, blocked
    ((), (), {}),
    ((4,), (4,), {"axis": 1}),
    ((2, 4, 2), (2, 4, 2), {"axis": 2, "block_size": 3}),
]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
@pytest.mark.parametrize("scale_shape, zero_shape, attrs", CASES)
def test_quantize_and_dequantize_match_the_reference(dtype, scale_shape, zero_shape, attrs):
    info = np.iinfo(dtype)
    x = (RNG.standard_normal((2, 4, 5)) * 3).astype(np.float32)
    x.reshape(-1)[:4] = [0.5, 1.5, -2.5, 1e6]  # halves round to even; far values saturate
    scale = (RNG.random(scale_shape) * 0.05 + 0.01).astype(np.float32)
    zero = RNG.integers(max(info.min, -20), min(info.max, 20), zero_shape, endpoint=True).astype(dtype)
    _assert_equal(_run_both("QuantizeLinear", {"x": x}, {"scale": scale, "zero": zero}, **attrs))
    q = RNG.integers(info.min, info.max, x.shape, endpoint=True).astype(dtype)
    _assert_equal(_run_both("DequantizeLinear", {"q": q}, {"scale": scale, "zero": zero}, **attrs))


def test_quantize_without_zero_point_gives_uint8_or_output_dtype():
    x = (RNG.standard_normal((3, 4)) * 100).astype(np.float32)
    _assert_equal(_run_both("QuantizeLinear", {"x": x}, {"scale": np.float32(0.5)}))
    _assert_equal(_run_both("QuantizeLinear", {"x": x}, {"scale": np.float32(0.5)},
                            output_dtype=TensorProto.INT16))


@pytest.mark.parametrize("low, high", [(-3.0, 5.0), (0.5, 4.0), (-6.0, -1.0)])
def test_dynamic_quantize_linear_matches_the_reference(low, high):
    x = RNG.uniform(low, high, (4, 6)).astype(np.float32)
    _assert_equal(_run_both("DynamicQuantizeLinear", {"x": x}, {}, outputs=3))


@pytest.mark.parametrize("a_dtype, b_dtype", [(np.uint8, np.uint8), (np.int8, np.int8), (np.uint8, np.int8)])
def test_matmul_integer_with_per_row_and_per_column_zero_points(a_dtype, b_dtype):
    a = RNG.integers(-100, 100, (3, 5)).astype(a_dtype)
    b = RNG.integers(-100, 100, (5, 4)).astype(b_dtype)
    scalars = {"a_zero": np.array(4, a_dtype), "b_zero": np.array(7, b_dtype)}
    _assert_equal(_run_both("MatMulInteger", {"a": a, "b": b}, scalars, opset=10))
    _assert_equal(_run_both("MatMulInteger", {"a": a, "b": b}, {}, opset=10))
    # onnx's reference takes no zero point per row of A: numpy's integer math instead
    rows, columns = RNG.integers(0, 9, (3,)).astype(a_dtype), RNG.integers(0, 9, (4,)).astype(b_dtype)
    model = node_model("MatMulInteger", {"a": a, "b": b}, {"a_zero": rows, "b_zero": columns}, 1, 10)
    (got,) = _halfway(model, {"a": a, "b": b})
    want = (a.astype(np.int32) - rows[:, None]) @ (b.astype(np.int32) - columns)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_matmul_requantizes_like_the_reference(dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, (2, 3, 6), endpoint=True).astype(dtype)
    b = RNG.integers(info.min, info.max, (6, 4), endpoint=True).astype(dtype)
    zero = np.array(3, dtype)
    consts = {"a_scale": np.float32(0.02), "a_zero": zero, "b": b, "b_scale": np.float32(0.03), "b_zero": zero,
              "y_scale": np.float32(0.4), "y_zero": zero}
    pairs = _run_both("QLinearMatMul", {"a": a}, consts, opset=10)
    _assert_equal(pairs)


def test_quantize_refuses_a_zero_point_of_another_type():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    with pytest.raises(ConversionError, match="ZeroPoint is int8, but out_dtype is uint8"):
        _run_both("QuantizeLinear", {"x": x}, {"scale": np.float32(0.1), "zero": np.int8(1)},
                  output_dtype=TensorProto.UINT8)
