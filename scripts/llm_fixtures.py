"""Tiny transformers checkpoints and their reference outputs, for the LLM tests.

    /path/to/torchenv/bin/python scripts/llm_fixtures.py            # every family
    /path/to/torchenv/bin/python scripts/llm_fixtures.py llama gpt2  # some

Run it with a Python that has torch, transformers, safetensors and tokenizers (halfway's own
environment needs none of them): it builds each family's model from a config object (2 layers, a
hidden size of 32, grouped-query heads where the family has them, a vocabulary of 128) with seeded
random weights, and writes ``tests/fixtures/llm/<family>/``:

- ``config.json``, ``generation_config.json`` and the weights (``save_pretrained``: safetensors,
  in the family's ``DTYPE``; one family's sharded, with ``model.safetensors.index.json``);
- ``reference.npz``: ``prompt_<i>`` (int64 token ids of each prompt), ``greedy_<i>`` (what
  ``generate(do_sample=False, max_new_tokens=32)`` returns for that prompt alone, the prompt
  included, float32), ``penalized`` (the same for prompt 0 with ``repetition_penalty=PENALTY``),
  ``logits`` (float32 [tokens, vocab]: the logits of every position of
  ``greedy_0``, one forward pass: what each step of teacher-forced decoding must give) and
  ``margin`` (the smallest gap between the best and second-best logit over every greedy step:
  how far a tie is);
- for llama, ``tokenizer.json`` (a character BPE trained on a few sentences) and ``text.npz``:
  ``prompt`` (the encoded ``TEXT_PROMPT``) and ``greedy`` (its greedy continuation, as ids).

Weights are drawn in float32 and rounded to the checkpoint's dtype before the references are
computed, so a float32 program loading them sees the very weights the references used. Weights
are drawn wider than transformers' initialisation (``STD``), and norm weights and biases away from
1 and 0, so that a missing bias or a wrong norm shows in the logits and greedy steps are not near
ties.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "llm"
SEED = 0
STD = 0.25
NEW_TOKENS = 32
PENALTY = 1.5
PROMPTS = ([1, 17, 42, 99, 5, 64, 23], [1, 88, 3], [1, 7, 120, 33, 33, 91, 12, 50, 77, 14, 2 + 60])
TEXT_PROMPT = "Once upon a time"
CORPUS = ["Once upon a time there was a tiny model that wrote tiny stories.",
          "The quick brown fox jumps over the lazy dog.",
          "A time to speak, and a time to listen; upon the hill the wind was cold.",
          "Stories begin once, and end when the last token is written."]
COMMON = {"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
          "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}


def _configs() -> dict[str, tuple[Any, torch.dtype, str | None]]:
    """Family -> (config, checkpoint dtype, max shard size or None)."""
    t = transformers
    return {
        "llama": (t.LlamaConfig(**COMMON, rms_norm_eps=1e-5), torch.bfloat16, None),
        "qwen2": (t.Qwen2Config(**COMMON, rms_norm_eps=1e-6, tie_word_embeddings=True), torch.bfloat16, "20KB"),
        "mistral": (t.MistralConfig(**COMMON, sliding_window=16), torch.float16, None),
        "gemma": (t.GemmaConfig(**COMMON, head_dim=16, hidden_activation="gelu_pytorch_tanh"), torch.bfloat16, None),
        "phi3": (t.Phi3Config(**COMMON, rope_scaling=None), torch.float32, None),
        "gpt2": (t.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=128, bos_token_id=1,
                              eos_token_id=2, pad_token_id=0), torch.bfloat16, None),
    }


def _randomize(model: torch.nn.Module, family: str, dtype: torch.dtype) -> None:
    """Seeded weights, rounded to ``dtype`` (see the module docstring)."""
    generator = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=generator)
            if p.ndim == 1 and ("norm" in name or "ln_" in name):
                value = noise * 0.1 + (0.0 if family == "gemma" else 1.0)  # gemma scales by 1 + weight
            elif p.ndim == 1:
                value = noise * 0.1
            else:
                value = noise * STD
            p.copy_(value.to(dtype).to(torch.float32))


def _greedy(model: Any, ids: list[int], **options: Any) -> tuple[np.ndarray, float]:
    """``generate``'s greedy tokens for ``ids`` (prompt included) and the smallest top-2 logit gap."""
    out = model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=NEW_TOKENS, min_new_tokens=0,
                         output_logits=True, return_dict_in_generate=True, **options)
    gaps = [float(np.diff(np.sort(step[0].numpy())[-2:])[0]) for step in out.logits]
    return out.sequences[0].numpy().astype(np.int64), min(gaps)


def make(family: str, out: Path) -> None:
    config, dtype, shard = _configs()[family]
    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    _randomize(model, family, dtype)
    folder = out / family
    shutil.rmtree(folder, ignore_errors=True)
    arrays: dict[str, np.ndarray] = {}
    margins = []
    for i, prompt in enumerate(PROMPTS):
        arrays[f"prompt_{i}"] = np.array(prompt, np.int64)
        arrays[f"greedy_{i}"], gap = _greedy(model, prompt)
        margins.append(gap)
    arrays["penalized"], _ = _greedy(model, PROMPTS[0], repetition_penalty=PENALTY)
    with torch.no_grad():
        arrays["logits"] = model(torch.tensor(arrays["greedy_0"][None])).logits[0].numpy().astype(np.float32)
    arrays["margin"] = np.array(min(margins), np.float32)
    model.to(dtype).save_pretrained(folder, max_shard_size=shard or "50MB")
    model.to(torch.float32)
    np.savez_compressed(folder / "reference.npz", **arrays)
    if family == "llama":
        _text_fixture(model, folder)
    size = sum(f.stat().st_size for f in folder.iterdir())
    print(f"{family}: {size / 1024:.0f} KiB, smallest greedy top-2 gap {min(margins):.3g}")


def _text_fixture(model: Any, folder: Path) -> None:
    """A tokenizer for the model's vocabulary and the greedy continuation of ``TEXT_PROMPT``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    trainer = trainers.BpeTrainer(vocab_size=model.config.vocab_size, special_tokens=special, show_progress=False)
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tokenizer.save(str(folder / "tokenizer.json"))
    prompt = tokenizer.encode(TEXT_PROMPT).ids
    greedy, _ = _greedy(model, prompt)
    np.savez_compressed(folder / "text.npz", prompt=np.array(prompt, np.int64), greedy=greedy)
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>",
                                                              "pad_token": "<pad>"}, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help=f"families to make (default: all of {', '.join(_configs())})")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the fixtures folder (default: {OUT})")
    args = parser.parse_args()
    for family in args.families or list(_configs()):
        make(family, args.out)


if __name__ == "__main__":
    main()
