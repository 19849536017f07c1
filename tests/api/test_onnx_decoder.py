"""api.llm.onnx_decoder and the cache_attention pass on the decoder exports of
``tests/fixtures/llm/llama_onnx``: the program they make (the checkpoint decoder's feeds, fetch and
caches) and the exports they refuse."""

from __future__ import annotations

import json
import shutil

import onnx
import pytest

from halfway.api.llm.onnx_decoder import load_decoder
from halfway.frontends.onnx.importer import load
from halfway.frontends.onnx.static_cache import has_static_cache, lower_static_cache
from halfway.ir.errors import HalfwayError, PassError
from halfway.passes import PassManager, get_pass
from halfway.passes.cache_attention import FEEDS, LOGITS
from tests.support.onnx_decoders import EXPORTS, ONNX, export


@pytest.mark.parametrize("name", EXPORTS)
def test_the_program_reads_and_appends_caches(name):
    decoder = load_decoder(export(name), max_length=32)
    program = decoder.program
    ops = [op.type for op in program.global_block().ops]
    assert program.feed_names() == list(FEEDS) and program.fetch_names() == [LOGITS]
    assert ops.count("cached_attention") == 2 and "scaled_dot_product_attention" not in ops
    assert decoder.caches == (("layers.0.key_cache", "layers.0.value_cache"),
                              ("layers.1.key_cache", "layers.1.value_cache"))
    cache = program.global_block().var("layers.1.value_cache")
    assert cache.persistable and cache.tensor_shape == (-1, 2, 32, 8)
    assert decoder.cache_shape(3) == (3, 2, 32, 8)
    assert program.global_block().var(LOGITS).tensor_shape == (-1, 128)


def test_without_a_config_the_graph_gives_the_shapes(tmp_path):
    shutil.copy(export("dynamo"), tmp_path / "model.onnx")
    config = load_decoder(tmp_path / "model.onnx", max_length=16).config
    assert (config.architecture, config.layers, config.kv_heads, config.head_dim, config.vocab_size) == (
        "model", 2, 2, 8, 128)
    assert config.eos_token_ids == ()


def test_an_export_without_presents_is_refused(tmp_path):
    model = onnx.load(str(export("dynamo")))
    del model.graph.output[1:]
    path = tmp_path / "no_presents.onnx"
    onnx.save(model, str(path))
    with pytest.raises(HalfwayError, match=r"no_presents.onnx: not a decoder with a past/present cache .* no fetch "
                                           r"is a present key or value .* fetches: logits"):
        load_decoder(path)


def test_a_config_disagreeing_with_the_graph_is_refused(tmp_path):
    shutil.copy(export("torchscript"), tmp_path / "model.onnx")
    config = json.loads((ONNX / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "num_key_value_heads": 4}))
    with pytest.raises(HalfwayError, match=r"model.onnx: the graph has kv_heads 2, its config.json 4"):
        load_decoder(tmp_path / "model.onnx")


def test_a_static_cache_becomes_attention_over_the_pasts():
    model = onnx.load(str(export("static_cache")))
    lowered = lower_static_cache(model)
    assert has_static_cache(model) and not has_static_cache(lowered)
    attentions = [n for n in lowered.graph.node if n.op_type == "Attention"]
    assert [list(n.input[3:6]) for n in attentions] == [["", "past_key_values.0.key", "past_key_values.0.value"],
                                                        ["", "past_key_values.1.key", "past_key_values.1.value"]]
    assert [list(n.output) for n in attentions][0][1:] == ["present.0.key", "present.0.value"]


def test_a_circular_static_cache_is_left_and_refused(tmp_path):
    model = onnx.load(str(export("static_cache")))
    for node in model.graph.node:
        if node.op_type == "TensorScatter":
            node.attribute.append(onnx.helper.make_attribute("mode", "circular"))
    path = tmp_path / "circular.onnx"
    onnx.save(model, str(path))
    assert has_static_cache(lower_static_cache(model))
    with pytest.raises(HalfwayError, match=r"circular.onnx: not a decoder with a past/present cache halfway can run: "
                                           r".*'cache_attention': no fetch is a present key or value"):
        load_decoder(path)


def test_a_genai_config_gives_the_tokens_and_the_context(tmp_path):
    shutil.copy(export("genai"), tmp_path / "model.onnx")
    (tmp_path / "genai_config.json").write_text(json.dumps(
        {"model": {"type": "llama", "bos_token_id": 1, "eos_token_id": [2, 5], "pad_token_id": 0,
                   "context_length": 96}}))
    decoder = load_decoder(tmp_path / "model.onnx")
    assert decoder.max_length == 96
    assert (decoder.config.architecture, decoder.config.eos_token_ids, decoder.config.pad_token_id) == (
        "llama", (2, 5), 0)


def test_an_attention_not_reading_presents_is_named(tmp_path):
    model = onnx.load(str(export("dynamo")))
    del model.graph.output[3:]  # layer 1's present key and value
    path = tmp_path / "half.onnx"
    onnx.save(model, str(path))
    with pytest.raises(HalfwayError, match=r"half.onnx: .*scaled_dot_product_attention\(.*\) does not read the present "
                                           r"keys and values \(present.0.key, present.0.value\)"):
        load_decoder(path)


def test_windows_for_another_count_of_attentions_are_refused():
    program, _, fetches, scope = load(export("dynamo"))
    cached = get_pass("cache_attention", max_length=16, windows=(4,))
    with pytest.raises(PassError, match=r"cache_attention': 1 sliding windows given for 2 attentions"):
        PassManager(after=[cached]).run(program, scope, fetch=fetches)
