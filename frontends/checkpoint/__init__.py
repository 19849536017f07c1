"""transformers checkpoint folders (``config.json`` + safetensors weights) built directly into
halfway decoder programs: the Llama family (Llama, Mistral, Qwen2), Gemma, Phi-3 and GPT-2
(``families``). ``halfway.api.llm`` runs them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from attrs import evolve

from ...ir.dtypes import DType
from .config import DecoderConfig
from .decoder import FEEDS, LOGITS, DecoderProgram, build_decoder
from .families import FAMILIES, family_of
from .files import CONFIG, CheckpointError, CheckpointFiles, is_checkpoint
from .weights import DecoderWeights

__all__ = ["DEFAULT_MAX_LENGTH", "load_checkpoint", "read_checkpoint", "is_checkpoint", "CheckpointError", "DecoderConfig",
           "DecoderProgram", "DecoderWeights", "FAMILIES", "FEEDS", "LOGITS"]


DEFAULT_MAX_LENGTH = 2048
"""The cache positions per sequence ``load_checkpoint`` builds when given none (fewer where the
model has fewer): what a cache costs grows with them."""


@contextlib.contextmanager
def _config_file(folder: Path) -> Iterator[None]:
    """Errors about ``config.json`` name the file with its folder."""
    try:
        yield
    except CheckpointError as e:
        if not str(e).startswith(f"{CONFIG}:"):
            raise
        raise CheckpointError(f"{folder}{os.sep}{e}") from e


def read_checkpoint(path: str | os.PathLike[str]) -> tuple[DecoderConfig, DecoderWeights]:
    """The config and weights of the checkpoint folder at ``path``, as float32 (float16 and
    float64 tensors as stored).

    Raises:
        CheckpointError: a missing file or tensor, a tensor whose shape disagrees with the config,
            an architecture no family builds (each names the file and the tensor or key).
    """
    files = CheckpointFiles(path)
    with _config_file(files.folder):
        family = family_of(files.config, str(files.folder / CONFIG))
        config = family.config(files.config, files.generation_config)
    config = evolve(config, architecture=next(a for a in files.config["architectures"] if a in FAMILIES))
    return config, family.weights(files, config)


def load_checkpoint(path: str | os.PathLike[str], *, dtype: DType | str = DType.float32,
                    max_length: int | None = None) -> DecoderProgram:
    """The decoder program of the checkpoint folder at ``path`` in ``dtype`` (float32 or float16),
    with caches of ``max_length`` positions (default: ``DEFAULT_MAX_LENGTH``, or the config's
    ``max_position_embeddings`` where fewer).

    Raises:
        CheckpointError: as ``read_checkpoint``; a ``max_length`` beyond the learned positions of a
            model that has them (GPT-2's ``n_positions``); a dtype other than float32 or float16.
    """
    program_dtype = DType.from_any(dtype)
    if program_dtype not in (DType.float32, DType.float16):
        raise CheckpointError(f"a decoder program is float32 or float16, not {program_dtype.name}")
    config, weights = read_checkpoint(path)
    length = max_length if max_length is not None else min(DEFAULT_MAX_LENGTH, config.max_positions)
    if length < 1:
        raise CheckpointError(f"{path}: max_length must be at least 1, got {length}")
    if config.rope is None and length > config.max_positions:
        raise CheckpointError(f"{path}: max_length {length} is beyond the model's {config.max_positions} learned "
                              f"positions (n_positions in {CONFIG})")
    with _config_file(Path(path)):
        return build_decoder(config, weights, dtype=program_dtype, max_length=length)
