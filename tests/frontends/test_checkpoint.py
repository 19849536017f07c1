"""halfway.frontends.checkpoint: transformers checkpoint folders built into decoder programs, their
logits against transformers', and the folders it refuses (each error naming the file, the tensor
or the key)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from halfway.executor import Executor
from halfway.frontends.checkpoint import (
    FEEDS,
    LOGITS,
    CheckpointError,
    CheckpointFiles,
    load_checkpoint,
    read_checkpoint,
)
from halfway.ir.dtypes import DType
from halfway.ir.verifier import verify
from tests.support.checkpoints import FAMILIES, copy_of, folder, reference

LENGTH = 64


def _edit_config(path, **changes):
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


def _forward(decoder, ids: np.ndarray) -> np.ndarray:
    """The logits of every token of ``ids`` [1, S], from empty caches."""
    scope = decoder.scope.new_scope()
    for names in decoder.caches:
        for name in names:
            scope.set(name, np.zeros(decoder.cache_shape(1), decoder.dtype.numpy))
    length = ids.shape[1]
    feeds = dict(zip(FEEDS, (ids, np.arange(length)[None], np.zeros(1, np.int64), np.arange(length))))
    (logits,) = Executor().run(decoder.program, feeds, [LOGITS], scope)
    return logits


@pytest.mark.parametrize("family", FAMILIES)
def test_one_program_with_a_cache_per_layer(family):
    decoder = load_checkpoint(folder(family), max_length=LENGTH)
    program, config = decoder.program, decoder.config
    verify(program, feed_names=list(FEEDS))
    assert program.feed_names() == list(FEEDS) and program.fetch_names() == [LOGITS]
    attentions = [op for op in program.global_block().ops if op.type == "cached_attention"]
    assert len(attentions) == config.layers == len(decoder.caches)
    for op, (key, value) in zip(attentions, decoder.caches):
        assert op.input("KCache") == op.output("KCacheOut") == (key,)
        assert op.input("VCache") == op.output("VCacheOut") == (value,)
        assert program.global_block().var(key).shape == (-1, config.kv_heads, LENGTH, config.head_dim)
    assert decoder.cache_shape(3) == (3, config.kv_heads, LENGTH, config.head_dim)


@pytest.mark.parametrize("family", FAMILIES)
def test_logits_match_transformers(family):
    ref = reference(family)
    logits = _forward(load_checkpoint(folder(family), max_length=LENGTH), ref["greedy_0"][None])
    np.testing.assert_allclose(logits, ref["logits"], rtol=0, atol=1e-4 * np.abs(ref["logits"]).max())


def test_float16_program_keeps_norms_and_logits_float32():
    decoder = load_checkpoint(folder("qwen2"), dtype="float16", max_length=LENGTH)
    block = decoder.program.global_block()
    assert decoder.scope.get("layers.0.qkv.weight").dtype == np.float16
    assert decoder.scope.get("layers.0.qkv.bias").dtype == np.float16
    assert decoder.scope.get("layers.0.norm1.weight").dtype == np.float32
    assert block.var(decoder.caches[0][0]).dtype is DType.float16
    assert block.var(LOGITS).dtype is DType.float32
    ref = reference("qwen2")
    logits = _forward(decoder, ref["greedy_0"][None])
    assert np.abs(logits - ref["logits"]).max() < 2e-2 * np.abs(ref["logits"]).max()


def test_bfloat16_tensors_widen_exactly_and_shards_are_found():
    files = CheckpointFiles(folder("qwen2"))
    assert len(files.weight_files) == 3  # model.safetensors.index.json's shards
    for name in files.names:
        value = files.tensor(name)
        assert value.dtype == np.float32 and not (value.view(np.uint32) & 0xFFFF).any()


def test_gemma_norms_scale_by_one_plus_weight():
    config, weights = read_checkpoint(folder("gemma"))
    raw = CheckpointFiles(folder("gemma")).tensor("model.layers.0.input_layernorm.weight")
    np.testing.assert_array_equal(weights.layers[0].norm1, raw + 1)
    assert config.embed_scale == pytest.approx(np.sqrt(config.hidden_size)) and weights.lm_head is None


def test_windows_and_fused_projections():
    mistral, _ = read_checkpoint(folder("mistral"))
    assert mistral.windows == (16, 16)
    phi3, weights = read_checkpoint(folder("phi3"))
    assert weights.layers[0].qkv.shape == (phi3.hidden_size, phi3.q_size + 2 * phi3.kv_size)
    assert weights.layers[0].up.shape == (phi3.hidden_size, 2 * phi3.intermediate_size)


# -- folders it refuses -----------------------------------------------------------------------------
def test_unknown_architecture_names_the_file_and_the_known_ones(tmp_path):
    path = copy_of("llama", tmp_path)
    _edit_config(path, architectures=["MambaForCausalLM"])
    with pytest.raises(CheckpointError, match=r"config\.json: architecture MambaForCausalLM; .*LlamaForCausalLM"):
        load_checkpoint(path)


def test_missing_tensor_names_it(tmp_path):
    from safetensors.numpy import load_file, save_file

    path = copy_of("phi3", tmp_path)
    tensors = load_file(path / "model.safetensors")
    del tensors["model.layers.1.mlp.down_proj.weight"]
    save_file(tensors, path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"no tensor 'model\.layers\.1\.mlp\.down_proj\.weight'"):
        load_checkpoint(path)


def test_shape_mismatch_names_the_tensor_and_both_shapes(tmp_path):
    path = copy_of("llama", tmp_path)
    _edit_config(path, intermediate_size=48)
    with pytest.raises(CheckpointError, match=r"model\.safetensors: tensor 'model\.layers\.0\.mlp\.gate_proj\.weight' "
                                              r"has shape \[64, 32\], but config\.json makes it \[48, 32\]"):
        load_checkpoint(path)


def test_missing_config_key_names_it(tmp_path):
    path = copy_of("llama", tmp_path)
    config = json.loads((path / "config.json").read_text())
    del config["num_hidden_layers"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=rf"{path}.config\.json: no num_hidden_layers"):
        load_checkpoint(path)


@pytest.mark.parametrize("remove, message", [("config.json", r"config\.json: no such file"),
                                             ("model.safetensors", r"no model\.safetensors or model\.safetensors\.index")])
def test_folder_without_its_files(tmp_path, remove, message):
    path = copy_of("llama", tmp_path)
    (path / remove).unlink()
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path)


def test_index_naming_a_missing_shard(tmp_path):
    path = copy_of("qwen2", tmp_path)
    (path / "model-00002-of-00003.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"lists the shard model-00002-of-00003\.safetensors"):
        load_checkpoint(path)


def test_rope_scaling_not_built(tmp_path):
    path = copy_of("llama", tmp_path)
    _edit_config(path, rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0})
    with pytest.raises(CheckpointError, match=r"config\.json: rope scaling 'yarn' is not built"):
        load_checkpoint(path)


def test_limits_of_the_program():
    with pytest.raises(CheckpointError, match=r"max_length 129 is beyond the model's 128 learned positions"):
        load_checkpoint(folder("gpt2"), max_length=129)
    with pytest.raises(CheckpointError, match=r"float32 or float16, not int8"):
        load_checkpoint(folder("gpt2"), dtype="int8")
