"""Feeds for a model: arrays read from input specs (``name=file.npy`` or ``file.npz``, as
``--input`` takes them), or seeded random values shaped like the model's inputs."""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Sequence
from typing import IO

import numpy as np

from ..ir.dtypes import DType
from ..ir.errors import FeedError
from ..ir.program import Program
from .errors import SpecError

__all__ = ["parse_inputs", "random_inputs", "feed_dims", "convert_feed"]

DYNAMIC_DIM = 1
"""What a dim the model leaves open (-1) becomes in a random input."""


def parse_inputs(specs: Sequence[str], program: Program, feed_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Arrays for every feed from ``specs`` (``name=file.npy`` or ``file.npz`` holding arrays by
    feed name); floating arrays are converted to the feed's floating dtype, ints to its int dtype.

    Raises:
        SpecError: a spec that is neither form.
        FeedError: an unreadable file, an unknown or missing feed, an array of another kind.
    """
    arrays: dict[str, np.ndarray] = {}
    for spec in specs:
        arrays.update(_read_spec(spec))
    unknown = sorted(set(arrays) - set(feed_names))
    if unknown:
        raise FeedError(f"--input names {unknown} are not inputs of the model; its inputs are {list(feed_names)}")
    missing = [n for n in feed_names if n not in arrays]
    if missing:
        raise FeedError(f"no --input for {missing}; give name=file.npy for each input (or use --random)")
    return {name: convert_feed(name, arrays[name], program) for name in feed_names}


def _read_spec(spec: str) -> dict[str, np.ndarray]:
    name, sep, path = spec.partition("=")
    if sep:
        if not name or not path:
            raise SpecError(f"--input {spec!r}: expected name=file.npy")
        return {name: _load(path, spec)}
    if spec.endswith(".npz"):
        return _load_npz(spec)
    raise SpecError(f"--input {spec!r}: expected name=file.npy or a .npz file holding arrays named after the inputs")


def _load(path: str, spec: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise FeedError(f"--input {spec!r}: {path}: no such file" if not os.path.exists(path)
                        else f"--input {spec!r}: {path}: not a regular file")
    try:
        if not zipfile.is_zipfile(path):
            with open(path, "rb") as f:
                _check_header(f, os.path.getsize(path), f"--input {spec!r}: {path}")
        value = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise FeedError(f"--input {spec!r}: {path} is not a readable .npy file ({e})") from None
    if not isinstance(value, np.ndarray):
        raise FeedError(f"--input {spec!r}: {path} holds several arrays; use it as --input {path}")
    return value


def _check_header(f: IO[bytes], size: int, what: str) -> None:
    """FeedError when the .npy header read from ``f`` claims more data than ``size`` bytes hold
    (checked before numpy allocates the array)."""
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(f)
    needed = math.prod(shape) * dtype.itemsize
    if needed > size - f.tell():
        raise FeedError(f"{what}: the header claims a {dtype} array of shape {list(shape)} ({needed:,} bytes), "
                        f"but the file holds {size - f.tell():,} bytes of data")


def _load_npz(path: str) -> dict[str, np.ndarray]:
    if not os.path.isfile(path):
        raise FeedError(f"--input {path!r}: no such file" if not os.path.exists(path)
                        else f"--input {path!r}: not a regular file")
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                with archive.open(info) as member:
                    _check_header(member, info.file_size, f"--input {path!r}: {info.filename}")
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise FeedError(f"--input {path!r}: not a readable .npz file ({e})") from None


def convert_feed(name: str, value: np.ndarray, program: Program) -> np.ndarray:
    """``value`` in the dtype of ``program``'s feed ``name`` when both are floats or both ints."""
    dtype = program.global_block().var(name).dtype
    want = dtype.numpy if isinstance(dtype, DType) else value.dtype
    if value.dtype == want:
        return value
    kinds = {value.dtype.kind, want.kind}
    if kinds <= {"f"} or kinds <= {"i", "u"}:
        return value.astype(want)
    raise FeedError(f"input {name!r}: the array is {value.dtype}, the model expects {want}")


def feed_dims(program: Program, name: str) -> tuple[int, ...]:
    """The shape of feed ``name`` with open dims (-1) set to DYNAMIC_DIM."""
    shape = program.global_block().var(name).shape or ()
    return tuple(DYNAMIC_DIM if d < 0 else d for d in shape)


def random_inputs(program: Program, feed_names: Sequence[str], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded values for every feed: standard normal floats, ints in [0, 10), fair bools."""
    rng = np.random.default_rng(seed)
    block = program.global_block()
    feeds = {}
    for name in feed_names:
        dtype = block.var(name).dtype or DType.float32
        shape = feed_dims(program, name)
        if dtype.is_floating:
            value = rng.standard_normal(shape).astype(dtype.numpy)
        elif dtype is DType.bool:
            value = rng.random(shape) < 0.5
        else:
            value = rng.integers(0, 10, shape).astype(dtype.numpy)
        feeds[name] = value
    return feeds
