"""The compiled epilogue (halfway.kernels.numpy.jit) against the numpy passes it replaces: the same
float32 bits, every activation, layout, crop and missing term."""

import os
import subprocess
import sys

import numpy as np
import pytest

from halfway.kernels.numpy import jit
from halfway.kernels.numpy.conv import make_epilogue

pytestmark = pytest.mark.skipif(not jit.JIT, reason="numba is not installed (pip install 'halfway[jit]')")

RNG = np.random.default_rng(11)
ACTIVATIONS = [("", 0.0, 0.0), ("relu", 0.0, 0.0), ("relu6", 0.0, 0.0), ("relu6", 0.0, 2.5), ("relu6", 1.5, 0.0),
               ("leaky_relu", 0.1, 0.0), ("leaky_relu", 0.0, 0.0)]


def _both(bias_shape, act, out, bias, residual, source):
    """The epilogue's result compiled and as numpy passes, each on its own copy of ``out``."""
    epilogue = make_epilogue(bias_shape, *act)
    assert epilogue.compiled is not None
    numpy_only = epilogue._replace(compiled=None)
    got, want = out.copy(), out.copy()
    assert epilogue(got, bias, residual, source) is got
    assert numpy_only(want, bias, residual, source) is want
    return got, want


def _values(shape):
    """Normal values with NaNs and both zeros among them."""
    x = RNG.standard_normal(shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    flat[::97] = np.nan
    flat[1::89] = 0.0
    flat[2::83] = -0.0
    return x


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("with_residual", [True, False])
@pytest.mark.parametrize("crop", [False, True])
def test_nchw_matches_numpy_bit_for_bit(act, with_bias, with_residual, crop):
    out = _values((2, 5, 4, 6))
    source = _values((2, 5, 4, 9))[..., :6] if crop else None
    bias = _values((5,)) if with_bias else None
    residual = _values((2, 5, 4, 6)) if with_residual else None
    got, want = _both((5, 1, 1), act, out, bias, residual, source)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("shape", [(2, 3, 4, 7), (6, 7)])
def test_channels_last_and_fc_match_numpy(act, shape):
    out, residual, bias = _values(shape), _values(shape), _values((shape[-1],))
    got, want = _both((shape[-1],), act, out, bias, residual, None)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_arrays_the_loops_do_not_take_run_as_numpy_passes():
    act = jit.compiled_activation("relu", 0.0, 0.0)
    out64 = np.ones((1, 2, 3, 3))
    assert not jit.compiled_epilogue(act, False, out64, out64, None, None)
    strided = _values((2, 3, 8))[..., ::2]
    assert not jit.compiled_epilogue(act, True, np.empty((2, 3, 4), np.float32), strided, None, None)
    got, want = _both((4,), ("relu", 0.0, 0.0), np.empty((2, 3, 4), np.float32), _values((4,)), None, strided)
    np.testing.assert_array_equal(got, want)
    assert jit.compiled_activation("sigmoid", 0.0, 0.0) is None


def test_halfway_jit_0_turns_the_loops_off():
    code = "from halfway.kernels.numpy import jit, conv; print(jit.JIT, conv.make_epilogue((3, 1, 1), 'relu').compiled)"
    env = {**os.environ, "HALFWAY_JIT": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "None"]


def test_a_numba_that_does_not_import_leaves_the_numpy_passes(tmp_path):
    fake = tmp_path / "numba"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('Numba needs NumPy 2.3 or less')\n")
    code = ("import numpy as np\n"
            "from halfway.kernels.numpy import jit, conv\n"
            "e = conv.make_epilogue((2, 1, 1), 'relu')\n"
            "out = np.array([[[[-1.0]], [[2.0]]]], np.float32)\n"
            "print(jit.JIT, e(out, np.array([0.5, -3.0], np.float32)).ravel().tolist())")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[0] == "True [0.0, 0.0]"
    assert "numba does not import (Numba needs NumPy 2.3 or less)" in done.stderr


def test_read_only_inputs_as_feeds_and_parameters_are_bound():
    out, source = _values((1, 4, 3, 3)), _values((1, 4, 3, 5))[..., :3]
    bias, residual = _values((4,)), _values((1, 4, 3, 3))
    for array in (source.base, bias, residual):
        array.flags.writeable = False
    got, want = _both((4, 1, 1), ("relu", 0.0, 0.0), out, bias, residual, source)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
