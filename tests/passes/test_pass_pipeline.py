from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway.executor import Executor
from halfway.passes import DEFAULT_PIPELINE, PassManager
from tests.support.modern import FIXTURE_DIR, fixtures, layer_ops
from tests.support.passcheck import fuse_and_compare, op_types, random_cnn

FIXTURES = Path(__file__).parent.parent / "fixtures" / "paddle"


def test_default_pipeline_on_the_paddle_resnet():
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / "resnet_tiny"))
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    names = set(scope)
    result = PassManager(count_ops=True).run(program, scope)
    assert [r.name for r in result.records] == DEFAULT_PIPELINE.split(",")
    assert op_types(result.program) == {"feed": 1, "fused_conv2d": 4, "pool2d": 2, "flatten_contiguous_range": 1,
                                        "fc": 1, "softmax": 1, "fetch": 1}
    got = Executor().run(result.program, {n: io[n] for n in feeds}, fetches, result.scope)
    np.testing.assert_allclose(got[0], io[fetches[0]], rtol=1e-5, atol=1e-6)
    assert set(scope) == names


def test_default_pipeline_then_float16_on_the_paddle_resnet():
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / "resnet_tiny"))
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    result = PassManager(after=["float16"]).run(program, scope)
    fused = [o for o in result.program.global_block().ops if o.type in ("fused_conv2d", "fc")]
    assert len(fused) == 5 and all(result.program.global_block().var(o.input("Input")[0]).dtype.name == "float16"
                                   for o in fused)
    got = Executor().run(result.program, {n: io[n] for n in feeds}, fetches, result.scope)
    assert got[0].dtype == np.float32
    np.testing.assert_allclose(got[0], io[fetches[0]], rtol=1e-2, atol=1e-3)


def test_default_pipeline_saves_and_reloads(tmp_path):
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / "resnet_tiny"))
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    result = PassManager().run(program, scope)
    halfway.save_inference_model(tmp_path / "fused", feeds, fetches, result.program, result.scope)
    again, feeds2, fetches2, scope2 = halfway.load_inference_model(tmp_path / "fused")
    assert again.to_bytes() == result.program.to_bytes()
    got = Executor().run(again, {n: io[n] for n in feeds2}, fetches2, scope2)
    np.testing.assert_allclose(got[0], io[fetches[0]], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_default_pipeline_on_random_cnns(seed):
    prog, scope, outs = random_cnn(seed)
    block = prog.global_block()
    block.create_var("fetch", kind=halfway.VarKind.FETCH_LIST)
    for col, name in enumerate(outs):
        block.append_op("fetch", {"X": name}, {"Out": "fetch"}, {"col": col})
    result = fuse_and_compare(prog, scope, DEFAULT_PIPELINE, outs)
    types = op_types(result.program)
    assert "batch_norm" not in types
    assert types["fc"] == 2 and "matmul_v2" not in types and "mul" not in types


@pytest.mark.parametrize("name, left", [
    # pre-activation batch_norms + relus (after concat) become clamps before their 1x1 convs, with a
    # sign flip where some scales are negative; the last one, before the global pool, stays
    ("densenet121", {"feed": 1, "fused_conv2d": 63, "conv2d": 58, "elementwise_max": 61, "elementwise_mul": 60,
                     "batch_norm": 1, "relu": 1, "concat": 58, "pool2d": 5, "fetch": 1}),
    ("resnet50", {"feed": 1, "fused_conv2d": 53, "pool2d": 2, "reshape2": 1, "fc": 1, "softmax": 1, "fetch": 1}),
])
def test_default_pipeline_on_onnx_zoo_models_matches_onnxruntime(name, left):
    from tests.support.onnx_zoo import dummy_inputs, light_model, ort_session, with_random_weights

    model = with_random_weights(light_model(name), seed=1)
    feeds = dummy_inputs(model, seed=2)
    want = ort_session(model).run(None, feeds)[0]
    program, feed_names, fetch_names, scope = halfway.load(model)
    result = PassManager().run(program, scope)
    assert op_types(result.program) == left
    got = Executor().run(result.program, {n: feeds[n] for n in feed_names}, fetch_names, result.scope)[0]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4 * float(np.abs(want).max()))


LAYER_OPS = {"llama": 10, "bert": 8, "distilbert": 8, "roberta": 8, "vit": 8}
"""The most ops the default pipeline leaves in one layer, per fixture family: a decoder's norms (the
residual adds in them), its projections (query, key and value as one; gate and up gated as one),
the split, the two rotary embeddings and the attention; an encoder's the same without rotary, its
post-norms taking the residual adds."""


@pytest.mark.parametrize("name", [e["name"] for e in fixtures() if e["family"] in LAYER_OPS])
def test_a_transformer_layer_keeps_few_ops(name):
    program, _, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"))
    layer = layer_ops(PassManager().run(program, scope, fetch=fetches).program.global_block())
    assert layer is not None
    family = next(e["family"] for e in fixtures() if e["name"] == name)
    assert len(layer) <= LAYER_OPS[family], sorted(op.type for op in layer)
