"""``halfway batch`` never harms the user's files: an output that is the input is refused, an
existing output keeps its mode, the temporaries of a killed run go with the next run, FIFOs and
folders named like files of rows are refused without waiting, and malformed files of rows are
one error naming the file (their sizes checked before anything is allocated)."""

from __future__ import annotations

import io
import multiprocessing
import os
import stat
import zipfile
from pathlib import Path

import numpy as np
import pytest

from halfway.api.batch.tables import check_output, read_rows, write_rows
from halfway.ir.errors import HalfwayError, SerdeError
from tests.support.batchdata import mlp_model, mlp_rows
from tests.support.clirun import halfway, one_line_error
from tests.support.watchdog import watchdog

FORK = multiprocessing.get_context("fork")


def _refused(path: Path, *fragments: str) -> str:
    with watchdog(10), pytest.raises(HalfwayError) as info:
        read_rows(str(path), ["x"])
    message = str(info.value)
    for fragment in (str(path), *fragments):
        assert fragment in message, message
    return message


# -- the output -------------------------------------------------------------------------------------
def test_an_output_that_is_the_input_is_refused_and_the_rows_are_kept(tmp_path):
    model = mlp_model(tmp_path / "mlp.onnx")
    data = tmp_path / "rows.npz"
    np.savez(data, x=mlp_rows(3, seed=1))
    before = data.read_bytes()
    done = halfway("batch", model, "--input", data, "--output", data)
    one_line_error(done, "rows.npz: the output is the input")
    assert data.read_bytes() == before


@pytest.mark.parametrize("output, data", [("link.npz", "rows.npz"), ("hard.npz", "rows.npz"),
                                          ("rows/../rows.npz", "rows.npz"), ("rows/out.npz", "rows")])
def test_outputs_resolving_to_the_input_or_into_its_folder_are_refused(tmp_path, output, data):
    (tmp_path / "rows").mkdir()
    np.savez(tmp_path / "rows.npz", x=np.zeros((1, 8), np.float32))
    (tmp_path / "link.npz").symlink_to(tmp_path / "rows.npz")
    os.link(tmp_path / "rows.npz", tmp_path / "hard.npz")
    with pytest.raises(SerdeError, match="the output is"):
        check_output(str(tmp_path / output), str(tmp_path / data))


def test_an_output_that_is_a_fifo_or_a_folder_is_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe.npz")
    (tmp_path / "dir.npz").mkdir()
    for name in ("pipe.npz", "dir.npz"):
        with watchdog(10), pytest.raises(SerdeError, match="not a regular file"):
            check_output(str(tmp_path / name), str(tmp_path / "rows.npz"))
        with watchdog(10), pytest.raises(SerdeError):
            write_rows(str(tmp_path / name), {"y": np.zeros(2)})


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o664])
def test_an_existing_outputs_mode_is_kept(tmp_path, mode):
    out = tmp_path / "out.npz"
    out.write_bytes(b"old results")
    out.chmod(mode)
    write_rows(str(out), {"y": np.arange(3)})
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert read_rows(str(out), ["y"])["y"].tolist() == [0, 1, 2]


def _killed_write(out: Path) -> None:
    """In a child: write results, dying (no cleanup) as the temporary is about to move into place."""
    os.replace = lambda *args: os._exit(9)
    write_rows(str(out), {"y": np.zeros((1000, 100))})
    os._exit(0)


def test_the_next_run_removes_the_temporary_of_a_killed_one(tmp_path):
    out = tmp_path / "out.npz"
    child = FORK.Process(target=_killed_write, args=(out,))
    child.start()
    child.join(60)
    assert child.exitcode == 9 and len(os.listdir(tmp_path)) == 1  # its temporary
    write_rows(str(out), {"y": np.arange(3)})
    assert os.listdir(tmp_path) == ["out.npz"]


# -- the rows ---------------------------------------------------------------------------------------
def test_a_fifo_among_the_rows_is_refused_without_waiting(tmp_path):
    np.save(tmp_path / "row0.npy", np.zeros(8, np.float32))
    os.mkfifo(tmp_path / "row1.npy")
    _refused(tmp_path, "row1.npy: not a regular file")


def test_a_fifo_given_as_the_rows_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "rows.npz")
    _refused(tmp_path / "rows.npz", "not a format halfway batch reads")


def _zip(path: Path, members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _header_claiming(shape: tuple[int, ...]) -> bytes:
    """An .npy header for a float32 array of ``shape``, followed by 16 bytes of data."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return buffer.getvalue() + bytes(16)


def test_an_npz_member_that_is_not_an_array_is_named(tmp_path):
    path = _zip(tmp_path / "rows.npz", {"x.npy": _npy(np.zeros((2, 8), np.float32)), "notes.txt": b"taken on..."})
    _refused(path, "member 'notes.txt' is not a .npy array")


@pytest.mark.parametrize("container", ["npy", "npz", "deflated npz"])
def test_a_header_claiming_more_rows_than_the_file_holds_is_refused_before_allocating(tmp_path, container):
    data = _header_claiming((10**12, 8))
    if container == "npy":
        (tmp_path / "rows").mkdir()
        path = tmp_path / "rows" / "row0.npy"
        path.write_bytes(data)
    else:
        compression = zipfile.ZIP_DEFLATED if container == "deflated npz" else zipfile.ZIP_STORED
        path = _zip(tmp_path / "rows.npz", {"x.npy": data}, compression)
    _refused(path)


def test_a_corrupt_deflate_stream_is_named(tmp_path):
    path = tmp_path / "rows.npz"
    np.savez_compressed(path, x=np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32))
    data = bytearray(path.read_bytes())
    for i in range(80, 400, 7):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    _refused(path)


def test_a_scalar_column_is_named(tmp_path):
    path = tmp_path / "rows.npz"
    np.savez(path, x=np.zeros((2, 8), np.float32), scale=np.float32(2))
    _refused(path, "['scale'] are scalars")


def test_parquet_files_with_other_columns_are_named(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"x": [1.0, 2.0]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": [3.0], "id": [7]}), tmp_path / "b.parquet")
    _refused(tmp_path, "b.parquet: has the columns ['x', 'id']")


def test_a_folder_named_like_a_parquet_file_is_refused(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"x": [1.0, 2.0]}), tmp_path / "a.parquet")
    (tmp_path / "b.parquet").mkdir()
    pq.write_table(pa.table({"x": [3.0]}), tmp_path / "b.parquet" / "part0.parquet")
    _refused(tmp_path, "b.parquet: not a regular file")


def test_a_file_of_rows_over_the_size_limit_is_refused_before_reading(tmp_path, monkeypatch):
    path = tmp_path / "rows.npz"
    np.savez(path, x=np.zeros((64, 8), np.float32))
    monkeypatch.setenv("HALFWAY_MAX_MODEL_BYTES", "1000")
    _refused(path, "more than the limit of 1,000", "HALFWAY_MAX_MODEL_BYTES")


def test_a_malformed_file_of_rows_is_one_line_from_the_command(tmp_path):
    model = mlp_model(tmp_path / "mlp.onnx")
    path = _zip(tmp_path / "rows.npz", {"x.npy": _header_claiming((10**12, 8))})
    done = halfway("batch", model, "--input", path, "--output", tmp_path / "out.npz")
    one_line_error(done, "rows.npz: member 'x.npy'")
    assert sorted(os.listdir(tmp_path)) == ["mlp.onnx", "rows.npz"]
