"""The compiled epilogue (halfway.kernels.numpy.jit) against the numpy passes it replaces: the same
float32 bits, every activation, layout, crop and missing term."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from halfway.ir.dtypes import DType
from halfway.ir.ops.families import UNARY
from halfway.kernels.numpy import jit
from halfway.kernels.numpy.conv import Epilogue, make_activation, make_epilogue

pytestmark = pytest.mark.skipif(not jit.JIT, reason="numba is not installed (pip install 'halfway[jit]')")

RNG = np.random.default_rng(11)
ACTIVATIONS = [("", 0.0, 0.0), ("relu", 0.0, 0.0), ("relu6", 0.0, 0.0), ("relu6", 0.0, 2.5), ("relu6", 1.5, 0.0),
               ("leaky_relu", 0.1, 0.0), ("leaky_relu", 0.0, 0.0),
               ("hard_swish", 0.0, 0.0), ("hard_swish", 0.25, 0.4)]


def _both(bias_shape, act, out, bias, residual, source):
    """The epilogue's result compiled and as numpy passes, each on its own copy of ``out``."""
    epilogue = make_epilogue(bias_shape, *act)
    assert epilogue.compiled is not None
    numpy_only = epilogue._replace(compiled=None)
    got, want = out.copy(), out.copy()
    assert epilogue(got, bias, residual, source) is got
    assert numpy_only(want, bias, residual, source) is want
    return got, want


def _erfc(x: np.ndarray) -> np.ndarray:
    return np.array([math.erfc(v) for v in x.reshape(-1)]).reshape(x.shape)


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
    act = jit.compiled_activation("relu", {})
    out64 = np.ones((1, 2, 3, 3))
    assert not jit.compiled_epilogue(act, False, out64, out64, None, None)
    strided = _values((2, 3, 8))[..., ::2]
    assert not jit.compiled_epilogue(act, True, np.empty((2, 3, 4), np.float32), strided, None, None)
    got, want = _both((4,), ("relu", 0.0, 0.0), np.empty((2, 3, 4), np.float32), _values((4,)), None, strided)
    np.testing.assert_array_equal(got, want)
    assert jit.compiled_activation("scale", {"scale": 2.0}) is None  # no family row


@pytest.mark.parametrize("act, beta", [("sigmoid", None), ("swish", 1.0), ("swish", 0.35), ("gelu", 0.0),
                                       ("gelu", 1.0)])
@pytest.mark.parametrize("shape, bias_shape", [((2, 5, 4, 6), (5, 1, 1)), ((6, 7), (7,))])
def test_sigmoid_swish_and_gelu_epilogues_match_their_float64_formulas(act, beta, shape, bias_shape):
    """sigmoid(sum), sum * sigmoid(beta * sum) and GELU (exact, or its tanh form for fuse_alpha 1),
    the sum in float32 as numpy's, against float64."""
    out, residual, bias = _values(shape), _values(shape), _values((shape[-1] if len(shape) == 2 else shape[1],))
    epilogue = make_epilogue(bias_shape, act, beta or 0.0)
    assert epilogue.compiled is not None
    got = out.copy()
    assert epilogue(got, bias, residual) is got
    total = ((out + bias.reshape(bias_shape)) + residual).astype(np.float64)
    if act == "gelu":
        want = UNARY["gelu"].numpy(total, approximate=True) if beta else total * 0.5 * _erfc(-total / math.sqrt(2))
    else:
        gate = 1 / (1 + np.exp(-total * np.float64(np.float32(beta or 1.0))))
        want = gate if act == "sigmoid" else total * gate
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-30)
    assert np.array_equal(np.isnan(got), np.isnan(total))


def _phi(x: np.ndarray) -> np.ndarray:
    return 0.5 * _erfc(-x / math.sqrt(2))


REFERENCES = {  # float64 math of every unary row, written apart from the rows; a = the attrs
    "relu": lambda x, a: np.maximum(x, 0),
    "relu6": lambda x, a: np.clip(x, 0, a["threshold"]),
    "leaky_relu": lambda x, a: np.where(x >= 0, x, a["alpha"] * x),
    "sigmoid": lambda x, a: 1 / (1 + np.exp(-x)),
    "tanh": lambda x, a: np.tanh(x),
    "hard_swish": lambda x, a: x * np.clip(x + a["offset"], 0, a["threshold"]) / a["scale"],
    "hard_sigmoid": lambda x, a: np.clip(a["slope"] * x + a["offset"], 0, 1),
    "swish": lambda x, a: x / (1 + np.exp(-a["beta"] * x)),
    "silu": lambda x, a: x / (1 + np.exp(-x)),
    # 0.5 x (1 + tanh(u)), without 1 + tanh's cancellation
    "gelu": lambda x, a: (x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
                          if a["approximate"] else x * _phi(x)),
    "softplus": lambda x, a: np.where(a["beta"] * x > a["threshold"], x, np.log1p(np.exp(a["beta"] * x)) / a["beta"]),
    "mish": lambda x, a: x * np.tanh(np.log1p(np.exp(x))),
    "selu": lambda x, a: a["scale"] * np.where(x > 0, x, a["alpha"] * (np.exp(x) - 1)),
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "sqrt": lambda x, a: np.sqrt(x),
    "abs": lambda x, a: np.abs(x),
    "erf": lambda x, a: np.vectorize(math.erf)(x),
    "ceil": lambda x, a: np.ceil(x),
    "floor": lambda x, a: np.floor(x),
    "round": lambda x, a: np.sign(x) * np.floor(np.abs(x) + 0.5),
    "round_half_even": lambda x, a: np.rint(x),
    "sign": lambda x, a: np.sign(x),
    "reciprocal": lambda x, a: 1 / x,
    "sin": lambda x, a: np.sin(x), "cos": lambda x, a: np.cos(x), "tan": lambda x, a: np.tan(x),
    "asin": lambda x, a: np.arcsin(x), "acos": lambda x, a: np.arccos(x), "atan": lambda x, a: np.arctan(x),
    "sinh": lambda x, a: np.sinh(x), "cosh": lambda x, a: np.cosh(x), "asinh": lambda x, a: np.arcsinh(x),
    "acosh": lambda x, a: np.arccosh(x), "atanh": lambda x, a: np.arctanh(x),
    "softsign": lambda x, a: x / (1 + np.abs(x)),
    "elu": lambda x, a: np.where(x > 0, x, a["alpha"] * (np.exp(x) - 1)),
    "celu": lambda x, a: np.maximum(x, 0) + np.minimum(0, a["alpha"] * (np.exp(x / a["alpha"]) - 1)),
    "thresholded_relu": lambda x, a: np.where(x > a["threshold"], x, a["value"]),
    "hard_shrink": lambda x, a: np.where(np.abs(x) > a["threshold"], x, 0),
    "shrink": lambda x, a: np.where(x > a["lambd"], x - a["bias"], np.where(x < -a["lambd"], x + a["bias"], 0)),
    "logsigmoid": lambda x, a: -np.log1p(np.exp(-x)),
    "square": lambda x, a: x * x,
}
FLOAT_ROWS = sorted(name for name, row in UNARY.items() if DType.float32 in row.dtypes)
DOMAINS = {"log": (0.1, 8.0), "sqrt": (0.0, 8.0), "acosh": (1.0, 8.0), "asin": (-1.0, 1.0), "acos": (-1.0, 1.0),
           "atanh": (-0.99, 0.99)}


def test_every_unary_row_has_a_reference_here():
    """A new activation is its row and its line in ``REFERENCES``."""
    assert sorted(REFERENCES) == FLOAT_ROWS


def _row_attrs(name: str, changed: bool) -> dict:
    """The row's defaults, or each attr changed (booleans flipped, floats times 0.75)."""
    attrs = UNARY[name].defaults()
    if changed:
        attrs = {k: (not v) if isinstance(v, bool) else v * 0.75 for k, v in attrs.items()}
    return attrs


def _row_input(name: str, shape: tuple[int, ...]) -> np.ndarray:
    low, high = DOMAINS.get(name, (-9.0, 9.0))
    x = RNG.uniform(low, high, shape).astype(np.float32)
    if name not in DOMAINS:
        x.reshape(-1)[:4] = [0.0, -0.0, 1e-4, -1e-4]
    return x


def _reference(name: str, total: np.ndarray, attrs: dict) -> np.ndarray:
    """REFERENCES of the float32 values, the attrs as the kernels hold them (float32)."""
    held = {k: v if isinstance(v, bool) else float(np.float32(v)) for k, v in attrs.items()}
    with np.errstate(over="ignore"):
        return REFERENCES[name](total.astype(np.float64), held)


@pytest.mark.parametrize("changed", [False, True], ids=["defaults", "changed"])
@pytest.mark.parametrize("name", FLOAT_ROWS)
def test_every_unary_row_runs_in_the_compiled_epilogues_as_its_float64_math(name, changed):
    """Every float row (mish and selu as much as relu) is a compiled epilogue, no numpy pass: a
    conv's NCHW one with bias and residual, and fc's; and, where numpy's passes are slower, the
    compiled unary loop; against float64 math."""
    if changed and not UNARY[name].attrs:
        pytest.skip("no attrs")
    attrs = _row_attrs(name, changed)
    act = jit.compiled_activation(name, attrs)
    assert act is not None
    inside = name in DOMAINS  # an input whose sums would leave the row's domain comes alone
    for shape, bias_shape in (((2, 5, 4, 6), (5, 1, 1)), ((6, 7), (7,))):
        out = _row_input(name, shape)
        bias, residual = (None, None) if inside else (_row_input(name, bias_shape[:1]), _row_input(name, shape))
        got = out.copy()
        assert jit.compiled_epilogue(act, len(bias_shape) == 1, got, None, bias, residual)
        total = out if inside else (out + bias.reshape(bias_shape)) + residual
        want = _reference(name, total, attrs)
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-37)
        numpy_passes = Epilogue(make_activation(name, attrs), bias_shape)(out.copy(), bias, residual)
        # numpy's passes round each step to float32: exp(u) of a large |u| carries u's rounding times |u|
        np.testing.assert_allclose(numpy_passes, want, rtol=2e-5, atol=1e-37)
    run = jit.compiled_unary(name, attrs)
    if run is not None:
        x = _row_input(name, (1000,))
        loop = np.empty_like(x)
        assert run(loop, x)
        np.testing.assert_allclose(loop, _reference(name, x, attrs), rtol=2e-6, atol=1e-37)


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


DEPTHWISE_CASES = [  # (x shape, channel multiplier, conv attrs)
    ((2, 4, 9, 11), 1, {"paddings": [1, 1]}),
    ((1, 3, 12, 9), 2, {"strides": [2, 2], "paddings": [1, 1]}),
    ((1, 5, 10, 13), 1, {"strides": [2, 3], "dilations": [2, 1], "paddings": [2, 0, 1, 2]}),
    ((2, 2, 7, 7), 3, {"strides": [3, 1], "dilations": [1, 3], "paddings": [0, 2, 3, 1]}),
    ((1, 6, 5, 4), 1, {"padding_algorithm": "SAME", "strides": [2, 2]}),
]
WIDE_CASES = [  # the same for windows other than 3x3, on images they fit
    ((2, 4, 14, 15), 1, {"paddings": [2, 2]}),
    ((1, 3, 16, 13), 2, {"strides": [2, 2], "paddings": [3, 3]}),
    ((1, 5, 17, 19), 1, {"strides": [2, 3], "dilations": [2, 1], "paddings": [2, 0, 1, 2]}),
    ((1, 6, 9, 8), 1, {"padding_algorithm": "SAME", "strides": [2, 2]}),
]
WINDOW_CASES = ([(case, (3, 3)) for case in DEPTHWISE_CASES]
                + [(case, window) for window in ((5, 5), (7, 7), (1, 4)) for case in WIDE_CASES])


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("case, window", WINDOW_CASES, ids=str)
@pytest.mark.parametrize("with_residual", [True, False])
@pytest.mark.parametrize("small_map", [0, 10**6], ids=["planes", "channels"])
def test_depthwise_loops_match_the_reference(monkeypatch, act, case, with_residual, window, small_map):
    """The compiled depthwise convs, 3x3 and other windows (with bias, residual and activation in
    their loop), plane by plane and (``small_map``, channel multiplier 1) channels as lanes,
    against the float64 reference convolution, and a loop is what ran."""
    from tests.kernels.test_kernels_nn import check, ref_activation, ref_conv, run

    shape, mult, conv_attrs = case
    monkeypatch.setattr(jit, "SMALL_MAP", small_map)
    calls = []
    monkeypatch.setattr("halfway.kernels.numpy.conv.compiled_depthwise",
                        lambda *a: calls.append(1) or jit.compiled_depthwise(*a))
    channels = shape[1]
    attrs = {**conv_attrs, "groups": channels, "fuse_activation": act[0], "fuse_alpha": act[1], "fuse_beta": act[2]}
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal((channels * mult, 1, *window)).astype(np.float32)
    bias = RNG.standard_normal(channels * mult).astype(np.float32)
    base = ref_conv(x, w, attrs)
    residual = RNG.standard_normal(base.shape).astype(np.float32) if with_residual else None
    expected = ref_activation(base + bias.reshape(1, -1, 1, 1) + (0 if residual is None else residual), *act)
    inputs = {"Input": x, "Filter": w, "Bias": bias} | ({} if residual is None else {"ResidualData": residual})
    check(run("fused_conv2d", inputs, attrs)["Output"], expected, 11)
    assert calls


def test_depthwise_arrays_the_loop_does_not_take_are_refused():
    act = jit.compiled_activation("", {})
    x, w = np.ones((1, 2, 4, 4), np.float32), np.ones((2, 1, 3, 3), np.float32)
    out = np.empty((1, 2, 4, 4), np.float32)
    assert jit.compiled_depthwise(act, (1, 1), (1, 1), (1, 1), out, x, w, None, None)
    np.testing.assert_array_equal(out[0, 0], [[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]])
    assert not jit.compiled_depthwise(act, (1, 1), (1, 1), (1, 1), out, x.astype(np.float64), w, None, None)
    assert not jit.compiled_depthwise(act, (1, 1), (1, 1), (1, 1), out, x[..., ::-1], w, None, None)
    assert jit.compiled_depthwise(act, (2, 2), (1, 1), (1, 1), out, x, np.ones((2, 1, 5, 5), np.float32), None, None)
    np.testing.assert_array_equal(out[0, 0], [[9, 12, 12, 9], [12, 16, 16, 12], [12, 16, 16, 12], [9, 12, 12, 9]])
    assert not jit.compiled_depthwise(act, (1, 1), (1, 1), (1, 1), out, x, np.ones((2, 2, 3, 3), np.float32),
                                      None, None)
    assert not jit.compiled_depthwise(act, (1, 1), (1, 1), (1, 1), out, x, w, None, np.ones((1, 2, 1, 4), np.float32))


DENSE_CASES = [  # (x shape, output channels, window, conv attrs)
    ((1, 3, 17, 15), 5, (3, 3), {"paddings": [1, 1]}),
    ((2, 4, 12, 9), 8, (3, 3), {"strides": [2, 2], "paddings": [1, 1]}),
    ((1, 5, 10, 13), 6, (3, 3), {"strides": [2, 3], "dilations": [2, 1], "paddings": [2, 0, 1, 2]}),
    ((3, 2, 9, 8), 3, (5, 5), {"padding_algorithm": "SAME", "strides": [2, 2]}),
    ((1, 6, 11, 12), 4, (7, 7), {"strides": [2, 2], "paddings": [3, 3]}),
    ((1, 3, 64, 70), 9, (3, 3), {"paddings": [1, 1]}),  # several blocks of rows, parts by rows
    ((2, 4, 8, 8), 7, (2, 2), {"strides": [2, 2]}),
    ((1, 2, 9, 10), 4, (1, 4), {"paddings": [0, 1, 0, 2]}),
    ((1, 70, 80, 33), 19, (3, 3), {"paddings": [1, 1]}),  # blocks of fewer rows for many channels
    ((1, 128, 12, 12), 40, (3, 3), {"paddings": [1, 1]}),  # a small map: parts by output channels
    ((1, 20, 7, 7), 19, (1, 1), {}),  # sums straight into the output, but the last 3 channels'
    ((2, 9, 6, 5), 16, (1, 1), {}),
    ((1, 12, 9, 9), 10, (1, 1), {"strides": [2, 2]}),
    ((1, 6, 9, 8), 9, (3, 1), {"paddings": [1, 0]}),  # planes as wide as the output
]


@pytest.mark.parametrize("act", ACTIVATIONS)
@pytest.mark.parametrize("case", DENSE_CASES, ids=str)
@pytest.mark.parametrize("with_residual", [True, False])
def test_dense_loop_matches_the_reference(monkeypatch, act, case, with_residual):
    """The compiled direct convolution (one group; bias, residual and activation in its loop),
    any window, stride, dilation and padding, output channels not a multiple of its tiles', cut by
    rows or by channels, against the float64 reference convolution, and the loop is what ran."""
    from tests.kernels.test_kernels_nn import check, ref_activation, ref_conv, run

    shape, outs, window, conv_attrs = case
    calls = []
    monkeypatch.setattr("halfway.kernels.numpy.conv.compiled_dense", lambda *a: calls.append(1) or jit.compiled_dense(*a))
    monkeypatch.setattr("halfway.kernels.numpy.conv._takes_direct", lambda g: True)
    attrs = {**conv_attrs, "fuse_activation": act[0], "fuse_alpha": act[1], "fuse_beta": act[2]}
    x = RNG.standard_normal(shape).astype(np.float32)
    w = RNG.standard_normal((outs, shape[1], *window)).astype(np.float32)
    bias = RNG.standard_normal(outs).astype(np.float32)
    base = ref_conv(x, w, attrs)
    residual = RNG.standard_normal(base.shape).astype(np.float32) if with_residual else None
    expected = ref_activation(base + bias.reshape(1, -1, 1, 1) + (0 if residual is None else residual), *act)
    inputs = {"Input": x, "Filter": w, "Bias": bias} | ({} if residual is None else {"ResidualData": residual})
    check(run("fused_conv2d", inputs, attrs)["Output"], expected, shape[1] * window[0] * window[1] + 2)
    assert calls


@pytest.mark.parametrize("lanes, outs, vectors", [(16, 8, 2), (8, 4, 3), (4, 4, 2), (16, 1, 4)])
def test_tile_sums_at_every_vector_width(monkeypatch, lanes, outs, vectors):
    """The register-tiled loop's IR at each host's vector width (the host's own and the others,
    compiled here), for whole tiles and partial ones, its weights packed step by step or as a
    matrix's rows, against numpy in float64; nothing past ``npos`` is written."""
    from numba import njit

    from halfway.kernels.numpy import jit_tiles

    monkeypatch.setattr(jit_tiles, "LANES", lanes)
    tile_sums = jit_tiles.make_tile_sums(outs, vectors)

    @njit
    def sums(src, offs, w, w_step, w_row, out, npos):
        tile_sums(src.ctypes.data, offs.ctypes.data, offs.size, w.ctypes.data, w_step, w_row, out.ctypes.data,
                  out.shape[1], npos)

    src = RNG.standard_normal(400).astype(np.float32)
    offs = np.array([0, 7, 31, 64, 3], np.int64)
    w = RNG.standard_normal((len(offs), outs)).astype(np.float32)
    rows = np.ascontiguousarray(w.T)
    for npos in (1, lanes * vectors, 2 * lanes * vectors + lanes + 3):
        columns = np.stack([src[o:o + npos] for o in offs]).astype(np.float64)  # [steps, npos]
        for weights, w_step, w_row in ((w, outs, 1), (rows, 1, len(offs))):
            out = np.full((outs, npos + 40), -7.0, np.float32)
            sums(src, offs, weights, w_step, w_row, out, npos)
            np.testing.assert_allclose(out[:, :npos], w.astype(np.float64).T @ columns, rtol=1e-5, atol=1e-5)
            assert (out[:, npos:] == -7.0).all()


def test_dense_arrays_the_loop_does_not_take_are_refused():
    act = jit.compiled_activation("", {})
    x, w = np.ones((1, 2, 4, 4), np.float32), jit.dense_filter(np.ones((3, 2, 3, 3), np.float32))
    out = np.empty((1, 3, 4, 4), np.float32)
    assert jit.compiled_dense(act, (3, 3), (1, 1), (1, 1), (1, 1), out, x, w, None, None)
    np.testing.assert_array_equal(out[0, 2], 2 * np.array([[4, 6, 6, 4], [6, 9, 9, 6], [6, 9, 9, 6], [4, 6, 6, 4]]))
    assert not jit.compiled_dense(act, (3, 3), (1, 1), (1, 1), (1, 1), out, x.astype(np.float64), w, None, None)
    assert not jit.compiled_dense(act, (3, 3), (1, 1), (1, 1), (1, 1), out, x[..., ::-1], w, None, None)
    assert not jit.compiled_dense(act, (3, 3), (1, 1), (1, 1), (1, 1), out, x, w, None, np.ones((1, 3, 1, 4), np.float32))


POOL_CASES = [
    {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
    {"ksize": [3, 3], "strides": [1, 1], "paddings": [1, 1]},
    {"ksize": [3, 3], "strides": [2, 3], "paddings": [0, 1, 1, 0], "ceil_mode": True},
    {"ksize": [3, 3], "strides": [3, 2], "exclusive": False, "ceil_mode": True},
    {"ksize": [2, 2], "strides": [2, 2], "exclusive": False, "ceil_mode": True},
    {"ksize": [5, 4], "strides": [3, 1], "paddings": [2, 1]},
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_pool_loop_matches_the_numpy_passes(monkeypatch, kind, case):
    """The compiled 3x3 pool against the numpy passes it replaces: max pools bit for bit, NaN
    included; averages to float32 rounding (the taps are summed in another order)."""
    from halfway.kernels.numpy import pool
    from tests.kernels.test_kernels_nn import run

    taken = []
    monkeypatch.setattr(pool, "compiled_pool", lambda *a: taken.append(jit.compiled_pool(*a)) or taken[-1])
    attrs = {**case, "pooling_type": kind}
    x = _values((2, 3, 11, 13))
    got = run("pool2d", {"X": x}, attrs)["Out"]
    assert taken == ([True] if case["ksize"] == [3, 3] else [])  # other windows keep the numpy passes
    monkeypatch.setattr(jit, "JIT", False)
    want = run("pool2d", {"X": x}, attrs)["Out"]
    if kind == "max":
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_compiled_loops_come_from_the_user_cache_in_the_next_process(tmp_path):
    code = ("import numpy as np\n"
            "from halfway.kernels.numpy import jit\n"
            "from halfway.kernels.numpy.jit_source import marker\n"
            "loops = jit._loops()\n"
            "out, x = np.zeros((1, 2, 5, 5), np.float32), np.ones((1, 2, 5, 5), np.float32)\n"
            "loops.channels_mid(out, x, np.ones(2, np.float32), x, marker('relu'), *np.zeros(3, np.float32))\n"
            "loops.pool3x3(out, x, 1, 1, 1, 1, None)\n"
            "stats = [loop.stats for loop in (loops.channels_mid, loops.pool3x3)]\n"
            "print(sum(len(s.cache_hits) for s in stats), sum(len(s.cache_misses) for s in stats))")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | {"XDG_CACHE_HOME": str(tmp_path)}

    def run():
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        return [int(n) for n in done.stdout.split()]

    assert run()[1] > 0  # compiled and written to the cache
    files = sorted(p.name for p in (tmp_path / "halfway" / "numba").rglob("*"))
    assert run() == [2, 0]  # both loops found, nothing compiled
    assert sorted(p.name for p in (tmp_path / "halfway" / "numba").rglob("*")) == files


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_loops_match_the_float64_formulas_densely(approximate):
    """The compiled GELU against x * Phi(x) in float64 (``math.erfc``; the tanh form's
    x * sigmoid(2u)) over [-14, 6], the tail below -2 included; in place too."""
    x = np.concatenate([np.linspace(-14, 6, 200_001), [np.nan]]).astype(np.float32)
    wide = x.astype(np.float64)
    if approximate:
        u = 2 * math.sqrt(2 / math.pi) * (wide + 0.044715 * wide ** 3)
        want = wide / (1 + np.exp(-u))
    else:
        want = np.array([0.5 * v * math.erfc(-v * math.sqrt(0.5)) for v in wide])
    run = jit.compiled_unary("gelu", {"approximate": approximate})
    out = np.empty_like(x)
    assert run(out, x)
    tiny = np.abs(want) < 1e-37  # beyond float32's normal range
    np.testing.assert_allclose(out[~tiny].astype(np.float64), want[~tiny], rtol=1e-6)
    assert np.all(np.abs(out[tiny]) < 1e-37)
    assert run(x, x) and np.array_equal(x, out, equal_nan=True)


@pytest.mark.parametrize("op_type", ["sigmoid", "silu"])
def test_sigmoid_and_silu_loops_match_float64_densely(op_type):
    """The compiled loops against 1 / (1 + exp(-x)) in float64 over [-110, 90]: exp's polynomial
    through the whole float32 range, results below float32's normal range tiny; NaN and both
    infinities as the numpy rows'; in place too."""
    x = np.concatenate([np.linspace(-110, 90, 400_001), [np.nan, np.inf, -np.inf]]).astype(np.float32)
    wide = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        gate = 1 / (1 + np.exp(-wide))
        want = gate if op_type == "sigmoid" else wide * gate
    run = jit.compiled_unary(op_type, {})
    out = np.empty_like(x)
    assert run(out, x)
    finite = np.isfinite(want)
    tiny = finite & (np.abs(want) < 1e-37)
    np.testing.assert_allclose(out[finite & ~tiny].astype(np.float64), want[finite & ~tiny], rtol=1e-6)
    assert np.all(np.abs(out[tiny]) < 1e-37)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(out[-3:], UNARY[op_type].numpy(x[-3:]))  # numpy's: silu(-inf) NaN
    assert run(x, x) and np.array_equal(x, out, equal_nan=True)


@pytest.mark.parametrize("m, k, n", [(8, 5, 33), (13, 40, 70), (64, 300, 96), (130, 700, 200), (3, 20, 40), (40, 17, 32),
                                     (901, 100, 96), (2000, 64, 300)])
def test_products_by_packed_weights_match_float64(monkeypatch, m, k, n):
    """Linear layers' products by a weight packed at prepare (``jit_gemm``): whole and partial
    blocks of rows and panels of columns, cut among the threads by panels or, for few panels, by
    rows, against float64; the compiled loop takes products of 8 rows or more, OpenBLAS the
    others."""
    from halfway.kernels.numpy import products

    calls = []
    monkeypatch.setattr(products, "compiled_product", lambda *a: calls.append(1) or jit.compiled_product(*a))
    a, b = RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n)).astype(np.float32)
    got = products.matmul(a, b, products.pack(b))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * k * np.finfo(np.float32).eps * np.abs(a).max() * np.abs(b).max())
    assert bool(calls) == (m >= products.PACKED_ROWS)


def test_a_weight_is_packed_once_while_it_lives_and_holds_its_values():
    """Views of one weight (each prepare binds its own) share a packed copy; a copy of it, a
    change in place and a dropped weight do not."""
    from halfway.kernels.numpy import products

    w = RNG.standard_normal((24, 40)).astype(np.float32)
    packed = products.pack(w.view())
    assert packed is not None and products.pack(w.view()) is packed
    assert products.pack(w.copy()) is not packed
    w[3, 5] += 1
    repacked = products.pack(w.view())
    assert repacked is not packed
    x = RNG.standard_normal((9, 24)).astype(np.float32)
    np.testing.assert_allclose(products.matmul(x, w, repacked), x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
    before = len(products._packed)
    del w
    assert len(products._packed) < before


def test_linear_layers_pack_their_constant_weights(monkeypatch):
    """fc, matmul_v2 and mul pack a constant weight once, when the kernel is made, and match
    the float64 product."""
    from halfway.kernels.numpy import products
    from tests.support.oprun import run_op

    packed = []
    monkeypatch.setattr(products, "pack", lambda b: packed.append(b.shape) or jit.packed_weight(b))
    x, w = RNG.standard_normal((16, 24)).astype(np.float32), RNG.standard_normal((24, 40)).astype(np.float32)
    want = x.astype(np.float64) @ w
    for op_type, inputs, attrs, weight in (("fc", {"Input": x, "W": w}, {"in_num_col_dims": 1}, "W"),
                                           ("matmul_v2", {"X": x, "Y": w}, {}, "Y"),
                                           ("mul", {"X": x, "Y": w}, {}, "Y")):
        ran = run_op(op_type, inputs, attrs, params=[weight])
        (got,) = next(iter(ran.outputs.values()))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert packed == [(24, 40)] * 3
