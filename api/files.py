"""Writing one output file atomically: the file holds all the new bytes or is as it was; arrays
by name as .npz bytes."""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
from collections.abc import Mapping

import numpy as np

from ..ir.errors import SerdeError

__all__ = ["write_file", "write_npz", "npz_bytes"]


def write_file(path: str, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then move it over ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise SerdeError(f"{path}: is a directory; give a file name")
    if not os.path.isdir(folder):
        raise SerdeError(f"{path}: the folder {folder} does not exist")
    fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temp, path)
    except BaseException as e:
        os.unlink(temp)
        if isinstance(e, OSError):
            raise SerdeError(f"{path}: cannot write ({e.strerror or e}); nothing was written") from None
        raise


def write_npz(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Save ``arrays`` by name as an .npz archive at ``path`` (atomically)."""
    if not path.endswith(".npz"):
        raise SerdeError(f"{path}: outputs are written as an .npz archive; give a name ending .npz")
    write_file(path, npz_bytes(arrays))


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """``arrays`` by name as an .npz archive (as ``np.savez`` writes it, which cannot take an
    array named ``file``, its own argument)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, values in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, values, allow_pickle=False)
    return buffer.getvalue()
