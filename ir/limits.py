"""How large a tensor halfway makes from a shape, and how large a file it reads whole, before
refusing to: shapes come from model files (a 123-byte model can ask for ``ConstantOfShape
[25000, 25000]``), so sizes are checked before anything is allocated.

The tensor limit is ``HALFWAY_MAX_TENSOR_BYTES`` (bytes; default 2 GiB), or the
``max_tensor_bytes`` argument of the functions that take one (``halfway.load``). Parameters read
from files are not limited by it: their size is that of the bytes read.

The file limit is ``HALFWAY_MAX_MODEL_BYTES`` (bytes; default 4 GiB): a program file (``.onnx``,
``.pdmodel``, ``model.json``) or a file of rows larger than it is refused before it is read.
Parameter files are not limited by it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from .errors import HalfwayError, SerdeError

__all__ = ["TensorSizeError", "FileSizeError", "MAX_TENSOR_BYTES_ENV", "DEFAULT_MAX_TENSOR_BYTES", "max_tensor_bytes",
           "check_tensor_size", "MAX_MODEL_BYTES_ENV", "DEFAULT_MAX_MODEL_BYTES", "max_model_bytes", "check_file_size"]

MAX_TENSOR_BYTES_ENV = "HALFWAY_MAX_TENSOR_BYTES"
DEFAULT_MAX_TENSOR_BYTES = 2 << 30
MAX_MODEL_BYTES_ENV = "HALFWAY_MAX_MODEL_BYTES"
DEFAULT_MAX_MODEL_BYTES = 4 << 30


class TensorSizeError(HalfwayError):
    """A tensor would be larger than the limit (or its shape is not a shape)."""


class FileSizeError(SerdeError):
    """A file to be read whole is larger than the limit."""


def max_tensor_bytes(limit: int | None = None) -> int:
    """``limit`` if given, else ``HALFWAY_MAX_TENSOR_BYTES``, else the default."""
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise TensorSizeError(f"max_tensor_bytes must be a positive int, got {limit!r}")
        return limit
    return _env_bytes(MAX_TENSOR_BYTES_ENV, DEFAULT_MAX_TENSOR_BYTES, TensorSizeError)


def max_model_bytes() -> int:
    """``HALFWAY_MAX_MODEL_BYTES``, else the default."""
    return _env_bytes(MAX_MODEL_BYTES_ENV, DEFAULT_MAX_MODEL_BYTES, FileSizeError)


def _env_bytes(name: str, default: int, error: type[HalfwayError]) -> int:
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise error(f"{name}={text!r}: expected a positive number of bytes")
    return value


def check_file_size(path: str | os.PathLike[str], what: str) -> None:
    """FileSizeError naming ``path`` when the file ``what`` (a model file, a file of rows) is
    larger than ``HALFWAY_MAX_MODEL_BYTES``; a file that cannot be looked at is left to its read."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return
    allowed = max_model_bytes()
    if size > allowed:
        raise FileSizeError(f"{os.fspath(path)}: {what} of {size:,} bytes, more than the limit of {allowed:,}; "
                            f"{MAX_MODEL_BYTES_ENV} raises it")


def check_tensor_size(shape: Sequence[int], dtype: np.dtype | type, what: str, limit: int | None = None) -> None:
    """TensorSizeError naming ``what`` (the op) when a ``dtype`` tensor of ``shape`` has a
    negative dim or would exceed the limit. Dims of -1 (unknown) count as 1."""
    dims = [int(d) for d in shape]
    if any(d < -1 for d in dims):
        raise TensorSizeError(f"{what}: shape {dims} has a negative dim")
    nbytes = math.prod(max(d, 1) if d == -1 else d for d in dims) * np.dtype(dtype).itemsize
    allowed = max_tensor_bytes(limit)
    if nbytes > allowed:
        raise TensorSizeError(f"{what}: a {np.dtype(dtype).name} tensor of shape {dims} would take {nbytes:,} "
                              f"bytes, more than the limit of {allowed:,} ({MAX_TENSOR_BYTES_ENV} or "
                              f"max_tensor_bytes raises it)")
