"""cached_attention: its numpy and OpenCL kernels against a loop over every query row, the caches
written in place (and kept between runs and between programs prepared with ``share``), and the
inputs its schema refuses."""

from __future__ import annotations

import numpy as np
import pytest

import halfway
from halfway.executor import Executor, OpenCLPlace, PreparedProgram
from halfway.ir.builder import append_op, program_guard
from halfway.ir.errors import HalfwayError
from halfway.ir.schema import InferError
from halfway.kernels.opencl.attention import DECODE_CHUNK, DECODE_ROWS

B, HQ, HKV, D, L = 2, 4, 2, 8, 16


def _reference(q, k_cache, v_cache, past, rows, window=0, mask=None, softcap=0.0):
    length = k_cache.shape[2]
    """Out [B, Hq, S, D] of one loop per (sequence, query head, new token), float64."""
    out = np.zeros(q.shape, np.float64)
    group = q.shape[1] // k_cache.shape[1]
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            for i in range(rows):
                position = past[b] + i
                keys = [j for j in range(min(position + 1, length)) if (not window or position - j < window)
                        and (mask is None or mask[b, j])]
                if not keys:
                    continue
                s = k_cache[b, h // group, keys].astype(np.float64) @ q[b, h, i] / np.sqrt(D)
                if softcap:
                    s = softcap * np.tanh(s / softcap)
                p = np.exp(s - s.max())
                out[b, h, i] = (p / p.sum()) @ v_cache[b, h // group, keys]
    return out


def _program(rows: int, dtype="float32", sequence_major=False, mask=False, kv=HKV, length=L, **attrs):
    """One cached_attention op on fed Q, K, V, Past (and KeyMask), the caches persistable vars."""
    prog = halfway.Program()
    block = prog.global_block()
    heads = {"q_num_heads": HQ, "kv_num_heads": kv} if sequence_major else {}
    shapes = ({"Q": (B, rows, HQ * D), "K": (B, rows, kv * D), "V": (B, rows, kv * D)} if sequence_major else
              {"Q": (B, HQ, rows, D), "K": (B, kv, rows, D), "V": (B, kv, rows, D)})
    with program_guard(prog):
        inputs = {slot: halfway.layers.data(slot.lower(), shape, dtype) for slot, shape in shapes.items()}
        inputs["Past"] = halfway.layers.data("past", [B], "int64")
        if mask:
            inputs["KeyMask"] = halfway.layers.data("mask", [B, length], "bool")
        caches = [block.create_var(name, dtype=dtype, shape=[B, kv, length, D], persistable=True) for name in ("kc", "vc")]
        inputs.update(KCache=caches[0], VCache=caches[1])
        out = append_op("cached_attention", inputs, {**heads, **attrs},
                        outputs={"Out": 1, "KCacheOut": [caches[0]], "VCacheOut": [caches[1]]})["Out"][0]
    return prog, out.name


def _scope(dtype="float32", kv=HKV, length=L):
    scope = halfway.Scope()
    for name in ("kc", "vc"):
        scope.set(name, np.zeros((B, kv, length, D), dtype))
    return scope


def _feeds(rng, rows, past, dtype="float32", mask=None, kv=HKV):
    feeds = {"q": rng.standard_normal((B, HQ, rows, D)), "k": rng.standard_normal((B, kv, rows, D)),
             "v": rng.standard_normal((B, kv, rows, D))}
    feeds = {name: value.astype(dtype) for name, value in feeds.items()}
    feeds["past"] = np.array(past, np.int64)
    if mask is not None:
        feeds["mask"] = mask
    return feeds


def _run(place, prog, out, scope, feeds, share=None):
    prepared = Executor(place).prepare(prog, list(feeds), [out], scope, share=share)
    assert isinstance(prepared, PreparedProgram)
    return prepared, prepared.run(feeds)[0]


def _expected_caches(feeds_list, length=L):
    """The caches after runs of ``feeds_list`` (head-major K and V), float64."""
    shape = (B, feeds_list[0]["k"].shape[1], length, D)
    caches = [np.zeros(shape), np.zeros(shape)]
    for feeds in feeds_list:
        for b, start in enumerate(feeds["past"]):
            rows = min(feeds["k"].shape[2], length - start)
            caches[0][b, :, start:start + rows] = feeds["k"][b, :, :rows]
            caches[1][b, :, start:start + rows] = feeds["v"][b, :, :rows]
    return caches


PLACES = [pytest.param("cpu", id="numpy"), pytest.param("opencl", id="opencl", marks=pytest.mark.opencl)]


def _place(name):
    return halfway.CPUPlace() if name == "cpu" else OpenCLPlace()


@pytest.mark.parametrize("place", PLACES)
def test_prefill_then_decode_share_the_caches(place):
    """A prefill of 5 tokens then two decode steps, the second program prepared with ``share``:
    each reads what the ones before wrote, per sequence at its own past length."""
    rng = np.random.default_rng(0)
    scope = _scope()
    prefill, decode = _program(5), _program(1)
    first = _feeds(rng, 5, [0, 0])
    shared, got = _run(_place(place), *prefill, scope, first)
    caches = _expected_caches([first])
    np.testing.assert_allclose(got, _reference(first["q"], *caches, [0, 0], 5), rtol=1e-5, atol=1e-5)
    past, done = np.array([5, 3]), [first]  # sequence 1 is 3 tokens long: its last 2 prefill tokens were padding
    for _ in range(2):
        step = _feeds(rng, 1, past)
        done.append(step)
        prepared, got = _run(_place(place), *decode, scope, step, share=shared)
        if place == "opencl":  # one device buffer per cache for both programs
            assert all(prepared.resident[n][1] is shared.resident[n][1] for n in ("kc", "vc"))
        caches = _expected_caches(done)
        np.testing.assert_allclose(got, _reference(step["q"], *caches, past, 1), rtol=1e-5, atol=1e-5)
        past = past + 1
    if place == "cpu":  # on numpy the scope's arrays are the caches
        np.testing.assert_allclose(scope.get("kc"), caches[0], rtol=1e-6)


@pytest.mark.parametrize("rows", [1, 12], ids=["decode", "prefill"])
@pytest.mark.parametrize("place", PLACES)
def test_a_long_cache(place, rows):
    """Caches longer than a decode work-group's chunk of keys (``DECODE_CHUNK``), read by one new
    row (the decode kernel) and by more rows than a decode step has (the tiled kernel)."""
    length = 2 * DECODE_CHUNK + 37
    assert rows > DECODE_ROWS or rows == 1
    rng = np.random.default_rng(3)
    prog, out = _program(rows, length=length, window=DECODE_CHUNK + 5)
    scope = _scope(length=length)
    scope.set("kc", rng.standard_normal((B, HKV, length, D)).astype(np.float32))
    scope.set("vc", rng.standard_normal((B, HKV, length, D)).astype(np.float32))
    caches = [scope.get("kc").astype(np.float64), scope.get("vc").astype(np.float64)]
    past = [length - rows - 3, DECODE_CHUNK - rows // 2]
    feeds = _feeds(rng, rows, past)
    _, got = _run(_place(place), prog, out, scope, feeds)
    for b, start in enumerate(past):
        caches[0][b, :, start:start + rows], caches[1][b, :, start:start + rows] = feeds["k"][b], feeds["v"][b]
    expected = _reference(feeds["q"], *caches, past, rows, window=DECODE_CHUNK + 5)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kv", [HKV, 1], ids=["grouped", "multi-query"])
@pytest.mark.parametrize("place", PLACES)
def test_window_mask_softcap_and_sequence_major(place, kv):
    rng = np.random.default_rng(1)
    mask = np.ones((B, L), bool)
    mask[1, :2] = False  # sequence 1 is left-padded by two
    prog, out = _program(6, sequence_major=True, mask=True, kv=kv, window=3, softcap=2.0)
    feeds = _feeds(rng, 6, [0, 2], mask=mask, kv=kv)
    head_major = {name: feeds[name] for name in ("q", "k", "v")}
    feeds.update({name: np.ascontiguousarray(value.transpose(0, 2, 1, 3).reshape(B, 6, -1))
                  for name, value in head_major.items()})
    _, got = _run(_place(place), prog, out, _scope(kv=kv), feeds)
    caches = _expected_caches([{**feeds, **head_major}])
    expected = _reference(head_major["q"], *caches, [0, 2], 6, window=3, mask=mask, softcap=2.0)
    np.testing.assert_allclose(got, expected.transpose(0, 2, 1, 3).reshape(B, 6, -1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("place", PLACES)
def test_float16_caches_and_tokens_past_the_end(place):
    """float16 caches are written in place (no float32 copy); tokens at L and beyond are dropped,
    and a row with nothing to attend to (all keys masked) is 0."""
    rng = np.random.default_rng(2)
    mask = np.ones((B, L), bool)
    mask[0] = False
    prog, out = _program(4, dtype="float16", mask=True)
    scope = _scope("float16")
    feeds = _feeds(rng, 4, [L - 2, 3], dtype="float16", mask=mask)
    _, got = _run(_place(place), prog, out, scope, feeds)
    assert got.dtype == np.float16
    caches = _expected_caches([feeds])
    expected = _reference(feeds["q"], *caches, [L - 2, 3], 4, mask=mask)
    np.testing.assert_array_equal(got[0], 0)
    np.testing.assert_allclose(got.astype(np.float32), expected, rtol=2e-2, atol=2e-2)
    if place == "cpu":
        np.testing.assert_array_equal(scope.get("kc"), caches[0].astype(np.float16))


def test_past_beyond_the_cache():
    prog, out = _program(1)
    feeds = _feeds(np.random.default_rng(3), 1, [0, L + 1])
    with pytest.raises(HalfwayError, match=rf"Past\[1\] = {L + 1} is outside the cache's {L} positions"):
        _run(halfway.CPUPlace(), prog, out, _scope(), feeds)


@pytest.mark.parametrize("change, message", [
    ({"dtype": "float16"}, r"KCache and VCache must be of Q's dtype float32, are float16"),
    ({"past": "float32"}, r"Past must be \[batch = 2\] int32 or int64, is float32"),
    ({"heads": 3}, r"Q's 4 heads must be a multiple of K's and V's 3"),
])
def test_schema_refuses(change, message):
    prog = halfway.Program()
    block = prog.global_block()
    kv = change.get("heads", HKV)
    with program_guard(prog), pytest.raises(InferError, match=message):
        q = halfway.layers.data("q", [B, HQ, 1, D], "float32")
        k, v = (halfway.layers.data(n, [B, kv, 1, D], "float32") for n in ("k", "v"))
        past = halfway.layers.data("past", [B], change.get("past", "int64"))
        caches = [block.create_var(n, dtype=change.get("dtype", "float32"), shape=[B, kv, L, D], persistable=True)
                  for n in ("kc", "vc")]
        append_op("cached_attention", {"Q": q, "K": k, "V": v, "KCache": caches[0], "VCache": caches[1], "Past": past},
                  outputs={"Out": 1, "KCacheOut": [caches[0]], "VCacheOut": [caches[1]]})


def _turned(x, cos, sin, rotary, interleaved):
    """x [B, H, S, D] rotated by tables [B, S, rotary / 2], float64 (rotary_embedding's math)."""
    x = x.astype(np.float64).copy()
    c, s = cos[:, None].astype(np.float64), sin[:, None].astype(np.float64)
    first, second = ((slice(0, rotary, 2), slice(1, rotary, 2)) if interleaved
                     else (slice(0, rotary // 2), slice(rotary // 2, rotary)))
    x1, x2 = x[..., first].copy(), x[..., second].copy()
    x[..., first], x[..., second] = x1 * c - x2 * s, x1 * s + x2 * c
    return x


@pytest.mark.parametrize("rows, dtype", [(1, "float32"), (3, "float16"), (12, "float32")],
                         ids=["decode", "decode-float16", "prefill"])
@pytest.mark.parametrize("interleaved, rotary", [(False, 0), (True, 4)], ids=["halves", "interleaved-partial"])
@pytest.mark.parametrize("place", PLACES)
def test_rotary_in_the_attention(place, rows, dtype, interleaved, rotary):
    """With Cos, Sin and PositionIds, Q and K are rotated first and the cache takes the rotated
    keys: a second step reads the first's keys rotated by their own positions."""
    rng = np.random.default_rng(4)
    prog, out = _program(rows, dtype=dtype, interleaved=interleaved, rotary_dim=rotary)
    block = prog.global_block()
    op = block.ops[-1]
    width = rotary or D
    for slot, name, shape, kind in (("Cos", "cos", [4 * L, width // 2], "float32"),
                                    ("Sin", "sin", [4 * L, width // 2], "float32"),
                                    ("PositionIds", "ids", [B, rows], "int64")):
        block.create_var(name, dtype=kind, shape=shape)
        op.set_input(slot, [name])
    angles = np.arange(4 * L)[:, None] * rng.uniform(0.1, 1.0, width // 2)[None]
    tables = {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}
    scope = _scope(dtype)
    past, done = np.array([0, 2]), []
    prepared = None
    for _ in range(2):
        feeds = {**_feeds(rng, rows, past, dtype), **tables, "ids": past[:, None] + np.arange(rows)}
        prepared = Executor(_place(place)).prepare(prog, list(feeds), [out], scope, share=prepared)
        got = prepared.run(feeds)[0]
        cos, sin = tables["cos"][feeds["ids"]], tables["sin"][feeds["ids"]]
        turned = {name: _turned(feeds[name], cos, sin, width, interleaved).astype(dtype) for name in ("q", "k")}
        done.append({**feeds, "k": turned["k"]})
        expected = _reference(turned["q"], *_expected_caches(done), past, rows)
        tolerance = 2e-2 if dtype == "float16" else 1e-5
        np.testing.assert_allclose(got.astype(np.float32), expected, rtol=tolerance, atol=tolerance)
        past = past + rows
