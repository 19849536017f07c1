"""halfway.llm against transformers on the tiny checkpoints of ``tests/fixtures/llm``: greedy tokens
identical to ``generate(do_sample=False)`` on numpy and OpenCL, teacher-forced logits at every step,
batches of prompts of different lengths, sampling, streaming, text, and the inputs it refuses."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import halfway
from halfway.api import llm
from halfway.frontends.checkpoint import CheckpointError
from halfway.ir.errors import FeedError, HalfwayError
from tests.support.checkpoints import FAMILIES, NEW_TOKENS, PROMPTS, copy_of, folder, reference

LENGTH = 64
FLOAT32 = 1e-4
FLOAT16 = 2e-2


def _load(family: str, **options) -> llm.LanguageModel:
    return llm.load(folder(family), max_length=LENGTH, **options)


def _prompts(ref):
    return [ref[f"prompt_{i}"] for i in range(PROMPTS)]


def _check_greedy(lm: llm.LanguageModel, ref) -> None:
    for i in range(PROMPTS):
        np.testing.assert_array_equal(lm.generate(ref[f"prompt_{i}"], NEW_TOKENS)[0], ref[f"greedy_{i}"])


def _teacher_forced(lm: llm.LanguageModel, ref) -> float:
    """The largest error of the logits of every position of ``greedy_0``: the prompt's from
    ``prefill``, each later one from a ``decode`` step fed the reference's token; relative to the
    largest reference logit."""
    tokens, start, expected = ref["greedy_0"], len(ref["prompt_0"]), ref["logits"]
    got = [lm.logits(tokens[:start])[0], lm.prefill(tokens[:start])]
    got += [lm.decode(tokens[i:i + 1]) for i in range(start, len(tokens) - 1)]
    errors = [np.abs(got[0] - expected[:start]).max()] + [np.abs(g[0] - expected[start - 1 + j]).max()
                                                           for j, g in enumerate(got[1:])]
    return float(max(errors) / np.abs(expected).max())


def test_the_facade_reaches_it():
    assert halfway.llm.load is llm.load


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_tokens_are_transformers(family):
    _check_greedy(_load(family), reference(family))


@pytest.mark.opencl
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_tokens_are_transformers_on_opencl(family):
    _check_greedy(_load(family, place="opencl"), reference(family))


@pytest.mark.parametrize("family", FAMILIES)
def test_teacher_forced_logits(family):
    assert _teacher_forced(_load(family), reference(family)) < FLOAT32


@pytest.mark.parametrize("family", ["llama", "gemma", "gpt2"])
def test_teacher_forced_logits_float16(family):
    assert _teacher_forced(_load(family, dtype="float16"), reference(family)) < FLOAT16


@pytest.mark.opencl
@pytest.mark.parametrize("dtype, tolerance", [("float32", FLOAT32), ("float16", FLOAT16)])
def test_teacher_forced_logits_on_opencl(dtype, tolerance):
    assert _teacher_forced(_load("mistral", place="opencl", dtype=dtype), reference("mistral")) < tolerance


def test_repetition_penalty_is_transformers():
    ref = reference("llama")
    np.testing.assert_array_equal(_load("llama").generate(ref["prompt_0"], NEW_TOKENS, repetition_penalty=1.5)[0],
                                  ref["penalized"])


@pytest.mark.parametrize("family", ["qwen2", "gpt2"])
def test_a_batch_of_different_lengths_is_each_prompt_alone(family):
    ref = reference(family)
    out = _load(family).generate(_prompts(ref), NEW_TOKENS)
    width = max(len(p) for p in _prompts(ref))
    assert out.shape == (PROMPTS, width + NEW_TOKENS) and out.dtype == np.int64
    for i, prompt in enumerate(_prompts(ref)):
        row = out[i]
        np.testing.assert_array_equal(row[:width - len(prompt)], 0)  # left padding: the pad id
        np.testing.assert_array_equal(row[width - len(prompt):], ref[f"greedy_{i}"])


def test_padded_array_with_a_mask_left_or_right():
    ref = reference("llama")
    short, long = ref["prompt_1"], ref["prompt_0"]
    lm = _load("llama")
    left = np.zeros((2, len(long)), np.int64)
    left[0, -len(short):], left[1] = short, long
    right = np.zeros_like(left)
    right[0, :len(short)], right[1] = short, long
    for ids in (left, right):
        out = lm.generate(ids, 8, attention_mask=ids != 0)
        np.testing.assert_array_equal(out[:, :len(long)], ids)  # the ids as given, then the new tokens
        np.testing.assert_array_equal(out[0, len(long):], ref["greedy_1"][len(short):len(short) + 8])
        np.testing.assert_array_equal(out[1, len(long):], ref["greedy_0"][len(long):len(long) + 8])


def test_stream_yields_one_token_per_sequence_per_step():
    ref = reference("mistral")
    lm = _load("mistral")
    steps = list(lm.stream(_prompts(ref)[:2], 5))
    assert len(steps) == 5 and all(s.shape == (2,) and s.dtype == np.int64 for s in steps)
    np.testing.assert_array_equal(np.stack(steps, 1), lm.generate(_prompts(ref)[:2], 5)[:, -5:])
    assert lm.stats.prompt_tokens == sum(len(p) for p in _prompts(ref)[:2]) and lm.stats.decode_tokens == 2 * 4


def test_generation_stops_at_eos_and_pads_after_it():
    ref = reference("llama")
    lm = _load("llama")
    start = len(ref["prompt_0"])
    eos = int(ref["greedy_0"][start + 4])  # the fifth new token of prompt 0, not among its first four
    assert eos not in ref["greedy_0"][start:start + 4]
    alone = lm.generate(ref["prompt_0"], NEW_TOKENS, eos_token_id=eos)
    np.testing.assert_array_equal(alone[0], ref["greedy_0"][:start + 5])
    both = lm.generate([ref["prompt_0"], ref["prompt_2"]], NEW_TOKENS, eos_token_id=[eos])
    width = len(ref["prompt_2"])
    assert both[0, width + 4] == eos and both.shape[1] > width + 5
    np.testing.assert_array_equal(both[0, width + 5:], lm.pad_token_id)
    assert lm.generate(ref["prompt_0"], 4, eos_token_id=())[0].tolist() == ref["greedy_0"][:start + 4].tolist()


def test_seeded_sampling_is_reproducible():
    ref = reference("phi3")
    lm = _load("phi3")
    options = {"do_sample": True, "temperature": 0.9, "top_k": 40, "top_p": 0.95}
    first = lm.generate(_prompts(ref), 16, seed=7, **options)
    np.testing.assert_array_equal(first, lm.generate(_prompts(ref), 16, seed=7, **options))
    assert not np.array_equal(first, lm.generate(_prompts(ref), 16, seed=8, **options))
    assert ((first >= 0) & (first < lm.vocab_size)).all()
    greedy = lm.generate(ref["prompt_0"], 16)
    np.testing.assert_array_equal(lm.generate(ref["prompt_0"], 16, do_sample=True, top_k=1, seed=1), greedy)


def test_text_through_the_tokenizer():
    text = np.load(folder("llama") / "text.npz")
    lm = _load("llama")
    np.testing.assert_array_equal(lm.tokenizer.encode("Once upon a time"), text["prompt"])
    made = lm.generate_text("Once upon a time", NEW_TOKENS)
    assert "Once upon a time" + made == lm.tokenizer.decode(text["greedy"])
    assert made.startswith(" ")  # the first new word's space, which decoding it alone would drop
    assert lm.generate_text(["Once upon a time", "The quick"], 4)[0] == lm.generate_text("Once upon a time", 4)


def test_text_without_tokenizers_or_tokenizer_json(monkeypatch):
    lm = _load("mistral")
    with pytest.raises(HalfwayError, match=r"no tokenizer\.json; give token ids"):
        lm.generate_text("hello")
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(HalfwayError, match=r"needs the tokenizers package: pip install tokenizers"):
        _load("llama").generate_text("hello")


def test_cache_bytes():
    lm = _load("gemma", dtype="float16")
    c = lm.config
    assert lm.cache_bytes(3) == 2 * c.layers * 3 * c.kv_heads * LENGTH * c.head_dim * 2
    assert lm.allocated_cache_bytes == 0
    lm.prefill([[1, 2, 3]] * 3)
    assert lm.allocated_cache_bytes == lm.cache_bytes(3)


# -- inputs it refuses ------------------------------------------------------------------------------
def test_prompt_and_new_tokens_beyond_max_length():
    lm = _load("llama")
    with pytest.raises(llm.LengthError, match=r"make 65 tokens, beyond max_length 64"):
        lm.generate(np.ones(33, np.int64), 32)
    with pytest.raises(llm.LengthError, match=r"beyond max_length 64"):
        lm.prefill(np.ones(65, np.int64))
    lm.prefill(np.ones(63, np.int64))
    lm.decode([1])
    with pytest.raises(llm.LengthError, match=r"one more token make 65 tokens, beyond max_length 64"):
        lm.decode([1])


@pytest.mark.parametrize("ids, message", [([[1, 128, 3]], r"token id 128 \(prompt 0, token 1\) is outside the "
                                                           r"vocabulary of 128 ids"),
                                          ([[1, 2], [-1, 3]], r"token id -1 \(prompt 1, token 0\)"),
                                          ([[1.5, 2.0]], r"must hold integer token ids"),
                                          ([[]], r"prompt 0 has no tokens")])
def test_bad_token_ids(ids, message):
    with pytest.raises(FeedError, match=message):
        _load("llama").generate(ids, 4)


def test_decode_before_prefill_and_of_another_batch():
    lm = _load("llama")
    with pytest.raises(HalfwayError, match=r"prefill them first"):
        lm.decode([1])
    lm.prefill([[1, 2], [3, 4]])
    with pytest.raises(FeedError, match=r"one integer token per sequence \(2\)"):
        lm.decode([1])
    with pytest.raises(FeedError, match=r"token id 300 \(sequence 1\) is outside the vocabulary"):
        lm.decode([1, 300])


def test_bad_sampling_options():
    with pytest.raises(HalfwayError, match=r"temperature 0 must be > 0; top_p 1.5 must be in \(0, 1\]"):
        _load("llama").generate([[1, 2]], 4, do_sample=True, temperature=0, top_p=1.5)


def test_folders_it_cannot_load(tmp_path):
    with pytest.raises(HalfwayError, match=r"not a transformers checkpoint folder"):
        llm.load(tmp_path)
    path = copy_of("llama", tmp_path)
    (path / "config.json").write_text((path / "config.json").read_text().replace("LlamaForCausalLM", "Unknown"))
    with pytest.raises(CheckpointError, match=r"architecture Unknown; the checkpoint builder knows"):
        llm.load(path)
