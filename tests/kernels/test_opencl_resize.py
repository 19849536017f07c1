"""The OpenCL interpolations (nearest_interp_v2, bilinear_interp_v2) against the numpy kernel of
the same ops: 2x up, a fractional down, sizes by attr and by a parameter, Paddle's align_corners /
align_mode rules and ONNX's coordinate and nearest rounding modes, float32 and float16; what the
kernel does not cover falls back to numpy, saying why."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.extras import import_pyopencl

import_pyopencl()

from tests.kernels.test_opencl_kernels import FLOATS, check, rand
from tests.support.oprun import run_op

pytestmark = pytest.mark.opencl

SIZES = [{"scale": [2.0, 2.0]}, {"scale": [0.6, 0.45]}, {"out_h": 7, "out_w": 3}]
PADDLE_RULES = [{"align_corners": True}, {"align_corners": False, "align_mode": 0},
                {"align_corners": False, "align_mode": 1}]
ONNX_MODES = ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners", "half_pixel_symmetric"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("size", SIZES, ids=["up2", "down", "sizes"])
@pytest.mark.parametrize("rule", PADDLE_RULES, ids=["corners", "mode0", "mode1"])
@pytest.mark.parametrize("op_type", ["bilinear_interp_v2", "nearest_interp_v2"])
def test_paddle_rules(place, op_type, rule, size, dtype):
    check(place, op_type, {"X": rand(2, 3, 5, 6, dtype=dtype)}, {**rule, **size})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("size", SIZES[:2], ids=["up2", "down"])
@pytest.mark.parametrize("mode", ONNX_MODES)
def test_bilinear_onnx_modes(place, mode, size, dtype):
    check(place, "bilinear_interp_v2", {"X": rand(1, 2, 6, 5, dtype=dtype)},
          {"coordinate_transformation_mode": mode, "align_corners": False, **size})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("size", SIZES[:2], ids=["up2", "down"])
@pytest.mark.parametrize("rounding", NEAREST_MODES)
@pytest.mark.parametrize("mode", ["half_pixel", "asymmetric", "pytorch_half_pixel"])
def test_nearest_onnx_modes(place, mode, rounding, size, dtype):
    check(place, "nearest_interp_v2", {"X": rand(1, 2, 6, 5, dtype=dtype)},
          {"coordinate_transformation_mode": mode, "nearest_mode": rounding, "align_corners": False, **size})


@pytest.mark.parametrize("op_type", ["bilinear_interp_v2", "nearest_interp_v2"])
def test_one_axis_resized_and_sizes_from_parameters(place, op_type):
    x = rand(2, 3, 4, 5)
    check(place, op_type, {"X": x}, {"scale": [1.0, 2.5], "align_corners": False})
    check(place, op_type, {"X": x, "OutSize": np.array([4, 9], np.int32)}, {"align_corners": False},
          params=("OutSize",))
    check(place, op_type, {"X": x, "Scale": np.array([0.5, 1.5], np.float32)}, {"align_corners": False},
          params=("Scale",))


@pytest.mark.parametrize("inputs, attrs, reason", [
    ({"X": rand(1, 4, 5, 3)}, {"data_layout": "NHWC", "scale": [2.0, 2.0]}, "NHWC"),
    ({"X": rand(1, 2, 5, 6)}, {"scale": [0.5, 0.5], "antialias": True}, "antialias"),
    ({"X": rand(1, 2, 3, 5, 6)}, {"scale": [2.0, 2.0, 2.0]}, "shape [1, 2, 3, 5, 6]"),
], ids=["nhwc", "antialias", "5d"])
def test_declines_to_numpy_naming_why(place, inputs, attrs, reason):
    ran = run_op("bilinear_interp_v2", inputs, {"align_corners": False, **attrs}, place=place)
    fallbacks = ran.report.fallbacks
    assert [op_type for _, op_type, _ in fallbacks] == ["bilinear_interp_v2"]
    assert reason in fallbacks[0][2], fallbacks[0][2]
    want = run_op("bilinear_interp_v2", inputs, {"align_corners": False, **attrs}).outputs["Out"][0]
    np.testing.assert_allclose(ran.outputs["Out"][0], want, rtol=1e-6)


def test_axes_left_as_they_are_and_a_resized_channel_axis(place):
    x = rand(2, 3, 4, 5)
    check(place, "bilinear_interp_v2", {"X": x}, {"axes": [0, 1, 2, 3], "scale": [1.0, 1.0, 2.0, 1.5],
                                                  "coordinate_transformation_mode": "half_pixel"})
    ran = run_op("nearest_interp_v2", {"X": x}, {"axes": [1, 2], "scale": [2.0, 2.0]}, place=place)
    assert "resizing axes [1, 2]" in ran.report.fallbacks[0][2]
