"""Reading the .npy and .npz files of ``halfway batch``'s rows with their sizes checked before
anything is allocated: a file no larger than ``halfway.ir.limits.max_model_bytes``, every array's
header agreeing with the bytes that follow it (a deflated .npz member no larger than deflate can
expand its compressed bytes to), every array within ``halfway.ir.limits.max_tensor_bytes``, and
only arrays of numbers, bools or strings in an .npz."""

from __future__ import annotations

import math
import tokenize
import zipfile
import zlib
from pathlib import Path
from typing import IO

import numpy as np

from ...ir import limits
from ...ir.errors import FeedError

__all__ = ["read_npy", "read_npz", "check_data_file"]

_KINDS = "biufUS"
"""The dtype kinds a file of rows may hold: bool, integers, floats, strings."""
_DEFLATE_RATIO = 1032
"""How many times its compressed size deflate can expand a stream, at most."""
_ARRAY_ERRORS = (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error, SyntaxError, tokenize.TokenError,
                 RecursionError, NotImplementedError, RuntimeError)
"""What numpy and zipfile raise on a malformed file (numpy parses a header as a Python literal;
zipfile refuses unknown compressions and versions with NotImplementedError, encrypted members
with RuntimeError)."""


def check_data_file(path: Path) -> None:
    """FeedError naming ``path`` unless it is a regular file; FileSizeError when it is larger
    than the file size limit."""
    if not path.is_file():
        raise FeedError(f"{path}: not a regular file; a file of rows is a .npy, .npz or .parquet file")
    limits.check_file_size(path, "a file of rows")


def read_npy(path: Path) -> np.ndarray:
    """The array of an .npy file (FeedError naming it when it is not one, or is malformed)."""
    check_data_file(path)
    try:
        with open(path, "rb") as f:
            _checked_header(f, path.stat().st_size, str(path))
            f.seek(0)
            return np.load(f, allow_pickle=False)
    except _ARRAY_ERRORS as e:
        raise FeedError(f"{path}: not a readable .npy file ({e})") from None


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz archive by name (FeedError naming it and the member at fault)."""
    check_data_file(path)
    arrays = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = _member_name(info, path)
                arrays[name] = _read_member(archive, info, f"{path}: member {info.filename!r}")
    except _ARRAY_ERRORS as e:
        raise FeedError(f"{path}: not a readable .npz file ({type(e).__name__}: {e})") from None
    return arrays


def _member_name(info: zipfile.ZipInfo, path: Path) -> str:
    if info.is_dir() or not info.filename.endswith(".npy"):
        raise FeedError(f"{path}: member {info.filename!r} is not a .npy array; an .npz of rows holds only "
                        f"arrays (as numpy.savez writes them)")
    return info.filename[:-len(".npy")]


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> np.ndarray:
    bound = info.compress_size * (_DEFLATE_RATIO if info.compress_type != zipfile.ZIP_STORED else 1)
    if info.file_size > bound + 1024:
        raise FeedError(f"{where}: claims {info.file_size:,} bytes, more than its {info.compress_size:,} "
                        f"compressed bytes can hold")
    with archive.open(info) as member:
        _checked_header(member, info.file_size, where)
    with archive.open(info) as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def _checked_header(f: IO[bytes], size: int, where: str) -> None:
    """Read an .npy header from ``f`` (a stream of ``size`` bytes): FeedError unless it describes
    an array of a kind rows may hold whose data are exactly the bytes after it."""
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise FeedError(f"{where}: .npy format version {version} is not read (1.0 and 2.0 are)")
    if dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise FeedError(f"{where}: an array of dtype {dtype}; rows hold numbers, bools or strings")
    limits.check_tensor_size(shape, dtype, where)
    claimed, held = math.prod(shape) * dtype.itemsize, size - f.tell()
    if claimed != held:
        raise FeedError(f"{where}: its header says a {dtype} array of shape {list(shape)} ({claimed:,} bytes), "
                        f"but {held:,} bytes follow it")
