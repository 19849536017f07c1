"""fuse_gqa: transformers' repeat_kv before the attention goes, the attention reading its key/value
heads as they lie (matching ONNX Runtime); a repeat along another axis stays, saying why."""

import numpy as np
import pytest

import halfway
from halfway.passes import PassManager
from tests.support.onnx_graph import Graph, check_passes

B, HQ, HKV, S, D = 2, 6, 2, 5, 8
RNG = np.random.default_rng(11)


def _repeated(g, name, axis=2, opaque=False):
    """repeat_kv as exported: unsqueeze, expand to a shape computed from the input's, reshape (to a
    batch and sequence computed past what the probes follow when ``opaque``: x * 2 / 2)."""
    shape = g.node("Shape", name)
    dims = [g.node("Gather", shape, g.ints(i), axis=0) for i in range(4)]
    wide = dims[:axis] + [g.ints(HQ // HKV)] + dims[axis:]
    expanded = g.node("Expand", g.node("Unsqueeze", name, g.ints(axis)), g.node("Concat", *wide, axis=0))
    batch, length = (g.node("Div", g.node("Mul", d, g.ints(2)), g.ints(2)) if opaque else d for d in dims[::2])
    joined = g.node("Concat", batch, g.ints(HQ), length, dims[3], axis=0)
    return g.node("Reshape", expanded, joined)


def _attention(axis=2, opaque=False):
    g = Graph()
    q = g.input("q", np.float32, ["batch", HQ, "seq", D])
    k, v = (g.input(n, np.float32, ["batch", HKV, "seq", D]) for n in ("k", "v"))
    keys, values = _repeated(g, k, axis, opaque), _repeated(g, v, axis, opaque)
    scores = g.node("Mul", g.node("MatMul", q, g.node("Transpose", keys, perm=[0, 1, 3, 2])),
                    g.const(np.float32(D ** -0.5)))
    return g.model([g.node("MatMul", g.node("Softmax", scores, axis=-1), values)])


def _feeds():
    return {"q": RNG.standard_normal((B, HQ, S, D)).astype(np.float32),
            "k": RNG.standard_normal((B, HKV, S, D)).astype(np.float32),
            "v": RNG.standard_normal((B, HKV, S, D)).astype(np.float32)}


@pytest.mark.parametrize("opaque", [False, True])
def test_repeated_key_value_heads_are_read_where_they_lie(opaque):
    program = check_passes(_attention(opaque=opaque), _feeds())
    (sdpa,) = [op for op in program.global_block().ops if op.type == "scaled_dot_product_attention"]
    assert (sdpa.input("K"), sdpa.input("V")) == (("k",), ("v",))
    assert not {"expand_v2", "reshape2", "unsqueeze2"} & {op.type for op in program.global_block().ops}


@pytest.mark.parametrize("axis, reason", [(3, "adds axis [3], not 2")])
def test_a_repeat_along_another_axis_says_why(axis, reason):
    program, _, fetches, scope = halfway.load(_attention(axis))
    result = PassManager(",".join(halfway.passes.DEFAULT_PIPELINE.split(",")[:-1]), debug=True).run(
        program, scope, fetch=fetches)
    (sdpa,) = [op for op in result.program.global_block().ops if op.type == "scaled_dot_product_attention"]
    assert sdpa.input("K") != ("k",)
    misses = [m.reason for r in result.records if r.name == "fuse_gqa" for m in r.near_misses]
    assert any(reason in m for m in misses), misses
