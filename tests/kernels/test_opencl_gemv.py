"""The GEMV kernels (gemv.cl on n-contiguous weights, gemv_t.cl on k-contiguous ones) against numpy:
1 to 8 rows, sizes that are no multiple of a work-group's columns or k slice, K whole and split,
float32 and float16 programs, the epilogue's bias and activation, and a decoder's [B, 1, hidden]
activations by its weights as one product of B rows."""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from tests.support.extras import import_pyopencl

import_pyopencl()

from halfway.executor import OpenCLPlace
from halfway.kernels.opencl import gemm, runtime
from tests.support.oprun import Ran, run_op

pytestmark = pytest.mark.opencl

RNG = np.random.default_rng(11)
FLOATS = [np.float32, np.float16]
N_MAJOR = (1000, gemm.GEMV_MIN_WEIGHTS // 1000 + 3)
"""(N, K): columns no multiple of a work-group's, an odd K."""
K_MAJOR = (1001, 1048)
"""(N, K): odd columns, K a whole number of 16-byte vectors but not of gemv_t's k slice."""


def rand(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def gemv_place(monkeypatch, units: int, precision: str | None = None) -> tuple[OpenCLPlace, list[str]]:
    """A GPU place on the test device with ``units`` compute units (4096: K splits), and the names of
    the kernels it makes from now on."""
    shared = runtime.get_runtime()
    rt = runtime.Runtime(shared.device, precision or shared.precision)
    rt.caps = attrs.evolve(rt.caps, compute_units=units, is_gpu=True)
    monkeypatch.setattr(runtime, "get_runtime", lambda device=None, precision="normal": rt)
    names: list[str] = []
    make = rt.kernel
    monkeypatch.setattr(rt, "kernel", lambda text, name, options=(): names.append(name) or make(text, name, options))
    return OpenCLPlace(), names


def assert_close(ran: Ran, want: np.ndarray, dtype: type) -> None:
    tol = 2e-3 if dtype == np.float16 else 2e-5
    np.testing.assert_allclose(ran.out.astype(np.float64), want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("units", [1, 4096], ids=["whole-k", "split-k"])
@pytest.mark.parametrize("dtype", FLOATS, ids=["float32", "float16"])
@pytest.mark.parametrize("m", range(1, 9))
def test_n_major_weights(monkeypatch, m, dtype, units):
    """fc on [K, N] weights: one gemv launch, bias and relu in its epilogue."""
    place, names = gemv_place(monkeypatch, units)
    n, k = N_MAJOR
    x, w, bias = rand(m, k, dtype=dtype), rand(k, n, dtype=dtype), rand(n, dtype=dtype)
    ran = run_op("fc", {"Input": x, "W": w, "Bias": bias}, {"activation_type": "relu"}, params=("W", "Bias"),
                 place=place)
    assert names == ["gemv"] and ran.report.launches == 1
    assert_close(ran, np.maximum(x.astype(np.float64) @ w.astype(np.float64) + bias, 0), dtype)


@pytest.mark.parametrize("units", [1, 4096], ids=["whole-k", "split-k"])
@pytest.mark.parametrize("dtype", FLOATS, ids=["float32", "float16"])
@pytest.mark.parametrize("m", range(1, 9))
def test_k_major_weights(monkeypatch, m, dtype, units):
    """matmul_v2 by [N, K] weights (trans_y): one gemv_t launch."""
    place, names = gemv_place(monkeypatch, units)
    n, k = K_MAJOR
    x, w = rand(m, k, dtype=dtype), rand(n, k, dtype=dtype)
    ran = run_op("matmul_v2", {"X": x, "Y": w}, {"trans_y": True}, params=("Y",), place=place)
    assert names == ["gemv_t"] and ran.report.launches == 1
    assert_close(ran, x.astype(np.float64) @ w.astype(np.float64).T, dtype)


@pytest.mark.parametrize("trans_y", [False, True], ids=["n-major", "k-major"])
@pytest.mark.parametrize("batch", [1, 3, 8])
def test_decoder_rows_read_the_weights_once(monkeypatch, batch, trans_y):
    """[B, 1, K] float16 activations by constant weights: one GEMV of B rows, not B products."""
    place, names = gemv_place(monkeypatch, 1)
    n, k = 1024, 1032
    x, w = rand(batch, 1, k, dtype=np.float16), rand(*((n, k) if trans_y else (k, n)), dtype=np.float16)
    ran = run_op("matmul_v2", {"X": x, "Y": w}, {"trans_y": trans_y}, params=("Y",), place=place)
    assert names == ["gemv_t" if trans_y else "gemv"] and ran.report.launches == 1
    want = x.astype(np.float64) @ (w.astype(np.float64).T if trans_y else w.astype(np.float64))
    assert_close(ran, want, np.float16)


@pytest.mark.parametrize("precision", ["low", "high"])
def test_k_major_float16_in_other_buffers(monkeypatch, precision):
    """A float16 program in float16 storage ("low") or float32 buffers ("high") on k-major weights."""
    place, names = gemv_place(monkeypatch, 4096, precision)
    n, k = K_MAJOR
    x, w = rand(5, k, dtype=np.float16), rand(n, k, dtype=np.float16)
    ran = run_op("matmul_v2", {"X": x, "Y": w}, {"trans_y": True}, params=("Y",), place=place)
    assert names == ["gemv_t"]
    assert_close(ran, x.astype(np.float64) @ w.astype(np.float64).T, np.float16)


def test_too_many_rows_take_the_tiled_kernel(monkeypatch):
    place, names = gemv_place(monkeypatch, 1)
    n, k = K_MAJOR
    run_op("matmul_v2", {"X": rand(gemm.GEMV_MAX_ROWS + 1, k), "Y": rand(n, k)}, {"trans_y": True}, params=("Y",),
           place=place)
    assert names == ["gemm"]


@pytest.mark.parametrize("dtype", FLOATS, ids=["float32", "float16"])
def test_strided_rows_of_a(monkeypatch, dtype):
    """A transposed A (trans_x: k strided) is read a value at a time, by both kernels."""
    place, names = gemv_place(monkeypatch, 1)
    n, k = K_MAJOR
    x, w = rand(k, 3, dtype=dtype), rand(n, k, dtype=dtype)
    ran = run_op("matmul_v2", {"X": x, "Y": w}, {"trans_x": True, "trans_y": True}, params=("Y",), place=place)
    assert_close(ran, x.astype(np.float64).T @ w.astype(np.float64).T, dtype)
    w = rand(k, 1024, dtype=dtype)
    ran = run_op("matmul_v2", {"X": x, "Y": w}, {"trans_x": True}, params=("Y",), place=place)
    assert_close(ran, x.astype(np.float64).T @ w.astype(np.float64), dtype)
    assert names == ["gemv_t", "gemv"]
