"""Feeds for a model: arrays read from input specs (``name=file.npy`` or ``file.npz``, as
``--input`` takes them), or seeded random values the model can take, shaped like its inputs."""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Mapping, Sequence
from typing import IO

import numpy as np

from ..ir.dtypes import DType
from ..ir.errors import FeedError
from ..ir.program import Program
from .errors import SpecError
from .feed_roles import IDS, MASK, POSITIONS, TYPE_IDS, Role, feed_roles
from .input_shapes import feed_shapes

__all__ = ["parse_inputs", "read_inputs", "typed_feeds", "dtype_changes", "random_inputs", "convert_feed"]


def parse_inputs(specs: Sequence[str], program: Program, feed_names: Sequence[str], *,
                 cast: bool = True) -> dict[str, np.ndarray]:
    """Arrays for every feed from ``specs`` (``read_inputs``), in the feeds' dtypes
    (``typed_feeds``)."""
    return typed_feeds(read_inputs(specs, feed_names), program, cast=cast)


def read_inputs(specs: Sequence[str], feed_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Arrays for every feed from ``specs`` (``name=file.npy`` or ``file.npz`` holding arrays by
    feed name), as the files hold them.

    Raises:
        SpecError: a spec that is neither form.
        FeedError: an unreadable file, an unknown or missing feed.
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
    return {name: arrays[name] for name in feed_names}


def typed_feeds(arrays: Mapping[str, np.ndarray], program: Program, *, cast: bool) -> dict[str, np.ndarray]:
    """``arrays`` in their feeds' dtypes. With ``cast``, floating arrays are converted to the
    feed's floating dtype, ints to its int dtype (``dtype_changes`` lists them); without, an
    array of another dtype than its feed's is an error, as in ONNX Runtime.

    Raises:
        FeedError: an array of another kind (of another dtype, without ``cast``), naming it.
    """
    changes = dtype_changes(arrays, program)
    if changes and not cast:
        name, have, want = changes[0]
        raise FeedError(f"input {name!r} is {have}, the model takes {want} and converts nothing (as ONNX Runtime); "
                        f"save the array as {want}, or pass --cast-inputs to convert it")
    return {name: convert_feed(name, value, program) for name, value in arrays.items()}


def dtype_changes(arrays: Mapping[str, np.ndarray], program: Program) -> list[tuple[str, str, str]]:
    """(name, the array's dtype, the feed's) for each array whose dtype is not its feed's."""
    block = program.global_block()
    changes = []
    for name, value in arrays.items():
        dtype = block.var(name).dtype
        if isinstance(dtype, DType) and value.dtype != dtype.numpy:
            changes.append((name, str(value.dtype), dtype.name))
    return changes


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


def random_inputs(program: Program, feed_names: Sequence[str], seed: int = 0,
                  shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, np.ndarray]:
    """Seeded values for every feed that the model can take (``halfway.api.feed_roles``): ids
    below the rows of the embedding table they index, masks of ones, token type ids 0, position
    ids counting along the last axis; other floats in [0, 1), bools fair, ints in [0, 10).
    ``shapes`` gives each feed's shape (default: ``feed_shapes``, free dims ``DYNAMIC_DIM``)."""
    rng = np.random.default_rng(seed)
    block = program.global_block()
    shapes = shapes if shapes is not None else feed_shapes(program, feed_names)
    feeds = {}
    for name, role in feed_roles(program, feed_names).items():
        dtype = block.var(name).dtype or DType.float32
        feeds[name] = np.ascontiguousarray(_values(role, tuple(shapes[name]), dtype, rng), dtype=dtype.numpy)
    return feeds


def _values(role: Role, shape: tuple[int, ...], dtype: DType, rng: np.random.Generator) -> np.ndarray:
    if role.kind == MASK:
        return np.ones(shape)
    if role.kind == TYPE_IDS:
        return np.zeros(shape)
    if role.kind == POSITIONS:
        positions = np.arange(shape[-1] if shape else 1) % (role.rows or np.iinfo(np.int64).max)
        return np.broadcast_to(positions, shape)
    if role.kind == IDS:
        return rng.integers(0, role.rows or 1, shape)
    if dtype.is_floating:
        return rng.random(shape)
    if dtype is DType.bool:
        return rng.random(shape) < 0.5
    return rng.integers(0, 10, shape)
