"""The interpolations (``ir/ops/resize.py``, their numpy kernel and the Resize / Upsample
converters): ONNX models as the PyTorch exporter writes them for ``F.interpolate`` against ONNX
Runtime, with constant and run-time scales and sizes, in float32 and float16; Paddle's own
align_corners / align_mode rules against a direct per-pixel transcription of Paddle's kernels."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import helper, numpy_helper

import halfway
from halfway.executor import Executor
from halfway.ir.builder import append_op, program_guard
from halfway.ir.errors import HalfwayError
from tests.support.oprun import float16_tolerance, run_op

RNG = np.random.default_rng(11)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _resize_model(op_type: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], inputs: list[str],
                  opset: int, **attrs: object):
    node = helper.make_node(op_type, inputs, ["y"], **attrs)
    elem = helper.np_dtype_to_tensor_dtype
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info(n, elem(a.dtype), a.shape) for n, a in feeds.items()],
        [helper.make_tensor_value_info("y", elem(feeds["x"].dtype), None)],
        [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(op_type: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], inputs: list[str],
           opset: int = 13, **attrs: object) -> None:
    """halfway against ONNX Runtime on the model, and in float16 against ONNX Runtime's float32
    result on the same (float16-rounded) input."""
    model = _resize_model(op_type, feeds, consts, inputs, opset, **attrs)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)[0]
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {n: feeds[n] for n in names}, fetches, scope)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    half = {**feeds, "x": feeds["x"].astype(np.float16)}
    want16 = session.run(None, {**half, "x": half["x"].astype(np.float32)})[0]
    prog, names, fetches, scope = halfway.load(_resize_model(op_type, half, consts, inputs, opset, **attrs))
    got16 = Executor().run(prog, {n: half[n] for n in names}, fetches, scope)[0]
    assert got16.dtype == np.float16
    tol = 4 * float16_tolerance(16)
    np.testing.assert_allclose(got16.astype(np.float32), want16, rtol=tol, atol=tol * np.abs(want16).max())


SCALES = np.array([1, 1, 2, 1.5], np.float32)
DOWN = np.array([1, 1, 0.6, 0.5], np.float32)
TORCH_MODES = [  # F.interpolate's mode and align_corners, as the exporter writes them
    {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
    {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
    {"mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel", "cubic_coeff_a": -0.75},
    {"mode": "cubic", "coordinate_transformation_mode": "align_corners", "cubic_coeff_a": -0.75},
]


@pytest.mark.parametrize("attrs", TORCH_MODES, ids=lambda a: f"{a['mode']}-{a['coordinate_transformation_mode']}")
@pytest.mark.parametrize("scales", [SCALES, DOWN], ids=["up", "down"])
def test_pytorch_interpolate_with_constant_scales(attrs, scales):
    _check("Resize", {"x": _x(2, 3, 5, 6)}, {"scales": scales}, ["x", "", "scales"], **attrs)


@pytest.mark.parametrize("attrs", TORCH_MODES, ids=lambda a: f"{a['mode']}-{a['coordinate_transformation_mode']}")
def test_pytorch_interpolate_with_constant_sizes_at_opset_11(attrs):
    consts = {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
              "sizes": np.array([2, 3, 7, 4], np.int64)}
    _check("Resize", {"x": _x(2, 3, 5, 6)}, consts, ["x", "roi", "scales", "sizes"], opset=11, **attrs)


@pytest.mark.parametrize("attrs", TORCH_MODES[:3], ids=lambda a: f"{a['mode']}-{a['coordinate_transformation_mode']}")
def test_scales_and_sizes_computed_at_run_time(attrs):
    x = _x(1, 2, 4, 6)  # 6 * 1.5 is whole: align_corners divides by in * scale (onnx's reference), ONNX Runtime by out
    _check("Resize", {"x": x, "scales": SCALES}, {}, ["x", "", "scales"], **attrs)
    _check("Resize", {"x": x, "sizes": np.array([1, 2, 3, 9], np.int64)}, {}, ["x", "", "", "sizes"], **attrs)


def test_resize_of_a_3d_and_a_5d_tensor_and_of_channels():
    _check("Resize", {"x": _x(2, 3, 7)}, {"scales": np.array([1, 1, 1.7], np.float32)}, ["x", "", "scales"],
           mode="linear")
    _check("Resize", {"x": _x(1, 2, 3, 4, 5)}, {"scales": np.array([1, 1, 2, 0.5, 1.4], np.float32)},
           ["x", "", "scales"], mode="linear", coordinate_transformation_mode="align_corners")
    _check("Resize", {"x": _x(2, 3, 4)}, {"scales": np.array([1.5, 2, 1], np.float32)}, ["x", "", "scales"],
           mode="nearest")


@pytest.mark.parametrize("opset", [7, 9])
def test_upsample(opset):
    x, scales = _x(1, 2, 3, 4), np.array([1, 1, 2, 3], np.float32)
    for mode in ("nearest", "linear"):
        if opset == 7:
            _check("Upsample", {"x": x}, {}, ["x"], opset=7, mode=mode, scales=scales.tolist())
        else:
            _check("Upsample", {"x": x}, {"scales": scales}, ["x", "scales"], opset=9, mode=mode)


def test_resize_10_rounds_nearest_up_when_it_shrinks():
    _check("Resize", {"x": _x(1, 1, 6, 7)}, {"scales": DOWN}, ["x", "scales"], opset=10, mode="nearest")
    _check("Resize", {"x": _x(1, 1, 3, 4)}, {"scales": SCALES}, ["x", "scales"], opset=10, mode="linear")


def test_constant_identity_resize_is_a_copy():
    model = _resize_model("Resize", {"x": _x(1, 2, 3, 4)}, {"scales": np.ones(4, np.float32)}, ["x", "", "scales"],
                          13, mode="linear")
    prog = halfway.load(model)[0]
    assert [op.type for op in prog.global_block().ops if op.type not in ("feed", "fetch")] == ["assign"]


# -- Paddle's rules --------------------------------------------------------------------------------
def _paddle_source(k: int, ratio: float, align_flag: bool) -> float:
    return max(ratio * (k + 0.5) - 0.5, 0.0) if align_flag else ratio * k


def _paddle_bilinear(x: np.ndarray, out_h: int, out_w: int, align_corners: bool, align_mode: int) -> np.ndarray:
    """Paddle's BilinearInterpolation, pixel by pixel."""
    n, c, in_h, in_w = x.shape

    def ratio(size_in: int, size_out: int) -> float:
        if align_corners:
            return (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
        return size_in / size_out

    flag = align_mode == 0 and not align_corners
    out = np.zeros((n, c, out_h, out_w), np.float64)
    for k in range(out_h):
        sy = _paddle_source(k, ratio(in_h, out_h), flag)
        y0 = int(sy)
        y1, dy = min(y0 + 1, in_h - 1), sy - y0
        for m in range(out_w):
            sx = _paddle_source(m, ratio(in_w, out_w), flag)
            x0 = int(sx)
            x1, dx = min(x0 + 1, in_w - 1), sx - x0
            out[:, :, k, m] = ((1 - dy) * ((1 - dx) * x[:, :, y0, x0] + dx * x[:, :, y0, x1])
                               + dy * ((1 - dx) * x[:, :, y1, x0] + dx * x[:, :, y1, x1]))
    return out


@pytest.mark.parametrize("align_corners, align_mode", [(True, 1), (False, 0), (False, 1)])
def test_paddle_bilinear_rules(align_corners, align_mode):
    x = _x(2, 3, 4, 5)
    ran = run_op("bilinear_interp_v2", {"X": x}, {"out_h": 7, "out_w": 3, "align_corners": align_corners,
                                                  "align_mode": align_mode})
    np.testing.assert_allclose(ran.out, _paddle_bilinear(x, 7, 3, align_corners, align_mode), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("align_corners", [True, False])
def test_paddle_nearest_rules_and_run_time_sizes(align_corners):
    x = _x(1, 2, 5, 6)
    out_h, out_w = 8, 4
    ratios = [((i - 1) / (o - 1) if align_corners else i / o) for i, o in ((5, out_h), (6, out_w))]
    rows = [int(ratios[0] * k + 0.5) if align_corners else int(ratios[0] * k) for k in range(out_h)]
    cols = [int(ratios[1] * k + 0.5) if align_corners else int(ratios[1] * k) for k in range(out_w)]
    want = x[:, :, rows][:, :, :, cols]
    attrs = {"align_corners": align_corners}
    np.testing.assert_array_equal(run_op("nearest_interp_v2", {"X": x}, {**attrs, "out_h": 8, "out_w": 4}).out, want)
    np.testing.assert_array_equal(run_op("nearest_interp_v2", {"X": x, "OutSize": np.array([8, 4], np.int32)},
                                         attrs).out, want)
    sizes = [np.array([8], np.int32), np.array([4], np.int32)]
    np.testing.assert_array_equal(run_op("nearest_interp_v2", {"X": x, "SizeTensor": sizes}, attrs).out, want)


def test_scale_attr_places_coordinates_by_the_scale():
    x = _x(1, 1, 3, 3)
    got = run_op("nearest_interp_v2", {"X": x}, {"scale": [1.5], "align_corners": False}).out
    index = [int(k / 1.5) for k in range(4)]
    np.testing.assert_array_equal(got, x[:, :, index][:, :, :, index])


def test_inference_keeps_unknown_dims_and_run_time_sizes_unknown():
    prog = halfway.Program()
    block = prog.global_block()
    with program_guard(prog):
        x = block.create_var("x", dtype="float32", shape=[-1, 3, -1, 4])
        size = block.create_var("size", dtype="int32", shape=[2])
        by_scale = append_op("bilinear_interp_v2", {"X": x}, {"scale": [2.0, 2.5]})["Out"][0]
        by_size = append_op("bicubic_interp_v2", {"X": x, "OutSize": size})["Out"][0]
    assert list(by_scale.shape) == [-1, 3, -1, 10]
    assert list(by_size.shape) == [-1, 3, -1, -1]


def test_sizes_that_do_not_fit_the_axes_name_the_op():
    with pytest.raises(HalfwayError, match="bilinear_interp_v2.*one value per resized axis"):
        run_op("bilinear_interp_v2", {"X": _x(1, 1, 2, 2), "OutSize": np.array([3, 3, 3], np.int32)})
    with pytest.raises(HalfwayError, match="name a dim twice"):
        run_op("nearest_interp_v2", {"X": _x(1, 1, 2, 2)}, {"axes": [2, -2], "scale": [2.0]})


def test_unsupported_mode_names_the_node():
    model = _resize_model("Resize", {"x": _x(1, 1, 2, 2)}, {"scales": SCALES}, ["x", "", "scales"], 13, mode="area")
    with pytest.raises(HalfwayError, match="Resize.*mode 'area'"):
        halfway.load(model)


@pytest.mark.parametrize("name", ["yolo_torchscript", "segformer_eager_dynamo", "mobilevit_torchscript"])
def test_modern_fixtures_resizing_match_onnxruntime_at_fixed_shapes(name):
    """Exported upsampling (YOLO's nearest, SegFormer's and MobileViT's bilinear) with the input
    shapes given, until their symbolic dims import."""
    from tests.support.modern import FIXTURE_DIR, cases

    inputs, want = cases(name)[0]
    prog, feeds, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"),
                                               input_shapes={n: v.shape for n, v in inputs.items()})
    assert any(op.type.endswith("interp_v2") for op in prog.global_block().ops)
    for fetch, got in zip(fetches, Executor().run(prog, {n: inputs[n] for n in feeds}, fetches, scope)):
        np.testing.assert_allclose(got, want[fetch], rtol=1e-4, atol=1e-5 * max(1.0, np.abs(want[fetch]).max()))


@pytest.mark.parametrize("coordinates, rounding, repeated", [
    ("asymmetric", "floor", True), ("half_pixel", "round_prefer_floor", True),
    ("align_corners", "floor", False), ("asymmetric", "ceil", False)])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 2, 3, 1]], ids=["2x2", "channels-3x"])
def test_nearest_whole_upscales_repeat_blocks(monkeypatch, coordinates, rounding, repeated, scales):
    """A nearest upscale by whole factors whose output i reads input i // factor (YOLO's 2x) is
    repeated in blocks; other rounding reads other pixels and takes the gathers. Both match ONNX
    Runtime."""
    from halfway.kernels.numpy import resize

    calls, original = [], resize._repeat_blocks
    monkeypatch.setattr(resize, "_repeat_blocks", lambda *a: calls.append(1) or original(*a))
    _check("Resize", {"x": _x(2, 3, 4, 5)}, {"scales": np.array(scales, np.float32)}, ["x", "", "scales"],
           mode="nearest", coordinate_transformation_mode=coordinates, nearest_mode=rounding)
    assert bool(calls) == repeated
