"""Writing one output file atomically (``halfway.ir.tempfiles.write_file``: the file holds all
the new bytes or is as it was, and keeps its mode); arrays by name as .npz bytes."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping

import numpy as np

from ..ir.errors import SerdeError
from ..ir.tempfiles import write_file

__all__ = ["write_file", "write_npz", "npz_bytes"]


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
