"""Reading the rows of ``halfway batch`` and writing its results.

DATA is a folder of .npy files (one row each, for a model with one input) or of .npz files (one
row each, arrays named after the inputs), an .npz archive (arrays named after the columns, one
entry per row), or a Parquet file or folder of them. Parquet tensor columns are Arrow's
fixed-shape tensors or (nested) lists. Folder rows get a ``file`` column naming their file.
Results are written atomically as Parquet (tensors as fixed-shape tensor columns) or .npz.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...ir.errors import FeedError, HalfwayError, SerdeError
from ..files import npz_bytes, write_file
from .arrays import check_data_file, read_npy, read_npz
from .columns import Columns, concat_columns, object_column

__all__ = ["FORMATS", "read_rows", "check_output", "write_rows", "MissingExtraError", "require_pyarrow"]

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
    """The rows of DATA at ``path`` as columns (``FORMATS``), every file read with its sizes
    checked first (``halfway.api.batch.arrays``).

    Raises:
        FeedError: a missing path, an unknown format, an entry of a folder that is not a regular
            file (a FIFO, a folder named like a file of rows), or a file that cannot be read.
    """
    data = Path(path)
    if data.is_dir():
        files = _folder_files(data)
        if files[0].suffix == ".parquet":
            return _concat_tables(files)
        return _read_files(files, feed_names)
    if data.suffix == ".npz" and data.is_file():
        return _archive_columns(data)
    if data.suffix == ".parquet" and data.is_file():
        return _read_parquet(data)
    what = "no such file or folder" if not data.exists() else "not a format halfway batch reads"
    raise FeedError(f"{path}: {what}; expected {FORMATS}")


def _folder_files(folder: Path) -> list[Path]:
    """The files of rows in ``folder``, all of one kind; FeedError for one that is not a regular
    file (reading a FIFO would wait forever)."""
    files = sorted(p for p in folder.iterdir() if p.suffix in (".npy", ".npz", ".parquet"))
    kinds = {p.suffix for p in files}
    if len(kinds) != 1:
        found = f"files of several kinds ({', '.join(sorted(kinds))})" if kinds else "no .npy, .npz or .parquet file"
        raise FeedError(f"{folder}: the folder holds {found}; expected {FORMATS}")
    for file in files:
        check_data_file(file)
    return files


def _read_files(files: Sequence[Path], feed_names: Sequence[str]) -> Columns:
    """One row per file: a .npy file is the value of the model's one input, a .npz file holds a
    value per column. The rows are checked against the model where they run."""
    if files[0].suffix == ".npy" and len(feed_names) != 1:
        raise FeedError(f"{files[0].parent}: a folder of .npy files feeds a model with one input; this model has "
                        f"{list(feed_names)}: give one .npz file per row, its arrays named after the inputs")
    rows = [{feed_names[0]: read_npy(p)} if p.suffix == ".npy" else read_npz(p) for p in files]
    for path, row in zip(files, rows):
        if row.keys() != rows[0].keys():
            raise FeedError(f"{path}: holds the arrays {sorted(row)}, {files[0].name} holds {sorted(rows[0])}; every "
                            f"row needs the same ones")
    columns = {name: _stacked(object_column([row[name] for row in rows])) for name in rows[0]}
    return {"file": np.array([p.name for p in files]), **columns}


def _archive_columns(path: Path) -> Columns:
    """The columns of an .npz archive of rows: arrays with one entry per row along axis 0."""
    columns = read_npz(path)
    scalars = [name for name, values in columns.items() if values.ndim == 0]
    if scalars:
        raise FeedError(f"{path}: the arrays {scalars} are scalars; an .npz of rows holds one array per column, "
                        f"its rows along axis 0")
    return columns


def _stacked(column: np.ndarray) -> np.ndarray:
    """An object column as one array when its rows agree in shape and dtype."""
    if len({(row.shape, row.dtype) for row in column}) == 1:
        return np.stack(list(column))
    return column


def _concat_tables(files: Sequence[Path]) -> Columns:
    """The rows of several Parquet files, which must have the same columns."""
    tables = [_read_parquet(p) for p in files]
    for path, table in zip(files, tables):
        if list(table) != list(tables[0]):
            raise FeedError(f"{path}: has the columns {list(table)}, {files[0].name} has {list(tables[0])}; every "
                            f"file of a folder needs the same ones")
    return concat_columns(tables)


def _read_parquet(path: Path) -> Columns:
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    check_data_file(path)
    try:
        table = pq.read_table(path)
        return {name: _column(table.column(name).combine_chunks()) for name in table.column_names}
    except (OSError, ValueError, TypeError, pa.ArrowException) as e:
        raise FeedError(f"{path}: not a readable Parquet file of rows ({type(e).__name__}: {e})") from None


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


def check_output(path: str, data: str) -> None:
    """SerdeError unless ``path`` can take the results of the rows at ``data``: a name ending
    .parquet or .npz, in an existing folder, not a folder or another kind of file that is not a
    regular one, and neither DATA (its resolved path, or a link to it) nor inside DATA's folder.
    Called before a run, so that a run whose results cannot be written does not start."""
    _output_format(path)
    out, rows = Path(path), Path(data)
    if out.is_dir() or (out.exists() and not out.is_file()):
        raise SerdeError(f"{path}: not a regular file; give the name of a .parquet or .npz file to write")
    if not out.absolute().parent.is_dir():
        raise SerdeError(f"{path}: the folder {out.absolute().parent} does not exist")
    resolved, source = out.resolve(), rows.resolve()
    same = out.exists() and rows.exists() and os.path.samefile(out, rows)
    if same or resolved == source or (rows.is_dir() and source in resolved.parents):
        where = "is the input" if same or resolved == source else "is inside the input folder"
        raise SerdeError(f"{path}: the output {where} {data}; write the results elsewhere")


def write_rows(path: str, columns: Columns) -> None:
    """Write ``columns`` to ``path`` (.parquet or .npz), all of it or nothing, keeping the mode
    of a file it replaces.

    Raises:
        SerdeError: another suffix, a column .npz cannot hold, or a write that failed.
    """
    if _output_format(path) == ".npz":
        ragged = [name for name, values in columns.items() if values.dtype == object]
        if ragged:
            raise SerdeError(f"{path}: the columns {ragged} hold rows of different shapes, which .npz cannot store; "
                             f"write Parquet instead")
        write_file(path, npz_bytes(columns))
    else:
        write_file(path, _parquet_bytes(columns))


def _output_format(path: str) -> str:
    for suffix in (".npz", ".parquet"):
        if path.endswith(suffix):
            return suffix
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
