import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.builder import append_op, create_parameter
from halfway.ir.initializers import Constant
from halfway.passes import PassManager
from tests.support.passcheck import fuse_and_compare, op_types

B, H, S, D = 2, 3, 5, 4


def _const(value, shape=()):
    return create_parameter("c", list(shape), initializer=Constant(value))


def _one(op_type, inputs, **attrs):
    return append_op(op_type, inputs, attrs)["Out"][0]


def _attention(keys="bhsd", scale="scores", masks=1, softmax_axis=-1, scale_shape=(), zero_nan=False,
               mask_shape=(B, 1, S, S), heads=H):
    """Q [B, H, S, D] against keys laid out as ``keys``, scaled where ``scale`` says, plus ``masks``
    additive masks, softmax, times V; the zeroing of NaN probabilities of PyTorch's sdpa export."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        q, v = layers.data("q", [B, heads, S, D]), layers.data("v", [B, heads, S, D])
        if keys == "bhsd":
            kt = _one("transpose2", {"X": layers.data("k", [B, heads, S, D])}, axis=[0, 1, 3, 2])
        elif keys == "bshd":
            kt = _one("transpose2", {"X": layers.data("k", [B, S, heads, D])}, axis=[0, 2, 3, 1])
        else:
            kt = layers.data("kt", [B, heads, D, S])
        if scale == "both":
            q = _one("elementwise_mul", {"X": q, "Y": _const(0.5)})
            kt = _one("elementwise_mul", {"X": kt, "Y": _const(0.25)})
        scores = _one("matmul_v2", {"X": q, "Y": kt})
        if scale in ("scores", "div"):
            op = "elementwise_mul" if scale == "scores" else "elementwise_div"
            scores = _one(op, {"X": scores, "Y": _const(0.7, scale_shape)})
        for i in range(masks):
            shape = mask_shape if i == 0 else (1, H, S, S)
            scores = _one("elementwise_add", {"X": scores, "Y": layers.data(f"mask{i}", list(shape))})
        probs = _one("softmax", {"X": scores}, axis=softmax_axis)
        if zero_nan:
            flags = _one("isnan", {"X": probs})
            probs = _one("where", {"Condition": flags, "X": _const(0.0, (1,)), "Y": probs})
        out = _one("matmul_v2", {"X": probs, "Y": v})
    scope = halfway.init_scope(prog, seed=1)
    return prog, scope, [out.name]


def _numpy_attention(feed, factor, keys, masks):
    k = feed["k"].transpose(0, 2, 1, 3) if keys == "bshd" else feed.get("k", None)
    k = k if k is not None else feed["kt"].swapaxes(-1, -2)
    scores = feed["q"] @ k.swapaxes(-1, -2) * factor + sum(feed[f"mask{i}"] for i in range(masks))
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    return (scores / scores.sum(-1, keepdims=True)) @ feed["v"]


@pytest.mark.parametrize("keys", ["bhsd", "bshd", "var"])
@pytest.mark.parametrize("scale, factor", [("scores", 0.7), ("div", 1 / 0.7), ("both", 0.125), (None, 1.0)])
@pytest.mark.parametrize("masks", [0, 1, 2])
def test_attention_chains_become_one_op(keys, scale, factor, masks):
    prog, scope, outs = _attention(keys, scale, masks)
    result = fuse_and_compare(prog, scope, "fuse_attention", outs)
    types = op_types(result.program)
    assert types["scaled_dot_product_attention"] == 1 and "softmax" not in types and "matmul_v2" not in types
    assert types["transpose2"] == (1 if keys != "bhsd" else 0) and types["elementwise_add"] == (masks == 2)
    (sdpa,) = [o for o in result.program.global_block().ops if o.type == "scaled_dot_product_attention"]
    assert sdpa.attr("scale") == pytest.approx(factor)
    rng = np.random.default_rng(4)
    feed = {n: rng.standard_normal(prog.global_block().var(n).shape).astype(np.float32)
            for n in ["q", "v", "k" if keys != "var" else "kt"] + [f"mask{i}" for i in range(masks)]}
    (got,) = halfway.Executor().run(result.program, feed, outs, result.scope)
    np.testing.assert_allclose(got, _numpy_attention(feed, factor, keys, masks), rtol=1e-5, atol=1e-6)


def test_zeroed_nan_probabilities_fuse_and_keep_masked_rows_at_zero():
    prog, scope, outs = _attention(zero_nan=True)
    rng = np.random.default_rng(2)
    feed = {n: rng.standard_normal(prog.global_block().var(n).shape).astype(np.float32)
            for n in ("q", "k", "v", "mask0")}
    feed["mask0"][0, 0, 1] = -np.inf
    result = fuse_and_compare(prog, scope, "fuse_attention", outs, feed=feed)
    assert set(op_types(result.program)) == {"scaled_dot_product_attention"}
    assert result.program.global_block().ops[0].attr("zero_nan")
    (got,) = halfway.Executor().run(result.program, feed, outs, result.scope)
    assert np.all(got[0, :, 1] == 0) and np.all(np.isfinite(got))


def test_outputs_replaced_by_another_value_than_zero_keep_their_where():
    prog, scope, outs = _attention()
    with halfway.program_guard(prog):
        out = prog.global_block().var(outs[0])
        kept = _one("where", {"Condition": _one("isnan", {"X": out}), "X": _const(1.0, (1,)), "Y": out})
    scope = halfway.init_scope(prog, seed=1)
    result = PassManager("fuse_attention", debug=True).run(prog, scope, fetch=[kept.name])
    assert op_types(result.program)["where"] == 1
    assert any("is not a zero scalar constant" in m.reason for r in result.records for m in r.near_misses)


@pytest.mark.parametrize("kwargs, reason", [
    ({"softmax_axis": 2}, "the softmax is over axis 2, not the keys"),
    ({"scale_shape": (S,)}, "is not a scalar constant in the scope"),
    ({"mask_shape": (B, H, S, S), "keys": "var"}, None),
    ({"heads": 1, "mask_shape": (B, H, S, S)}, "widens the scores"),
])
def test_near_misses_say_why(kwargs, reason):
    prog, scope, outs = _attention(**kwargs)
    result = PassManager("fuse_attention", debug=True).run(prog, scope, fetch=outs)
    misses = [m.reason for r in result.records for m in r.near_misses]
    if reason is None:
        assert op_types(result.program)["scaled_dot_product_attention"] == 1 and not misses
        return
    assert "scaled_dot_product_attention" not in op_types(result.program)
    assert any(reason in m for m in misses), misses


def test_scores_read_twice_are_left_alone():
    prog, scope, outs = _attention()
    with halfway.program_guard(prog):
        scores = next(o for o in prog.global_block().ops if o.type == "softmax").input("X")[0]
        extra = _one("relu", {"X": prog.global_block().var(scores)})
    result = fuse_and_compare(prog, scope, "fuse_attention", outs + [extra.name])
    assert not result.modified
