"""The files of a transformers checkpoint folder: ``config.json`` (and ``generation_config.json``),
the weights in ``model.safetensors`` or in the shards ``model.safetensors.index.json`` lists, read
with the ``safetensors`` package.

Tensors are read one at a time, by name, as float32 or float16 numpy arrays: safetensors' numpy
reader knows no bfloat16, so a bfloat16 tensor's bytes are read where the file's header places
them and widened (a bfloat16 is the upper half of a float32).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...ir.errors import SerdeError

__all__ = ["CheckpointError", "CheckpointFiles", "CONFIG", "is_checkpoint"]

CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"
SINGLE = "model.safetensors"
INDEX = "model.safetensors.index.json"
INSTALL_HINT = "pip install safetensors (or 'halfway[llm]')"
_NUMPY = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


class CheckpointError(SerdeError):
    """A checkpoint folder that cannot be read or built into a program: a missing file or tensor,
    a tensor whose shape disagrees with ``config.json``, an architecture no builder knows."""


def is_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding a ``config.json`` and safetensors weights."""
    folder = Path(path)
    return (folder / CONFIG).is_file() and ((folder / SINGLE).is_file() or (folder / INDEX).is_file())


class CheckpointFiles:
    """A checkpoint folder: its configs and a reader of its tensors by name."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise CheckpointError(f"{self.folder}: not a folder (a checkpoint is a folder holding {CONFIG} and "
                                  f"{SINGLE} or {INDEX})")
        self.config = _read_json(self.folder / CONFIG)
        generation = self.folder / GENERATION_CONFIG
        self.generation_config = _read_json(generation) if generation.is_file() else {}
        self._file_of = self._weight_map()
        self._headers: dict[Path, tuple[dict[str, Any], int]] = {}

    @property
    def names(self) -> list[str]:
        return sorted(self._file_of)

    @property
    def weight_files(self) -> list[Path]:
        """The safetensors files holding the tensors."""
        return sorted(set(self._file_of.values()))

    def has(self, name: str) -> bool:
        return name in self._file_of

    def tensor(self, name: str, shape: Sequence[int] | None = None) -> np.ndarray:
        """Tensor ``name`` as float32 (float16 and float64 as they are stored), checked against
        ``shape`` (from the config) when given."""
        if name not in self._file_of:
            files = ", ".join(p.name for p in self.weight_files)
            raise CheckpointError(f"{self.folder}: the checkpoint has no tensor {name!r} ({files} hold "
                                  f"{len(self._file_of)} others)")
        path = self._file_of[name]
        value = self._read(path, name)
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise CheckpointError(f"{path}: tensor {name!r} has shape {list(value.shape)}, but {CONFIG} makes it "
                                  f"{list(shape)}")
        return value

    def _weight_map(self) -> dict[str, Path]:
        """Tensor name -> the file holding it."""
        single, index = self.folder / SINGLE, self.folder / INDEX
        if single.is_file():
            return {name: single for name in _keys(single)}
        if not index.is_file():
            raise CheckpointError(f"{self.folder}: no {SINGLE} or {INDEX} (halfway reads safetensors checkpoints; "
                                  f"save_pretrained(..., safe_serialization=True) writes them)")
        weight_map = _read_json(index).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{index}: no 'weight_map' object naming each tensor's file")
        shards = {file: self.folder / file for file in set(weight_map.values())}
        for file, path in shards.items():
            if not path.is_file():
                raise CheckpointError(f"{index}: lists the shard {file}, which is not in {self.folder}")
        return {name: shards[file] for name, file in weight_map.items()}

    def _read(self, path: Path, name: str) -> np.ndarray:
        safe_open = _safe_open()
        try:
            with safe_open(str(path), framework="numpy") as f:
                dtype = f.get_slice(name).get_dtype()
                if dtype == "BF16":
                    return self._bfloat16(path, name)
                if dtype not in _NUMPY:
                    raise CheckpointError(f"{path}: tensor {name!r} is {dtype}; halfway reads F32, F16 and BF16 "
                                          f"weights")
                return np.asarray(f.get_tensor(name), dtype=_NUMPY[dtype])
        except (OSError, RuntimeError, ValueError) as e:  # what safetensors raises for a damaged file
            raise CheckpointError(f"{path}: cannot read tensor {name!r}: {e}") from e

    def _bfloat16(self, path: Path, name: str) -> np.ndarray:
        """A bfloat16 tensor's bits, read at the offsets the file's header gives, as float32."""
        header, start = self._header(path)
        entry = header[name]
        begin, end = entry["data_offsets"]
        bits = np.fromfile(path, dtype="<u2", count=(end - begin) // 2, offset=start + begin)
        return (bits.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])

    def _header(self, path: Path) -> tuple[dict[str, Any], int]:
        """The safetensors header of ``path`` and where its data begins."""
        if path not in self._headers:
            with open(path, "rb") as f:
                (size,) = struct.unpack("<Q", f.read(8))
                self._headers[path] = json.loads(f.read(size)), 8 + size
        return self._headers[path]


def _safe_open() -> Any:
    try:
        from safetensors import safe_open
    except ImportError as e:
        raise CheckpointError(f"reading a transformers checkpoint needs the safetensors package: {INSTALL_HINT}") from e
    return safe_open


def _keys(path: Path) -> list[str]:
    try:
        with _safe_open()(str(path), framework="numpy") as f:
            return list(f.keys())
    except (OSError, RuntimeError, ValueError) as e:
        raise CheckpointError(f"{path}: not a safetensors file: {e}") from e


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file (a checkpoint folder holds {CONFIG})") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not a JSON file: {e}") from e
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: holds a JSON {type(value).__name__}, not an object")
    return value
