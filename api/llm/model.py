"""``LanguageModel``: a decoder with its key/value caches on a place — the step API (``prefill``,
``decode``, ``logits``) and the generation loop over it (``generate``, ``stream``,
``generate_text``), greedy or sampled (``halfway.api.llm.sampling``)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from attrs import define, evolve

from ...executor.place import Place
from ...frontends.checkpoint import LOGITS, DecoderConfig, DecoderProgram, is_checkpoint, load_checkpoint
from ...ir.errors import FeedError, HalfwayError
from ...kernels.numpy.threads import single_threaded_blas, team_size
from ...passes import PassManager
from ..places import parse_place
from .onnx_decoder import is_onnx, load_decoder
from .prompts import Prompts, check_length, check_tokens, read_prompts
from .sampling import Sampler, Sampling
from .session import Session, prefill_width
from .text import Tokenizer

__all__ = ["LanguageModel", "GenerationStats", "load"]


@define
class GenerationStats:
    """The last generation's figures: prompt tokens and the prefill's seconds; tokens made by
    decode steps (one per sequence per step, the first token, the prefill's, aside) and their
    seconds; the seconds spent preparing programs for shapes not run before, which the other
    seconds leave out."""

    prompt_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_tokens: int = 0
    decode_seconds: float = 0.0
    prepare_seconds: float = 0.0

    @property
    def prefill_tokens_per_second(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        return self.decode_tokens / self.decode_seconds if self.decode_seconds else 0.0


class LanguageModel:
    """A decoder LLM on a place, with its caches (made for each batch size it is run with).

    The step API keeps the batch's state: ``prefill`` starts new sequences, ``decode`` appends one
    token to each, ``lengths`` says how many positions each holds. A model runs one batch at a
    time (not from several threads at once).
    """

    def __init__(self, decoder: DecoderProgram, place: Place, folder: str | os.PathLike[str]) -> None:
        self.decoder = decoder
        self.place = place
        self.folder = Path(folder)
        self.lengths = np.zeros(0, np.int64)
        self.stats = GenerationStats()
        self._session: Session | None = None
        self._tokenizer: Tokenizer | None = None

    def __repr__(self) -> str:
        c = self.config
        return (f"LanguageModel({c.architecture}, {c.layers} layers, {self.dtype} on {self.place}, max_length "
                f"{self.max_length})")

    # -- what it is -------------------------------------------------------------------------------
    @property
    def config(self) -> DecoderConfig:
        return self.decoder.config

    @property
    def dtype(self) -> str:
        return self.decoder.dtype.name

    @property
    def max_length(self) -> int:
        return self.decoder.max_length

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self.config.eos_token_ids

    @property
    def pad_token_id(self) -> int:
        """The config's padding id, else its first end-of-sequence id, else 0."""
        c = self.config
        return c.pad_token_id if c.pad_token_id is not None else (c.eos_token_ids or (0,))[0]

    def cache_bytes(self, batch: int = 1) -> int:
        """Bytes of the caches of ``batch`` sequences: 2 x layers x batch x kv heads x max_length x
        head size x the element size."""
        c = self.config
        return 2 * c.layers * batch * c.kv_heads * self.max_length * c.head_dim * self.decoder.dtype.itemsize

    @property
    def allocated_cache_bytes(self) -> int:
        """Bytes of the caches allocated now: the last batch's (0 before the first)."""
        return 0 if self._session is None else self._session.cache_bytes

    @property
    def tokenizer(self) -> Tokenizer:
        """The checkpoint's ``tokenizer.json`` (HalfwayError without one or without ``tokenizers``)."""
        if self._tokenizer is None:
            self._tokenizer = Tokenizer.of_folder(self.folder)
        return self._tokenizer

    # -- steps ----------------------------------------------------------------------------------
    def prefill(self, input_ids: Any, attention_mask: Any = None) -> np.ndarray:
        """Start new sequences from the prompts ``input_ids`` (see ``halfway.api.llm.prompts``):
        returns the logits [batch, vocab] (float32) of each one's last token."""
        return self._prefill(self._prompts(input_ids, attention_mask), every=False)

    def decode(self, tokens: Any) -> np.ndarray:
        """Append one token per sequence (``tokens`` [batch]): returns the logits [batch, vocab]
        that follow it."""
        session = self._active()
        ids = np.asarray(tokens).reshape(-1)
        if ids.shape != (session.batch,) or ids.dtype.kind not in "iu":
            raise FeedError(f"decode takes one integer token per sequence ({session.batch}), got "
                            f"{np.asarray(tokens).dtype} {list(np.shape(tokens))}")
        check_tokens(ids, self.vocab_size, "sequence")
        check_length(int(self.lengths.max()) + 1, self.max_length, "the sequences and one more token")
        ids = ids.astype(np.int64)
        logits = session.run(ids[:, None], self.lengths[:, None], self.lengths, np.arange(session.batch))
        self.lengths = self.lengths + 1
        return logits

    def logits(self, input_ids: Any, attention_mask: Any = None) -> np.ndarray:
        """Start new sequences from ``input_ids`` and return the logits of every one of their
        tokens, [batch, longest prompt, vocab], each sequence from column 0 (NaN past its end)."""
        prompts = self._prompts(input_ids, attention_mask)
        every = self._prefill(prompts, every=True)
        width = int(prompts.lengths.max())
        out = np.full((prompts.batch, width, self.vocab_size), np.nan, np.float32)
        for row, length in enumerate(prompts.lengths):
            out[row, :length] = every[row, :length]
        return out

    def _prompts(self, input_ids: Any, attention_mask: Any) -> Prompts:
        return read_prompts(input_ids, attention_mask, self.vocab_size, self.pad_token_id)

    def _prefill(self, prompts: Prompts, *, every: bool) -> np.ndarray:
        lengths = prompts.lengths
        check_length(int(lengths.max()), self.max_length, "the longest prompt's tokens")
        session = self._session_for(prompts.batch)
        width = prefill_width(int(lengths.max()), self.max_length)
        positions = np.broadcast_to(np.arange(width, dtype=np.int64), (prompts.batch, width))
        rows = np.arange(prompts.batch * width) if every else np.arange(prompts.batch) * width + lengths - 1
        logits = session.run(prompts.right_padded(width, self.pad_token_id), np.ascontiguousarray(positions),
                             np.zeros(prompts.batch, np.int64), rows.astype(np.int64))
        self.lengths = lengths
        return logits.reshape(prompts.batch, width, -1) if every else logits

    def _session_for(self, batch: int) -> Session:
        if self._session is None or self._session.batch != batch:
            self._session = None  # the caches of another batch size go first
            self._session = Session(self.decoder, self.place, batch)
        return self._session

    def _active(self) -> Session:
        if self._session is None or not len(self.lengths):
            raise HalfwayError("decode continues sequences: prefill them first")
        return self._session

    # -- generation -----------------------------------------------------------------------------
    def generate(self, input_ids: Any, max_new_tokens: int = 32, *, attention_mask: Any = None,
                 eos_token_id: int | Sequence[int] | None = None, **sampling: Any) -> np.ndarray:
        """The prompts followed by up to ``max_new_tokens`` new tokens each: int64 [batch, prompt +
        new] (prompts of different lengths left-padded, as transformers returns them). A sequence
        stops at an end-of-sequence token (``eos_token_id``, default the config's; () for none),
        padded after it; generation stops when every sequence has. ``sampling``: the fields of
        ``Sampling`` (do_sample, temperature, top_k, top_p, repetition_penalty, seed)."""
        prompts = self._prompts(input_ids, attention_mask)
        steps = list(self._steps(prompts, max_new_tokens, Sampling(**sampling), eos_token_id))
        new = np.stack(steps, axis=1) if steps else np.zeros((prompts.batch, 0), np.int64)
        return np.concatenate([prompts.given, new], axis=1)

    def stream(self, input_ids: Any, max_new_tokens: int = 32, *, attention_mask: Any = None,
               eos_token_id: int | Sequence[int] | None = None, **sampling: Any) -> Iterator[np.ndarray]:
        """``generate``'s new tokens as they come: one int64 [batch] array per step."""
        prompts = self._prompts(input_ids, attention_mask)
        return self._steps(prompts, max_new_tokens, Sampling(**sampling), eos_token_id)

    def generate_text(self, prompt: str | Sequence[str], max_new_tokens: int = 32, **options: Any) -> str | list[str]:
        """The text generated after ``prompt`` (or after each of a list of prompts), through the
        checkpoint's tokenizer; ``options`` as ``generate``'s."""
        texts = [prompt] if isinstance(prompt, str) else list(prompt)
        encoded = [self.tokenizer.encode(text) for text in texts]
        steps = list(self.stream(encoded if len(encoded) > 1 else encoded[0], max_new_tokens, **options))
        eos = self._eos(options.get("eos_token_id"))
        made = [self.tokenizer.continuation(ids, _until(np.array([s[row] for s in steps], np.int64), eos))
                for row, ids in enumerate(encoded)]
        return made[0] if isinstance(prompt, str) else made

    def _eos(self, eos_token_id: int | Sequence[int] | None) -> np.ndarray:
        if eos_token_id is None:
            return np.array(self.eos_token_ids, np.int64)
        return np.array([eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id), np.int64)

    def _steps(self, prompts: Prompts, max_new_tokens: int, sampling: Sampling,
               eos_token_id: int | Sequence[int] | None) -> Iterator[np.ndarray]:
        """Prefill, then a token per sequence per step (see ``generate``); checks before any work."""
        if max_new_tokens < 0:
            raise HalfwayError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
        check_length(int(prompts.lengths.max()) + max_new_tokens, self.max_length,
                     f"the longest prompt and max_new_tokens {max_new_tokens}")
        return self._loop(prompts, max_new_tokens, Sampler(sampling, self.vocab_size, list(prompts.sequences)),
                          self._eos(eos_token_id))

    def _loop(self, prompts: Prompts, max_new_tokens: int, sampler: Sampler, eos: np.ndarray) -> Iterator[np.ndarray]:
        self.stats = stats = GenerationStats(prompt_tokens=int(prompts.lengths.sum()))
        if not max_new_tokens:
            return
        session = self._session_for(prompts.batch)
        logits, stats.prefill_seconds = _timed(session, lambda: self._prefill(prompts, every=False), stats)
        finished = np.zeros(prompts.batch, bool)
        for step in range(max_new_tokens):
            tokens = np.where(finished, self.pad_token_id, sampler(logits))
            finished |= np.isin(tokens, eos)
            yield tokens
            if finished.all() or step == max_new_tokens - 1:
                return
            logits, seconds = _timed(session, lambda: self.decode(tokens), stats)
            stats.decode_seconds += seconds
            stats.decode_tokens += prompts.batch


def _timed(session: Session, step: Callable[[], np.ndarray], stats: GenerationStats) -> tuple[np.ndarray, float]:
    """``step``'s logits and its seconds, less any preparing it did (added to ``stats``)."""
    start, prepared = time.perf_counter(), session.prepare_seconds
    with _one_blas_thread():
        logits = step()
    preparing = session.prepare_seconds - prepared
    stats.prepare_seconds += preparing
    return logits, time.perf_counter() - start - preparing


def _one_blas_thread() -> contextlib.AbstractContextManager[bool]:
    """OpenBLAS on one thread for a whole step where the numpy backend's own threads cut the
    products: switched per product, OpenBLAS's threads wake and spin beside the team's at every
    one of a decode step's hundreds of small products, which then take ten times as long."""
    return single_threaded_blas() if team_size() > 0 else contextlib.nullcontext(False)


def _until(tokens: np.ndarray, eos: np.ndarray) -> np.ndarray:
    """``tokens`` up to its first end-of-sequence token (dropped)."""
    stops = np.flatnonzero(np.isin(tokens, eos))
    return tokens[:stops[0]] if stops.size else tokens


def load(path: str | os.PathLike[str], *, place: str | Place = "cpu", dtype: str = "float32",
         max_length: int | None = None) -> LanguageModel:
    """A decoder LLM from the transformers checkpoint folder at ``path`` (``config.json`` and
    safetensors weights: the families of ``halfway.frontends.checkpoint``) or from a decoder ONNX
    export with a past/present cache (``halfway.api.llm.onnx_decoder``; its folder's
    ``config.json`` and ``tokenizer.json`` are read where present) on ``place`` (cpu, opencl,
    opencl:N or a Place), as a ``dtype`` (float32 or float16; an export in its own, or a float32
    one as float16) program, with caches of ``max_length`` positions per sequence (default:
    ``DEFAULT_MAX_LENGTH``, 2048, or the model's positions if fewer).

    Raises:
        CheckpointError: the folder cannot be read or built (as ``load_checkpoint``).
        HalfwayError: ``path`` is neither a checkpoint folder nor an ONNX file; an export that is
            not a decoder with a cache (as ``load_decoder``); a place that names no device.
    """
    chosen = parse_place(place) if isinstance(place, str) else place
    if is_onnx(path):
        return LanguageModel(load_decoder(path, dtype=dtype, max_length=max_length), chosen, Path(path).parent)
    if not is_checkpoint(path):
        raise HalfwayError(f"{path}: not a transformers checkpoint folder (config.json with model.safetensors or "
                           f"model.safetensors.index.json) nor an ONNX file; halfway.llm loads decoders from "
                           f"either")
    return LanguageModel(_fused(load_checkpoint(path, dtype=dtype, max_length=max_length)), chosen, path)


def _fused(decoder: DecoderProgram) -> DecoderProgram:
    """A checkpoint's program through the default pipeline, as an export's is (a residual add
    and the norm after it become one skip_rms_norm: fewer launches per decode step)."""
    result = PassManager().run(decoder.program, decoder.scope, fetch=[LOGITS])
    return evolve(decoder, program=result.program, scope=result.scope if result.scope is not None else decoder.scope)
