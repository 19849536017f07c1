"""The transformer ops (``ir/ops/attention.py``, their numpy kernels and ONNX converters): ONNX's
Attention, RMSNormalization and RotaryEmbedding imported and run against onnx's reference
implementation in float32 and float16, LinearAttention against ONNX Runtime; the ops alone against
numpy; their inference with unknown dims and the errors they raise."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import halfway
from halfway.executor import Executor
from halfway.frontends.onnx import ConversionError
from halfway.ir.dtypes import DType
from halfway.ir.schema import InferContext, InferError, TensorInfo, get_schema
from halfway.passes.float16.lists import DEFAULT_WHITE_LIST
from tests.support.oprun import float16_tolerance, run_op

RNG = np.random.default_rng(23)


def _x(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _model(op_type: str, feeds: dict[str, np.ndarray | None], outputs: list[str], **attrs: object):
    """One ``op_type`` node; a feed given as None is an absent optional input."""
    node = helper.make_node(op_type, [n if v is not None else "" for n, v in feeds.items()], outputs, **attrs)
    graph = helper.make_graph(
        [node], "one_op",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in feeds.items() if a is not None],
        [helper.make_empty_tensor_value_info(o) for o in outputs if o])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


def _check(op_type: str, feeds: dict[str, np.ndarray | None], outputs: tuple[str, ...] = ("y",), rtol: float = 1e-5,
           **attrs: object) -> list[np.ndarray]:
    """Import and run the node; compare with onnx's reference (run in float32 for float16 feeds)."""
    model = _model(op_type, feeds, list(outputs), **attrs)
    given = {n: v for n, v in feeds.items() if v is not None}
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {n: given[n] for n in names}, fetches, scope)
    wide = {n: v.astype(np.float32) if v.dtype == np.float16 else v for n, v in given.items()}
    want = ReferenceEvaluator(_model(op_type, {n: wide.get(n) for n in feeds}, list(outputs), **attrs)).run(None, wide)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == next(iter(given.values())).dtype, (g.shape, w.shape, g.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=rtol, atol=rtol)
    return got


ATTENTION_CASES = {
    "4d": dict(q=(2, 3, 4, 8), k=(2, 3, 6, 8), v=(2, 3, 6, 5)),
    "4d gqa causal": dict(q=(2, 6, 4, 8), k=(2, 2, 6, 8), v=(2, 2, 6, 8), is_causal=1),
    "4d mqa softcap scaled": dict(q=(1, 4, 3, 8), k=(1, 1, 5, 8), v=(1, 1, 5, 8), softcap=1.5, scale=0.3),
    "3d gqa": dict(q=(2, 4, 48), k=(2, 6, 16), v=(2, 6, 20), q_num_heads=6, kv_num_heads=2),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("case", list(ATTENTION_CASES))
def test_attention_matches_the_reference(case, dtype):
    shapes = dict(ATTENTION_CASES[case])
    feeds = {name: _x(*shapes.pop(name), dtype=dtype) for name in ("q", "k", "v")}
    _check("Attention", feeds, rtol=1e-5 if dtype is np.float32 else 4 * float16_tolerance(8), **shapes)


@pytest.mark.parametrize("mask_shape", [(4, 6), (2, 1, 4, 6), (2, 3, 4, 4)])
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_attention_masks_broadcast_and_pad_the_keys(mask_shape, kind):
    """A bool mask drops keys, a float one adds; a mask shorter than the keys drops the rest."""
    mask = RNG.random(mask_shape) > 0.3 if kind == "bool" else _x(*mask_shape)
    mask[..., 0] = True if kind == "bool" else mask[..., 0]
    _check("Attention", {"q": _x(2, 3, 4, 8), "k": _x(2, 3, 6, 8), "v": _x(2, 3, 6, 8), "m": mask})


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_with_past_keys_causal_and_every_qk_output(causal):
    """present_key/value are the past and new keys joined; the causal diagonal starts after the
    past; qk_matmul_output at each of its four stages (stage 0 without softcap: the spec says the
    product, onnx's reference gives it softcapped)."""
    feeds = {"q": _x(2, 3, 4, 8), "k": _x(2, 3, 2, 8), "v": _x(2, 3, 2, 6), "m": _x(2, 1, 4, 7),
             "past_k": _x(2, 3, 5, 8), "past_v": _x(2, 3, 5, 6)}
    for mode in range(4):
        _check("Attention", feeds, ("y", "present_k", "present_v", "qk"), is_causal=causal,
               softcap=2.0 if mode else 0.0, qk_matmul_output_mode=mode)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # the reference's 0 / 0
def test_attention_padded_batch_and_fully_masked_rows():
    """nonpad_kv_seqlen drops each sample's padding keys; a row whose keys are all masked out is
    NaN, as the reference computes it."""
    mask = np.zeros((2, 1, 4, 6), np.float32)
    mask[:, :, 1] = -np.inf
    feeds = {"q": _x(2, 3, 4, 8), "k": _x(2, 3, 6, 8), "v": _x(2, 3, 6, 8), "m": mask, "pk": None, "pv": None,
             "lengths": np.array([6, 3], np.int64)}
    got = _check("Attention", feeds)[0]
    assert np.isnan(got[:, :, 1]).all() and not np.isnan(np.delete(got, 1, axis=2)).any()


def test_attention_with_zero_nan_zeroes_the_rows_without_keys():
    """zero_nan: PyTorch's where(isnan(out), 0, out) after the attention, in the op."""
    mask = np.ones((2, 1, 4, 6), bool)
    mask[0, :, 2] = False
    inputs = {"Q": _x(2, 3, 4, 8), "K": _x(2, 3, 6, 8), "V": _x(2, 3, 6, 8), "Mask": mask}
    want = run_op("scaled_dot_product_attention", inputs).out
    got = run_op("scaled_dot_product_attention", inputs, {"zero_nan": True}).out
    assert np.isnan(want[0, :, 2]).all()
    np.testing.assert_array_equal(got, np.where(np.isnan(want), 0, want))


def test_attention_op_in_float16_computes_in_float32():
    q, k, v = _x(1, 4, 3, 16), _x(1, 2, 7, 16), _x(1, 2, 7, 16)
    half = [a.astype(np.float16) for a in (q, k, v)]
    ran = run_op("scaled_dot_product_attention", dict(zip("QKV", half)))
    wq, wk, wv = (a.astype(np.float32) for a in half)
    scores = wq.reshape(1, 2, 6, 16) @ wk.swapaxes(-1, -2) / 4
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    want = (weights / weights.sum(-1, keepdims=True) @ wv).reshape(1, 4, 3, 16)
    assert ran.kernel_dtypes == [DType.float16] and ran.out.dtype == np.float16
    np.testing.assert_allclose(ran.out, want, rtol=float16_tolerance(16), atol=float16_tolerance(16))
    assert "scaled_dot_product_attention" in DEFAULT_WHITE_LIST


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("attrs, mask_shape", [({}, None), ({"is_causal": True}, (2, 1, 4, 6)),
                                               ({"softcap": 1.5, "scale": 0.3}, (4, 6))])
def test_sequence_major_attention_matches_onnx_3d_attention(attrs, mask_shape, dtype):
    """Q, K, V and Out as [B, S, H * D] (grouped heads, Dv apart from D) against the reference's
    3-D Attention; the Scores keep [B, Hq, Sq, Skv]."""
    feeds = {"q": _x(2, 4, 6 * 8, dtype=dtype), "k": _x(2, 6, 2 * 8, dtype=dtype), "v": _x(2, 6, 2 * 5, dtype=dtype)}
    if mask_shape:
        feeds["m"] = _x(*mask_shape, dtype=dtype)
    ran = run_op("scaled_dot_product_attention", dict(zip(("Q", "K", "V", "Mask"), feeds.values())),
                 {"q_num_heads": 6, "kv_num_heads": 2, **attrs}, outputs={"Out": 1, "Scores": 1})
    wide = {n: v.astype(np.float32) for n, v in feeds.items()}
    model = _model("Attention", wide, ["y", "", "", "qk"], q_num_heads=6, kv_num_heads=2, qk_matmul_output_mode=0,
                   is_causal=int(attrs.get("is_causal", False)), softcap=attrs.get("softcap", 0.0),
                   **({"scale": attrs["scale"]} if "scale" in attrs else {}))
    out, scores = ReferenceEvaluator(model).run(None, wide)
    tol = 1e-5 if dtype is np.float32 else 4 * float16_tolerance(8)
    assert ran.out.shape == (2, 4, 30) and ran.out.dtype == dtype and ran.outputs["Scores"][0].shape == (2, 6, 4, 6)
    np.testing.assert_allclose(ran.out.astype(np.float32), out, rtol=tol, atol=tol)
    if "softcap" not in attrs:  # the reference softcaps its stage-0 output, the spec does not
        np.testing.assert_allclose(ran.outputs["Scores"][0].astype(np.float32), scores, rtol=tol, atol=tol)


def _infer(op_type: str, inputs: dict[str, tuple[tuple[int, ...], DType]], **attrs: object) -> InferContext:
    ctx = InferContext(get_schema(op_type), {s: [TensorInfo(*info)] for s, info in inputs.items()}, attrs)
    get_schema(op_type).infer(ctx)
    return ctx


def test_attention_inference_carries_unknown_dims_and_rejects_bad_heads():
    f32 = DType.float32
    ctx = _infer("scaled_dot_product_attention", {"Q": ((-1, 8, -1, 64), f32), "K": ((-1, 2, -1, 64), f32),
                                                  "V": ((-1, 2, -1, 32), f32), "Mask": ((-1, 1, 1, -1), DType.bool)})
    assert ctx.outputs["Out"][0].shape == (-1, 8, -1, 32)
    with pytest.raises(InferError, match="multiple"):
        _infer("scaled_dot_product_attention", {"Q": ((1, 3, 4, 8), f32), "K": ((1, 2, 4, 8), f32),
                                                "V": ((1, 2, 4, 8), f32)})
    with pytest.raises(InferError, match="broadcast"):
        _infer("scaled_dot_product_attention", {"Q": ((1, 2, 4, 8), f32), "K": ((1, 2, 5, 8), f32),
                                                "V": ((1, 2, 5, 8), f32), "Mask": ((3, 5), f32)})
    ctx = _infer("scaled_dot_product_attention", {"Q": ((-1, -1, 512), f32), "K": ((-1, -1, 128), f32),
                                                  "V": ((-1, -1, 64), f32)}, q_num_heads=8, kv_num_heads=2)
    assert ctx.outputs["Out"][0].shape == (-1, -1, 256)
    with pytest.raises(InferError, match="both"):
        _infer("scaled_dot_product_attention", {"Q": ((1, 4, 16), f32), "K": ((1, 4, 16), f32),
                                                "V": ((1, 4, 16), f32)}, q_num_heads=2)
    with pytest.raises(InferError, match="heads \\* head size"):
        _infer("scaled_dot_product_attention", {"Q": ((1, 4, 15), f32), "K": ((1, 4, 16), f32),
                                                "V": ((1, 4, 16), f32)}, q_num_heads=2, kv_num_heads=2)


def test_causal_attention_over_a_past_of_unknown_length_is_refused():
    q = helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 2, 1, 8])
    kv = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 1, 8]) for n in ("k", "v")]
    past = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, "past", 8]) for n in ("pk", "pv")]
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y"], is_causal=1)
    graph = helper.make_graph([node], "g", [q, *kv, *past], [helper.make_empty_tensor_value_info("y")])
    with pytest.raises(ConversionError, match="unknown length"):
        halfway.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape, axis, scale", [((3, 4), -1, (4,)), ((2, 3, 5), 1, (3, 5)), ((2, 3, 5), 1, (5,)),
                                                ((2, 3, 4, 5), 0, (1, 4, 5))])
def test_rms_normalization(shape, axis, scale, dtype):
    _check("RMSNormalization", {"x": _x(*shape, dtype=dtype), "s": _x(*scale, dtype=dtype)},
           rtol=1e-5 if dtype is np.float32 else 2 * float16_tolerance(), axis=axis, epsilon=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("interleaved, rotary_dim", [(0, 0), (1, 0), (0, 4), (1, 4)])
@pytest.mark.parametrize("layout", ["4d ids", "3d ids", "4d tables"])
def test_rotary_embedding(layout, interleaved, rotary_dim, dtype):
    half = (rotary_dim or 8) // 2
    x = _x(2, 4, 3, 8, dtype=dtype) if layout.startswith("4d") else _x(2, 3, 32, dtype=dtype)
    tables = (10, half) if layout.endswith("ids") else (2, 3, half)
    feeds = {"x": x, "cos": _x(*tables, dtype=dtype), "sin": _x(*tables, dtype=dtype)}
    if layout.endswith("ids"):
        feeds["ids"] = RNG.integers(0, 10, (2, 3))
    _check("RotaryEmbedding", feeds, rtol=1e-5 if dtype is np.float32 else 2 * float16_tolerance(),
           interleaved=interleaved, rotary_embedding_dim=rotary_dim, num_heads=0 if layout.startswith("4d") else 4)


def _sdpa_program(shape_q, shape_kv, mask_shape, causal):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        from halfway import layers
        from halfway.ir.builder import append_op
        inputs = {"Q": layers.data("q", shape_q), "K": layers.data("k", shape_kv), "V": layers.data("v", shape_kv)}
        if mask_shape:
            inputs["Mask"] = layers.data("mask", mask_shape)
        out = append_op("scaled_dot_product_attention", inputs, {"is_causal": causal})["Out"][0]
    return prog, out.name


@pytest.mark.parametrize("mask_shape, causal", [((2, 1, 40, 40), False), ((1, 40), True), (None, True)])
def test_blocks_of_query_rows_match_one_block_and_onnx_reference(monkeypatch, mask_shape, causal):
    """Grouped heads, a mask per query row or per key, causal offsets across blocks of 7 rows: the
    blocks give the one-block result, and (without causal) onnx's reference."""
    import halfway.kernels.numpy.attention as kernels

    prog, out = _sdpa_program([2, 4, 40, 8], [2, 2, 40, 8], mask_shape, causal)
    feed = {"q": _x(2, 4, 40, 8), "k": _x(2, 2, 40, 8), "v": _x(2, 2, 40, 8)}
    if mask_shape:
        feed["mask"] = _x(*mask_shape)
    whole = Executor().run(prog, feed, [out])[0]
    monkeypatch.setattr(kernels, "SCORE_BLOCK_BYTES", 2 * 4 * 40 * 4 * 7)
    assert kernels._block_rows(2, 4, 40, 40, 4, kernels.SCORE_BLOCK_BYTES) == 7
    blocked = Executor().run(prog, feed, [out])[0]
    np.testing.assert_allclose(blocked, whole, rtol=1e-6, atol=1e-6)
    if causal:
        return
    names = ["q", "k", "v"] + (["mask"] if mask_shape else [])
    model = _model("Attention", {n: feed[n] for n in names}, ["y"], is_causal=int(causal))
    (want,) = ReferenceEvaluator(model).run(None, {n: feed[n] for n in names})
    np.testing.assert_allclose(blocked, want, rtol=1e-5, atol=1e-5)


def test_long_sequences_hold_one_block_of_scores(monkeypatch):
    """At sequence 512 the scratch is a block of rows, not the [B, H, S, S] scores (2 MiB here)."""
    import tracemalloc

    import halfway.kernels.numpy.attention as kernels

    prog, out = _sdpa_program([1, 2, 512, 16], [1, 2, 512, 16], None, False)
    feed = {n: _x(1, 2, 512, 16) for n in ("q", "k", "v")}
    full_scores = 2 * 512 * 512 * 4
    monkeypatch.setattr(kernels, "SCORE_BLOCK_BYTES", full_scores // 16)
    prepared = Executor().prepare(prog, list(feed), [out], halfway.Scope(),
                                  feed_shapes={n: v.shape for n, v in feed.items()})
    prepared.run(feed)
    tracemalloc.start()
    prepared.run(feed)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < full_scores // 4, f"peak {peak} bytes"


@pytest.mark.parametrize("batch, mask_shape, lengths, attrs", [
    (1, (1, 1, 1, 33), False, {}),              # a padding mask broadcast over heads and rows
    (1, (1, 8, 20, 33), False, {"is_causal": True, "causal_offset": 13}),
    (1, (8, 20, 33), True, {}),                 # per head, no batch axis
    (3, (3, 1, 20, 33), True, {}),              # cut by images
    (3, (20, 33), False, {"softcap": 2.0}),
    (1, None, False, {"q_num_heads": 8, "kv_num_heads": 2}),  # sequence-major
])
def test_heads_and_images_cut_for_the_threads_match_the_whole(monkeypatch, batch, mask_shape, lengths, attrs):
    """With OpenBLAS on one thread, attention cut among three threads (grouped heads: 8 query heads
    over 2 key/value heads; masks and key lengths cut where they do not broadcast) gives the
    result of one thread."""
    from halfway.kernels.numpy import attention, threads

    if not threads._openblas():
        pytest.skip("threadpoolctl is not installed or numpy's BLAS is not OpenBLAS")
    rng = np.random.default_rng(3)
    sequence_major = "q_num_heads" in attrs
    shapes = ((batch, 20, 8 * 16), (batch, 33, 2 * 16)) if sequence_major else ((batch, 8, 20, 16), (batch, 2, 33, 16))
    inputs = {"Q": rng.standard_normal(shapes[0]).astype(np.float32),
              "K": rng.standard_normal(shapes[1]).astype(np.float32),
              "V": rng.standard_normal(shapes[1]).astype(np.float32)}
    if mask_shape:
        inputs["Mask"] = rng.standard_normal(mask_shape).astype(np.float32)
    if lengths:
        inputs["KeyLengths"] = rng.integers(5, 34, batch).astype(np.int64)
    monkeypatch.setattr(threads, "thread_count", lambda: 1)
    whole = run_op("scaled_dot_product_attention", inputs, attrs).out
    monkeypatch.setattr(threads, "thread_count", lambda: 3)
    monkeypatch.setattr(threads, "MIN_PART", 1)
    calls = []
    monkeypatch.setattr(attention, "run_parts", lambda parts: calls.append(len(parts)) or threads.run_parts(parts))
    parts = run_op("scaled_dot_product_attention", inputs, attrs).out
    assert calls and max(calls) > 1, "the attention was not cut"
    np.testing.assert_allclose(parts, whole, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("rule, decay_per_key, beta_per_head", [
    ("linear", False, False), ("gated", False, False), ("delta", False, True), ("gated_delta", True, True),
    ("gated_delta", False, False)])
def test_linear_attention_matches_onnxruntime(rule, decay_per_key, beta_per_head):
    """Grouped-query heads (4 over 2), a past state, per-head or per-key-dim decays and a Beta per
    head or shared; halfway's result and its export's against ONNX Runtime's."""
    import onnxruntime

    from halfway.frontends.onnx_export import to_onnx

    b, t, q_heads, kv_heads, dk, dv = 2, 5, 4, 2, 3, 4
    feeds: dict[str, np.ndarray | None] = {
        "q": _x(b, t, q_heads * dk), "k": _x(b, t, kv_heads * dk) * 0.5, "v": _x(b, t, kv_heads * dv),
        "past": _x(b, kv_heads, dk, dv),
        "decay": -np.abs(_x(b, t, kv_heads * (dk if decay_per_key else 1))) if rule.startswith("gated") else None,
        "beta": RNG.uniform(0, 1, (b, t, kv_heads if beta_per_head else 1)).astype(np.float32) if "delta" in rule
        else None}
    model = _model("LinearAttention", feeds, ["y", "state"], q_num_heads=q_heads, kv_num_heads=kv_heads,
                   update_rule=rule)
    model.opset_import[0].version = 27
    given = {n: v for n, v in feeds.items() if v is not None}
    prog, names, fetches, scope = halfway.load(model)
    got = Executor().run(prog, {n: given[n] for n in names}, fetches, scope)
    want = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, given)
    exported = to_onnx(prog, scope, names, fetches, opset=27)
    again = onnxruntime.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {n: given[n] for n in names})
    for g, a, w in zip(got, again, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-5)


def test_linear_attention_names_an_input_its_rule_does_not_read():
    feeds: dict[str, np.ndarray | None] = {"q": _x(1, 2, 4), "k": _x(1, 2, 4), "v": _x(1, 2, 4), "past": None,
                                           "decay": _x(1, 2, 2)}
    model = _model("LinearAttention", feeds, ["y", ""], q_num_heads=2, kv_num_heads=2, update_rule="linear")
    model.opset_import[0].version = 27
    with pytest.raises(ConversionError, match="update_rule 'linear' takes no Decay"):
        halfway.load(model)
