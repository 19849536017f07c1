"""Reading the rows of ``halfway batch`` and writing its results.

DATA is a folder of .npy files (one row each, for a model with one input) or of .npz files (one
row each, arrays named after the inputs), an .npz archive (arrays named after the columns, one
entry per row), or a Parquet file or folder of them. Parquet tensor columns are Arrow's
fixed-shape tensors or (nested) lists. Folder rows get a ``file`` column naming their file.
Results are written atomically as Parquet (tensors as fixed-shape tensor columns) or .npz.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...ir.errors import FeedError, HalfwayError, SerdeError
from ..files import npz_bytes, write_file
from .columns import Columns, concat_columns, object_column

__all__ = ["FORMATS", "read_rows", "write_rows", "MissingExtraError", "require_pyarrow"]

FORMATS = "a folder of .npy or .npz files, an .npz archive, or a Parquet file or folder"


class MissingExtraError(HalfwayError, ImportError):
    """An optional dependency is not installed; the message names the pip command."""


def require_pyarrow() -> Any:
    """The pyarrow module, or a MissingExtraError naming the extra that installs it."""
    try:
        import pyarrow
    except ImportError:
        raise MissingExtraError("Parquet files need pyarrow: pip install 'halfway[ray]'") from None
    return pyarrow


def read_rows(path: str, feed_names: Sequence[str]) -> Columns:
    """The rows of DATA at ``path`` as columns (``FORMATS``).

    Raises:
        FeedError: a missing path, an unknown format, or a file that cannot be read.
    """
    data = Path(path)
    if data.is_dir():
        files = sorted(p for p in data.iterdir() if p.suffix in (".npy", ".npz", ".parquet"))
        kinds = {p.suffix for p in files}
        if len(kinds) != 1:
            found = f"files of several kinds ({', '.join(sorted(kinds))})" if kinds else "no .npy, .npz or .parquet file"
            raise FeedError(f"{path}: the folder holds {found}; expected {FORMATS}")
        if kinds == {".parquet"}:
            return concat_columns([_read_parquet(p) for p in files])
        return _read_files(files, feed_names)
    if data.suffix == ".npz" and data.is_file():
        return _read_file(data, "")
    if data.suffix == ".parquet" and data.is_file():
        return _read_parquet(data)
    what = "no such file or folder" if not data.exists() else "not a format halfway batch reads"
    raise FeedError(f"{path}: {what}; expected {FORMATS}")


def _read_files(files: Sequence[Path], feed_names: Sequence[str]) -> Columns:
    """One row per file: a .npy file is the value of the model's one input, a .npz file holds a
    value per column. The rows are checked against the model where they run."""
    if files[0].suffix == ".npy" and len(feed_names) != 1:
        raise FeedError(f"{files[0].parent}: a folder of .npy files feeds a model with one input; this model has "
                        f"{list(feed_names)}: give one .npz file per row, its arrays named after the inputs")
    rows = [_read_file(p, feed_names[0]) for p in files]
    for path, row in zip(files, rows):
        if row.keys() != rows[0].keys():
            raise FeedError(f"{path}: holds the arrays {sorted(row)}, {files[0].name} holds {sorted(rows[0])}; every "
                            f"row needs the same ones")
    columns = {name: _stacked(object_column([row[name] for row in rows])) for name in rows[0]}
    return {"file": np.array([p.name for p in files]), **columns}


def _read_file(path: Path, feed_name: str) -> dict[str, np.ndarray]:
    try:
        if path.suffix == ".npy":
            return {feed_name: np.load(path, allow_pickle=False)}
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise FeedError(f"{path}: not a readable {path.suffix} file ({e})") from None


def _stacked(column: np.ndarray) -> np.ndarray:
    """An object column as one array when its rows agree in shape and dtype."""
    if len({(row.shape, row.dtype) for row in column}) == 1:
        return np.stack(list(column))
    return column


def _read_parquet(path: Path) -> Columns:
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as e:
        raise FeedError(f"{path}: not a readable Parquet file ({e})") from None
    return {name: _column(table.column(name).combine_chunks()) for name in table.column_names}


def _column(array: Any) -> np.ndarray:
    """An Arrow column as numpy: tensors [rows, ...], lists of one length per level likewise,
    ragged lists an object column, strings a str array."""
    import pyarrow as pa

    if isinstance(array.type, pa.FixedShapeTensorType):
        return array.to_numpy_ndarray()
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return np.array(array.to_pylist(), dtype=str)
    if not _is_list(array.type):
        return array.to_numpy(zero_copy_only=False)
    regular = _regular(array)
    if regular is not None:
        return regular
    return object_column([np.asarray(row) for row in array.to_pylist()])


def _is_list(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)
                or pa.types.is_fixed_size_list(arrow_type))


def _regular(array: Any) -> np.ndarray | None:
    """A list column whose lists have one length at every level as [rows, *lengths]; else None."""
    import pyarrow.compute as pc

    rows, dims = len(array), []
    while _is_list(array.type):
        lengths = np.unique(pc.list_value_length(array).to_numpy(zero_copy_only=False))
        if array.null_count or len(lengths) != 1:
            return None
        dims.append(int(lengths[0]))
        array = array.flatten()
    if array.null_count:
        return None
    return array.to_numpy(zero_copy_only=False).reshape(rows, *dims)


def write_rows(path: str, columns: Columns) -> None:
    """Write ``columns`` to ``path`` (.parquet or .npz), all of it or nothing.

    Raises:
        SerdeError: another suffix, a column .npz cannot hold, or a write that failed.
    """
    if path.endswith(".npz"):
        ragged = [name for name, values in columns.items() if values.dtype == object]
        if ragged:
            raise SerdeError(f"{path}: the columns {ragged} hold rows of different shapes, which .npz cannot store; "
                             f"write Parquet instead")
        write_file(path, npz_bytes(columns))
    elif path.endswith(".parquet"):
        write_file(path, _parquet_bytes(columns))
    else:
        raise SerdeError(f"{path}: results are written as Parquet or .npz; give a name ending .parquet or .npz")


def _parquet_bytes(columns: Columns) -> bytes:
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    arrays = {name: _arrow(values) for name, values in columns.items()}
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table(arrays), sink)
    return bytes(sink.getvalue())


def _arrow(values: np.ndarray) -> Any:
    import pyarrow as pa

    if values.dtype == object:
        return pa.array([np.asarray(row).tolist() for row in values])
    if values.ndim == 1:
        return pa.array(values)
    return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(values))
