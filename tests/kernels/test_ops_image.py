"""The image-geometry ops (``ir/ops/image.py``, their numpy kernels and ONNX converters):
DepthToSpace / SpaceToDepth, GridSample and AffineGrid imported and run against onnx's reference
implementation, in float32 and float16."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import halfway
from halfway.executor import Executor
from halfway.ir.errors import HalfwayError
from tests.support.oprun import float16_tolerance, run_op

RNG = np.random.default_rng(23)


def _model(op_type: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], opset: int, **attrs: object):
    node = helper.make_node(op_type, [*feeds, *consts], ["y"], **attrs)
    elem = helper.np_dtype_to_tensor_dtype
    graph = helper.make_graph(
        [node], "image", [helper.make_tensor_value_info(n, elem(a.dtype), a.shape) for n, a in feeds.items()],
        [helper.make_empty_tensor_value_info("y")], [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(op_type: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray] | None = None,
           opset: int = 20, rtol: float = 1e-5, **attrs: object) -> np.ndarray:
    model = _model(op_type, feeds, consts or {}, opset, **attrs)
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {n: feeds[n] for n in names}, fetches, scope)[0]
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_depth_to_space_both_orders_and_space_to_depth(dtype):
    x = RNG.integers(-50, 50, (2, 8, 3, 2)).astype(dtype)
    _check("DepthToSpace", {"x": x}, opset=13, blocksize=2)
    _check("DepthToSpace", {"x": x}, opset=13, blocksize=2, mode="CRD")
    _check("SpaceToDepth", {"x": RNG.integers(-50, 50, (2, 3, 4, 6)).astype(dtype)}, opset=13, blocksize=2)


def test_pixel_shuffle_and_unshuffle_invert_each_other():
    x = RNG.standard_normal((1, 18, 2, 3)).astype(np.float32)
    shuffled = run_op("pixel_shuffle", {"X": x}, {"upscale_factor": 3}).out
    assert shuffled.shape == (1, 2, 6, 9)
    np.testing.assert_array_equal(shuffled[0, 1, 4, 7], x[0, 1 * 9 + 1 * 3 + 1, 1, 2])  # Paddle's channel-major blocks
    np.testing.assert_array_equal(run_op("pixel_unshuffle", {"X": shuffled}, {"downscale_factor": 3}).out, x)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_grid_sample_4d(mode, padding_mode, align_corners):
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1.4, 1.4, (2, 3, 6, 2)).astype(np.float32)
    _check("GridSample", {"x": x, "grid": grid}, mode=mode, padding_mode=padding_mode, align_corners=align_corners)


@pytest.mark.parametrize("mode16, mode20", [("bilinear", "linear"), ("nearest", "nearest"), ("bicubic", "cubic")])
def test_grid_sample_16_mode_names_and_float16(mode16, mode20):
    """Opset 16's names against onnx's reference under opset 20's (it knows only those)."""
    x = RNG.standard_normal((1, 2, 5, 4)).astype(np.float16)
    grid = RNG.uniform(-1.1, 1.1, (1, 4, 3, 2)).astype(np.float16)
    got = _check("GridSample", {"x": x, "grid": grid}, rtol=8 * float16_tolerance(16), mode=mode20)
    prog, names, fetches, scope = halfway.load(_model("GridSample", {"x": x, "grid": grid}, {}, 16, mode=mode16))
    np.testing.assert_array_equal(Executor().run(prog, {"x": x, "grid": grid}, fetches, scope)[0], got)


@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_volumetric(padding_mode):
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1.3, 1.3, (1, 2, 3, 2, 3)).astype(np.float32)
    for mode in ("linear", "nearest"):
        _check("GridSample", {"x": x, "grid": grid}, mode=mode, padding_mode=padding_mode)


@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_2d_and_3d_with_constant_and_run_time_sizes(align_corners):
    theta2, theta3 = (RNG.standard_normal((2, k, k + 1)).astype(np.float32) for k in (2, 3))
    _check("AffineGrid", {"theta": theta2}, {"size": np.array([2, 3, 4, 5], np.int64)}, align_corners=align_corners)
    _check("AffineGrid", {"theta": theta3}, {"size": np.array([2, 3, 2, 4, 5], np.int64)},
           align_corners=align_corners)
    _check("AffineGrid", {"theta": theta2, "size": np.array([2, 1, 3, 6], np.int64)}, align_corners=align_corners)


def test_shapes_that_do_not_fit_name_the_op():
    with pytest.raises(HalfwayError, match="pixel_shuffle.*not a multiple of upscale_factor"):
        run_op("pixel_shuffle", {"X": np.zeros((1, 6, 2, 2), np.float32)}, {"upscale_factor": 2})
    with pytest.raises(HalfwayError, match="grid_sampler.*Grid's last dim must be 2"):
        run_op("grid_sampler", {"X": np.zeros((1, 1, 2, 2), np.float32), "Grid": np.zeros((1, 2, 2, 3), np.float32)})


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_col2im_2d_and_3d_with_strides_pads_and_dilations(dtype):
    rtol = 4 * float16_tolerance(4) if dtype is np.float16 else 1e-5
    image, block = np.array([5, 6], np.int64), np.array([2, 3], np.int64)
    attrs = {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]}
    blocks = ((5 + 1 - 2) // 2 + 1) * ((6 + 1 - 5) // 1 + 1)
    x = RNG.standard_normal((2, 3 * 6, blocks)).astype(dtype)
    _check("Col2Im", {"x": x}, {"image": image, "block": block}, opset=18, rtol=rtol, **attrs)
    x3 = RNG.standard_normal((1, 2 * 8, 3 * 2 * 2)).astype(dtype)
    _check("Col2Im", {"x": x3}, {"image": np.array([4, 3, 3], np.int64), "block": np.array([2, 2, 2], np.int64)},
           opset=18, rtol=rtol)


@pytest.mark.parametrize("shape, axes", [([3, 7], [1, 2]), ([6, 2, 5], None), ([4], [-1])])
def test_center_crop_pad_crops_and_pads_about_the_centre(shape, axes):
    x = RNG.standard_normal((4, 5, 3)).astype(np.float32)
    attrs = {} if axes is None else {"axes": axes}
    _check("CenterCropPad", {"x": x}, {"shape": np.array(shape, np.int64)}, opset=18, **attrs)


def test_fold_needs_blocks_that_fit_the_output():
    with pytest.raises(HalfwayError, match="fold.*must hold C \\* 4 rows of 4 blocks"):
        run_op("fold", {"X": np.zeros((1, 4, 5), np.float32)}, {"output_sizes": [3, 3], "kernel_sizes": [2, 2]})
