"""fuse_cached_attention: a decoder's query and key rotations go into its cached attention, which
and so does the split of the projection before them: the one op then computes what the four ops
computed (caches included), on numpy and OpenCL; what it cannot take stays, saying why."""

from __future__ import annotations

import numpy as np
import pytest

import halfway
from halfway.executor import Executor, OpenCLPlace
from halfway.ir.builder import append_op, program_guard
from halfway.passes import PassManager

B, HQ, HKV, S, D, L = 2, 4, 2, 3, 8, 16
RNG = np.random.default_rng(5)


def _decoder_attention(k_table="cos", k_interleaved=False, order=(0, 1, 2)):
    """split(qkv) -> rotary(q), rotary(k) -> cached_attention, sequence-major, tables read by
    position ids (``order``: which pieces of the split are Q, K and V)."""
    prog = halfway.Program()
    block = prog.global_block()
    with program_guard(prog):
        qkv = halfway.layers.data("qkv", [B, S, (HQ + 2 * HKV) * D])
        pieces = append_op("split", {"X": qkv}, {"axis": 2, "sections": [HQ * D, HKV * D, HKV * D]},
                           outputs={"Out": 3})["Out"]
        q, k, v = (pieces[i] for i in order)
        past, ids = halfway.layers.data("past", [B], "int64"), halfway.layers.data("ids", [B, S], "int64")
        tables = {name: halfway.layers.data(name, [L, D // 2]) for name in ("cos", "sin", "cos2")}
        turned = [append_op("rotary_embedding", {"X": x, "Cos": tables[table], "Sin": tables["sin"], "PositionIds": ids},
                            {"num_heads": heads, "interleaved": interleaved})["Out"][0]
                  for x, heads, table, interleaved in ((q, HQ, "cos", False), (k, HKV, k_table, k_interleaved))]
        caches = [block.create_var(name, dtype="float32", shape=[B, HKV, L, D], persistable=True) for name in ("kc", "vc")]
        out = append_op("cached_attention", {"Q": turned[0], "K": turned[1], "V": v, "KCache": caches[0],
                                             "VCache": caches[1], "Past": past},
                        {"q_num_heads": HQ, "kv_num_heads": HKV},
                        outputs={"Out": 1, "KCacheOut": [caches[0]], "VCacheOut": [caches[1]]})["Out"][0]
    return prog, out.name


def _feeds():
    angles = np.arange(L)[:, None] * RNG.uniform(0.1, 1.0, D // 2)
    past = np.array([0, 4])
    return {"qkv": RNG.standard_normal((B, S, (HQ + 2 * HKV) * D)).astype(np.float32), "past": past, "ids": past[:, None] + np.arange(S), "cos": np.cos(angles).astype(np.float32),
            "sin": np.sin(angles).astype(np.float32), "cos2": np.cos(2 * angles).astype(np.float32)}


def _caches():
    scope = halfway.Scope()
    for name in ("kc", "vc"):
        scope.set(name, np.zeros((B, HKV, L, D), np.float32))
    return scope


def _run(prog, out, feeds, place="cpu"):
    """Out, and the key cache after the run (fetched: on OpenCL the scope's array stays as it was)."""
    scope = _caches()
    chosen = halfway.CPUPlace() if place == "cpu" else OpenCLPlace()
    got, cache = Executor(chosen).run(prog, feeds, [out, "kc"], scope)
    return got, cache


def _fused(prog):
    """The pass run with debug (outputs compared on random feeds, caches updated on copies)."""
    result = PassManager(["fuse_cached_attention"], debug=True).run(prog, _caches())
    return result.program, [m.reason for r in result.records for m in r.near_misses]


@pytest.mark.parametrize("place", [pytest.param("cpu", id="numpy"),
                                   pytest.param("opencl", id="opencl", marks=pytest.mark.opencl)])
def test_the_split_and_the_rotations_go_into_the_attention(place):
    prog, out = _decoder_attention()
    fused, misses = _fused(prog)
    assert [op.type for op in fused.global_block().ops if op.type not in ("feed", "fetch")] == ["cached_attention"]
    assert misses == []
    attention = next(op for op in fused.global_block().ops if op.type == "cached_attention")
    assert (attention.input("Q"), attention.input("K"), attention.input("Cos")) == (("qkv",), (), ("cos",))
    assert attention.attr("packed")
    feeds = _feeds()
    (want, want_cache), (got, got_cache) = _run(prog, out, feeds), _run(fused, out, feeds, place)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got_cache, want_cache, rtol=1e-6, atol=1e-6)  # the cache holds rotated keys


@pytest.mark.parametrize("change, reason", [
    ({"k_table": "cos2"}, "the query and key rotations read other Cos: ['cos'] and ['cos2']"),
    ({"k_interleaved": True}, "the query and key rotations differ in interleaved"),
    ({"order": (0, 2, 1)}, "Q, K and V are not the pieces, in order, of one split"),
])
def test_rotations_it_cannot_take_stay(change, reason):
    prog, _ = _decoder_attention(**change)
    fused, misses = _fused(prog)
    assert [op.type for op in fused.global_block().ops].count("split") == 1
    assert reason in misses
