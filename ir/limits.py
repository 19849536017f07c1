"""How large a tensor halfway makes from a shape before refusing to: shapes come from model files
(a 123-byte model can ask for ``ConstantOfShape [25000, 25000]``), so sizes are checked before
anything is allocated.

The limit is ``HALFWAY_MAX_TENSOR_BYTES`` (bytes; default 2 GiB), or the ``max_tensor_bytes``
argument of the functions that take one (``halfway.load``). Parameters read from files are not
limited by it: their size is that of the bytes read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from .errors import HalfwayError

__all__ = ["TensorSizeError", "MAX_TENSOR_BYTES_ENV", "DEFAULT_MAX_TENSOR_BYTES", "max_tensor_bytes",
           "check_tensor_size"]

MAX_TENSOR_BYTES_ENV = "HALFWAY_MAX_TENSOR_BYTES"
DEFAULT_MAX_TENSOR_BYTES = 2 << 30


class TensorSizeError(HalfwayError):
    """A tensor would be larger than the limit (or its shape is not a shape)."""


def max_tensor_bytes(limit: int | None = None) -> int:
    """``limit`` if given, else ``HALFWAY_MAX_TENSOR_BYTES``, else the default."""
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
            raise TensorSizeError(f"max_tensor_bytes must be a positive int, got {limit!r}")
        return limit
    text = os.environ.get(MAX_TENSOR_BYTES_ENV, "")
    if not text:
        return DEFAULT_MAX_TENSOR_BYTES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise TensorSizeError(f"{MAX_TENSOR_BYTES_ENV}={text!r}: expected a positive number of bytes")
    return value


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
