"""Batch inference in one process: halfway.api.batch.Predictor and ``halfway batch`` without Ray,
against halfway's Executor run one row at a time and against numpy."""

from __future__ import annotations

import numpy as np
import pytest

from halfway.api.batch import Predictor
from halfway.api.batch.tables import read_rows, write_rows
from halfway.ir.errors import FeedError, SerdeError
from tests.support.batchdata import FEATURES, mlp_model, mlp_numpy, mlp_rows, reference_rows
from tests.support.clirun import halfway, one_line_error

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'halfway[ray]')")
pq = pytest.importorskip("pyarrow.parquet")

ROWS = 11


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return mlp_model(tmp_path_factory.mktemp("batch") / "mlp.onnx")


@pytest.fixture(scope="module")
def rows():
    return mlp_rows(ROWS, seed=3)


@pytest.mark.parametrize("fp16", [False, True], ids=["float32", "float16"])
def test_a_batch_gets_each_rows_outputs_and_keeps_its_ids(model, rows, fp16):
    predictor = Predictor(str(model), fp16=fp16)
    ids = np.arange(100, 100 + ROWS)
    out = predictor({"x": rows, "id": ids})
    assert sorted(out) == ["id", "y"]  # the input column is dropped, the ids pass through
    np.testing.assert_array_equal(out["id"], ids)
    np.testing.assert_allclose(out["y"], reference_rows(model, rows, fp16=fp16), rtol=2e-3 if fp16 else 1e-5,
                               atol=1e-3 if fp16 else 1e-6)
    np.testing.assert_allclose(out["y"], mlp_numpy(rows), rtol=1e-2 if fp16 else 1e-5, atol=1e-2 if fp16 else 1e-5)


def test_a_fixed_batch_dim_runs_in_chunks_with_the_last_one_padded(tmp_path, rows):
    predictor = Predictor(str(mlp_model(tmp_path / "fixed.onnx", batch=4)))
    out = predictor({"x": rows})  # 11 rows: chunks of 4, 4 and 3 (padded to 4)
    assert out["y"].shape == (ROWS, 4)
    np.testing.assert_allclose(out["y"], mlp_numpy(rows), rtol=1e-5, atol=1e-5)


def test_object_columns_of_equal_rows_stack(model, rows):
    column = np.empty(ROWS, dtype=object)
    for i, row in enumerate(rows):
        column[i] = row.astype(np.float64)  # floats convert to the feed's float32
    out = Predictor(str(model))({"x": column})
    np.testing.assert_allclose(out["y"], mlp_numpy(rows), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad, problem", [(np.zeros(FEATURES + 1, np.float32), "a row of shape [9]"),
                                          (np.array(["a"] * FEATURES), "a row of dtype <U1")],
                         ids=["shape", "dtype"])
def test_a_bad_row_is_named_by_its_place_and_ids(model, rows, bad, problem):
    column = np.empty(ROWS, dtype=object)
    for i, row in enumerate(rows):
        column[i] = row
    column[6] = bad
    with pytest.raises(FeedError) as caught:
        Predictor(str(model))({"x": column, "key": np.arange(ROWS) * 10})
    message = str(caught.value)
    assert message.startswith("row 6 of the batch (key=60), column 'x': " + problem), message
    assert "float32 [8] per row" in message


def test_missing_and_clashing_columns_are_errors_naming_them(model, rows):
    predictor = Predictor(str(model))
    with pytest.raises(FeedError, match=r"no column \['x'\].*'z'"):
        predictor({"z": rows})
    with pytest.raises(FeedError, match=r"outputs \['y'\] are named like columns"):
        predictor({"x": rows, "y": np.arange(ROWS)})


def test_parquet_tensor_and_list_columns_read_back(tmp_path, rows):
    path = tmp_path / "rows.parquet"
    tensor = pa.FixedShapeTensorArray.from_numpy_ndarray(rows)
    nested = pa.array([r.reshape(2, 4).tolist() for r in rows])
    ragged = pa.array([list(range(i % 3 + 1)) for i in range(ROWS)])
    pq.write_table(pa.table({"t": tensor, "n": nested, "r": ragged, "name": [f"r{i}" for i in range(ROWS)]}), path)
    columns = read_rows(str(path), ["t"])
    np.testing.assert_array_equal(columns["t"], rows)
    np.testing.assert_array_equal(columns["n"], rows.reshape(ROWS, 2, 4).astype(np.float64))
    assert columns["r"].dtype == object and [list(r) for r in columns["r"]] == [list(range(i % 3 + 1)) for i in range(ROWS)]
    assert columns["name"].tolist() == [f"r{i}" for i in range(ROWS)]
    out = tmp_path / "out.parquet"
    write_rows(str(out), columns)
    again = read_rows(str(out), ["t"])
    for name in ("t", "n", "name"):
        np.testing.assert_array_equal(again[name], columns[name])


def test_an_output_of_another_format_is_refused(tmp_path, rows):
    with pytest.raises(SerdeError, match="out.csv: results are written as Parquet or .npz"):
        write_rows(str(tmp_path / "out.csv"), {"x": rows})


def _npy_folder(folder, rows):
    folder.mkdir()
    for i, row in enumerate(rows):
        np.save(folder / f"row{i:02d}.npy", row)
    return folder


@pytest.mark.parametrize("suffix", [".parquet", ".npz"])
def test_the_command_writes_every_rows_outputs_in_order(tmp_path, model, rows, suffix):
    data = _npy_folder(tmp_path / "rows", rows)
    out = tmp_path / f"out{suffix}"
    done = halfway("batch", model, "--input", data, "--output", out, "--batch-size", "4")
    assert done.returncode == 0, done.stderr
    columns = read_rows(str(out), ["y"])
    assert columns["file"].tolist() == [f"row{i:02d}.npy" for i in range(ROWS)]
    np.testing.assert_array_equal(columns["index"], np.arange(ROWS))
    np.testing.assert_allclose(columns["y"], reference_rows(model, rows), rtol=1e-5, atol=1e-6)


def test_the_command_reads_an_npz_of_columns(tmp_path, model, rows):
    np.savez(tmp_path / "rows.npz", x=rows, id=np.arange(ROWS) + 5)
    done = halfway("batch", model, "--input", tmp_path / "rows.npz", "--output", tmp_path / "out.npz", "--fp16")
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_array_equal(out["id"], np.arange(ROWS) + 5)
        np.testing.assert_allclose(out["y"], reference_rows(model, rows, fp16=True), rtol=2e-3, atol=1e-3)


def test_a_bad_row_fails_the_command_and_writes_nothing(tmp_path, model, rows):
    data = _npy_folder(tmp_path / "rows", rows)
    np.save(data / "row07.npy", rows[7, :5])
    done = halfway("batch", model, "--input", data, "--output", tmp_path / "out.parquet", "--batch-size", "4")
    one_line_error(done, "index=7, file=row07.npy", "column 'x'", "shape [5]")
    assert list(tmp_path.iterdir()) == [data]


def test_ray_options_without_ray_are_a_usage_error(tmp_path, model):
    done = halfway("batch", model, "--input", tmp_path, "--output", tmp_path / "o.npz", "--workers", "2")
    assert done.returncode == 2 and "give --ray too" in done.stderr
