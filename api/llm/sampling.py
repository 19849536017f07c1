"""Choosing each step's tokens from the logits, as transformers' ``generate`` does: the repetition
penalty, then (sampling) the temperature, top-k and top-p filters and a draw from a seeded
generator, or (greedy) the best token."""

from __future__ import annotations

import numpy as np
from attrs import frozen

from ...ir.errors import HalfwayError

__all__ = ["Sampling", "Sampler"]


@frozen
class Sampling:
    """How tokens are chosen. ``top_k`` 0 and ``top_p`` 1 keep every token; ``repetition_penalty``
    divides the positive logits (multiplies the negative ones) of the tokens a sequence holds;
    ``seed`` None draws from fresh entropy."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    seed: int | None = None

    def __attrs_post_init__(self) -> None:
        problems = [what for what, bad in (
            (f"temperature {self.temperature} must be > 0", not self.temperature > 0),
            (f"top_k {self.top_k} must be >= 0", self.top_k < 0),
            (f"top_p {self.top_p} must be in (0, 1]", not 0 < self.top_p <= 1),
            (f"repetition_penalty {self.repetition_penalty} must be > 0", not self.repetition_penalty > 0)) if bad]
        if problems:
            raise HalfwayError("; ".join(problems))


class Sampler:
    """Chooses one token per sequence per step; remembers the tokens each sequence holds."""

    def __init__(self, sampling: Sampling, vocab_size: int, prompts: list[np.ndarray]) -> None:
        self.sampling = sampling
        self.rng = np.random.default_rng(sampling.seed)
        self.seen = np.zeros((len(prompts), vocab_size), bool)
        for row, prompt in zip(self.seen, prompts):
            row[prompt] = True

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        """The tokens [B] int64 for ``logits`` [B, vocab] (float32)."""
        s = self.sampling
        scores = np.array(logits, np.float32)
        if s.repetition_penalty != 1.0:
            penalty = np.float32(s.repetition_penalty)
            scores = np.where(self.seen, np.where(scores < 0, scores * penalty, scores / penalty), scores)
        tokens = self._draw(scores) if s.do_sample else scores.argmax(axis=-1)
        self.seen[np.arange(len(tokens)), tokens] = True
        return tokens.astype(np.int64)

    def _draw(self, scores: np.ndarray) -> np.ndarray:
        s = self.sampling
        scores = scores / np.float32(s.temperature)
        if 0 < s.top_k < scores.shape[-1]:
            kth = np.partition(scores, -s.top_k, axis=-1)[:, -s.top_k, None]
            scores = np.where(scores < kth, -np.inf, scores)
        probs = _softmax(scores)
        if s.top_p < 1.0:
            probs = _nucleus(probs, s.top_p)
        cumulative = np.cumsum(probs, axis=-1)
        draws = self.rng.random(len(probs))[:, None] * cumulative[:, -1:]
        return np.minimum((cumulative <= draws).sum(axis=-1), probs.shape[-1] - 1)


def _softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _nucleus(probs: np.ndarray, top_p: float) -> np.ndarray:
    """``probs`` with the fewest most likely tokens whose mass reaches ``top_p`` kept (at least
    one), the rest 0, renormalised."""
    order = np.argsort(-probs, axis=-1, kind="stable")
    ranked = np.take_along_axis(probs, order, axis=-1)
    keep_ranked = np.cumsum(ranked, axis=-1) - ranked < top_p
    keep = np.zeros_like(keep_ranked)
    np.put_along_axis(keep, order, keep_ranked, axis=-1)
    kept = np.where(keep, probs, 0.0)
    return kept / kept.sum(axis=-1, keepdims=True)
