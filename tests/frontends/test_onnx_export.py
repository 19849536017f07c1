"""ONNX export: ONNX -> halfway -> ONNX -> ONNX Runtime on the light zoo and the modern fixtures,
as imported and after the default passes (float32: ONNX Runtime matches halfway's outputs to
rel 1e-4), float16 programs against the float32 outputs, the opset 23 and contrib forms, and the
errors: every op with no ONNX form listed at once, nothing written on failure."""

from __future__ import annotations

import hashlib
import os
import stat

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import halfway
from halfway.frontends.onnx_export import ExportError, UnsupportedExportError, exportable_ops, save_onnx, to_onnx
from halfway.ir.schema import OpSchema, Slot, register_op, same_as
from tests.support.modern import FIXTURE_DIR, cases, fixtures
from tests.support.onnx_zoo import LIGHT_MODELS, dummy_inputs, light_model, ort_session, with_random_weights

ort = pytest.importorskip("onnxruntime")

MODERN = [entry["name"] for entry in fixtures()]
RTOL = 1e-4
FLOAT16_RTOL = 2e-2
"""float16 ONNX under ONNX Runtime against halfway's float32 outputs (largest error over the
largest reference magnitude)."""


def _rel_error(got: np.ndarray, want: np.ndarray) -> float:
    assert got.shape == want.shape
    assert np.isnan(got).sum() == np.isnan(want).sum()
    finite = ~np.isnan(want)
    return float(np.abs(got[finite].astype(np.float64) - want[finite]).max() / max(np.abs(want[finite]).max(), 1e-30))


def _round_trip(program, scope, feeds, fetches, inputs, want, *, rtol=RTOL, **options):
    """Export, check (full), run on ONNX Runtime at every input and compare with ``want``."""
    model = to_onnx(program, scope, feeds, fetches, **options)
    onnx.checker.check_model(model, full_check=True)
    session = ort_session(model)
    for case, expected in zip(inputs, want):
        got = session.run(fetches, {n: case[n] for n in feeds})
        for name, g, w in zip(fetches, got, expected):
            error = _rel_error(g, w)
            assert error <= rtol, f"output {name}: relative error {error:.2e}"
    return model


def _halfway_outputs(program, scope, feeds, fetches, inputs):
    return [halfway.Executor().run(program, {n: case[n] for n in feeds}, fetches, scope) for case in inputs]


def _stages(model, inputs):
    """Round trips of ``model`` as imported and after the default passes."""
    program, feeds, fetches, scope = halfway.load(model)
    _round_trip(program, scope, feeds, fetches, inputs, _halfway_outputs(program, scope, feeds, fetches, inputs))
    fused = halfway.PassManager().run(program, scope, fetch=fetches)
    _round_trip(fused.program, fused.scope, feeds, fetches, inputs,
                _halfway_outputs(fused.program, fused.scope, feeds, fetches, inputs))


def _zoo(name):
    model = with_random_weights(light_model(name), seed=1)
    return model, [dummy_inputs(model, seed=2)]


def _modern(name):
    return str(FIXTURE_DIR / f"{name}.onnx"), [inputs for inputs, _ in cases(name)]


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_zoo_round_trips(name):
    _stages(*_zoo(name))


@pytest.mark.parametrize("name", MODERN)
def test_modern_fixtures_round_trip(name):
    _stages(*_modern(name))


FLOAT16_MODELS = ["resnet50", "inception_v1", "bert_sdpa_dynamo", "llama_eager_torchscript", "vit_eager_dynamo",
                  "convnext_torchscript", "mobilenetv3_dynamo", "yolo_dynamo", "t5_encoder_eager_dynamo"]


@pytest.mark.parametrize("name", FLOAT16_MODELS)
def test_float16_programs_export_as_float16_onnx(name):
    model, inputs = _zoo(name) if name in LIGHT_MODELS else _modern(name)
    program, feeds, fetches, scope = halfway.load(model)
    fused = halfway.PassManager().run(program, scope, fetch=fetches)
    want = _halfway_outputs(fused.program, fused.scope, feeds, fetches, inputs)
    half, _ = halfway.float16_transpile(fused.program, fused.scope, calibration_feeds=inputs[0])
    exported = _round_trip(half, fused.scope, feeds, fetches, inputs, want, rtol=FLOAT16_RTOL)
    types = {init.data_type for init in exported.graph.initializer if len(init.dims) > 1}
    assert TensorProto.FLOAT16 in types
    assert all(v.type.tensor_type.elem_type == TensorProto.FLOAT for v in exported.graph.input
               if np.issubdtype(inputs[0][v.name].dtype, np.floating))


def _node_types(model):
    return {(node.domain, node.op_type) for node in model.graph.node}


@pytest.mark.parametrize("name", ["llama_sdpa_dynamo", "bert_eager_torchscript", "gpt2_sdpa_torchscript"])
def test_opset_23_writes_attention_rms_norm_and_gelu(name):
    model, inputs = _modern(name)
    program, feeds, fetches, scope = halfway.load(model)
    fused = halfway.PassManager().run(program, scope, fetch=fetches)
    exported = _round_trip(fused.program, fused.scope, feeds, fetches, inputs,
                           _halfway_outputs(fused.program, fused.scope, feeds, fetches, inputs), opset=23)
    types = {t for _, t in _node_types(exported)}
    assert "Attention" in types and "Softmax" not in types
    assert ("RMSNormalization" if name.startswith("llama") else "Gelu") in types


@pytest.mark.parametrize("name", ["inception_v1", "bert_sdpa_dynamo", "vit_eager_dynamo", "gpt2_eager_dynamo"])
def test_contrib_ops_run_on_onnxruntime(name):
    model, inputs = _zoo(name) if name in LIGHT_MODELS else _modern(name)
    program, feeds, fetches, scope = halfway.load(model)
    fused = halfway.PassManager().run(program, scope, fetch=fetches)
    exported = _round_trip(fused.program, fused.scope, feeds, fetches, inputs,
                           _halfway_outputs(fused.program, fused.scope, feeds, fetches, inputs), contrib=True)
    contrib = {t for domain, t in _node_types(exported) if domain == "com.microsoft"}
    gelu = "FastGelu" if name.startswith("gpt2") else "Gelu"
    assert contrib >= ({"FusedConv"} if name in LIGHT_MODELS else {"MultiHeadAttention", "SkipLayerNormalization", gelu})
    if name.startswith("gpt2"):  # pre-norm: the residual stream leaves SkipLayerNormalization as its 4th output
        assert any(n.op_type == "SkipLayerNormalization" and len(n.output) == 4 for n in exported.graph.node)


def _dim_params(values):
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in values}


@pytest.mark.parametrize("name", ["bert_sdpa_dynamo", "convnext_torchscript"])
def test_symbolic_dims_keep_the_names_inputs_and_outputs_share(name, tmp_path):
    """The source's dim_params (read with onnx) come back, through the passes, the float16
    transpile and a .pdmodel save."""
    model, _ = _modern(name)
    source = onnx.load(model).graph
    program, feeds, fetches, scope = halfway.load(model)
    fused = halfway.PassManager().run(program, scope)
    half, _ = halfway.float16_transpile(fused.program, fused.scope)
    halfway.save_inference_model(str(tmp_path / "m"), feeds, fetches, half, fused.scope)
    saved, saved_feeds, saved_fetches, saved_scope = halfway.load(str(tmp_path / "m"))
    for exported in (to_onnx(program, scope, feeds, fetches), to_onnx(saved, saved_scope, saved_feeds, saved_fetches)):
        assert _dim_params(exported.graph.input) == _dim_params(source.input)
        assert _dim_params(exported.graph.output) == _dim_params(source.output)


def test_unnamed_symbolic_dims_are_named_after_their_var():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 3])
    program, feeds, fetches, scope = halfway.load(helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    exported = to_onnx(program, scope, feeds, fetches)
    assert _dim_params(exported.graph.input) == {"x": ["x_dim0", 3]}
    assert _dim_params(exported.graph.output) == {"y": ["y_dim0", 3]}


def _unexportable_program():
    """x -> Relu -> two custom ops without exporters -> y."""
    for name in ("custom_scramble", "custom_unscramble"):
        register_op(OpSchema(name, inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X")))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3])
    program, feeds, _, scope = halfway.load(helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["r"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)]))
    block = program.global_block()
    source = "r"
    for name in ("custom_scramble", "custom_unscramble"):
        block.create_var(f"{name}.out", shape=[2, 3], dtype=block.var("r").dtype)
        block.append_op(name, {"X": [source]}, {"Out": [f"{name}.out"]})
        source = f"{name}.out"
    return program, feeds, [source], scope


def test_ops_without_onnx_form_are_listed_at_once_and_nothing_is_written(tmp_path):
    program, feeds, fetches, scope = _unexportable_program()
    kinds = sorted({op.type for op in program.global_block().ops} - {"feed", "fetch"} - set(exportable_ops()))
    assert kinds == ["custom_scramble", "custom_unscramble"]
    target = tmp_path / "model.onnx"
    target.write_bytes(b"the user's file")
    with pytest.raises(UnsupportedExportError) as caught:
        save_onnx(target, feeds, fetches, program, scope)
    assert caught.value.op_types == kinds and all(kind in str(caught.value) for kind in kinds)
    assert isinstance(caught.value, halfway.HalfwayError)
    assert target.read_bytes() == b"the user's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_bad_opset_and_names_are_clear_errors():
    model, _ = _zoo("squeezenet")
    program, feeds, fetches, scope = halfway.load(model)
    with pytest.raises(ExportError, match="opset 12"):
        to_onnx(program, scope, feeds, fetches, opset=12)
    with pytest.raises(ExportError, match="'nope'"):
        to_onnx(program, scope, feeds, ["nope"])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_save_onnx_writes_the_model_atomically(tmp_path):
    model, inputs = _zoo("squeezenet")
    program, feeds, fetches, scope = halfway.load(model)
    target = tmp_path / "deep" / "squeezenet.onnx"
    halfway.save_onnx(target, feeds, fetches, program, scope, manifest=True)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    assert (target.parent / "squeezenet.onnx.sha256").read_text() == f"{digest}  squeezenet.onnx\n"
    halfway.save_onnx(target, feeds, fetches, program, scope)  # no manifest: the old one goes
    assert sorted(p.name for p in target.parent.iterdir()) == ["squeezenet.onnx"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~_umask()
    saved = onnx.load(target)
    got = ort_session(saved).run(fetches, inputs[0])[0]
    want = halfway.Executor().run(program, inputs[0], fetches, scope)[0]
    assert _rel_error(got, want) <= RTOL


@pytest.mark.parametrize("act, kind", [("relu", "max"), ("relu6", "avg"), ("", "max")])
def test_convolutions_with_their_pool_export(act, kind):
    """fused_conv2d_pool (odd maps: the last row and column dropped) as Conv, its activation and a pool."""
    program = halfway.Program()
    with halfway.program_guard(program):
        y = halfway.layers.conv2d(halfway.layers.data("x", [2, 4, 11, 9]), num_filters=6, filter_size=3, padding=1,
                                  act=act or None)
        y = halfway.layers.pool2d(y, pool_size=2, pool_type=kind, pool_stride=2)
    fused = halfway.PassManager(f"{halfway.passes.DEFAULT_PIPELINE},fuse_conv_pool").run(
        program, halfway.init_scope(program, seed=2), fetch=[y.name])
    assert [op.type for op in fused.program.global_block().ops][0] == "fused_conv2d_pool"
    inputs = [{"x": np.random.default_rng(3).standard_normal((2, 4, 11, 9)).astype(np.float32)}]
    _round_trip(fused.program, fused.scope, ["x"], [y.name], inputs,
                _halfway_outputs(fused.program, fused.scope, ["x"], [y.name], inputs))


@pytest.mark.parametrize("opset, contrib", [(14, False), (17, False), (17, True)])
def test_skip_layer_norm_exports_with_its_sum(opset, contrib):
    from tests.passes.test_fuse_norm import _opset14_pre_norm_block

    program, feeds, fetches, scope = halfway.load(_opset14_pre_norm_block())
    fused = halfway.PassManager().run(program, scope, fetch=fetches)
    rng = np.random.default_rng(9)
    inputs = [{n: rng.standard_normal(shape).astype(np.float32) for n in feeds} for shape in [(2, 3, 8), (1, 4, 8)]]
    exported = _round_trip(fused.program, fused.scope, feeds, fetches, inputs,
                           _halfway_outputs(fused.program, fused.scope, feeds, fetches, inputs), opset=opset,
                           contrib=contrib)
    types = {t for _, t in _node_types(exported)}
    assert ("SkipLayerNormalization" in types) == contrib
    assert ("LayerNormalization" in types) == (opset >= 17 and not contrib)


@pytest.mark.parametrize("opset, contrib", [(17, False), (23, False), (17, True)])
def test_a_decoders_fused_layers_export(opset, contrib):
    """LLaMA after the passes: skip_rms_norm (SkipSimplifiedLayerNormalization with its sum, or Add and
    RMSNormalization or its decomposition), rotary_embedding and grouped-query attention."""
    model, inputs = _modern("llama_sdpa_dynamo")
    program, feeds, fetches, scope = halfway.load(model)
    fused = halfway.PassManager().run(program, scope, fetch=fetches)
    assert {"skip_rms_norm", "rotary_embedding"} <= {op.type for op in fused.program.global_block().ops}
    exported = _round_trip(fused.program, fused.scope, feeds, fetches, inputs,
                           _halfway_outputs(fused.program, fused.scope, feeds, fetches, inputs), opset=opset,
                           contrib=contrib)
    types = {t for _, t in _node_types(exported)}
    assert ("SkipSimplifiedLayerNormalization" in types) == contrib
    assert ("RotaryEmbedding" in types) == (opset >= 23)


@pytest.mark.parametrize("opset, contrib", [(17, False), (23, False), (17, True)])
def test_sequence_major_attention_exports(opset, contrib):
    """Attention on [B, S, H * D]: the decomposition with its heads split and merged, Attention's
    3-D form, MultiHeadAttention on the projections as they are."""
    from tests.passes.test_attention_heads import _program

    program, scope, fetches = _program()
    fused = halfway.PassManager("fuse_attention_heads").run(program, scope, fetch=fetches)
    (sdpa,) = [op for op in fused.program.global_block().ops if op.type == "scaled_dot_product_attention"]
    assert sdpa.attr("q_num_heads") > 0
    feeds = ["xq", "xk", "xv", "mask"]
    rng = np.random.default_rng(5)
    inputs = [{n: rng.standard_normal(fused.program.global_block().var(n).shape).astype(np.float32) for n in feeds}]
    exported = _round_trip(fused.program, fused.scope, feeds, fetches, inputs,
                           _halfway_outputs(fused.program, fused.scope, feeds, fetches, inputs), opset=opset,
                           contrib=contrib)
    attention = [n for n in exported.graph.node if n.op_type in ("Attention", "MultiHeadAttention", "Softmax")]
    assert [n.op_type for n in attention] == ["MultiHeadAttention" if contrib else
                                              "Attention" if opset >= 23 else "Softmax"]
    assert not contrib or not {n.op_type for n in exported.graph.node} & {"Reshape", "Transpose"}
