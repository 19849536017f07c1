"""Every OpenCL kernel against the numpy kernel of the same op, on random inputs of awkward shapes
(odd sizes, tails that are no multiple of 4 or of a tile), in float32 and in float16 (on PoCL:
float16 storage with float32 arithmetic). Each op runs through the executor on an OpenCLPlace
and on the CPU; the report must show no numpy fallback, so the OpenCL kernel really ran."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from tests.support.extras import import_pyopencl

import_pyopencl()

import halfway
from halfway.executor import Executor, OpenCLPlace
from halfway.ir.dtypes import DType
from halfway.kernels.opencl import gemm, runtime
from tests.support.oprun import run_op

pytestmark = pytest.mark.opencl

RNG = np.random.default_rng(5)
FLOATS = [np.float32, np.float16]


def rand(*shape: int, dtype=np.float32, low: float | None = None) -> np.ndarray:
    if low is not None:
        return RNG.uniform(low, low + 2, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def check(place: OpenCLPlace, op_type: str, inputs: dict, attrs: dict | None = None, *, params=(),
          rtol: float | None = None, outputs: dict | None = None) -> dict:
    """Run ``op_type`` on both places; the OpenCL outputs must match numpy's."""
    ran = run_op(op_type, inputs, attrs, params=params, outputs=outputs, place=place)
    got, report = ran.outputs, ran.report
    assert report.fallbacks == [], report.summary()
    want = run_op(op_type, inputs, attrs, params=params, outputs=outputs).outputs
    first = next(iter(inputs.values()))
    dtype = (first if isinstance(first, np.ndarray) else first[0]).dtype
    tol = rtol or (2e-3 if dtype == np.float16 else 2e-5)
    for slot, values in want.items():
        for w, g in zip(values, got[slot]):
            if w is None:
                continue
            assert g.dtype == w.dtype and g.shape == w.shape, (slot, g.dtype, g.shape, w.dtype, w.shape)
            scale = max(1.0, float(np.abs(w.astype(np.float32)).max(initial=0)))
            np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=tol, atol=tol * scale,
                                       err_msg=f"{op_type} {slot}")
    return got


# -- elementwise ----------------------------------------------------------------------------------
BINARY = ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_max",
          "elementwise_min", "elementwise_pow"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op_type", BINARY)
def test_binary(place, op_type, dtype):
    positive = 0.5 if op_type in ("elementwise_pow", "elementwise_div") else None
    x = rand(3, 5, 7, dtype=dtype, low=positive)
    check(place, op_type, {"X": x, "Y": rand(3, 5, 7, dtype=dtype, low=positive)})  # same shapes, a tail of 1
    check(place, op_type, {"X": x, "Y": rand(5, dtype=dtype, low=positive)}, {"axis": 1})  # Paddle's axis


@pytest.mark.parametrize("dtype", FLOATS)
def test_swiglu(place, dtype):
    check(place, "swiglu", {"X": rand(3, 5, 7, dtype=dtype) * 8, "Y": rand(3, 5, 7, dtype=dtype)})


@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_broadcasts_both_ways(place, dtype):
    check(place, "elementwise_mul", {"X": rand(4, 1, 6, dtype=dtype), "Y": rand(3, 1, dtype=dtype)})


UNARY = [
    ("relu", {}), ("relu6", {"threshold": 0.7}), ("leaky_relu", {"alpha": 0.1}), ("sigmoid", {}), ("tanh", {}),
    ("hard_swish", {}), ("hard_sigmoid", {}), ("swish", {"beta": 1.5}), ("silu", {}), ("gelu", {}),
    ("gelu", {"approximate": True}), ("softplus", {"beta": 2.0, "threshold": 1.0}), ("exp", {}), ("abs", {}),
    ("scale", {"scale": 1.5, "bias": 0.25}), ("scale", {"scale": -2.0, "bias": 1.0, "bias_after_scale": False}),
    ("clip", {"min": -0.5, "max": 0.3}), ("dropout", {"dropout_prob": 0.25, "is_test": True}),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op_type, attrs", UNARY, ids=[f"{op}{i}" for i, (op, _) in enumerate(UNARY)])
def test_unary(place, op_type, attrs, dtype):
    check(place, op_type, {"X": rand(2, 3, 11, dtype=dtype)}, attrs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op_type, attrs", [("log", {}), ("sqrt", {}), ("pow", {"factor": 2.5})])
def test_unary_of_positive_inputs(place, op_type, attrs, dtype):
    check(place, op_type, {"X": rand(37, dtype=dtype, low=0.1)}, attrs)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sum(place, dtype):
    check(place, "sum", {"X": [rand(3, 7, dtype=dtype) for _ in range(3)]})


@pytest.mark.parametrize("src, dst", [(np.float32, 4), (np.float16, 5)])
def test_cast(place, src, dst):
    x = rand(5, 7, dtype=src) * 100
    check(place, "cast", {"X": x}, {"in_dtype": 5 if src == np.float32 else 4, "out_dtype": dst})


# -- data movement --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS + [np.int32])
def test_concat_and_split(place, dtype):
    parts = [rand(2, n, 3).astype(dtype) for n in (1, 4, 2)]
    check(place, "concat", {"X": parts}, {"axis": 1})
    check(place, "split", {"X": rand(2, 7, 3).astype(dtype)}, {"axis": 1, "sections": [2, -1, 1]},
          outputs={"Out": 3})


@pytest.mark.parametrize("pieces, launches", [(2, 1), (4, 1), (6, 6)])
def test_split_into_a_few_pieces_is_one_launch(place, pieces, launches):
    """Up to SPLIT_PIECES pieces (a decoder's fused projections) are written by one launch, more
    by a copy each; both give numpy's pieces, along the last axis and a middle one."""
    x = rand(3, 2 * pieces, 2 * pieces)
    for axis in (1, 2):
        check(place, "split", {"X": x}, {"axis": axis, "num": pieces}, outputs={"Out": pieces})
    ran = run_op("split", {"X": x}, {"axis": 2, "num": pieces}, outputs={"Out": pieces}, place=place)
    assert ran.report.launches == launches


@pytest.mark.parametrize("dtype", FLOATS)
def test_transpose_and_slice(place, dtype):
    x = rand(2, 3, 5, 4, dtype=dtype)
    check(place, "transpose2", {"X": x}, {"axis": [0, 2, 3, 1]})
    check(place, "slice", {"Input": x}, {"axes": [1, 3], "starts": [1, -3], "ends": [3, 100],
                                         "decrease_axis": []})


DATA = FLOATS + [np.int64, np.bool_]


def data(*shape: int, dtype=np.float32) -> np.ndarray:
    return rand(*shape).astype(dtype) if dtype != np.bool_ else rand(*shape) > 0


@pytest.mark.parametrize("dtype", DATA)
def test_strided_slice_expand_and_pad(place, dtype):
    x = data(2, 3, 5, 4, dtype=dtype)
    check(place, "strided_slice", {"Input": x}, {"axes": [1, 2, 3], "starts": [0, 4, -1], "ends": [3, 0, 100],
                                                 "strides": [2, -2, 1], "decrease_axis": [3]})
    check(place, "expand_v2", {"X": data(3, 1, 5, dtype=dtype)}, {"shape": [2, 3, 4, 5]})
    if dtype != np.bool_:
        check(place, "pad", {"X": x}, {"paddings": [0, 1, 2, 0, 1, 1, 0, 3], "pad_value": 1.5})


@pytest.mark.parametrize("dtype", FLOATS)
def test_slice_with_constant_bound_tensors(place, dtype):
    """StartsTensor and EndsTensor given as parameters: constants at prepare, so no fallback."""
    x = rand(3, 6, 5, dtype=dtype)
    check(place, "slice", {"Input": x, "StartsTensor": np.array([1, -4], np.int64),
                           "EndsTensor": np.array([3, 5], np.int64)},
          {"axes": [0, 1], "starts": [], "ends": [], "decrease_axis": []}, params=("StartsTensor", "EndsTensor"))


@pytest.mark.parametrize("src, dst", [(np.float32, np.int64), (np.float16, np.int32), (np.int64, np.float32),
                                      (np.int32, np.float16), (np.bool_, np.float32), (np.float32, np.bool_),
                                      (np.int64, np.int32), (np.bool_, np.int64)])
def test_cast_of_integers_and_bool(place, src, dst):
    x = data(5, 7, dtype=np.float32) * 50
    x[0, :3] = [0.0, -2.7, 2.7]
    x = x.astype(src)
    codes = {np.float32: 5, np.float16: 4, np.int32: 2, np.int64: 3, np.bool_: 0}
    check(place, "cast", {"X": x}, {"in_dtype": codes[src], "out_dtype": codes[dst]})


@pytest.mark.parametrize("op_type", ["elementwise_add", "elementwise_sub", "elementwise_mul"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_binary(place, op_type, dtype):
    x, y = (RNG.integers(-1000, 1000, shape).astype(dtype) for shape in ((3, 5, 7), (5, 7)))
    check(place, op_type, {"X": x, "Y": x[::-1].copy()})
    check(place, op_type, {"X": x, "Y": y})


@pytest.mark.parametrize("op_type, attrs", [("reshape2", {"shape": [0, -1]}),
                                            ("flatten_contiguous_range", {"start_axis": 1, "stop_axis": 2}),
                                            ("squeeze2", {"axes": [1]}), ("unsqueeze2", {"axes": [0]})])
def test_reshapes_alias_their_input(place, op_type, attrs):
    x = rand(3, 1, 5, dtype=np.float16)
    ran = run_op(op_type, {"X": x}, attrs, place=place)
    np.testing.assert_array_equal(ran.out, run_op(op_type, {"X": x}, attrs).out)
    assert ran.report.launches == 0  # a view: nothing to run


def test_assign(place):
    check(place, "assign", {"X": rand(3, 5)})


# -- nn -------------------------------------------------------------------------------------------
POOLS = [
    {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
    {"pooling_type": "avg", "ksize": [3, 2], "strides": [2, 1], "paddings": [1, 0], "exclusive": True},
    {"pooling_type": "avg", "ksize": [2, 2], "strides": [2, 2], "paddings": [1, 1], "exclusive": False,
     "ceil_mode": True},
    {"pooling_type": "avg", "ksize": [1, 1], "global_pooling": True},
    {"pooling_type": "max", "ksize": [3, 2], "adaptive": True},
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("attrs", POOLS, ids=range(len(POOLS)))
def test_pool2d(place, attrs, dtype):
    check(place, "pool2d", {"X": rand(2, 3, 7, 9, dtype=dtype)}, attrs)
    for channels in (3, 8):  # one channel a work-item, or 4
        check(place, "pool2d", {"X": rand(2, 7, 9, channels, dtype=dtype)}, {**attrs, "data_format": "NHWC"})


NHWC_CONVS = [
    ({"paddings": [1, 1]}, 16, 3),  # whole 16-byte chunks of channels: tensor cores read them as they lie
    ({"paddings": [1, 0], "strides": [2, 2]}, 16, 3),
    ({"paddings": [2, 2], "dilations": [2, 2]}, 8, 3),
    ({}, 24, 1),
    ({"paddings": [1, 1]}, 3, 3),  # a stem's few channels: gathered one at a time
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("attrs, channels, size", NHWC_CONVS, ids=range(len(NHWC_CONVS)))
def test_nhwc_convolutions(place, attrs, channels, size, dtype):
    """Ungrouped NHWC convolutions (what the channels_last pass makes), with the fused epilogue."""
    x = rand(2, 9, 7, channels, dtype=dtype)
    w = rand(16, channels, size, size, dtype=dtype)
    attrs = {**attrs, "data_format": "NHWC"}
    check(place, "conv2d", {"Input": x, "Filter": w}, attrs, params=("Filter",))
    out = run_op("conv2d", {"Input": x, "Filter": w}, attrs, params=("Filter",)).outputs["Output"][0]
    inputs = {"Input": x, "Filter": w, "Bias": rand(16, dtype=dtype), "ResidualData": rand(*out.shape, dtype=dtype)}
    check(place, "fused_conv2d", inputs, {**attrs, "fuse_activation": "relu"}, params=("Filter", "Bias"))


CONV_POOLS = [
    ({"paddings": [1, 1], "data_format": "NHWC"}, 16, "max", [2, 2]),  # tensor cores: the pool is the epilogue
    ({"paddings": [1, 1], "strides": [2, 2], "data_format": "NHWC"}, 8, "max", [2, 2]),  # odd maps: a row dropped
    ({"paddings": [1, 1], "data_format": "NHWC"}, 3, "max", [2, 2]),  # a stem's few channels
    ({"paddings": [1, 1], "data_format": "NHWC"}, 16, "avg", [2, 2]),
    ({"paddings": [1, 1], "data_format": "NCHW"}, 16, "max", [3, 2]),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("attrs, channels, kind, size", CONV_POOLS, ids=range(len(CONV_POOLS)))
def test_convolutions_with_their_pool(place, attrs, channels, kind, size, dtype):
    """fused_conv2d_pool: one launch where the epilogue pools (2x2 max, NHWC, tensor cores), the
    convolution then the pool elsewhere; against numpy's convolution then pool."""
    shape = (2, 13, 11, channels) if attrs["data_format"] == "NHWC" else (2, channels, 13, 11)
    inputs = {"Input": rand(*shape, dtype=dtype), "Filter": rand(24, channels, 3, 3, dtype=dtype) * 0.3,
              "Bias": rand(24, dtype=dtype)}
    attrs = {**attrs, "fuse_activation": "relu", "pool_type": kind, "pool_size": size}
    got = check(place, "fused_conv2d_pool", inputs, attrs, params=("Filter", "Bias"))["Output"][0]
    conv = run_op("fused_conv2d", inputs, {k: v for k, v in attrs.items() if not k.startswith("pool_")},
                  params=("Filter", "Bias")).outputs["Output"][0].astype(np.float32)
    axes = (1, 2) if attrs["data_format"] == "NHWC" else (2, 3)
    rows, cols = conv.shape[axes[0]] // size[0] * size[0], conv.shape[axes[1]] // size[1] * size[1]
    conv = conv[:, :rows, :cols] if axes == (1, 2) else conv[:, :, :rows, :cols]
    split = list(conv.shape)
    split[axes[0]:axes[1] + 1] = [rows // size[0], size[0], cols // size[1], size[1]]
    windows = conv.reshape(split)
    want = windows.max(axis=(axes[0] + 1, axes[1] + 2)) if kind == "max" else windows.mean(axis=(axes[0] + 1, axes[1] + 2))
    tol = 2e-3 if dtype == np.float16 else 2e-5
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm(place, dtype):
    c = 5
    stats = {"Scale": rand(c), "Bias": rand(c), "Mean": rand(c), "Variance": rand(c, low=0.5)}
    check(place, "batch_norm", {"X": rand(2, c, 3, 7, dtype=dtype), **stats}, {"epsilon": 1e-3, "is_test": True},
          params=tuple(stats))


@pytest.mark.parametrize("dtype", FLOATS)
def test_lrn(place, dtype):
    check(place, "lrn", {"X": rand(2, 7, 3, 5, dtype=dtype)}, {"n": 5, "k": 1.5, "alpha": 0.3, "beta": 0.75})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(place, axis, dtype):
    check(place, "softmax", {"X": rand(3, 6, 5, dtype=dtype) * 3}, {"axis": axis})


CONVS = [
    ("conv2d", (2, 5, 9, 11), (7, 5, 3, 3), {"paddings": [1, 1]}),
    ("conv2d", (1, 6, 10, 9), (4, 3, 3, 2), {"strides": [2, 1], "paddings": [1, 0, 2, 1], "dilations": [1, 2],
                                             "groups": 2}),
    ("conv2d", (2, 6, 5, 7), (9, 6, 1, 1), {}),  # 1x1: a batched GEMM
    ("depthwise_conv2d", (2, 4, 9, 8), (8, 1, 3, 3), {"strides": [2, 2], "paddings": [1, 1], "groups": 4}),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op_type, x, w, attrs", CONVS, ids=range(len(CONVS)))
def test_conv(place, op_type, x, w, attrs, dtype):
    check(place, op_type, {"Input": rand(*x, dtype=dtype), "Filter": rand(*w, dtype=dtype)}, attrs,
          params=("Filter",))


FUSED = [("relu", 0.0, 0.0), ("leaky_relu", 0.2, 0.0), ("hard_swish", 0.0, 0.0), ("swish", 0.0, 0.0)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("act, alpha, beta", FUSED)
@pytest.mark.parametrize("kernel", [3, 1])
def test_fused_conv2d_epilogue(place, kernel, act, alpha, beta, dtype):
    x, w = rand(2, 3, 6, 5, dtype=dtype), rand(5, 3, kernel, kernel, dtype=dtype)
    pad = kernel // 2
    inputs = {"Input": x, "Filter": w, "Bias": rand(5, dtype=dtype), "ResidualData": rand(2, 5, 6, 5, dtype=dtype)}
    check(place, "fused_conv2d", inputs, {"paddings": [pad, pad], "fuse_activation": act, "fuse_alpha": alpha,
                                          "fuse_beta": beta}, params=("Filter", "Bias"))


EPILOGUE_LAYOUTS = [  # input side, kernel, stride: how the tensor-core kernel stores (where it runs)
    (28, 1, 1),  # a GEMM per image of 784 pixels, 8 outputs a store
    (8, 3, 1),  # 64 pixels an image: 8 outputs a store
    (6, 3, 1),  # 36: 2 a store
    (7, 3, 1),  # 49: one at a time
    (9, 1, 2),  # a strided 1x1: only the pixels it reads copied channels-last
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("side, kernel, stride", EPILOGUE_LAYOUTS)
def test_fused_conv2d_residual_in_every_store_layout(place, side, kernel, stride, dtype):
    out = -(-side // stride)
    inputs = {"Input": rand(2, 8, side, side, dtype=dtype), "Filter": rand(16, 8, kernel, kernel, dtype=dtype),
              "Bias": rand(16, dtype=dtype), "ResidualData": rand(2, 16, out, out, dtype=dtype)}
    check(place, "fused_conv2d", inputs, {"strides": [stride, stride], "paddings": [kernel // 2] * 2,
                                          "fuse_activation": "relu"}, params=("Filter", "Bias"))


@pytest.mark.parametrize("dtype", FLOATS)
def test_depthwise_fused_epilogue(place, dtype):
    inputs = {"Input": rand(1, 3, 7, 6, dtype=dtype), "Filter": rand(3, 1, 3, 3, dtype=dtype),
              "Bias": rand(3, dtype=dtype)}
    check(place, "fused_conv2d", inputs, {"paddings": [1, 1], "groups": 3, "fuse_activation": "relu6"},
          params=("Filter", "Bias"))


MATMULS = [((3, 37, 21), (3, 21, 19), {}), ((37, 21), (2, 19, 21), {"trans_y": True}),
           ((2, 21, 5), (21, 7), {"trans_x": True}), ((21,), (21, 6), {})]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("x, y, attrs", MATMULS, ids=range(len(MATMULS)))
def test_matmul_v2(place, x, y, attrs, dtype):
    check(place, "matmul_v2", {"X": rand(*x, dtype=dtype), "Y": rand(*y, dtype=dtype)}, attrs)


@pytest.mark.parametrize("dtype", FLOATS)
def test_mul_and_fc(place, dtype):
    check(place, "mul", {"X": rand(3, 2, 5, dtype=dtype), "Y": rand(10, 7, dtype=dtype)}, {"x_num_col_dims": 1})
    check(place, "fc", {"Input": rand(5, 33, dtype=dtype), "W": rand(33, 9, dtype=dtype), "Bias": rand(9, dtype=dtype)},
          {"activation_type": "relu"}, params=("W", "Bias"))
    check(place, "fc", {"Input": rand(2, 6, dtype=dtype), "W": rand(10, 7, dtype=dtype)},
          {"padding_weights": True}, params=("W",))
    check(place, "fc", {"Input": rand(3, 4, 33, dtype=dtype), "W": rand(33, 18, dtype=dtype),
                        "Bias": rand(18, dtype=dtype)}, {"in_num_col_dims": 2, "activation_type": "swiglu"},
          params=("W", "Bias"))
    check(place, "fc", {"Input": rand(3, 4, 33, dtype=dtype), "W": rand(33, 9, dtype=dtype),
                        "Bias": rand(9, dtype=dtype), "ResidualData": rand(3, 4, 9, dtype=dtype)},
          {"in_num_col_dims": 2, "activation_type": "relu"}, params=("W", "Bias"))


@pytest.mark.parametrize("dtype", FLOATS)
def test_operands_aligned_to_eight(place, dtype):
    """Sizes and strides multiples of 8: the tensor-core kernel's vector loads (where it runs)."""
    check(place, "matmul_v2", {"X": rand(2, 40, 64, dtype=dtype), "Y": rand(64, 48, dtype=dtype)})
    check(place, "conv2d", {"Input": rand(1, 8, 9, 10, dtype=dtype), "Filter": rand(16, 8, 3, 3, dtype=dtype)},
          {"paddings": [1, 1]}, params=("Filter",))


def faked_place(monkeypatch, precision: str | None = None, **caps) -> OpenCLPlace:
    """A place on the test device whose capabilities claim ``caps`` (float16 in ``precision``'s mode)."""
    shared = runtime.get_runtime()
    rt = runtime.Runtime(shared.device, precision or shared.precision)
    rt.caps = attrs.evolve(rt.caps, **caps)
    monkeypatch.setattr(runtime, "get_runtime", lambda device=None, precision="normal": rt)
    return OpenCLPlace()


@pytest.fixture(params=[False, True], ids=["cpu-kernels", "gpu-kernels"])
def split_k_place(monkeypatch, request) -> OpenCLPlace:
    """Many compute units, so small GEMMs split K; with the CPU kernels or the GPU's tiled ones."""
    return faked_place(monkeypatch, compute_units=4096, is_gpu=request.param)


@pytest.mark.parametrize("dtype", FLOATS)
def test_tiled_gemm_kernels(monkeypatch, dtype):
    """The local-memory tiled GEMM and conv a GPU gets, run here by a device claiming to be one."""
    place = faked_place(monkeypatch, is_gpu=True)
    check(place, "matmul_v2", {"X": rand(2, 37, 45, dtype=dtype), "Y": rand(45, 70, dtype=dtype)})
    check(place, "conv2d", {"Input": rand(2, 6, 9, 11, dtype=dtype), "Filter": rand(8, 3, 3, 2, dtype=dtype)},
          {"strides": [2, 1], "paddings": [1, 0, 2, 1], "dilations": [1, 2], "groups": 2}, params=("Filter",))


@pytest.mark.parametrize("dtype", FLOATS)
def test_split_k(split_k_place, dtype):
    x, y = rand(3, 37, 600, dtype=dtype), rand(600, 19, dtype=dtype)
    ran = run_op("matmul_v2", {"X": x, "Y": y}, place=split_k_place)
    rt = split_k_place.runtime
    cpu_kernel = not (rt.caps.is_gpu or gemm.uses_tensor_cores(rt, DType.from_any(dtype)))
    assert ran.report.launches == (2 if cpu_kernel else 1)  # a second kernel sums, or the last split to finish
    np.testing.assert_allclose(ran.out.astype(np.float32), run_op("matmul_v2", {"X": x, "Y": y}).out.astype(np.float32),
                               rtol=2e-3, atol=2e-3 * 30)
    inputs = {"Input": rand(2, 40, 5, 4, dtype=dtype), "Filter": rand(6, 40, 3, 3, dtype=dtype),
              "Bias": rand(6, dtype=dtype)}
    check(split_k_place, "fused_conv2d", inputs, {"paddings": [1, 1], "fuse_activation": "relu"},
          params=("Filter", "Bias"))
    # 8 x 4 maps: the tensor-core epilogue's 16-byte stores, after a residual's 16-byte loads
    inputs = {"Input": rand(2, 40, 8, 4, dtype=dtype), "Filter": rand(16, 40, 3, 3, dtype=dtype),
              "Bias": rand(16, dtype=dtype), "ResidualData": rand(2, 16, 8, 4, dtype=dtype)}
    check(split_k_place, "fused_conv2d", inputs, {"paddings": [1, 1], "fuse_activation": "relu"},
          params=("Filter", "Bias"))


@pytest.mark.parametrize("dtype", FLOATS)
def test_split_k_runs_again_on_the_same_buffers(split_k_place, dtype):
    """The serial split-K's tile counters are back at zero after each run: three runs of one
    prepared program, each on other values, match numpy."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        y = halfway.layers.fc(halfway.layers.data("x", [7, 600]), size=40, act="relu")
    scope = halfway.init_scope(prog, seed=3)
    if dtype == np.float16:
        prog, _ = halfway.float16_transpile(prog, scope)
    on_device = Executor(split_k_place).prepare(prog, ["x"], [y.name], scope)
    on_numpy = Executor().prepare(prog, ["x"], [y.name], scope)
    tol = 2e-3 if dtype == np.float16 else 1e-4
    for _ in range(3):
        x = rand(7, 600)
        np.testing.assert_allclose(on_device.run({"x": x})[0], on_numpy.run({"x": x})[0], rtol=tol, atol=tol)


def launched_kernels(monkeypatch, rt: runtime.Runtime) -> list[str]:
    """The names of the kernels ``rt`` makes from now on, in order."""
    names: list[str] = []
    make = rt.kernel
    monkeypatch.setattr(rt, "kernel", lambda text, name, options=(): names.append(name) or make(text, name, options))
    return names


GEMV_MODES = [(np.float32, "normal"), (np.float16, "normal"), (np.float16, "low"), (np.float16, "high")]
"""float32; float16 storage, native where the device has cl_khr_fp16 (else storage), float32 buffers."""


@pytest.mark.parametrize("units", [1, 4096], ids=["whole-k", "split-k"])
@pytest.mark.parametrize("dtype, precision", GEMV_MODES, ids=["float32", "float16", "float16-low", "float16-high"])
@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_gemv(monkeypatch, m, dtype, precision, units):
    """A fully-connected layer of a few rows on large weights runs the GEMV kernel in one launch, K
    split across work-groups or not, the epilogue's bias and activation included (the device
    taken for a CPU, which takes the GEMV for up to 4 rows; a GPU for one)."""
    place = faked_place(monkeypatch, precision, compute_units=units, is_gpu=False)
    names = launched_kernels(monkeypatch, place.runtime)
    n = 1000  # not a multiple of a work-group's columns
    k = gemm.GEMV_MIN_WEIGHTS // n + 3  # odd: not a multiple of a vector or a step
    x, w, bias = rand(m, k, dtype=dtype), rand(k, n, dtype=dtype), rand(n, dtype=dtype)
    ran = run_op("fc", {"Input": x, "W": w, "Bias": bias}, {"activation_type": "relu"}, params=("W", "Bias"),
                 place=place)
    assert names == ["gemv"] and ran.report.launches == 1
    want = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + bias.astype(np.float64), 0)
    tol = 2e-3 if dtype == np.float16 else 2e-5
    np.testing.assert_allclose(ran.out.astype(np.float64), want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("dtype", FLOATS)
def test_gemv_of_batched_and_transposed_operands(monkeypatch, place, dtype):
    """Batched weights and a transposed A take the GEMV kernel; transposed weights the k-major one."""
    names = launched_kernels(monkeypatch, place.runtime)
    check(place, "matmul_v2", {"X": rand(2, 520, 1, dtype=dtype), "Y": rand(2, 520, 2048, dtype=dtype)},
          {"trans_x": True})  # one row: the GEMV on GPUs too
    check(place, "matmul_v2", {"X": rand(2, 520, dtype=dtype), "Y": rand(2048, 520, dtype=dtype)}, {"trans_y": True})
    assert names == ["gemv", "gemv_t"]
