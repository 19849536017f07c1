"""The tiny transformers checkpoints of ``tests/fixtures/llm`` (made by ``scripts/llm_fixtures.py``)
and their reference outputs from transformers, for the LLM tests.

    ref = reference("llama")       # prompt_<i>, greedy_<i>, penalized, logits, margin
    folder = copy_of("phi3", tmp_path)   # a copy to break on purpose
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

__all__ = ["LLM", "FAMILIES", "PROMPTS", "NEW_TOKENS", "folder", "reference", "copy_of"]

LLM = Path(__file__).resolve().parents[1] / "fixtures" / "llm"
FAMILIES = ("llama", "qwen2", "mistral", "gemma", "phi3", "gpt2")
PROMPTS = 3
NEW_TOKENS = 32


def folder(family: str) -> Path:
    return LLM / family


def reference(family: str) -> dict[str, np.ndarray]:
    with np.load(LLM / family / "reference.npz") as data:
        return dict(data)


def copy_of(family: str, tmp_path: Path) -> Path:
    """A copy of ``family``'s checkpoint folder under ``tmp_path``."""
    target = tmp_path / family
    shutil.copytree(LLM / family, target)
    return target
