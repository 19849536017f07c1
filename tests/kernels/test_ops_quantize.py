"""Linear quantization (``ir/ops/quantize.py``, its numpy kernels and ONNX converters): per-tensor,
per-axis and blocked QuantizeLinear / DequantizeLinear, DynamicQuantizeLinear, MatMulInteger and
QLinearMatMul against onnx's reference, ConvInteger and QLinearConv against ONNX Runtime; a zero point of
another type than out_dtype refused."""

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


def _onnxruntime(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    return onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


CONV_ATTRS = [{"pads": [1, 0, 2, 1], "strides": [2, 1]}, {"group": 2, "dilations": [2, 1]}]


@pytest.mark.parametrize("attrs", CONV_ATTRS)
def test_conv_integer_sums_as_onnxruntime(attrs):
    """uint8 X and W around their zero points (the widest products: 255 * 255), int32 sums."""
    x = RNG.integers(0, 256, (2, 4, 7, 6), dtype=np.uint8)
    x[0, :, :2] = 255
    w = RNG.integers(0, 256, (6, 4 // attrs.get("group", 1), 3, 2), dtype=np.uint8)
    w[:, :, 0] = 0
    model = node_model("ConvInteger", {"x": x}, {"w": w, "xz": np.array(0, np.uint8), "wz": np.array(255, np.uint8)},
                       opset=10, **attrs)
    (got,), (want,) = _halfway(model, {"x": x}), _onnxruntime(model, {"x": x})
    assert got.dtype == want.dtype == np.int32 and np.abs(want).max() > 2**18
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("attrs", CONV_ATTRS)
def test_qlinear_conv_quantizes_as_onnxruntime(attrs):
    """Per-channel weight scales and an int32 bias; ties in the requantization are few enough that
    the results agree exactly."""
    x = RNG.integers(0, 256, (1, 4, 7, 6), dtype=np.uint8)
    channels = 4 // attrs.get("group", 1)
    consts = {"xs": np.array(0.02, np.float32), "xz": np.array(128, np.uint8),
              "w": RNG.integers(-128, 128, (6, channels, 3, 2), dtype=np.int8),
              "ws": RNG.uniform(0.005, 0.02, 6).astype(np.float32), "wz": np.zeros(6, np.int8),
              "ys": np.array(0.05, np.float32), "yz": np.array(100, np.uint8),
              "b": RNG.integers(-2000, 2000, 6, dtype=np.int32)}
    model = node_model("QLinearConv", {"x": x}, consts, opset=10, **attrs)
    (got,), (want,) = _halfway(model, {"x": x}), _onnxruntime(model, {"x": x})
    assert got.dtype == want.dtype == np.uint8 and len(np.unique(want)) > 20
    np.testing.assert_array_equal(got, want)


def test_conv_integer_of_too_many_taps_is_refused():
    model = node_model("ConvInteger", {"x": np.zeros((1, 32, 5, 5), np.uint8)}, {"w": np.zeros((2, 32, 3, 3), np.int8)},
                       opset=10)
    with pytest.raises(ConversionError, match=r"sums 288 products an output, more than the 258"):
        halfway.load(model)
