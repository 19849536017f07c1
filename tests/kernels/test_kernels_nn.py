"""numpy kernels of the nn ops against independent references: float64 numpy formulas written
here (kernel taps summed with einsum, pooling windows walked from Paddle's definition, ...) and,
where the semantics match, onnx.reference's Conv, ConvTranspose, MaxPool, AveragePool,
BatchNormalization, LRN, Pad, Softmax, MatMul and Gemm. Every op runs through the executor in
float32 and in float16 (float16 inputs, a float64 reference from the same inputs, the
tolerance of ``float16_tolerance`` over the op's reduction length)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from halfway.ir.dtypes import DType
from halfway.ir.errors import SchemaError
from halfway.ir.schema import TensorInfo
from halfway.kernels.numpy import conv as conv_kernels
from halfway.kernels.numpy.conv import make_epilogue
from halfway.kernels.registry import KernelSpec, find_kernel
from tests.support.oprun import float16_tolerance, run_op

RNG = np.random.default_rng(11)
FLOATS = [np.float32, np.float16]


# -- helpers --------------------------------------------------------------------------------------
def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def run(op_type: str, inputs: dict, attrs: dict | None = None, outputs: dict | None = None) -> dict:
    """Outputs {slot: array} of one ``op_type`` op whose inputs are parameters, run by the kernel
    of its first input's dtype."""
    ran = run_op(op_type, inputs, attrs, params="all", outputs=outputs)
    assert ran.kernel_dtypes == [DType.from_any(next(iter(inputs.values())).dtype)]
    return {slot: values[0] for slot, values in ran.outputs.items()}


def tolerance(dtype, n: int) -> float:
    """Relative tolerance of a kernel output against a float64 reference, ``n`` the reduction
    length: float16 storage gets ``float16_tolerance``, float32 a few roundings plus one per
    accumulated element."""
    eps32 = float(np.finfo(np.float32).eps)
    return float16_tolerance(n) if dtype == np.float16 else 16 * eps32 + n * eps32


def check(actual: np.ndarray, expected: np.ndarray, n: int = 1, dtype=None) -> None:
    """``actual`` matches the float64 ``expected``: relative tolerance for the op's reduction
    length, absolute tolerance that times the reference's magnitude."""
    dtype = dtype or actual.dtype
    assert actual.dtype == dtype
    rtol = tolerance(dtype, n)
    scale = float(np.max(np.abs(expected))) if expected.size else 1.0
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=rtol, atol=rtol * max(scale, 1e-30))


def onnx_run(op_type: str, inputs: dict[str, np.ndarray], attrs: dict | None = None, opset: int = 19,
             n_outputs: int = 1) -> list[np.ndarray]:
    """Run one ONNX node through onnx.reference on float64 copies of ``inputs``."""
    feeds = {name: v.astype(np.float64) if v.dtype.kind == "f" else v for name, v in inputs.items()}
    kinds = {np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.int64): TensorProto.INT64}
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, list(feeds), outs, **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, kinds[v.dtype], v.shape) for n, v in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.DOUBLE, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, feeds)


def paddle_pads(attrs: dict, sizes, kernel, strides, dilations) -> list[tuple[int, int]]:
    """(before, after) per spatial dim, from Paddle's padding rules written out here."""
    algo = attrs.get("padding_algorithm", "EXPLICIT")
    if algo == "VALID":
        return [(0, 0), (0, 0)]
    if algo == "SAME":
        totals = [max((-(-n // s) - 1) * s + k - n, 0) for n, k, s in zip(sizes, kernel, strides)]
        return [(t // 2, t - t // 2) for t in totals]
    p = list(attrs.get("paddings", [0, 0]))
    return [(p[0], p[0]), (p[1], p[1])] if len(p) == 2 else [(p[0], p[1]), (p[2], p[3])]


# -- conv2d, depthwise_conv2d, fused_conv2d ---------------------------------------------------------
def ref_conv(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    """float64 convolution: for each kernel tap, the strided window of the padded input times
    that tap's weights, contracted over each group's channels with einsum."""
    nhwc = attrs.get("data_format") == "NHWC"
    x = (x.transpose(0, 3, 1, 2) if nhwc else x).astype(np.float64)
    w = w.astype(np.float64)
    strides, groups = attrs.get("strides", [1, 1]), attrs.get("groups", 1)
    same = attrs.get("padding_algorithm") == "SAME"
    dil = [1, 1] if same else attrs.get("dilations", [1, 1])
    kh, kw = w.shape[2:]
    pads = paddle_pads(attrs, x.shape[2:], (kh, kw), strides, dil)
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    n, c = x.shape[:2]
    o = w.shape[0]
    oh = (xp.shape[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (xp.shape[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, groups, o // groups, oh, ow))
    wg = w.reshape(groups, o // groups, c // groups, kh, kw)
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dil[0], i * dil[0] + (oh - 1) * strides[0] + 1, strides[0])
            cols = slice(j * dil[1], j * dil[1] + (ow - 1) * strides[1] + 1, strides[1])
            window = xp[:, :, rows, cols].reshape(n, groups, c // groups, oh, ow)
            out += np.einsum("ngchw,goc->ngohw", window, wg[:, :, :, i, j])
    out = out.reshape(n, o, oh, ow)
    return out.transpose(0, 2, 3, 1) if nhwc else out


def onnx_conv(x: np.ndarray, w: np.ndarray, attrs: dict) -> np.ndarray:
    strides = attrs.get("strides", [1, 1])
    pads = paddle_pads(attrs, x.shape[2:], w.shape[2:], strides, attrs.get("dilations", [1, 1]))
    return onnx_run("Conv", {"X": x, "W": w}, {
        "strides": strides, "dilations": attrs.get("dilations", [1, 1]), "group": attrs.get("groups", 1),
        "pads": [pads[0][0], pads[1][0], pads[0][1], pads[1][1]]})[0]


def to_layout(x: np.ndarray, attrs: dict) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if attrs.get("data_format") == "NHWC" else x


CONV_CASES = [
    ((2, 3, 9, 7), (4, 3, 3, 3), {"paddings": [1, 1]}),
    ((1, 3, 13, 10), (5, 3, 7, 7), {"strides": [2, 2], "paddings": [3, 3]}),
    ((2, 4, 10, 9), (6, 2, 3, 2), {"strides": [2, 1], "dilations": [2, 1], "paddings": [1, 2, 0, 1], "groups": 2}),
    ((1, 3, 11, 12), (4, 3, 5, 3), {"strides": [3, 2], "dilations": [2, 2], "paddings": [2, 1, 3, 0]}),
    ((2, 8, 6, 5), (4, 8, 1, 1), {"strides": [2, 2]}),
    ((1, 8, 6, 5), (8, 2, 1, 1), {"groups": 4}),
    ((1, 6, 7, 9), (4, 6, 1, 1), {"paddings": [1, 0]}),
    ((1, 5, 8, 11), (3, 5, 3, 3), {"strides": [2, 2], "padding_algorithm": "SAME"}),
    ((1, 5, 8, 11), (3, 5, 3, 2), {"strides": [2, 1], "padding_algorithm": "VALID"}),
    ((1, 4, 9, 9), (6, 4, 2, 2), {"strides": [2, 2], "paddings": [0, 1, 1, 0], "data_format": "AnyLayout"}),
    ((2, 4, 7, 6), (8, 1, 3, 3), {"groups": 4, "paddings": [1, 1]}),  # conv2d taking the depthwise path
    ((2, 3, 5, 40), (4, 3, 3, 3), {"paddings": [1, 1]}),  # wide rows: the shifted path in NCHW
    ((1, 4, 6, 48), (5, 4, 3, 2), {"dilations": [2, 3], "paddings": [2, 0, 1, 3]}),
    ((2, 8, 5, 40), (2, 8, 3, 3), {"paddings": [1, 1]}),  # few output channels: the tap sum in NCHW
    ((1, 8, 5, 6), (2, 8, 1, 1), {"paddings": [1, 1]}),  # the tap sum of a single (padded 1x1) tap
    ((2, 3, 9, 64), (4, 3, 3, 3), {"strides": [2, 2], "paddings": [1, 1]}),  # strided on wide rows
    ((1, 4, 10, 61), (5, 4, 4, 3), {"strides": [3, 2], "dilations": [1, 2], "paddings": [2, 0, 1, 3]}),
    ((1, 3, 8, 45), (2, 3, 5, 5), {"strides": [2, 3], "dilations": [2, 1], "padding_algorithm": "SAME"}),
]
DEPTHWISE_CASES = [
    ((1, 6, 8, 8), (6, 1, 3, 3), {"paddings": [1, 1], "groups": 6}),
    ((2, 4, 9, 10), (8, 1, 3, 3), {"strides": [2, 2], "dilations": [1, 2], "paddings": [1, 1], "groups": 4}),
    ((1, 3, 11, 7), (3, 1, 5, 3), {"strides": [1, 3], "paddings": [2, 0, 0, 1], "groups": 3}),
    ((1, 5, 7, 6), (5, 1, 3, 3), {"groups": 5, "padding_algorithm": "SAME", "strides": [2, 2]}),
    ((2, 3, 6, 9), (6, 1, 3, 2), {"groups": 3, "dilations": [2, 3], "paddings": [2, 1, 0, 3]}),  # stride 1
    ((1, 4, 5, 5), (4, 1, 5, 5), {"groups": 4, "padding_algorithm": "VALID"}),
]


def conv_case_id(case) -> str:
    x, w, attrs = case
    return f"{'x'.join(map(str, x))}-k{w[2]}x{w[3]}-" + "-".join(f"{k}{v}" for k, v in attrs.items())


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("op_type,case", [("conv2d", c) for c in CONV_CASES] +
                         [("depthwise_conv2d", c) for c in DEPTHWISE_CASES],
                         ids=lambda v: v if isinstance(v, str) else conv_case_id(v))
def test_conv_matches_references(op_type, case, layout, dtype):
    x_shape, w_shape, attrs = case
    if layout == "NHWC" and attrs.get("data_format"):
        pytest.skip("the case fixes its layout")
    attrs = {**attrs, "data_format": attrs.get("data_format", layout)}
    x, w = rand(*x_shape, dtype=dtype), rand(*w_shape, dtype=dtype)
    out = run(op_type, {"Input": to_layout(x, attrs), "Filter": w}, attrs)["Output"]
    n = w_shape[1] * w_shape[2] * w_shape[3]
    check(out, ref_conv(to_layout(x, attrs), w, attrs), n, dtype)
    if layout == "NCHW" and attrs.get("padding_algorithm") != "SAME":
        check(out, onnx_conv(x, w, attrs), n, dtype)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("path,attrs,x_shape,w_shape", [
    ("_im2col", {"strides": [2, 1], "paddings": [1, 2, 2, 0], "groups": 2}, (2, 4, 9, 7), (6, 2, 3, 3)),
    ("_shifted", {"paddings": [1, 0, 1, 1], "dilations": [2, 1]}, (2, 3, 7, 30), (4, 3, 3, 3)),
    ("_tap_sum", {"paddings": [1, 0, 1, 1], "dilations": [2, 1]}, (2, 9, 7, 30), (2, 9, 3, 3)),
])
def test_conv_in_several_chunks(monkeypatch, layout, path, attrs, x_shape, w_shape):
    """A tiny chunk budget makes every output row its own gather + GEMM."""
    monkeypatch.setattr(conv_kernels, "CHUNK_BYTES", 1)
    attrs = {**attrs, "data_format": layout}
    x, w = rand(*x_shape), rand(*w_shape)
    out = run("conv2d", {"Input": to_layout(x, attrs), "Filter": w}, attrs)["Output"]
    check(out, ref_conv(to_layout(x, attrs), w, attrs), 18)
    taken = conv_kernels._conv_runner(conv_kernels.ConvGeometry(
        x_shape[0], x_shape[1], x_shape[2], x_shape[3], w_shape[0], attrs.get("groups", 1), tuple(w_shape[2:]),
        tuple(attrs.get("strides", [1, 1])), tuple(attrs.get("dilations", [1, 1])),
        ((attrs["paddings"][0], attrs["paddings"][1]), (attrs["paddings"][2], attrs["paddings"][3])),
        tuple(out.shape[1:3] if layout == "NHWC" else out.shape[2:]), layout == "NHWC"))
    assert taken.__qualname__.startswith(path if layout == "NCHW" else "_im2col")


WINOGRAD_CASES = [
    ((2, 3, 9, 7), (4, 3, 3, 3), {"paddings": [1, 1]}),
    ((1, 5, 8, 11), (3, 5, 3, 3), {"padding_algorithm": "SAME"}),
    ((1, 4, 7, 10), (6, 4, 3, 3), {"paddings": [0, 2, 1, 0]}),  # odd output rows, asymmetric padding
    ((2, 3, 5, 40), (4, 3, 3, 3), {"paddings": [1, 1]}),
    ((1, 2, 6, 6), (2, 2, 3, 3), {"padding_algorithm": "VALID"}),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("case", WINOGRAD_CASES, ids=conv_case_id)
def test_winograd_matches_the_reference(monkeypatch, winograd_calls, case, dtype):
    """Every 3x3 stride-1 convolution with a constant filter taken by Winograd, whatever its size."""
    monkeypatch.setattr(conv_kernels, "WINOGRAD_MIN_CHANNELS", ((1 << 20, 1),))
    x_shape, w_shape, attrs = case
    attrs = {**attrs, "data_format": "NCHW"}
    x, w = rand(*x_shape, dtype=dtype), rand(*w_shape, dtype=dtype)
    out = run("conv2d", {"Input": x, "Filter": w}, attrs)["Output"]
    assert winograd_calls
    check(out, ref_conv(x, w, attrs), 9 * w_shape[1], dtype)


@pytest.fixture
def winograd_calls(monkeypatch) -> list:
    """The geometries the Winograd path is built for while the test runs."""
    calls, real = [], conv_kernels._winograd
    monkeypatch.setattr(conv_kernels, "_winograd", lambda g, w: calls.append(g) or real(g, w))
    return calls


def test_winograd_on_the_layers_it_is_chosen_for(winograd_calls):
    x, w = rand(2, 160, 15, 16), rand(170, 160, 3, 3)
    attrs = {"paddings": [1, 1], "data_format": "NCHW"}
    out = run("conv2d", {"Input": x, "Filter": w}, attrs)["Output"]
    assert len(winograd_calls) == 1
    check(out, ref_conv(x, w, attrs), 9 * 160)
    check(out, onnx_conv(x, w, attrs), 9 * 160)
    run("conv2d", {"Input": rand(1, 160, 30, 30), "Filter": w}, attrs)  # 30x30 outputs need 256 channels
    run("conv2d", {"Input": x, "Filter": w[:128]}, attrs)  # 128 output channels: the shifted GEMM
    run("conv2d", {"Input": x[:, :, :7, :7], "Filter": rand(900, 160, 3, 3)}, attrs)  # 7x7, a filter out of cache
    run("conv2d", {"Input": x[:, :, :7, :7], "Filter": w}, attrs)  # 7x7, a filter in cache: Winograd
    assert len(winograd_calls) == 2


def test_winograd_needs_a_constant_filter(winograd_calls):
    """A fed filter would be transformed on every run: such convolutions take the GEMM."""
    x, w = rand(1, 160, 14, 14), rand(160, 160, 3, 3)
    out = run_op("conv2d", {"Input": x, "Filter": w}, {"paddings": [1, 1]})["Output"][0]
    assert not winograd_calls
    check(out, ref_conv(x, w, {"paddings": [1, 1], "data_format": "NCHW"}), 9 * 160)
    run_op("conv2d", {"Input": x, "Filter": w}, {"paddings": [1, 1]}, params=["Filter"])
    assert len(winograd_calls) == 1


@pytest.mark.parametrize("strides", [[2, 1], [1, 1]])
def test_depthwise_in_several_channel_blocks(monkeypatch, strides):
    """A tiny chunk budget makes every channel its own im2col block + batched GEMM."""
    monkeypatch.setattr(conv_kernels, "CHUNK_BYTES", 1)
    attrs = {"groups": 3, "strides": strides, "dilations": [1, 2], "paddings": [1, 0, 2, 1]}
    x, w = rand(2, 3, 9, 8), rand(6, 1, 3, 3)
    out = run("depthwise_conv2d", {"Input": x, "Filter": w}, attrs)["Output"]
    check(out, ref_conv(x, w, {**attrs, "data_format": "NCHW"}), 9)
    check(out, onnx_conv(x, w, attrs), 9)


def ref_activation(y: np.ndarray, act: str, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    sigmoid = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    return {
        "": lambda: y,
        "relu": lambda: np.where(y > 0, y, alpha * y),
        "leaky_relu": lambda: np.where(y > 0, y, alpha * y),
        "relu6": lambda: np.minimum(np.maximum(y, 0), beta or alpha or 6.0),
        "sigmoid": lambda: sigmoid(y),
        "swish": lambda: y * sigmoid((alpha or 1.0) * y),
        "hard_swish": lambda: y * np.minimum(np.maximum((alpha or 1 / 6) * y + (beta or 0.5), 0), 1),
    }[act]()


FUSED_ACTS = [("", 0.0, 0.0), ("relu", 0.0, 0.0), ("leaky_relu", 0.2, 0.0), ("relu6", 0.0, 0.0),
              ("relu6", 0.0, 2.5), ("relu6", 1.5, 0.0), ("sigmoid", 0.0, 0.0), ("swish", 0.0, 0.0),
              ("swish", 0.7, 0.0), ("hard_swish", 0.0, 0.0), ("hard_swish", 0.25, 0.4)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("act,alpha,beta", FUSED_ACTS)
def test_fused_conv2d_epilogue(act, alpha, beta, dtype):
    attrs = {"strides": [2, 1], "paddings": [1, 2, 0, 1], "fuse_activation": act, "fuse_alpha": alpha,
             "fuse_beta": beta}
    x, w, b = rand(2, 3, 8, 6, dtype=dtype), rand(5, 3, 3, 3, dtype=dtype), rand(5, dtype=dtype)
    base = ref_conv(x, w, attrs)
    residual = rand(*base.shape, dtype=dtype)
    expected = ref_activation(base + b.reshape(1, -1, 1, 1) + residual, act, alpha, beta)
    out = run("fused_conv2d", {"Input": x, "Filter": w, "Bias": b, "ResidualData": residual}, attrs)["Output"]
    check(out, expected, 27 + 2, dtype)


@pytest.mark.parametrize("op_type", ["conv2d", "depthwise_conv2d", "fused_conv2d"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv_adds_residual_and_bias_in_either_layout(op_type, layout):
    attrs = {"paddings": [1, 1], "groups": 4 if op_type == "depthwise_conv2d" else 1, "data_format": layout}
    x, w = rand(1, 4, 6, 5), rand(4, 1 if op_type == "depthwise_conv2d" else 4, 3, 3)
    base = ref_conv(to_layout(x, attrs), w, attrs)
    residual = rand(*base.shape)
    inputs = {"Input": to_layout(x, attrs), "Filter": w}
    expected = base + residual
    if op_type == "fused_conv2d":
        inputs["Bias"] = b = rand(4)
        expected = expected + (b if layout == "NHWC" else b.reshape(-1, 1, 1))
    out = run(op_type, {**inputs, "ResidualData": residual}, attrs)["Output"]
    check(out, expected, 40)


def test_epilogue_runs_in_place_on_the_callers_buffer():
    out = rand(2, 3, 4, 4)
    expected = np.clip(out + np.arange(3).reshape(3, 1, 1), 0, 6)
    epilogue = make_epilogue((3, 1, 1), "relu6")
    assert epilogue(out, np.arange(3, dtype=np.float32)) is out
    check(out, expected)
    source = rand(2, 3, 4, 4).transpose(0, 1, 3, 2)
    into = np.empty((2, 3, 4, 4), np.float32)
    assert epilogue(into, None, None, source=source) is into
    check(into, np.clip(source, 0, 6).astype(np.float64))


def test_unknown_fused_activation_is_rejected():
    with pytest.raises(SchemaError, match="unknown fused activation .softplus."):
        make_epilogue((1,), "softplus")


# -- conv2d_transpose ------------------------------------------------------------------------------
def ref_conv_transpose(x: np.ndarray, w: np.ndarray, attrs: dict, out_hw) -> np.ndarray:
    """float64 transposed conv from its definition: input (h, w) and tap (i, j) add to output
    (h*s + i*d - pad, w*s + j*d - pad), written as one 0/1 placement matrix per tap and axis."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    s, d, groups = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]), attrs.get("groups", 1)
    p = attrs.get("paddings", [0, 0])
    before = (p[0], p[1]) if len(p) == 2 else (p[0], p[2])
    n, c, h, wd = x.shape
    og, kh, kw = w.shape[1:]
    out = np.zeros((n, groups, og, *out_hw))
    xg, wg = x.reshape(n, groups, c // groups, h, wd), w.reshape(groups, c // groups, og, kh, kw)
    for i in range(kh):
        for j in range(kw):
            rows = (np.arange(out_hw[0])[:, None] == np.arange(h) * s[0] + i * d[0] - before[0]).astype(float)
            cols = (np.arange(out_hw[1])[:, None] == np.arange(wd) * s[1] + j * d[1] - before[1]).astype(float)
            out += np.einsum("yh,xw,ngchw,gco->ngoyx", rows, cols, xg, wg[..., i, j])
    return out.reshape(n, groups * og, *out_hw)


TRANSPOSE_CASES = [
    ((1, 3, 5, 4), (3, 2, 3, 3), {"strides": [2, 2], "paddings": [1, 1]}),
    ((2, 4, 4, 5), (4, 3, 3, 2), {"strides": [2, 1], "paddings": [1, 0, 0, 1], "groups": 2, "dilations": [1, 2]}),
    ((1, 2, 3, 3), (2, 4, 4, 4), {"strides": [3, 2], "output_padding": [1, 1]}),
    ((1, 2, 4, 3), (2, 3, 3, 3), {"strides": [2, 2], "paddings": [1, 1], "output_size": [8, 6]}),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("x_shape,w_shape,attrs", TRANSPOSE_CASES)
def test_conv2d_transpose_matches_references(x_shape, w_shape, attrs, layout, dtype):
    attrs = {**attrs, "data_format": layout}
    x, w, b = rand(*x_shape, dtype=dtype), rand(*w_shape, dtype=dtype), rand(w_shape[1] * attrs.get("groups", 1),
                                                                          dtype=dtype)
    out = run("conv2d_transpose", {"Input": to_layout(x, attrs), "Filter": w, "Bias": b}, attrs)["Output"]
    nchw = out.transpose(0, 3, 1, 2) if layout == "NHWC" else out
    expected = ref_conv_transpose(x, w, attrs, nchw.shape[2:]) + b.reshape(-1, 1, 1)
    n = w_shape[0] * w_shape[2] * w_shape[3] + 1
    check(nchw, expected, n, dtype)
    if layout == "NCHW" and attrs.get("groups", 1) == 1:  # onnx.reference's ConvTranspose has no groups
        p = attrs.get("paddings", [0, 0])
        pads = [p[0], p[1], p[0], p[1]] if len(p) == 2 else [p[0], p[2], p[1], p[3]]
        onnx_attrs = {"strides": attrs["strides"], "dilations": attrs.get("dilations", [1, 1]), "pads": pads,
                      "group": attrs.get("groups", 1), "output_padding": attrs.get("output_padding", [0, 0])}
        if "output_size" in attrs:
            dil = attrs.get("dilations", [1, 1])
            base = [(h - 1) * s - before - after + d * (k - 1) + 1 for h, s, (before, after), d, k in
                    zip(x_shape[2:], attrs["strides"], [(pads[0], pads[2]), (pads[1], pads[3])], dil, w_shape[2:])]
            onnx_attrs["output_padding"] = [size - b for size, b in zip(attrs["output_size"], base)]
        check(nchw, onnx_run("ConvTranspose", {"X": x, "W": w, "B": b}, onnx_attrs)[0], n, dtype)


# -- pool2d ---------------------------------------------------------------------------------------
def ref_pool(x: np.ndarray, attrs: dict) -> np.ndarray:
    """float64 pool2d from Paddle's definition, window by window (vectorised over N and C)."""
    nhwc = attrs.get("data_format") == "NHWC"
    x = (x.transpose(0, 3, 1, 2) if nhwc else x).astype(np.float64)
    h, w = x.shape[2:]
    kind = attrs["pooling_type"]
    if attrs.get("global_pooling"):
        bins = [[(0, h)], [(0, w)]]
        sizes = None
    elif attrs.get("adaptive"):
        bins = [[(i * n // o, -(-(i + 1) * n // o)) for i in range(o)] for n, o in zip((h, w), attrs["ksize"])]
        sizes = None
    else:
        k, s = attrs["ksize"], attrs.get("strides", [1, 1])
        pads = paddle_pads(attrs, (h, w), k, s, (1, 1))
        ceil = attrs.get("ceil_mode", False)
        outs = [(n + b + a - kk + (ss - 1 if ceil else 0)) // ss + 1 for n, (b, a), kk, ss in zip((h, w), pads, k, s)]
        bins = [[(max(i * ss - b, 0), min(i * ss - b + kk, n)) for i in range(o)]
                for n, (b, _), kk, ss, o in zip((h, w), pads, k, s, outs)]
        sizes = k
    out = np.empty(x.shape[:2] + (len(bins[0]), len(bins[1])))
    for i, (r0, r1) in enumerate(bins[0]):
        for j, (c0, c1) in enumerate(bins[1]):
            window = x[:, :, r0:r1, c0:c1]
            if kind == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                exclusive = attrs.get("exclusive", True) or sizes is None
                count = (r1 - r0) * (c1 - c0) if exclusive else sizes[0] * sizes[1]
                out[:, :, i, j] = window.sum(axis=(2, 3)) / count
    return out.transpose(0, 2, 3, 1) if nhwc else out


POOL_CASES = [
    {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
    {"ksize": [2, 3], "strides": [2, 1], "paddings": [0, 1, 1, 0]},
    {"ksize": [3, 2], "strides": [2, 2], "paddings": [1, 0], "ceil_mode": True},
    {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1], "exclusive": False},
    {"ksize": [3, 3], "strides": [2, 2], "paddings": [0, 1], "ceil_mode": True, "exclusive": False},
    {"ksize": [2, 2], "strides": [2, 2], "ceil_mode": True},
    {"ksize": [2, 3], "strides": [2, 2], "ceil_mode": True, "exclusive": False},
    {"ksize": [3, 3], "strides": [2, 3], "padding_algorithm": "SAME"},
    {"ksize": [2, 2], "strides": [2, 2], "padding_algorithm": "VALID"},
    {"ksize": [1, 1], "strides": [2, 2]},
    {"ksize": [3, 3], "strides": [1, 1], "paddings": [1, 1]},
    {"ksize": [2, 2], "strides": [1, 1], "paddings": [1, 1]},  # no tap inside for every output: padded
    {"ksize": [3, 2], "strides": [1, 2], "paddings": [2, 1], "exclusive": False},  # likewise
    {"ksize": [9, 10]},  # one window over the whole input: a global pool
    {"ksize": [5, 5], "global_pooling": True, "paddings": [2, 2]},
    {"ksize": [3, 4], "adaptive": True},
    {"ksize": [4, 3], "adaptive": True},
    {"ksize": [1, 1], "adaptive": True},
    {"ksize": [12, 14], "adaptive": True},  # more bins than pixels (VGG's 7x7 of a smaller map)
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()))
def test_pool2d_matches_paddle_definition(case, kind, layout, dtype):
    attrs = {**case, "pooling_type": kind, "data_format": layout}
    x = rand(2, 3, 9, 10, dtype=dtype)
    out = run("pool2d", {"X": to_layout(x, attrs)}, attrs)["Out"]
    expected = ref_pool(to_layout(x, attrs), attrs)
    check(out, expected, 1 if kind == "max" else 90, dtype)


ONNX_POOL_CASES = [
    ({"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]}, [1, 1, 1, 1]),
    ({"ksize": [2, 3], "strides": [2, 1], "paddings": [0, 1, 1, 0]}, [0, 1, 1, 0]),
    ({"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1], "exclusive": False}, [1, 1, 1, 1]),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case,onnx_pads", ONNX_POOL_CASES)
def test_pool2d_matches_onnx(case, onnx_pads, kind):
    attrs = {**case, "pooling_type": kind}
    x = rand(2, 3, 9, 10)
    out = run("pool2d", {"X": x}, attrs)["Out"]
    onnx_attrs = {"kernel_shape": case["ksize"], "strides": case["strides"], "pads": onnx_pads}
    if kind == "avg":
        onnx_attrs["count_include_pad"] = 0 if case.get("exclusive", True) else 1
    check(out, onnx_run("MaxPool" if kind == "max" else "AveragePool", {"X": x}, onnx_attrs)[0], 9)
    global_out = run("pool2d", {"X": x}, {**attrs, "global_pooling": True})["Out"]
    check(global_out, onnx_run("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", {"X": x})[0], 90)


def test_float16_max_pool_runs_on_float16_exactly():
    x = rand(1, 2, 7, 7, dtype=np.float16)
    out = run("pool2d", {"X": x}, {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1],
                                   "adaptive": False})["Out"]
    np.testing.assert_array_equal(out, ref_pool(x, {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2],
                                                    "paddings": [1, 1]}).astype(np.float16))


# -- batch_norm, lrn ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,layout", [((2, 3, 4, 5), "NCHW"), ((2, 4, 5, 3), "NHWC"), ((4, 3), "NCHW"),
                                          ((2, 3, 7), "NCHW"), ((1, 2, 3, 4, 3), "NHWC")])
def test_batch_norm(shape, layout, dtype):
    c = shape[-1] if layout == "NHWC" else shape[1]
    x = rand(*shape, dtype=dtype)
    scale, bias, mean = rand(c), rand(c), rand(c)
    variance = RNG.uniform(0.5, 2.0, c).astype(np.float32)
    attrs = {"epsilon": 1e-3, "data_layout": layout, "is_test": True}
    outs = run("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": variance}, attrs)
    bshape = (c,) if layout == "NHWC" or len(shape) == 2 else (c,) + (1,) * (len(shape) - 2)
    inv_std = 1 / np.sqrt(variance.astype(np.float64) + 1e-3)
    expected = (x - mean.reshape(bshape)) * (inv_std * scale).reshape(bshape) + bias.reshape(bshape)
    check(outs["Y"], expected, 4, dtype)
    assert np.shares_memory(outs["MeanOut"], mean) and np.shares_memory(outs["VarianceOut"], variance)
    check(outs["SavedVariance"], inv_std, 2)
    if layout == "NCHW" and len(shape) == 4:
        expected_onnx = onnx_run("BatchNormalization", {"X": x, "scale": scale, "B": bias, "mean": mean,
                                                        "var": variance}, {"epsilon": 1e-3}, opset=15)[0]
        check(outs["Y"], expected_onnx, 4, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("n,beta", [(1, 0.75), (3, 0.75), (5, 0.75), (5, 0.5), (3, 0.6)])
def test_lrn(n, beta, layout, dtype):
    """onnx.reference's LRN walks the channels with a loop over dim 0, so N == C here. Betas of
    0.75 and 0.5 take square roots, others np.power."""
    attrs = {"n": n, "k": 1.5, "alpha": 1e-2, "beta": beta, "data_format": layout}
    x = rand(7, 7, 3, 4, dtype=dtype)
    outs = run("lrn", {"X": to_layout(x, attrs)}, attrs)
    wide = x.astype(np.float64)
    squares = np.pad(wide ** 2, [(0, 0), ((n - 1) // 2, n // 2), (0, 0), (0, 0)])
    mid = 1.5 + 1e-2 * sum(squares[:, t:t + 7] for t in range(n))
    check(outs["MidOut"], to_layout(mid, attrs), n + 2, dtype)
    check(outs["Out"], to_layout(wide * mid ** -beta, attrs), n + 4, dtype)
    if layout == "NCHW":
        onnx = onnx_run("LRN", {"X": x}, {"size": n, "alpha": 1e-2 * n, "beta": beta, "bias": 1.5})[0]
        check(outs["Out"], onnx, n + 4, dtype)


# -- pad3d, dropout, softmax -----------------------------------------------------------------------
def ref_index(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """Source index of every padded position along one axis (-1: the constant)."""
    i = np.arange(-before, size + after)
    if mode == "reflect":
        period = 2 * (size - 1)
        i = np.abs(i) % period
        return np.where(i >= size, period - i, i)
    if mode == "replicate":
        return np.clip(i, 0, size - 1)
    if mode == "circular":
        return i % size
    return np.where((i >= 0) & (i < size), i, -1)


@pytest.mark.parametrize("dtype", FLOATS + [np.int32, np.int64])
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_pad3d(mode, layout, dtype):
    paddings = [2, 1, 0, 2, 1, 1]  # left, right, top, bottom, front, back
    x = (RNG.standard_normal((2, 3, 3, 4, 5)) * 10).astype(dtype)
    attrs = {"paddings": paddings, "mode": mode, "value": 1.5, "data_format": layout}
    out = run("pad3d", {"X": x}, attrs)["Out"]
    spatial = (1, 2, 3) if layout == "NDHWC" else (2, 3, 4)
    expected = x
    for axis, (before, after) in zip(spatial, [(1, 1), (0, 2), (2, 1)]):
        index = ref_index(x.shape[axis], before, after, mode)
        taken = np.take(expected, np.maximum(index, 0), axis=axis)
        shape = [1] * 5
        shape[axis] = -1
        expected = np.where(index.reshape(shape) >= 0, taken, np.asarray(1.5).astype(dtype))
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, expected)
    if layout == "NCDHW" and dtype == np.float32:
        onnx_mode = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
        pads = np.array([0, 0, 1, 0, 2, 0, 0, 1, 2, 1], np.int64)
        onnx = onnx_run("Pad", {"data": x, "pads": pads, "constant_value": np.array(1.5)}, {"mode": onnx_mode})[0]
        np.testing.assert_array_equal(out, onnx)


@pytest.mark.parametrize("dtype", FLOATS + [np.int32, np.int64])
def test_pad_every_dim_with_a_constant(dtype):
    x = (RNG.standard_normal((2, 3, 4)) * 10).astype(dtype)
    out = run("pad", {"X": x}, {"paddings": [1, 0, 0, 2, 3, 1], "pad_value": 2.0})["Out"]
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, np.pad(x, [(1, 0), (0, 2), (3, 1)], constant_values=2))
    if dtype == np.float32:
        pads = np.array([1, 0, 3, 0, 2, 1], np.int64)
        onnx = onnx_run("Pad", {"data": x, "pads": pads, "constant_value": np.array(2.0, np.float32)})[0]
        np.testing.assert_array_equal(out, onnx)


def test_pad3d_reads_the_paddings_tensor():
    x = rand(1, 2, 2, 3, 3)
    out = run("pad3d", {"X": x, "Paddings": np.array([1, 0, 0, 1, 1, 0], np.int32)}, {"mode": "replicate"})["Out"]
    np.testing.assert_array_equal(out, np.pad(x, [(0, 0), (0, 0), (1, 0), (0, 1), (1, 0)], mode="edge"))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("impl", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_inference(impl, dtype):
    x = rand(3, 4, 5, dtype=dtype)
    outs = run("dropout", {"X": x}, {"dropout_prob": 0.3, "dropout_implementation": impl, "is_test": True},
               outputs={"Out": 1, "Mask": 1})
    expected = x.astype(np.float64) * (0.7 if impl == "downgrade_in_infer" else 1.0)
    check(outs["Out"], expected, 1, dtype)
    np.testing.assert_array_equal(outs["Mask"], np.ones(x.shape, np.uint8))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,axis", [((3, 7), -1), ((2, 5, 4), 1), ((4, 3, 2, 6), 0), ((9,), 0), ((2, 3, 4), -2)])
def test_softmax(shape, axis, dtype):
    x = (rand(*shape) * 20).astype(dtype)
    x.flat[0] = 80  # exp overflows without the max shift
    out = run("softmax", {"X": x}, {"axis": axis})["Out"]
    wide = x.astype(np.float64)
    e = np.exp(wide - wide.max(axis=axis, keepdims=True))
    expected = e / e.sum(axis=axis, keepdims=True)
    check(out, expected, shape[axis] + 4, dtype)
    check(out, onnx_run("Softmax", {"X": x}, {"axis": axis})[0], shape[axis] + 4, dtype)


def test_softmax_of_a_scalar_is_one():
    np.testing.assert_array_equal(run("softmax", {"X": np.array(3.0, np.float32)})["Out"], np.float32(1))


# -- matmul_v2, mul, fc ---------------------------------------------------------------------------
MATMUL_CASES = [
    ((3, 4), (4, 5), False, False),
    ((4, 3), (4, 5), True, False),
    ((3, 4), (5, 4), False, True),
    ((2, 1, 4, 3), (3, 5, 4), True, True),
    ((4,), (4,), False, False),
    ((4,), (2, 4, 3), True, False),
    ((2, 3, 4), (4,), False, True),
    ((5, 2, 3, 4), (1, 4, 2), False, False),
]


@pytest.mark.parametrize("dtype", FLOATS + [np.int32, np.int64])
@pytest.mark.parametrize("x_shape,y_shape,tx,ty", MATMUL_CASES)
def test_matmul_v2(x_shape, y_shape, tx, ty, dtype):
    x, y = (rand(*x_shape) * 4).astype(dtype), (rand(*y_shape) * 4).astype(dtype)
    out = run("matmul_v2", {"X": x, "Y": y}, {"trans_x": tx, "trans_y": ty})["Out"]
    xm = np.swapaxes(x, -1, -2) if tx and x.ndim > 1 else x
    ym = np.swapaxes(y, -1, -2) if ty and y.ndim > 1 else y
    x2, y2 = (xm[None] if xm.ndim == 1 else xm), (ym[:, None] if ym.ndim == 1 else ym)
    expected = np.einsum("...ik,...kj->...ij", x2.astype(np.float64), y2.astype(np.float64))
    expected = expected[..., 0, :] if xm.ndim == 1 else expected
    expected = expected[..., 0] if ym.ndim == 1 else expected
    k = x2.shape[-1]
    if dtype in (np.int32, np.int64):
        np.testing.assert_array_equal(out, expected.astype(dtype))
    else:
        check(out, expected, k, dtype)
        check(out, onnx_run("MatMul", {"A": xm, "B": ym})[0], k, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x_shape,y_shape,xc,yc", [((2, 3, 4), (12, 5), 1, 1), ((2, 3, 4), (4, 5), 2, 1),
                                                   ((6, 2, 2), (2, 2, 3, 2), 1, 2)])
def test_mul_flattens_both_operands(x_shape, y_shape, xc, yc, dtype):
    x, y = rand(*x_shape, dtype=dtype), rand(*y_shape, dtype=dtype)
    out = run("mul", {"X": x, "Y": y}, {"x_num_col_dims": xc, "y_num_col_dims": yc})["Out"]
    k = math.prod(x_shape[xc:])
    expected = np.tensordot(x.astype(np.float64).reshape(*x_shape[:xc], k),
                            y.astype(np.float64).reshape(k, *y_shape[yc:]), axes=1)
    check(out, expected, k, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("act", ["", "relu", "relu6", "sigmoid", "swish", "hard_swish"])
@pytest.mark.parametrize("padding_weights,bias_2d", [(False, False), (True, True)])
def test_fc(act, padding_weights, bias_2d, dtype):
    x = (rand(2, 3, 4) * 3).astype(dtype)
    pad = 4 if padding_weights else 0
    w, b = rand(4 + pad, 5 + pad, dtype=dtype), rand(5, dtype=dtype)
    bias = b.reshape(1, 5) if bias_2d else b
    attrs = {"in_num_col_dims": 2, "activation_type": act, "padding_weights": padding_weights}
    out = run("fc", {"Input": x, "W": w, "Bias": bias}, attrs)["Out"]
    linear = x.astype(np.float64) @ w[:4, :5].astype(np.float64) + b
    check(out, ref_activation(linear, act), 4 + 4, dtype)
    if act == "" and not padding_weights:
        gemm = onnx_run("Gemm", {"A": x.reshape(6, 4), "B": w, "C": b})[0].reshape(2, 3, 5)
        check(out, gemm, 8, dtype)


def test_fc_without_bias():
    x, w = rand(3, 6), rand(6, 2)
    check(run("fc", {"Input": x, "W": w})["Out"], x.astype(np.float64) @ w, 6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_fc_adds_its_residual_before_the_activation(dtype):
    x, w, b, r = rand(2, 3, 4, dtype=dtype), rand(4, 5, dtype=dtype), rand(5, dtype=dtype), rand(2, 3, 5, dtype=dtype)
    out = run("fc", {"Input": x, "W": w, "Bias": b, "ResidualData": r}, {"in_num_col_dims": 2,
                                                                          "activation_type": "relu"})["Out"]
    check(out, ref_activation(x.astype(np.float64) @ w + b + r, "relu"), 4 + 1, dtype)


# -- the kernels called directly ------------------------------------------------------------------
def test_conv_kernel_writes_a_fresh_contiguous_output_in_the_requested_layout():
    spec = KernelSpec("conv2d", DType.float32,
                      {"strides": [1, 1], "paddings": [1, 1], "padding_algorithm": "EXPLICIT", "data_format": "NHWC",
                       "groups": 1, "dilations": [1, 1]},
                      {"Input": (TensorInfo((1, 5, 6, 3), DType.float32),),
                       "Filter": (TensorInfo((4, 3, 3, 3), DType.float32),)},
                      {"Output": (TensorInfo((1, 5, 6, 4), DType.float32),)})
    kernel = find_kernel("conv2d", "numpy", DType.float32)(spec)
    x, w = rand(1, 5, 6, 3), rand(4, 3, 3, 3)
    out = kernel(x, w)
    assert out.flags.c_contiguous and out.shape == (1, 5, 6, 4)
    assert not np.shares_memory(out, x)
    check(out, ref_conv(x, w, {"paddings": [1, 1], "data_format": "NHWC"}), 27)


def test_pad_refuses_a_huge_output_before_allocating(monkeypatch):
    from halfway.ir.limits import TensorSizeError

    monkeypatch.setenv("HALFWAY_MAX_TENSOR_BYTES", "4096")
    x = rand(2, 3, 4)
    with pytest.raises(TensorSizeError, match=r"pad.*: a float32 tensor of shape \[2, 3, 1004\] would take 24,096 "
                                              r"bytes, more than the limit of 4,096"):
        run("pad", {"X": x}, {"paddings": [0, 0, 0, 0, 0, 1000], "pad_value": 0.0})
    assert run("pad", {"X": x}, {"paddings": [0, 0, 0, 0, 0, 10], "pad_value": 0.0})["Out"].shape == (2, 3, 14)
