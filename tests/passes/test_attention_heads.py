"""fuse_attention_heads: the head split of Q, K, V and the head merge of the output go into a
sequence-major scaled_dot_product_attention; the near misses say why they stay."""

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.builder import append_op, create_parameter
from halfway.ir.initializers import Constant
from halfway.passes import PassManager, collect_near_misses
from tests.support.passcheck import fuse_and_compare, op_types

B, S, H, D = 2, 5, 3, 4


def _one(op_type, inputs, **attrs):
    return append_op(op_type, inputs, attrs)["Out"][0]


def _split(x, shape, perm=(0, 2, 1, 3)):
    return _one("transpose2", {"X": _one("reshape2", {"X": x}, shape=list(shape))}, axis=list(perm))


def _program(q_shape=(0, 0, H, D), kv_heads=H, merge_shape=(0, 0, -1), merge_perm=(0, 2, 1, 3), q_perm=(0, 2, 1, 3),
             v_split=True, read_q=False, q_hidden=H * D, zero_shape=None, rotary=False):
    """[B, S, H * D] projections split into heads (Q and K rotated when ``rotary``), attention with
    a mask, NaN outputs zeroed where ``zero_shape`` is given, the heads merged."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        xq = layers.data("xq", [B, S, q_hidden])
        xk, xv = (layers.data(n, [B, S, kv_heads * D]) for n in ("xk", "xv"))
        q = _split(xq, q_shape, q_perm)
        k = _split(xk, (0, 0, kv_heads, D))
        v = _split(xv, (0, 0, kv_heads, D)) if v_split else layers.data("v", [B, kv_heads, S, D])
        if rotary:
            tables = {"Cos": create_parameter("cos", [1, S, D // 2]), "Sin": create_parameter("sin", [1, S, D // 2])}
            q, k = (_one("rotary_embedding", {"X": t, **tables}) for t in (q, k))
        inputs = {"Q": q, "K": k, "V": v, "Mask": layers.data("mask", [B, 1, S, S])}
        out = _one("scaled_dot_product_attention", inputs, scale=0.3)
        if zero_shape is not None:
            zero = create_parameter("zero", list(zero_shape), initializer=Constant(0.0))
            out = _one("where", {"Condition": _one("isnan", {"X": out}), "X": zero, "Y": out})
        merged = _one("reshape2", {"X": _one("transpose2", {"X": out}, axis=list(merge_perm))}, shape=list(merge_shape))
        fetches = [merged.name] + ([_one("relu", {"X": q}).name] if read_q else [])
    return prog, halfway.init_scope(prog, seed=1), fetches


def _numpy_attention(feed, kv_heads):
    q = feed["xq"].reshape(B, S, H, D).transpose(0, 2, 1, 3)
    k, v = (feed[n].reshape(B, S, kv_heads, D).transpose(0, 2, 1, 3).repeat(H // kv_heads, axis=1)
            for n in ("xk", "xv"))
    scores = q @ k.swapaxes(-1, -2) * 0.3 + feed["mask"]
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    return (probs / probs.sum(-1, keepdims=True) @ v).transpose(0, 2, 1, 3).reshape(B, S, H * D)


@pytest.mark.parametrize("q_shape, kv_heads, merge_shape, zero_shape", [
    ((0, 0, H, D), H, (0, 0, -1), None),
    ((-1, S, H, D), 1, (-1, S, H * D), None),  # dynamo's views; grouped-query keys
    ((0, 0, -1, D), H, (0, 0, H * D), ()),  # the head count from the known hidden size; NaN outputs zeroed
])
def test_head_split_and_merge_go_into_the_attention(q_shape, kv_heads, merge_shape, zero_shape):
    prog, scope, fetches = _program(q_shape, kv_heads, merge_shape, zero_shape=zero_shape)
    result = fuse_and_compare(prog, scope, "fuse_attention_heads", fetches)
    zeroed = {"isnan": 1, "where": 1} if zero_shape is not None else {}
    assert op_types(result.program) == {"scaled_dot_product_attention": 1, **zeroed}
    sdpa = result.program.global_block().ops[0]
    assert (sdpa.attr("q_num_heads"), sdpa.attr("kv_num_heads")) == (H, kv_heads)
    assert [sdpa.input(s)[0] for s in ("Q", "K", "V")] == ["xq", "xk", "xv"]
    assert result.program.global_block().ops[-1].output("Out") == tuple(fetches)
    rng = np.random.default_rng(3)
    feed = {n: rng.standard_normal(prog.global_block().var(n).shape).astype(np.float32)
            for n in ("xq", "xk", "xv", "mask")}
    (got,) = halfway.Executor().run(result.program, feed, fetches, result.scope)
    np.testing.assert_allclose(got, _numpy_attention(feed, kv_heads), rtol=1e-5, atol=1e-6)


def test_a_rotary_embedding_after_the_head_split_moves_before_it():
    prog, scope, fetches = _program(kv_heads=1, rotary=True)
    result = fuse_and_compare(prog, scope, "fuse_attention_heads", fetches)
    assert op_types(result.program) == {"rotary_embedding": 2, "scaled_dot_product_attention": 1}
    rotated = [op for op in result.program.global_block().ops if op.type == "rotary_embedding"]
    assert [(op.input("X")[0], op.attr("num_heads")) for op in rotated] == [("xq", H), ("xk", 1)]


@pytest.mark.parametrize("kwargs, reason", [
    ({"merge_perm": (0, 1, 2, 3), "merge_shape": (0, 0, -1)}, "is transposed by [0, 1, 2, 3]"),
    ({"q_shape": (0, 0, D, H), "q_perm": (0, 3, 1, 2)}, "is not written by one transpose2 (0, 2, 1, 3)"),
    ({"q_shape": (0, 0, -1, D), "q_hidden": -1}, "no head split into a known head count"),
    ({"q_shape": (-1, S, H, D), "q_hidden": -1}, "does not keep [batch, sequence]"),
    ({"v_split": False}, "V v is not written by one transpose2"),
    ({"read_q": True}, "is read elsewhere"),
    ({"zero_shape": (D,)}, "is not one element"),
])
def test_near_misses_say_why(kwargs, reason):
    prog, scope, fetches = _program(**kwargs)
    with collect_near_misses() as found:
        result = PassManager("fuse_attention_heads").run(prog, scope, fetch=fetches)
    misses = [m.reason for m in found]
    assert not result.modified and op_types(result.program)["reshape2"] == 3 + kwargs.get("v_split", True)
    assert any(reason in m for m in misses), misses
