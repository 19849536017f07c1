"""float16's range around the runs of a float16 program: a feed beyond it, or an op that overflows
it where float32 stays finite, is a Float16RangeError naming the var and the op (numpy, OpenCL,
the command line); inf/NaN the float32 program computes too come back as they are."""

from __future__ import annotations

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import Executor, Float16RangeError
from tests.support.clirun import RESNET_TINY, one_line_error
from tests.support.clirun import halfway as cli

F16_MAX = float(np.finfo(np.float16).max)


def _programs() -> tuple[halfway.Program, halfway.Program, halfway.Scope, str, str]:
    """conv -> relu (float16 after the transpile) -> log (float32): the float32 program, the
    float16 one, their scope, the relu output and the log output."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [1, 3, 6, 6])
        r = layers.relu(layers.conv2d(x, num_filters=4, filter_size=3, padding=1))
        out = layers.log(r)
    scope = halfway.init_scope(prog, seed=0)
    scope.set("conv2d_0.w_0", np.abs(scope.get("conv2d_0.w_0")))  # a positive input gives a positive output
    half, _ = halfway.float16_transpile(prog, scope)
    return prog, half, scope, r.name, out.name


def _run(program, x, fetch, scope, **options):
    return Executor().run(program, {"x": x}, fetch, scope, **options)


@pytest.mark.parametrize("value", [7e4, 1e6, -7e4])
def test_a_feed_beyond_float16_is_an_error_naming_it_and_the_cast(value):
    prog, half, scope, relu, out = _programs()
    x = np.full((1, 3, 6, 6), 0.5, np.float32)
    x[0, 1, 2, 3] = value
    assert all(np.isfinite(v).all() for v in _run(prog, x, [relu], scope))  # float32 copes
    with pytest.raises(Float16RangeError, match=r"feed 'x' holds .*beyond float16's range.*op #0 cast\(X=x\)"):
        _run(half, x, [relu], scope)


@pytest.mark.parametrize("fill, put", [(np.inf, None), (0.5, np.inf), (-np.inf, None), (np.nan, None), (0.5, -np.inf)],
                         ids=["all inf", "one inf", "all -inf", "all nan", "one -inf"])
def test_infinities_and_nans_fed_pass_as_float16_holds_them(fill, put):
    """float16 holds inf and NaN as they are (ONNX's Cast): no error, and the results' infinities
    and NaNs lie where the float32 program's do."""
    prog, half, scope, relu, out = _programs()
    x = np.full((1, 3, 6, 6), fill, np.float32)
    if put is not None:
        x[0, 1, 2, 3] = put
    want, got = _run(prog, x, [relu], scope)[0], _run(half, x, [relu], scope)[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


@pytest.mark.parametrize("beside", [np.nan, np.inf, 0.5], ids=["nan", "inf", "finite"])
def test_the_finite_value_farthest_out_is_named_whatever_lies_beside_it(beside):
    prog, half, scope, relu, out = _programs()
    x = np.full((1, 3, 6, 6), beside, np.float32)
    x[0, 2, 1, 1] = 7e4
    with pytest.raises(Float16RangeError, match=r"feed 'x' holds 70000, beyond float16's range"):
        _run(half, x, [relu], scope)


def test_check_float16_range_false_runs_without_the_check():
    prog, half, scope, relu, out = _programs()
    x = np.full((1, 3, 6, 6), 7e4, np.float32)
    with np.errstate(over="ignore"):
        unchecked = _run(half, x, [relu], scope, check_float16_range=False)[0]  # what the check prevents
    assert np.isinf(unchecked).any() and np.isfinite(_run(prog, x, [relu], scope)[0]).all()


def test_an_op_overflowing_float16_is_an_error_naming_the_fetch_and_the_op():
    prog, half, scope, relu, out = _programs()
    x = np.full((1, 3, 6, 6), F16_MAX / 2, np.float32)  # within range, but the conv's sums are not
    want = _run(prog, x, [relu], scope)[0]
    assert np.isfinite(want).all() and want.max() > F16_MAX
    with pytest.raises(Float16RangeError, match=rf"fetch '{relu}' holds inf/NaN: op #1 conv2d\(.*overflowed"):
        _run(half, x, [relu], scope)


def test_inf_and_nan_that_float32_computes_too_come_back_as_they_are():
    prog, half, scope, relu, out = _programs()
    x = np.zeros((1, 3, 6, 6), np.float32)
    x[0, :, :3] = -1.0  # relu gives zeros there, and log(0) = -inf in float32 as well
    with np.errstate(divide="ignore"):
        want = _run(prog, x, [out], scope)[0]
        got = _run(half, x, [out], scope)[0]
    assert np.isneginf(want).any()
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    nan = np.full((1, 3, 6, 6), np.nan, np.float32)
    assert np.isnan(_run(half, nan, [relu], scope)[0]).all()  # a NaN fed is not float16's doing


def test_float16_programs_fed_in_range_run_as_before():
    prog, half, scope, relu, out = _programs()
    x = np.random.default_rng(0).uniform(0, 2, (1, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(_run(half, x, [relu], scope)[0], _run(prog, x, [relu], scope)[0], rtol=2e-2, atol=2e-2)


@pytest.mark.opencl
def test_opencl_programs_check_the_same_way():
    prog, half, scope, relu, out = _programs()
    prepared = Executor(halfway.OpenCLPlace()).prepare(half, ["x"], [relu], scope)
    with pytest.raises(Float16RangeError, match="feed 'x' holds 70000"):
        prepared.run({"x": np.full((1, 3, 6, 6), 7e4, np.float32)})
    with pytest.raises(Float16RangeError, match=r"op #1 conv2d"):
        prepared.run({"x": np.full((1, 3, 6, 6), F16_MAX / 2, np.float32)})


def test_the_command_line_names_the_feed_and_can_skip_the_check(tmp_path):
    assert cli("transpile", RESNET_TINY, "-o", tmp_path / "half", "--fp16").returncode == 0
    image = tmp_path / "image.npy"
    np.save(image, np.full((1, 3, 16, 16), 7e4, np.float32))
    one_line_error(cli("run", tmp_path / "half.pdmodel", "--input", f"image={image}"),
                   "feed 'image' holds 70000", "beyond float16's range", "cast")
    done = cli("run", tmp_path / "half.pdmodel", "--input", f"image={image}", "--no-float16-check", "--json")
    assert done.returncode == 0, done.stderr
