"""Schemas and layers of the nn ops: inferred shapes equal those of numpy references computed on
random inputs; unknown dims (-1) carry through; bad attrs and shapes fail with clear messages."""

from pathlib import Path

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import halfway
from halfway.ir import DType, Program, SchemaError, layers
from halfway.ir.ops.window import window_geometry
from halfway.ir.schema import InferContext, InferError, TensorInfo, get_schema

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"
RNG = np.random.default_rng(0)


def infer(op_type, inputs, attrs=None, values=None):
    """Inferred outputs {slot: TensorInfo} of ``op_type`` on inputs {slot: shape | TensorInfo}."""
    schema = get_schema(op_type)
    infos = {slot: [v if isinstance(v, TensorInfo) else TensorInfo(tuple(v), DType.float32)]
             for slot, v in inputs.items()}
    ctx = InferContext(schema, infos, attrs or {}, values)
    schema.infer(ctx)
    return {slot: items[0] for slot, items in ctx.outputs.items()}


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


# -- numpy references (NCHW; callers transpose for NHWC) -------------------------------------------
def ref_pads(attrs, sizes, kernel, strides):
    """Per spatial dim (before, after) pads, written out from Paddle's definition."""
    algo = attrs.get("padding_algorithm", "EXPLICIT")
    if algo == "VALID":
        return [(0, 0)] * len(sizes)
    if algo == "SAME":
        totals = [max((-(-n // s) - 1) * s + k - n, 0) for n, k, s in zip(sizes, kernel, strides)]
        return [(t // 2, t - t // 2) for t in totals]
    p = list(attrs.get("paddings", [0, 0]))
    return [(p[0], p[0]), (p[1], p[1])] if len(p) == 2 else [(p[0], p[1]), (p[2], p[3])]


def ref_conv2d(x, w, attrs, bias=None, residual=None, act=""):
    nhwc = attrs.get("data_format") == "NHWC"
    x = x.transpose(0, 3, 1, 2) if nhwc else x
    strides, groups = attrs.get("strides", [1, 1]), attrs.get("groups", 1)
    dil = [1, 1] if attrs.get("padding_algorithm") == "SAME" else attrs.get("dilations", [1, 1])
    pads = ref_pads(attrs, x.shape[2:], w.shape[2:], strides)
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    ext = [d * (k - 1) + 1 for d, k in zip(dil, w.shape[2:])]
    win = sliding_window_view(xp, ext, axis=(2, 3))[:, :, ::strides[0], ::strides[1], ::dil[0], ::dil[1]]
    n, c, oh, ow = win.shape[:4]
    o = w.shape[0]
    win = win.reshape(n, groups, c // groups, oh, ow, *w.shape[2:])
    out = np.einsum("ngchwij,gocij->ngohw", win, w.reshape(groups, o // groups, *w.shape[1:]))
    out = out.reshape(n, o, oh, ow)
    out = out + (0 if bias is None else bias.reshape(1, -1, 1, 1))
    out = out.transpose(0, 2, 3, 1) if nhwc else out
    out = out + (0 if residual is None else residual)
    return {"": out, "relu": np.maximum(out, 0), "leaky_relu": np.where(out > 0, out, 0.1 * out)}[act]


def ref_conv2d_transpose(x, w, attrs):
    s, d, groups = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1]), attrs.get("groups", 1)
    n, c, h, wd = x.shape
    cg, og = c // groups, w.shape[1]
    kh, kw = w.shape[2:]
    full = [(h - 1) * s[0] + d[0] * (kh - 1) + 1, (wd - 1) * s[1] + d[1] * (kw - 1) + 1]
    pads = ref_pads(attrs, [h, wd], [kh, kw], s)
    sizes = [f - p[0] - p[1] for f, p in zip(full, pads)]
    if attrs.get("output_size"):
        extra = [o - z for o, z in zip(attrs["output_size"], sizes)]
    else:
        extra = attrs.get("output_padding") or [0, 0]
    out = np.zeros((n, og * groups, full[0] + extra[0], full[1] + extra[1]), np.float32)
    for i in range(h):
        for j in range(wd):
            for g in range(groups):
                contrib = np.einsum("nc,cokl->nokl", x[:, g * cg:(g + 1) * cg, i, j], w[g * cg:(g + 1) * cg])
                out[:, g * og:(g + 1) * og, i * s[0]:i * s[0] + d[0] * (kh - 1) + 1:d[0],
                    j * s[1]:j * s[1] + d[1] * (kw - 1) + 1:d[1]] += contrib
    return out[:, :, pads[0][0]:pads[0][0] + sizes[0] + extra[0], pads[1][0]:pads[1][0] + sizes[1] + extra[1]]


def ref_pool2d(x, attrs):
    nhwc = attrs.get("data_format") == "NHWC"
    x = x.transpose(0, 3, 1, 2) if nhwc else x
    ksize, strides = list(attrs["ksize"]), attrs.get("strides", [1, 1])
    is_max = attrs["pooling_type"] == "max"
    if attrs.get("global_pooling"):
        out = x.max((2, 3), keepdims=True) if is_max else x.mean((2, 3), keepdims=True)
    elif attrs.get("adaptive"):
        h, w = x.shape[2:]
        oh, ow = ksize
        out = np.empty(x.shape[:2] + (oh, ow), np.float32)
        for i in range(oh):
            for j in range(ow):
                cell = x[:, :, i * h // oh:-(-(i + 1) * h // oh), j * w // ow:-(-(j + 1) * w // ow)]
                out[:, :, i, j] = cell.max((2, 3)) if is_max else cell.mean((2, 3))
    else:
        pads = ref_pads(attrs, x.shape[2:], ksize, strides)
        if attrs.get("ceil_mode"):
            pads = [(b, a + s - 1) for (b, a), s in zip(pads, strides)]
        fill = -np.inf if is_max else 0.0
        xp = np.pad(x, [(0, 0), (0, 0), *pads], constant_values=fill)
        valid = np.pad(np.ones(x.shape[2:]), pads)
        win = sliding_window_view(xp, ksize, axis=(2, 3))[:, :, ::strides[0], ::strides[1]]
        counts = sliding_window_view(valid, ksize)[::strides[0], ::strides[1]].sum((-1, -2))
        with np.errstate(invalid="ignore", divide="ignore"):
            out = win.max((-1, -2)) if is_max else win.sum((-1, -2)) / counts
    return out.transpose(0, 2, 3, 1) if nhwc else out


def ref_batch_norm(x, scale, bias, mean, var, eps, layout):
    shape = [1] * x.ndim
    shape[-1 if layout == "NHWC" else 1] = -1
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape) + bias.reshape(shape)


def ref_lrn(x, n, k, alpha, beta):
    sq = np.pad(x * x, [(0, 0), (n // 2, n // 2), (0, 0), (0, 0)])
    mid = k + alpha * sliding_window_view(sq, n, axis=1).sum(-1)
    return x / mid ** beta, mid


def ref_matmul(x, y, trans_x=False, trans_y=False):
    x = x.swapaxes(-1, -2) if trans_x and x.ndim > 1 else x
    y = y.swapaxes(-1, -2) if trans_y and y.ndim > 1 else y
    return np.matmul(x, y)


def ref_mul(x, y, xc, yc):
    out = x.reshape(int(np.prod(x.shape[:xc])), -1) @ y.reshape(int(np.prod(y.shape[:yc])), -1)
    return out.reshape(x.shape[:xc] + y.shape[yc:])


# -- window geometry ------------------------------------------------------------------------------
def test_window_geometry_resolves_same_padding_like_tensorflow():
    window = window_geometry([7, 10], [3, 4], [2, 3], [2, 2], [9, 9], "SAME")
    assert window.out == (4, 4)
    assert window.pads == ((1, 1), (1, 2))
    assert window.dilations == (1, 1)


def test_window_geometry_explicit_and_ceil_mode():
    window = window_geometry([5, 7], [2, 3], [2, 2], [1, 1], [0, 1, 1, 0], ceil_mode=True)
    assert window.pads == ((0, 1), (1, 0))
    assert window.out == (3, 4)


# -- conv2d / depthwise_conv2d / fused_conv2d -----------------------------------------------------
CONV_CASES = [
    ("conv2d", (2, 3, 7, 9), (4, 3, 3, 2), {"strides": [2, 1], "paddings": [1, 0], "dilations": [1, 2]}),
    ("conv2d", (1, 4, 8, 5), (6, 2, 3, 3), {"strides": [2, 3], "paddings": [0, 1, 2, 1], "groups": 2}),
    ("conv2d", (1, 3, 10, 7), (5, 3, 4, 3), {"strides": [3, 2], "dilations": [2, 2], "padding_algorithm": "SAME"}),
    ("conv2d", (2, 2, 6, 6), (3, 2, 5, 2), {"strides": [1, 2], "paddings": [3, 3], "padding_algorithm": "VALID"}),
    ("conv2d", (1, 7, 5, 3), (4, 3, 3, 3), {"paddings": [1, 1], "data_format": "NHWC"}),
    ("conv2d", (1, 2, 5, 4), (2, 2, 3, 3), {"paddings": [1, 1], "data_format": "AnyLayout"}),
    ("depthwise_conv2d", (1, 4, 9, 9), (8, 1, 3, 3), {"strides": [2, 2], "paddings": [1, 1], "groups": 4}),
    ("depthwise_conv2d", (2, 3, 6, 11), (3, 1, 5, 3), {"strides": [1, 3], "paddings": [2, 0, 0, 1],
                                                        "groups": 3, "dilations": [1, 2]}),
]


@pytest.mark.parametrize("op_type,x_shape,w_shape,attrs", CONV_CASES)
def test_conv_shape_matches_numpy(op_type, x_shape, w_shape, attrs):
    expected = ref_conv2d(rand(*x_shape), rand(*w_shape), attrs)
    out = infer(op_type, {"Input": x_shape, "Filter": w_shape}, attrs)["Output"]
    assert out == TensorInfo(expected.shape, DType.float32)


@pytest.mark.parametrize("act", ["", "relu", "leaky_relu"])
def test_fused_conv2d_is_conv_plus_bias_plus_residual(act):
    attrs = {"strides": [2, 1], "paddings": [1, 2, 0, 1], "fuse_activation": act, "fuse_alpha": 0.1}
    x, w, b = rand(1, 3, 8, 6), rand(5, 3, 3, 3), rand(5)
    residual = rand(*ref_conv2d(x, w, attrs).shape)
    expected = ref_conv2d(x, w, attrs, b, residual, act)
    out = infer("fused_conv2d", {"Input": x.shape, "Filter": w.shape, "Bias": b.shape,
                                 "ResidualData": residual.shape}, attrs)["Output"]
    assert out.shape == expected.shape


def test_conv_carries_unknown_dims():
    attrs = {"strides": [2, 2], "paddings": [1, 1]}
    assert infer("conv2d", {"Input": (-1, 3, -1, 9), "Filter": (4, 3, 3, 3)}, attrs)["Output"].shape == (-1, 4, -1, 5)
    assert infer("conv2d", {"Input": (2, -1, 8, 8), "Filter": (4, 3, 3, 3)}, attrs)["Output"].shape == (2, 4, 4, 4)
    nhwc = infer("conv2d", {"Input": (-1, 8, -1, 3), "Filter": (4, 3, 3, 3)},
                 {**attrs, "padding_algorithm": "SAME", "data_format": "NHWC"})["Output"]
    assert nhwc.shape == (-1, 4, -1, 4)


def test_conv_keeps_float16():
    x = TensorInfo((1, 3, 8, 8), DType.float16)
    w = TensorInfo((4, 3, 3, 3), DType.float16)
    assert infer("conv2d", {"Input": x, "Filter": w})["Output"].dtype is DType.float16


@pytest.mark.parametrize("op_type,x_shape,w_shape,attrs,message", [
    ("conv2d", (1, 3, 8, 8), (4, 2, 3, 3), {}, "Input has 3 channels but Filter [4, 2, 3, 3] with groups=1 expects 2"),
    ("conv2d", (1, 4, 8, 8), (3, 2, 3, 3), {"groups": 2}, "C_out 3 is not divisible by groups=2"),
    ("conv2d", (1, 3, 8, 8), (4, 3, 3, 3), {"paddings": [1, 1, 1]}, "paddings must have 2 (symmetric) or 4"),
    ("conv2d", (1, 3, 8, 8), (4, 3, 3, 3), {"paddings": [-1, 0]}, "paddings must be >= 0"),
    ("conv2d", (1, 3, 8, 8), (4, 3, 3, 3), {"strides": [0, 1]}, "strides must be 2 positive values"),
    ("conv2d", (1, 3, 8, 8), (4, 3, 3, 3), {"padding_algorithm": "FULL"},
     "attr padding_algorithm = 'FULL' is not one of 'EXPLICIT', 'SAME', 'VALID'"),
    ("conv2d", (1, 3, 8, 8), (4, 3, 3, 3), {"data_format": "CHWN"}, "attr data_format = 'CHWN' is not one of"),
    ("conv2d", (1, 1, 2, 3), (1, 1, 5, 1), {}, "spatial dim 0: the window (5 with dilation) is larger than the "
                                               "padded input (2 + 0 + 0)"),
    ("conv2d", (1, 3, 8), (4, 3, 3, 3), {}, "Input must have rank 4, got shape [1, 3, 8]"),
    ("depthwise_conv2d", (1, 4, 8, 8), (4, 2, 3, 3), {"groups": 2}, "depthwise needs groups == input channels"),
])
def test_conv_errors(op_type, x_shape, w_shape, attrs, message):
    with pytest.raises(InferError, match="^" + op_type + ": ") as info:
        infer(op_type, {"Input": x_shape, "Filter": w_shape}, attrs)
    assert message in str(info.value)


def test_fused_conv2d_errors():
    base = {"Input": (1, 3, 8, 8), "Filter": (4, 3, 3, 3)}
    with pytest.raises(InferError, match="attr fuse_activation = .softplus. is not one of"):
        infer("fused_conv2d", base, {"fuse_activation": "softplus"})
    with pytest.raises(InferError, match=r"Bias must have shape \[4\], got \[1, 4\]"):
        infer("fused_conv2d", {**base, "Bias": (1, 4)})
    with pytest.raises(InferError, match=r"ResidualData must have the output's shape \[1, 4, 6, 6\]"):
        infer("fused_conv2d", {**base, "ResidualData": (1, 4, 8, 8)})


# -- conv2d_transpose -----------------------------------------------------------------------------
@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 3, 4, 5), (3, 2, 3, 3), {"strides": [2, 1], "paddings": [1, 0]}),
    ((2, 4, 3, 3), (4, 1, 3, 2), {"strides": [2, 3], "groups": 2, "dilations": [2, 1], "paddings": [0, 1, 1, 0]}),
    ((1, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 2], "paddings": [1, 1], "output_padding": [1, 0]}),
    ((1, 2, 5, 4), (2, 3, 3, 3), {"strides": [3, 2], "paddings": [1, 1], "output_size": [14, 8]}),
    ((1, 2, 5, 4), (2, 3, 3, 3), {"strides": [2, 2], "padding_algorithm": "SAME"}),
])
def test_conv2d_transpose_shape_matches_numpy(x_shape, w_shape, attrs):
    expected = ref_conv2d_transpose(rand(*x_shape), rand(*w_shape), attrs)
    out = infer("conv2d_transpose", {"Input": x_shape, "Filter": w_shape}, attrs)["Output"]
    assert out.shape == expected.shape


def test_conv2d_transpose_unknown_dims_and_errors():
    assert infer("conv2d_transpose", {"Input": (-1, 3, -1, 4), "Filter": (3, 2, 3, 3)},
                 {"strides": [2, 2]})["Output"].shape == (-1, 2, -1, 9)
    with pytest.raises(InferError, match=r"output_size\[0\] = 20 must be in \[13, 16\)"):
        infer("conv2d_transpose", {"Input": (1, 2, 5, 4), "Filter": (2, 3, 3, 3)},
              {"strides": [3, 2], "paddings": [1, 1], "output_size": [20, 8]})
    with pytest.raises(InferError, match=r"output_padding\[1\] = 2 must be in \[0, 2\)"):
        infer("conv2d_transpose", {"Input": (1, 2, 5, 4), "Filter": (2, 3, 3, 3)},
              {"strides": [2, 2], "output_padding": [0, 2]})
    with pytest.raises(InferError, match="Input has 3 channels but Filter"):
        infer("conv2d_transpose", {"Input": (1, 3, 5, 4), "Filter": (2, 3, 3, 3)})


# -- pool2d ---------------------------------------------------------------------------------------
POOL_CASES = [
    ((2, 3, 7, 9), {"pooling_type": "max", "ksize": [3, 2], "strides": [2, 3], "paddings": [1, 0]}),
    ((1, 2, 7, 8), {"pooling_type": "avg", "ksize": [2, 3], "strides": [2, 2], "ceil_mode": True}),
    ((1, 2, 6, 5), {"pooling_type": "max", "ksize": [3, 3], "strides": [2, 2], "paddings": [1, 0, 0, 2],
                    "ceil_mode": True}),
    ((1, 3, 9, 5), {"pooling_type": "avg", "ksize": [2, 2], "strides": [3, 2], "padding_algorithm": "SAME"}),
    ((1, 3, 9, 5), {"pooling_type": "max", "ksize": [4, 2], "strides": [2, 1], "paddings": [5, 5],
                    "padding_algorithm": "VALID"}),
    ((2, 3, 5, 7), {"pooling_type": "avg", "ksize": [1, 1], "global_pooling": True, "paddings": [2, 2]}),
    ((2, 3, 7, 10), {"pooling_type": "avg", "ksize": [3, 4], "adaptive": True}),
    ((1, 2, 5, 3), {"pooling_type": "max", "ksize": [1, 1], "adaptive": True}),
    ((1, 6, 5, 3), {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2], "data_format": "NHWC"}),
]


@pytest.mark.parametrize("x_shape,attrs", POOL_CASES)
def test_pool2d_shape_matches_numpy(x_shape, attrs):
    expected = ref_pool2d(rand(*x_shape), attrs)
    assert infer("pool2d", {"X": x_shape}, attrs)["Out"] == TensorInfo(expected.shape, DType.float32)


def test_pool2d_carries_unknown_dims():
    max2 = {"pooling_type": "max", "ksize": [2, 2], "strides": [2, 2]}
    assert infer("pool2d", {"X": (-1, 3, -1, 9)}, max2)["Out"].shape == (-1, 3, -1, 4)
    adaptive = {**max2, "ksize": [3, 3], "adaptive": True}
    assert infer("pool2d", {"X": (2, -1, -1, -1)}, adaptive)["Out"].shape == (2, -1, 3, 3)
    assert infer("pool2d", {"X": (-1, 8, -1, -1)}, {**max2, "global_pooling": True})["Out"].shape == (-1, 8, 1, 1)


@pytest.mark.parametrize("attrs,message", [
    ({"pooling_type": "min", "ksize": [2, 2]}, "attr pooling_type = 'min' is not one of 'max', 'avg'"),
    ({"pooling_type": "max", "ksize": [2]}, "attr ksize must be 2 positive values, got [2]"),
    ({"pooling_type": "max", "ksize": [9, 2]}, "window (9 with dilation) is larger than the padded input (8 + 0 + 0)"),
    ({"pooling_type": "max", "ksize": [2, 2], "paddings": [1, 2, 3]}, "paddings must have 2 (symmetric) or 4"),
])
def test_pool2d_errors(attrs, message):
    with pytest.raises(InferError) as info:
        infer("pool2d", {"X": (1, 3, 8, 8)}, attrs)
    assert message in str(info.value)


def test_pool2d_requires_pooling_type_and_ksize():
    with pytest.raises(SchemaError, match="op pool2d needs attr"):
        infer("pool2d", {"X": (1, 3, 8, 8)}, {"pooling_type": "max"})


# -- batch_norm / lrn -----------------------------------------------------------------------------
@pytest.mark.parametrize("x_shape,layout", [((2, 3, 5, 4), "NCHW"), ((2, 5, 4, 3), "NHWC"), ((4, 3), "NCHW"),
                                            ((2, 3, 5), "NCHW"), ((1, 2, 3, 2, 3), "NHWC")])
def test_batch_norm_shapes_match_numpy(x_shape, layout):
    c = x_shape[-1] if layout == "NHWC" else x_shape[1]
    scale, bias, mean = rand(c), rand(c), rand(c)
    var = np.abs(rand(c)) + 0.5
    expected = ref_batch_norm(rand(*x_shape), scale, bias, mean, var, 1e-5, layout)
    params = {"Scale": (c,), "Bias": (c,), "Mean": (c,), "Variance": (c,)}
    out = infer("batch_norm", {"X": x_shape, **params}, {"data_layout": layout, "is_test": True})
    assert out["Y"].shape == expected.shape
    assert out["MeanOut"].shape == out["VarianceOut"].shape == out["SavedMean"].shape == mean.shape


def test_batch_norm_float16_input_keeps_float32_statistics():
    params = {s: TensorInfo((3,), DType.float32) for s in ("Scale", "Bias", "Mean", "Variance")}
    out = infer("batch_norm", {"X": TensorInfo((-1, 3, -1, 8), DType.float16), **params})
    assert out["Y"] == TensorInfo((-1, 3, -1, 8), DType.float16)
    assert out["MeanOut"] == TensorInfo((3,), DType.float32)
    schema = get_schema("batch_norm")
    assert schema.decisive_slots == ("X",)
    assert set(schema.keep_dtype_slots) >= {"Scale", "Bias", "Mean", "Variance"}


def test_batch_norm_errors():
    params = {s: (3,) for s in ("Scale", "Bias", "Mean", "Variance")}
    with pytest.raises(InferError, match=r"Variance must have shape \[3\], got \[4\]"):
        infer("batch_norm", {"X": (1, 3, 4, 4), **params, "Variance": (4,)})
    with pytest.raises(InferError, match=r"Scale must have shape \[4\], got \[3\]"):
        infer("batch_norm", {"X": (1, 3, 4, 4), **params}, {"data_layout": "NHWC"})
    with pytest.raises(InferError, match=r"X must have rank 2 or 3 or 4 or 5, got shape \[3\]"):
        infer("batch_norm", {"X": (3,), **params})
    with pytest.raises(InferError, match="attr epsilon must be >= 0"):
        infer("batch_norm", {"X": (1, 3, 4, 4), **params}, {"epsilon": -1.0})


def test_lrn_matches_numpy():
    x = np.abs(rand(2, 7, 3, 4))
    out, mid = ref_lrn(x, 5, 2.0, 1e-4, 0.75)
    got = infer("lrn", {"X": x.shape})
    assert got["Out"].shape == out.shape and got["MidOut"].shape == mid.shape
    assert infer("lrn", {"X": (-1, 7, -1, 4)})["Out"].shape == (-1, 7, -1, 4)
    with pytest.raises(InferError, match="attr n must be a positive odd number, got 4"):
        infer("lrn", {"X": x.shape}, {"n": 4})
    with pytest.raises(InferError, match="attr beta must be > 0"):
        infer("lrn", {"X": x.shape}, {"beta": 0.0})
    with pytest.raises(InferError, match="X must have rank 4"):
        infer("lrn", {"X": (2, 7)})


# -- pad3d / dropout / softmax --------------------------------------------------------------------
PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@pytest.mark.parametrize("mode", list(PAD_MODES))
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_pad3d_matches_numpy(mode, layout):
    x = rand(1, 2, 3, 4, 5) if layout == "NCDHW" else rand(1, 3, 4, 5, 2)
    paddings = [1, 2, 0, 3, 2, 1]  # left, right, top, bottom, front, back
    spatial = [(2, 1), (0, 3), (1, 2)]
    pads = [(0, 0), (0, 0), *spatial] if layout == "NCDHW" else [(0, 0), *spatial, (0, 0)]
    expected = np.pad(x, pads, mode=PAD_MODES[mode])
    out = infer("pad3d", {"X": x.shape}, {"paddings": paddings, "mode": mode, "data_format": layout})["Out"]
    assert out.shape == expected.shape


def test_pad_shapes_and_bad_paddings():
    assert infer("pad", {"X": (2, 3, 4)}, {"paddings": [0, 1, 2, 0, 1, 1]})["Out"].shape == (3, 5, 6)
    assert infer("pad", {"X": (-1, 3)}, {"paddings": [1, 1, 0, 2]})["Out"].shape == (-1, 5)
    with pytest.raises(InferError, match="paddings must be 4 values >= 0"):
        infer("pad", {"X": (2, 3)}, {"paddings": [1, 1]})
    with pytest.raises(InferError, match="paddings must be 4 values >= 0"):
        infer("pad", {"X": (2, 3)}, {"paddings": [1, -1, 0, 0]})


def test_pad3d_paddings_tensor_and_unknown_dims():
    x = (1, 2, 3, 4, 5)
    tensor = TensorInfo((6,), DType.int32)
    assert infer("pad3d", {"X": x, "Paddings": tensor})["Out"].shape == (1, 2, -1, -1, -1)
    known = {"Paddings": [np.array([1, 1, 0, 0, 2, 0], np.int32)]}
    assert infer("pad3d", {"X": x, "Paddings": tensor}, values=known)["Out"].shape == (1, 2, 5, 4, 7)
    assert infer("pad3d", {"X": (-1, 2, -1, 4, 5)}, {"paddings": [1] * 6})["Out"].shape == (-1, 2, -1, 6, 7)
    assert "Paddings" in get_schema("pad3d").keep_dtype_slots


def test_pad3d_errors():
    with pytest.raises(InferError, match=r"paddings must be 6 values >= 0 .* got \[1, 1, 1, 1\]"):
        infer("pad3d", {"X": (1, 2, 3, 4, 5)}, {"paddings": [1, 1, 1, 1]})
    with pytest.raises(InferError, match=r"reflect padding of D \(3, 0\) must be smaller than the input's D \(3\)"):
        infer("pad3d", {"X": (1, 2, 3, 4, 5)}, {"paddings": [0, 0, 0, 0, 3, 0], "mode": "reflect"})
    with pytest.raises(InferError, match="attr mode = 'wrap' is not one of"):
        infer("pad3d", {"X": (1, 2, 3, 4, 5)}, {"mode": "wrap"})
    with pytest.raises(InferError, match="X must have rank 5"):
        infer("pad3d", {"X": (2, 3, 4, 5)})


@pytest.mark.parametrize("impl,scale", [("downgrade_in_infer", 0.75), ("upscale_in_train", 1.0)])
def test_dropout_inference(impl, scale):
    x = rand(3, 1, 5)
    expected = x * scale
    out = infer("dropout", {"X": (3, -1, 5)}, {"dropout_prob": 0.25, "is_test": True, "dropout_implementation": impl})
    assert out["Out"].shape == (3, -1, 5) and expected.shape == infer("dropout", {"X": x.shape})["Out"].shape
    assert out["Mask"].dtype is DType.uint8
    assert get_schema("dropout").inplace == {"X": "Out"}


def test_dropout_errors():
    with pytest.raises(InferError, match=r"attr dropout_prob must be in \[0, 1\], got 1.5"):
        infer("dropout", {"X": (2, 3)}, {"dropout_prob": 1.5})
    with pytest.raises(InferError, match="attr dropout_implementation = 'scale' is not one of"):
        infer("dropout", {"X": (2, 3)}, {"dropout_implementation": "scale"})


@pytest.mark.parametrize("shape,axis", [((2, 3, 5), -1), ((2, 3, 5), 1), ((4,), 0), ((3, 1, 2, 2), -3)])
def test_softmax_matches_numpy(shape, axis):
    x = rand(*shape)
    e = np.exp(x - x.max(axis, keepdims=True))
    expected = e / e.sum(axis, keepdims=True)
    assert infer("softmax", {"X": shape}, {"axis": axis})["Out"].shape == expected.shape
    assert infer("softmax", {"X": (-1, *shape[1:])}, {"axis": axis})["Out"].shape == (-1, *shape[1:])


def test_softmax_axis_out_of_range():
    with pytest.raises(InferError, match=r"softmax: attr axis must be in \[-2, 2\) for X \[2, 3\], got 2"):
        infer("softmax", {"X": (2, 3)}, {"axis": 2})


# -- matmul_v2 / mul / fc -------------------------------------------------------------------------
MATMUL_CASES = [
    ((3, 4), (4, 5), False, False),
    ((2, 3, 4), (4, 5), False, False),
    ((4, 3), (5, 4), True, True),
    ((2, 1, 3, 4), (5, 4, 6), False, False),
    ((7, 1, 4, 3), (6, 4, 5), True, False),
    ((4,), (4,), False, False),
    ((4,), (2, 4, 3), True, False),
    ((2, 3, 4), (4,), False, True),
    ((3, 2), (3,), True, False),
]


@pytest.mark.parametrize("x_shape,y_shape,trans_x,trans_y", MATMUL_CASES)
def test_matmul_v2_shape_matches_numpy(x_shape, y_shape, trans_x, trans_y):
    expected = ref_matmul(rand(*x_shape), rand(*y_shape), trans_x, trans_y)
    out = infer("matmul_v2", {"X": x_shape, "Y": y_shape}, {"trans_x": trans_x, "trans_y": trans_y})["Out"]
    assert out.shape == expected.shape


@pytest.mark.parametrize("x_shape,y_shape,expected", [
    ((-1, 5, 3), (3, 4), (-1, 5, 4)),
    ((-1, 1, 2, 3), (4, 3, 5), (-1, 4, 2, 5)),
    ((-1, 2, 3), (1, 3, 5), (-1, 2, 5)),
    ((-1, 2, 3), (-1, 3, 5), (-1, 2, 5)),
    ((-1, 2, 3), (6, 3, 5), (6, 2, 5)),
    ((2, -1), (3, 4), (2, 4)),
])
def test_matmul_v2_carries_unknown_dims(x_shape, y_shape, expected):
    assert infer("matmul_v2", {"X": x_shape, "Y": y_shape})["Out"].shape == expected


def test_matmul_v2_errors():
    with pytest.raises(InferError, match=r"X's contracted dim 4 != Y's 5 \(X \[3, 4\], Y \[5, 6\], trans_x=False"):
        infer("matmul_v2", {"X": (3, 4), "Y": (5, 6)})
    with pytest.raises(InferError, match=r"batch dims \[2\] and \[3\] do not broadcast \(2 vs 3\)"):
        infer("matmul_v2", {"X": (2, 3, 4), "Y": (3, 4, 5)})
    with pytest.raises(InferError, match="X and Y must have rank >= 1"):
        infer("matmul_v2", {"X": (), "Y": (3,)})


@pytest.mark.parametrize("x_shape,y_shape,xc,yc", [
    ((6, 4), (4, 3), 1, 1),
    ((2, 3, 4, 5), (20, 7), 2, 1),
    ((2, 3, 4), (3, 4, 2, 5), 1, 2),
    ((5, 2, 6), (3, 4, 7), 1, 2),
])
def test_mul_shape_matches_numpy(x_shape, y_shape, xc, yc):
    expected = ref_mul(rand(*x_shape), rand(*y_shape), xc, yc)
    out = infer("mul", {"X": x_shape, "Y": y_shape}, {"x_num_col_dims": xc, "y_num_col_dims": yc})["Out"]
    assert out.shape == expected.shape


def test_mul_unknown_dims_and_errors():
    assert infer("mul", {"X": (-1, 3, 4), "Y": (12, 5)})["Out"].shape == (-1, 5)
    assert infer("mul", {"X": (2, -1, 4), "Y": (12, 5)})["Out"].shape == (2, 5)
    with pytest.raises(InferError, match=r"X \[2, 3, 4\] flattened at 1 has 12 columns but Y \[10, 5\] flattened "
                                         r"at 1 has 10 rows"):
        infer("mul", {"X": (2, 3, 4), "Y": (10, 5)})
    with pytest.raises(InferError, match=r"attr x_num_col_dims must be in \[1, 2\] for X \[2, 3, 4\], got 3"):
        infer("mul", {"X": (2, 3, 4), "Y": (10, 5)}, {"x_num_col_dims": 3})


@pytest.mark.parametrize("x_shape,cols,act", [((4, 6), 1, ""), ((2, 3, 4, 5), 2, "relu"), ((2, 3, 5), 2, "relu")])
def test_fc_matches_numpy(x_shape, cols, act):
    x = rand(*x_shape)
    w, b = rand(int(np.prod(x_shape[cols:])), 7), rand(7)
    expected = ref_mul(x, w, cols, 1) + b
    expected = np.maximum(expected, 0) if act == "relu" else expected
    out = infer("fc", {"Input": x_shape, "W": w.shape, "Bias": b.shape},
                {"in_num_col_dims": cols, "activation_type": act})["Out"]
    assert out.shape == expected.shape
    assert infer("fc", {"Input": (-1, *x_shape[1:]), "W": w.shape, "Bias": (1, 7)},
                 {"in_num_col_dims": cols})["Out"].shape == (-1, *expected.shape[1:])


def test_fc_padding_weights_and_errors():
    assert infer("fc", {"Input": (2, 6), "W": (10, 9)}, {"padding_weights": True})["Out"].shape == (2, 5)
    with pytest.raises(InferError, match=r"Input \[2, 6\] flattened at 1 has 6 columns but W \[5, 9\] has 5 rows"):
        infer("fc", {"Input": (2, 6), "W": (5, 9)})
    with pytest.raises(InferError, match=r"Bias must have shape \[9\] or \[1, 9\], got \[2, 9\]"):
        infer("fc", {"Input": (2, 6), "W": (6, 9), "Bias": (2, 9)})
    with pytest.raises(InferError, match="attr activation_type = 'leaky_relu' is not one of"):
        infer("fc", {"Input": (2, 6), "W": (6, 9)}, {"activation_type": "leaky_relu"})


# -- against Paddle's own inference -----------------------------------------------------------------
def test_inference_reproduces_paddle_exported_shapes():
    prog = Program.from_bytes((FIXTURES / "resnet_tiny.pdmodel").read_bytes())
    block = prog.global_block()
    checked = set()
    for op in block.ops:
        if op.type not in ("conv2d", "depthwise_conv2d", "pool2d", "batch_norm", "matmul_v2", "softmax"):
            continue
        inputs = {slot: TensorInfo(block.find_var(names[0]).shape, block.find_var(names[0]).dtype)
                  for slot, names in op.inputs.items() if names}
        outputs = infer(op.type, inputs, op.attrs)
        for slot, names in op.outputs.items():
            if slot not in ("SavedMean", "SavedVariance"):  # Paddle declares these with dims []
                assert outputs[slot].shape == block.find_var(names[0]).shape, (op.type, slot)
        checked.add(op.type)
    assert len(checked) == 6


# -- layer functions ------------------------------------------------------------------------------
def _build_convnet() -> Program:
    prog = Program()
    with halfway.program_guard(prog):
        x = layers.data("image", [-1, 3, 16, 12])
        y = layers.conv2d(x, 8, 3, padding=1)
        y = layers.batch_norm(y, act="relu")
        y = layers.conv2d(y, 8, [3, 5], stride=2, padding="SAME", groups=8, bias_attr=False)
        y = layers.pool2d(y, 2, "avg", pool_stride=2, ceil_mode=True)
        y = layers.lrn(y)
        y = layers.dropout(y, 0.25)
        y = layers.adaptive_pool2d(y, [2, 3], "avg")
        z = layers.fc(y, 10, act="relu")
        z = layers.fc(z, 5)
        layers.softmax(z)
    return prog


def test_layers_build_paddle_shaped_convnet():
    prog = _build_convnet()
    ops = prog.global_block().ops
    assert [op.type for op in ops] == [
        "conv2d", "elementwise_add", "batch_norm", "relu", "depthwise_conv2d", "pool2d", "lrn", "dropout", "pool2d",
        "mul", "elementwise_add", "relu", "matmul_v2", "elementwise_add", "softmax"]
    conv, add, bn, _, dw, pool, _, drop, adaptive, mul, *_ = ops
    assert conv.attr("paddings") == (1, 1) and conv.attr("padding_algorithm") == "EXPLICIT"
    assert add.attr("axis") == 1 and add.input("Y") == ("conv2d_0.b_0",)
    assert bn.attr("is_test") and bn.attr("use_global_stats")
    assert bn.output("MeanOut") == bn.input("Mean") and bn.output("VarianceOut") == bn.input("Variance")
    assert dw.attr("groups") == 8 and dw.attr("padding_algorithm") == "SAME"
    assert pool.attr("ceil_mode") and pool.attr("pooling_type") == "avg"
    assert adaptive.attr("adaptive") and adaptive.attr("ksize") == (2, 3)
    assert drop.attr("is_test") and drop.attr("dropout_prob") == 0.25 and not drop.output("Mask")
    assert mul.attr("x_num_col_dims") == 1
    shape = lambda op, slot: op.output_var(slot).shape  # noqa: E731
    assert shape(conv, "Output") == (-1, 8, 16, 12)
    assert shape(dw, "Output") == (-1, 8, 8, 6)
    assert shape(pool, "Out") == (-1, 8, 4, 3)
    assert shape(ops[-1], "Out") == (-1, 5)
    params = {v.name: v.shape for v in prog.persistable_vars()}
    assert params == {
        "conv2d_0.w_0": (8, 3, 3, 3), "conv2d_0.b_0": (8,),
        "batch_norm_0.w_0": (8,), "batch_norm_0.w_1": (8,), "batch_norm_0.w_2": (8,), "batch_norm_0.b_0": (8,),
        "depthwise_conv2d_0.w_0": (8, 1, 3, 5),
        "fc_0.w_0": (48, 10), "fc_0.b_0": (10,), "fc_1.w_0": (10, 5), "fc_1.b_0": (5,)}
    assert Program.from_bytes(prog.to_bytes()).to_bytes() == prog.to_bytes()


def test_init_scope_gives_reproducible_parameters():
    prog = _build_convnet()
    first, again = halfway.init_scope(prog, seed=0), halfway.init_scope(_build_convnet(), seed=0)
    for var in prog.persistable_vars():
        assert first.get(var.name).shape == var.shape
        np.testing.assert_array_equal(first.get(var.name), again.get(var.name))
    np.testing.assert_array_equal(first.get("batch_norm_0.w_0"), np.ones(8, np.float32))
    np.testing.assert_array_equal(first.get("batch_norm_0.w_2"), np.ones(8, np.float32))
    np.testing.assert_array_equal(first.get("batch_norm_0.w_1"), np.zeros(8, np.float32))
    assert first.get("conv2d_0.w_0").std() > 0
    assert not np.array_equal(first.get("conv2d_0.w_0"), halfway.init_scope(prog, seed=1).get("conv2d_0.w_0"))


def test_layers_matmul_mul_pad3d_conv_transpose():
    prog = Program()
    with halfway.program_guard(prog):
        a = layers.data("a", [-1, 4, 3])
        b = layers.data("b", [3, 5])
        m = layers.matmul(a, b)
        t = layers.matmul(a, a, transpose_x=True)
        k = layers.mul(layers.data("c", [2, 3, 4]), layers.data("d", [12, 6]))
        v = layers.data("v", [1, 2, 3, 4, 5])
        p = layers.pad3d(v, [1, 1, 0, 2, 3, 0], mode="replicate")
        q = layers.pad3d(v, layers.data("pads", [6], "int32"))
        img = layers.data("img", [1, 4, 5, 5])
        up = layers.conv2d_transpose(img, 6, 3, stride=2, padding=1, groups=2, act="relu")
        nhwc = layers.conv2d(layers.data("nhwc", [1, 6, 6, 3]), 4, 3, data_format="NHWC")
    assert m.shape == (-1, 4, 5) and t.shape == (-1, 3, 3) and k.shape == (2, 6)
    assert p.shape == (1, 2, 6, 6, 7) and q.shape == (1, 2, -1, -1, -1)
    assert up.shape == (1, 6, 9, 9) and nhwc.shape == (1, 4, 4, 4)
    types = [op.type for op in prog.global_block().ops]
    assert types == ["matmul_v2", "matmul_v2", "mul", "pad3d", "pad3d", "conv2d_transpose", "elementwise_add",
                     "relu", "conv2d", "elementwise_add"]
    assert prog.global_block().ops[-1].attr("axis") == -1
    assert prog.global_block().var("conv2d_transpose_0.w_0").shape == (4, 3, 3, 3)


def test_layer_argument_errors():
    with halfway.program_guard(Program()):
        x = layers.data("x", [1, 6, 8, 8])
        with pytest.raises(halfway.IRError, match=r"groups=4 must divide input channels \(6\)"):
            layers.conv2d(x, 8, 3, groups=4)
        with pytest.raises(halfway.IRError, match="give pool_size, or global_pooling=True"):
            layers.pool2d(x)
        with pytest.raises(halfway.IRError, match=r"dims \[-1\] of h must be known"):
            layers.fc(layers.data("h", [2, -1]), 3)
        with pytest.raises(InferError, match="conv2d: spatial dim 0: the window .* is larger than the padded input"):
            layers.conv2d(x, 4, 9)
        with pytest.raises(halfway.SchemaError, match="unknown op type 'rleu'"):
            layers.fc(layers.data("f", [2, 3]), 4, act="rleu")
        block = halfway.default_main_program().global_block()
        assert block.ops == () and sorted(block.vars) == ["f", "h", "x"]
        assert halfway.default_main_program().initializers == {}
