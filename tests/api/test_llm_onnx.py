"""halfway.llm on decoder ONNX exports (``tests/fixtures/llm/llama_onnx``: PyTorch's two exporters,
ONNX opset 23, ONNX Runtime GenAI's form in float32 and 4-bit): the tiny Llama's greedy tokens and
teacher-forced logits are transformers', on numpy and OpenCL, as its checkpoint folder's and ONNX
Runtime's past/present loop's (optimum's merged form of one too); as float16 programs, the float16
checkpoint's."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from halfway.api import llm
from halfway.ir.errors import HalfwayError
from tests.api.test_llm import FLOAT16, FLOAT32, LENGTH, _check_greedy, _teacher_forced
from tests.support.checkpoints import LLM, NEW_TOKENS, folder, reference
from tests.support.onnx_decoders import (
    EXPORTS,
    ONNX,
    ONNXRUNTIME_EXPORTS,
    export,
    int4_reference,
    merged,
    onnxruntime_greedy,
)


def _load(name: str, **options) -> llm.LanguageModel:
    return llm.load(export(name), max_length=LENGTH, **options)


@pytest.mark.parametrize("name", EXPORTS)
def test_greedy_tokens_are_transformers(name):
    _check_greedy(_load(name), reference("llama"))


@pytest.mark.opencl
@pytest.mark.parametrize("name", EXPORTS)
def test_greedy_tokens_are_transformers_on_opencl(name):
    _check_greedy(_load(name, place="opencl"), reference("llama"))


@pytest.mark.parametrize("name", EXPORTS)
def test_teacher_forced_logits(name):
    assert _teacher_forced(_load(name), reference("llama")) < FLOAT32


@pytest.mark.opencl
def test_teacher_forced_logits_on_opencl():
    assert _teacher_forced(_load("dynamo", place="opencl"), reference("llama")) < FLOAT32


def test_exports_and_the_checkpoint_give_the_same_batch():
    prompts = _prompts()
    expected = llm.load(folder("llama"), max_length=LENGTH).generate(prompts, NEW_TOKENS)
    for name in EXPORTS:
        np.testing.assert_array_equal(_load(name).generate(prompts, NEW_TOKENS), expected)


@pytest.mark.parametrize("name", ONNXRUNTIME_EXPORTS)
def test_onnxruntime_loop_agrees(name):
    pytest.importorskip("onnxruntime")
    ref = reference("llama")
    np.testing.assert_array_equal(onnxruntime_greedy(export(name), ref["prompt_0"], NEW_TOKENS), ref["greedy_0"])


def test_int4_weights_are_dequantized_at_load():
    ref = int4_reference()
    _check_greedy(_load("genai_int4"), ref)
    assert _teacher_forced(_load("genai_int4"), ref) < FLOAT32


@pytest.mark.opencl
def test_int4_weights_on_opencl():
    _check_greedy(_load("genai_int4", place="opencl"), int4_reference())


def test_the_export_folder_gives_config_and_tokens():
    lm = _load("dynamo")
    assert lm.config.architecture == "LlamaForCausalLM"
    assert lm.eos_token_ids == (2,) and lm.pad_token_id == 0
    assert lm.cache_bytes(batch=1) == 2 * 2 * 2 * LENGTH * 8 * 4


def test_float16_programs_of_float32_exports_are_the_float16_checkpoints():
    prompts = _prompts()
    expected = llm.load(folder("llama"), max_length=LENGTH, dtype="float16").generate(prompts, NEW_TOKENS)
    for name in EXPORTS:
        lm = _load(name, dtype="float16")
        block = lm.decoder.program.global_block()
        assert lm.dtype == "float16" and block.var("layers.0.key_cache").tensor_dtype.name == "float16"
        assert block.var("logits").tensor_dtype.name == "float32"
        np.testing.assert_array_equal(lm.generate(prompts, NEW_TOKENS), expected)
    assert _teacher_forced(_load("dynamo", dtype="float16"), reference("llama")) < FLOAT16


def test_float16_int4_weights_are_within_float16s_tolerance():
    assert _teacher_forced(_load("genai_int4", dtype="float16"), int4_reference()) < FLOAT16


@pytest.mark.opencl
def test_float16_program_of_an_export_on_opencl():
    assert _teacher_forced(_load("genai", place="opencl", dtype="float16"), reference("llama")) < FLOAT16


def test_a_dtype_an_export_does_not_load_as_is_refused():
    with pytest.raises(HalfwayError, match=r"dynamo.onnx: the export computes in float32; it loads as a float32 "
                                           r"program or a float16 one, not bfloat16"):
        _load("dynamo", dtype="bfloat16")


def test_a_sliding_window_export_attends_within_its_window():
    lm = llm.load(LLM / "mistral_onnx" / "dynamo.onnx", max_length=LENGTH)
    attentions = [op for op in lm.decoder.program.global_block().ops if op.type == "cached_attention"]
    assert [op.attr("window") for op in attentions] == [16, 16]
    _check_greedy(lm, reference("mistral"))


def test_group_query_attention_is_onnxruntimes():
    pytest.importorskip("onnxruntime")
    path = LLM / "head16_onnx" / "genai.onnx"
    lm = llm.load(path, max_length=LENGTH)
    for prompt in _prompts():
        np.testing.assert_array_equal(lm.generate(prompt, NEW_TOKENS)[0], onnxruntime_greedy(path, prompt, NEW_TOKENS))


def _merged(tmp_path: Path) -> Path:
    """optimum's merged decoder of the opset-23 export, with the export's configs."""
    for name in ("config.json", "generation_config.json"):
        shutil.copy(ONNX / name, tmp_path / name)
    path = tmp_path / "decoder_model_merged.onnx"
    onnx.save(merged(onnx.load(export("attention23"))), path)
    return path


def test_optimums_merged_decoder_runs_its_with_past_branch(tmp_path):
    _check_greedy(llm.load(_merged(tmp_path), max_length=LENGTH), reference("llama"))


def test_onnxruntime_loop_over_the_merged_decoder_agrees(tmp_path):
    pytest.importorskip("onnxruntime")
    ref = reference("llama")
    np.testing.assert_array_equal(onnxruntime_greedy(_merged(tmp_path), ref["prompt_0"], NEW_TOKENS), ref["greedy_0"])


WINDOW = 4


def _windowed(tmp_path: Path) -> Path:
    """The head-16 GenAI decoder with every GroupQueryAttention attending within ``WINDOW``."""
    model = onnx.load(LLM / "head16_onnx" / "genai.onnx")
    for node in model.graph.node:
        if node.op_type == "GroupQueryAttention":
            node.attribute.append(onnx.helper.make_attribute("local_window_size", WINDOW))
    path = tmp_path / "windowed.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("place", ["cpu", pytest.param("opencl", marks=pytest.mark.opencl)])
def test_group_query_attention_within_a_sliding_window_is_onnxruntimes(tmp_path, place):
    pytest.importorskip("onnxruntime")
    path = _windowed(tmp_path)
    lm = llm.load(path, place=place, max_length=LENGTH)
    attentions = [op for op in lm.decoder.program.global_block().ops if op.type == "cached_attention"]
    assert attentions and all(op.attr("window") == WINDOW for op in attentions)
    unwindowed = llm.load(LLM / "head16_onnx" / "genai.onnx", max_length=LENGTH)
    for prompt in _prompts():
        expected = onnxruntime_greedy(path, prompt, NEW_TOKENS)
        np.testing.assert_array_equal(lm.generate(prompt, NEW_TOKENS)[0], expected)
        assert not np.array_equal(unwindowed.generate(prompt, NEW_TOKENS)[0], expected)  # the window tells


def _prompts():
    ref = reference("llama")
    return [ref[f"prompt_{i}"] for i in range(3)]
