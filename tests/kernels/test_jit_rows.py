"""The compiled row loops (layer_norm with its residual, softmax) against float64 numpy math, and
the numpy backend's threads: every loop and product cut into parts gives what the whole one gives."""

import functools
import os
import platform
import threading
import time

import numpy as np
import pytest

from halfway.kernels.numpy import jit, products, threads
from halfway.kernels.numpy.conv import make_epilogue

pytestmark = pytest.mark.skipif(not jit.JIT, reason="numba is not installed (pip install 'halfway[jit]')")

RNG = np.random.default_rng(5)


def _layer_norm64(x, scale, bias, epsilon):
    wide = x.astype(np.float64)
    mean = wide.mean(-1, keepdims=True)
    y = (wide - mean) / np.sqrt(((wide - mean) ** 2).mean(-1, keepdims=True) + epsilon)
    return y * (1 if scale is None else scale) + (0 if bias is None else bias)


@pytest.mark.parametrize("shape", [(3, 5, 768), (7, 33), (1, 1)])
@pytest.mark.parametrize("with_residual", [True, False])
@pytest.mark.parametrize("params", ["both", "scale", "none"])
def test_layer_norm_rows_match_float64(shape, with_residual, params):
    x = (RNG.standard_normal(shape) * 4 + 3).astype(np.float32)
    residual = RNG.standard_normal(shape).astype(np.float32) if with_residual else None
    scale = RNG.standard_normal(shape[-1]).astype(np.float32) if params != "none" else None
    bias = RNG.standard_normal(shape[-1]).astype(np.float32) if params == "both" else None
    out, total = np.empty_like(x), np.empty_like(x) if with_residual else None
    means, variances = np.empty(shape[:-1], np.float32), np.empty(shape[:-1], np.float32)
    assert jit.compiled_layer_norm(out, x, residual, total, scale, bias, 1e-5, shape[-1], means, variances)
    summed = x + residual if with_residual else x  # float32, as the elementwise_add it replaces
    np.testing.assert_allclose(out, _layer_norm64(summed, scale, bias, 1e-5), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(means, summed.astype(np.float64).mean(-1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(variances, summed.astype(np.float64).var(-1), rtol=1e-6)
    if with_residual:
        np.testing.assert_array_equal(total, summed)


def test_layer_norm_declines_what_it_does_not_take():
    x = np.ones((4, 8), np.float32)
    assert not jit.compiled_layer_norm(np.empty_like(x), x.astype(np.float64), None, None, None, None, 1e-5, 8)
    assert not jit.compiled_layer_norm(np.empty_like(x), x.T, None, None, None, None, 1e-5, 4)  # not C-contiguous
    assert not jit.compiled_layer_norm(np.empty_like(x), x, None, None, np.ones(4, np.float32), None, 1e-5, 8)


def test_softmax_rows_match_float64_with_infinities_and_nan():
    x = (RNG.standard_normal((6, 130)) * 30).astype(np.float32)
    x[1, ::3] = -np.inf      # masked keys
    x[2] = -np.inf           # a row whose keys all drop: NaN, as numpy's 0 / 0
    x[3, 7] = np.nan
    x[4, 0] = 3e38           # far above the rest
    out = np.empty_like(x)
    assert jit.compiled_softmax(out, x)
    wide = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(wide - wide.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-12)
    assert np.isnan(out[2]).all() and np.isnan(out[3]).all()
    same = x.copy()
    assert jit.compiled_softmax(same, same)
    np.testing.assert_array_equal(same, out)


def _whole_then_parts(monkeypatch, fn):
    """``fn()`` run on one thread, then on three in parts of a few elements, so that every test
    array is cut."""
    with monkeypatch.context() as m:
        m.setattr(threads, "thread_count", lambda: 1)
        whole = fn()
    m = monkeypatch
    m.setattr(threads, "MIN_PART", 4)
    m.setattr(threads, "thread_count", lambda: 3)
    calls = []
    m.setattr(jit, "run_parts", lambda parts: calls.append(len(parts)) or threads.run_parts(parts))
    parts = fn()
    assert calls and max(calls) > 1, "no loop was cut"
    return whole, parts


@pytest.mark.parametrize("op_type, attrs", [("gelu", {}), ("gelu", {"approximate": True}), ("silu", {}),
                                            ("sigmoid", {})])
def test_unary_loops_in_parts(monkeypatch, op_type, attrs):
    x = RNG.standard_normal(1001).astype(np.float32) * 4
    run = jit.compiled_unary(op_type, attrs)

    def once():
        out = np.empty_like(x)
        assert run(out, x)
        return out

    whole, parts = _whole_then_parts(monkeypatch, once)
    np.testing.assert_array_equal(parts, whole)


@pytest.mark.parametrize("shape", [(1, 7, 5, 6), (3, 4, 5, 6)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_epilogues_in_parts(monkeypatch, shape, channels_last):
    width = shape[-1] if channels_last else shape[1]
    bias = RNG.standard_normal(width).astype(np.float32)
    residual = RNG.standard_normal(shape).astype(np.float32)
    source = RNG.standard_normal(shape).astype(np.float32)
    epilogue = make_epilogue((width,) if channels_last else (width, 1, 1), "swish", 1.0)
    whole, parts = _whole_then_parts(monkeypatch, lambda: epilogue(np.empty_like(source), bias, residual, source))
    np.testing.assert_array_equal(parts, whole)
    want = source + bias.reshape((width,) if channels_last else (width, 1, 1)) + residual
    np.testing.assert_allclose(whole, want / (1 + np.exp(-want)), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("images, mult", [(1, 1), (1, 2), (2, 1)])
def test_depthwise_and_pool_in_parts(monkeypatch, images, mult):
    x = RNG.standard_normal((images, 6, 9, 8)).astype(np.float32)
    w = RNG.standard_normal((6 * mult, 1, 3, 3)).astype(np.float32)
    bias = RNG.standard_normal(6 * mult).astype(np.float32)
    act = jit.compiled_activation("relu", {})

    def convolve():
        out = np.empty((images, 6 * mult, 9, 8), np.float32)
        assert jit.compiled_depthwise(act, (1, 1), (1, 1), (1, 1), out, x, w, bias, None)
        return out

    def pool():
        out = np.empty((images, 6, 5, 4), np.float32)
        assert jit.compiled_pool((3, 3), (1, 1), (2, 2), None, out, x)
        return out

    for fn in (convolve, pool):
        whole, parts = _whole_then_parts(monkeypatch, fn)
        np.testing.assert_array_equal(parts, whole)


def test_rows_in_parts(monkeypatch):
    x = RNG.standard_normal((9, 16)).astype(np.float32)
    scale = RNG.standard_normal(16).astype(np.float32)

    def both():
        normed, probs = np.empty_like(x), np.empty_like(x)
        assert jit.compiled_layer_norm(normed, x, x, None, scale, None, 1e-6, 16)
        assert jit.compiled_softmax(probs, x)
        return np.stack([normed, probs])

    whole, parts = _whole_then_parts(monkeypatch, both)
    np.testing.assert_array_equal(parts, whole)


def test_spans_cut_only_work_worth_sharing(monkeypatch):
    monkeypatch.setattr(threads, "thread_count", lambda: 4)
    assert threads.spans(10, 10) == [(0, 10)]                      # 100 elements: one part
    cut = threads.spans(1000, threads.MIN_PART)
    assert len(cut) == 4 and cut[0] == (0, 250) and cut[-1][1] == 1000
    assert all(start % 64 == 0 for start, _ in threads.spans(1 << 20, align=64))
    assert threads.spans(0) == [(0, 0)]


@pytest.fixture
def team(monkeypatch):
    """The thread team, never taken to be crowded (on this shared machine it may be)."""
    if threads.team_size() == 0:
        pytest.skip("no thread team: numba's loops are off or there is one thread")
    found = threads._team()
    monkeypatch.setattr(threads, "LATE_S", float("inf"))
    monkeypatch.setattr(found, "_crowded_until", 0.0)
    return found


def test_parts_run_on_the_team_and_it_wakes_after_sleeping(monkeypatch, team):
    """The team's workers run parts (another thread than the caller's); a worker that stopped
    polling and slept is woken by the next parts."""
    monkeypatch.setattr(threads, "POLLS", 1)
    for _ in range(2):
        seen = []
        meet = threading.Barrier(threads.team_size() + 1, timeout=10)  # each part waits for the others' threads

        def part():
            seen.append(threading.get_ident())
            meet.wait()

        threads.run_parts([part] * (threads.team_size() + 1))
        assert len(set(seen)) == threads.team_size() + 1
        time.sleep(0.05)


def test_a_worker_kept_off_its_core_leaves_its_parts_to_the_caller(team):
    """Parts go to whichever thread is free: while the team's workers are held up (here by the
    parts that hold them), the caller takes every part that is left."""
    caller, release = threading.get_ident(), threading.Event()
    seen = []

    def part(i):
        seen.append((i, threading.get_ident()))
        if threading.get_ident() != caller:
            release.wait(10)  # a worker's part lasts until the caller has taken the rest

    parts = [functools.partial(part, i) for i in range(20)]
    thread = threading.Timer(0.5, release.set)
    thread.start()
    threads.run_parts(parts)
    thread.cancel()
    assert sorted(i for i, _ in seen) == list(range(20))
    assert sum(ident == caller for _, ident in seen) >= 20 - threads.team_size()


def test_a_team_whose_workers_join_late_backs_off_for_a_while(monkeypatch, team):
    """Workers that join a job late (here: later than no time at all) keep the team out of use
    for ``BACK_OFF_S``: the parts run on the caller meanwhile, and on the team again after."""
    meet = threading.Barrier(threads.team_size() + 1, timeout=10)
    threads.run_parts([meet.wait] * (threads.team_size() + 1))  # the workers are polling now
    monkeypatch.setattr(threads, "LATE_S", 0.0)
    threads.run_parts([meet.wait] * (threads.team_size() + 1))
    seen = []
    threads.run_parts([lambda: seen.append(threading.get_ident())] * 8)
    assert set(seen) == {threading.get_ident()}
    assert _openblas_threads() in (None, 1)  # OpenBLAS's threads would wait for each other as well
    monkeypatch.setattr(threads, "LATE_S", float("inf"))
    monkeypatch.setattr(team, "_crowded_until", time.perf_counter() + 0.05)
    time.sleep(0.06)
    threads.run_parts([meet.wait] * (threads.team_size() + 1))  # only the team's threads can meet
    assert _openblas_threads() in (None, threads.thread_count())


def test_waking_a_sleeping_worker_is_not_taken_for_a_crowded_machine(monkeypatch, team):
    """A job that wakes a worker from sleep (the first after an idle spell) is not judged late,
    however long the wake took: the team stays in use for the next job."""
    meet = threading.Barrier(threads.team_size() + 1, timeout=10)
    monkeypatch.setattr(threads, "POLLS", 1)
    threads.run_parts([meet.wait] * (threads.team_size() + 1))
    time.sleep(0.05)  # the workers have stopped polling and sleep
    assert all(team._sleeping)
    monkeypatch.setattr(threads, "LATE_S", 0.0)
    threads.run_parts([meet.wait] * (threads.team_size() + 1))  # only the team's threads can meet
    assert not team._crowded()


def _openblas_threads():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    found = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i.get("internal_api") == "openblas"]
    return found[0] if found else None


def test_callers_on_several_threads_all_get_their_parts_run():
    """While one caller holds the team, another runs its parts in turn; every part runs once."""
    counts = [0] * 64

    def caller(base):
        for _ in range(50):
            threads.run_parts([functools.partial(counts.__setitem__, base + i, counts[base + i] + 1) for i in range(4)])

    workers = [threading.Thread(target=caller, args=(4 * t,)) for t in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert counts[:16] == [50] * 16


def test_an_error_in_a_part_reaches_the_caller():
    def fail():
        raise ValueError("part failed")

    with pytest.raises(ValueError, match="part failed"):
        threads.run_parts([lambda: None, fail])


def test_thread_count_follows_the_environment(monkeypatch):
    threads.thread_count.cache_clear()
    try:
        monkeypatch.setenv("HALFWAY_NUM_THREADS", "3")
        assert threads.thread_count() == 3
        threads.thread_count.cache_clear()
        monkeypatch.delenv("HALFWAY_NUM_THREADS")
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "5")
        assert threads.thread_count() == 5
    finally:
        threads.thread_count.cache_clear()


def test_parts_made_inside_a_part_run_on_its_thread():
    """A part that cuts its own work (attention's softmax inside a head's part) runs those parts
    itself, in turn: on the pool they could wait behind the part that waits for them."""
    import threading

    seen: list[tuple[str, str]] = []

    def outer(name: str) -> None:
        mine = threading.current_thread().name
        threads.run_parts([lambda: seen.append((mine, threading.current_thread().name))] * 3)

    threads.run_parts([lambda: outer("a"), lambda: outer("b"), lambda: outer("c")])
    assert len(seen) == 9 and all(outer_thread == inner for outer_thread, inner in seen)


@pytest.mark.parametrize("attrs, shape", [
    ({"strides": [2, 2], "paddings": [1, 1]}, (2, 5, 17, 13)),                        # im2col
    ({"strides": [1, 1], "paddings": [1, 1]}, (1, 5, 17, 13)),                        # shifted
    ({"strides": [2, 1], "paddings": [0, 1], "data_format": "NHWC"}, (2, 17, 13, 5)),  # im2col, channels last
    ({"strides": [1, 1], "paddings": [1, 1], "groups": 5}, (1, 10, 9, 9)),            # grouped
])
def test_convolution_chunks_cut_for_the_threads_match_the_whole(monkeypatch, attrs, shape):
    """A convolution's chunks of output rows, gathered and multiplied on three threads with
    OpenBLAS on one, give the one-thread result."""
    from halfway.kernels.numpy import conv
    from tests.support.oprun import run_op

    if not threads._openblas():
        pytest.skip("threadpoolctl is not installed or numpy's BLAS is not OpenBLAS")
    monkeypatch.setattr(conv, "CUT_MULTIPLY_ADDS", 1)
    monkeypatch.setattr(conv, "_takes_direct", lambda g: False)  # im2col's chunks, not the direct loop
    blas = []
    single = threads.single_threaded_blas
    monkeypatch.setattr(conv, "single_threaded_blas", lambda: blas.append(1) or single())
    channels = shape[-1] if attrs.get("data_format") == "NHWC" else shape[1]
    inputs = {"Input": RNG.standard_normal(shape).astype(np.float32),
              "Filter": RNG.standard_normal((10, channels // attrs.get("groups", 1), 3, 3)).astype(np.float32)}

    def once():
        return run_op("conv2d", inputs, attrs)["Output"][0]

    whole, parts = _whole_then_parts(monkeypatch, once)
    assert blas, "the chunks were not cut"
    np.testing.assert_allclose(parts, whole, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(64, 48, 7), (5, 48, 96), (1, 30, 50), (40, 1, 3)], ids=str)
def test_products_cut_by_rows_or_columns_match_numpy(monkeypatch, shape):
    """``products.matmul`` cut (rows where ``a`` is the larger operand, else columns) against the
    same product whole; integers are not cut."""
    m, k, n = shape
    a, b = RNG.standard_normal((m, k)).astype(np.float32), RNG.standard_normal((k, n)).astype(np.float32)
    monkeypatch.setattr(threads, "MIN_PART", 1)
    got = products.matmul(a, b)
    np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5, atol=1e-5)
    assert got.dtype == np.float32 and got.shape == (m, n)
    ints = products.matmul(a.astype(np.int64), b.astype(np.int64))
    np.testing.assert_array_equal(ints, np.matmul(a.astype(np.int64), b.astype(np.int64)))


def test_the_heap_keeps_freed_memory_unless_turned_off():
    """Once ``keep_freed_memory`` ran, an 8 MiB array freed stays in the heap (glibc's free bytes);
    with HALFWAY_KEEP_HEAP=0 it goes back to the kernel. Each in a fresh process: the setting is
    once per process."""
    import subprocess
    import sys

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    code = ("import ctypes, halfway, numpy as np\n"
            "from halfway.kernels.numpy import heap\n"
            "kept = heap.keep_freed_memory()\n"
            "block = np.ones(1 << 20)\n"
            "del block\n"
            "class Info(ctypes.Structure):\n"
            "    _fields_ = [(n, ctypes.c_size_t) for n in ('arena ordblks smblks hblks hblkhd usmblks fsmblks '\n"
            "                                                'uordblks fordblks keepcost').split()]\n"
            "mallinfo2 = ctypes.CDLL('libc.so.6').mallinfo2\n"
            "mallinfo2.restype = Info\n"
            "print(kept, mallinfo2().fordblks >= 8 << 20)\n")
    for value, want in (("1", "True True"), ("0", "False False")):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "HALFWAY_KEEP_HEAP": value})
        assert done.stdout.strip() == want


@pytest.mark.parametrize("with_scale", [True, False])
def test_rms_norm_loop_matches_float64_whole_and_in_parts(monkeypatch, with_scale):
    """The compiled rms_norm against x / sqrt(mean(x^2) + eps) * scale in float64; cut among
    threads it gives the same bits."""
    x = RNG.standard_normal((37, 24)).astype(np.float32) * 3
    scale = RNG.standard_normal(24).astype(np.float32) if with_scale else None
    wide = x.astype(np.float64)
    want = wide / np.sqrt(np.mean(wide ** 2, axis=-1, keepdims=True) + 1e-6) * (1 if scale is None else scale)

    def once():
        out = np.empty_like(x)
        assert jit.compiled_rms_norm(out, x, scale, 1e-6, 24)
        return out

    whole, parts = _whole_then_parts(monkeypatch, once)
    np.testing.assert_allclose(whole, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(parts, whole)
    assert not jit.compiled_rms_norm(np.empty_like(x), x, np.ones(5, np.float32), 1e-6, 24)  # scale not per column
