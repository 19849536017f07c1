"""halfway.api.ray on a real local Ray cluster (two CPUs): each row's outputs equal halfway's
Executor run on that row alone, each row comes out exactly once, also when an actor is killed
in the middle of the run, and a bad row fails with the error naming it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.batchdata import mlp_model, mlp_rows, reference_rows
from tests.support.clirun import halfway

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'halfway[ray]')")
hray = pytest.importorskip("halfway.api.ray")

ROWS = 24


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return mlp_model(tmp_path_factory.mktemp("ray") / "mlp.onnx")


@pytest.fixture
def rows():
    return mlp_rows(ROWS, seed=5)


def _dataset(rows):
    return ray.data.from_items([{"id": i, "x": row} for i, row in enumerate(rows)], override_num_blocks=6)


def _by_id(dataset) -> tuple[np.ndarray, np.ndarray]:
    out = [row for row in dataset.take_all()]
    ids = np.array([row["id"] for row in out])
    assert sorted(ids.tolist()) == list(range(len(ids))), "each row exactly once"
    return ids, np.stack([row["y"] for row in out])[np.argsort(ids)]


@pytest.mark.parametrize("fp16", [False, True], ids=["float32", "float16"])
def test_two_actors_give_each_row_its_outputs_once(model, rows, fp16):
    ids, outputs = _by_id(hray.predict(_dataset(rows), str(model), fp16=fp16, batch_size=5, concurrency=2))
    assert len(ids) == ROWS
    np.testing.assert_allclose(outputs, reference_rows(model, rows, fp16=fp16), rtol=2e-3 if fp16 else 1e-5,
                               atol=1e-3 if fp16 else 1e-6)


def test_a_killed_actor_is_replaced_and_each_row_still_comes_once(model, rows, tmp_path):
    marker = tmp_path / "killed"

    class KilledOnce(hray.Predictor):
        """Kills its own actor on its second batch, once in the whole run."""

        calls = 0

        def __call__(self, batch):
            KilledOnce.calls += 1
            if KilledOnce.calls == 2 and not marker.exists():
                marker.touch()
                ray.kill(ray.get_runtime_context().current_actor, no_restart=False)
            return super().__call__(batch)

    dataset = _dataset(rows).map_batches(KilledOnce, fn_constructor_args=(str(model),), batch_size=3,
                                         batch_format="numpy", compute=hray.actor_pool(2))
    ids, outputs = _by_id(dataset)
    assert marker.exists() and len(ids) == ROWS
    np.testing.assert_allclose(outputs, reference_rows(model, rows), rtol=1e-5, atol=1e-6)


def test_a_bad_row_fails_with_the_error_naming_it(model, rows):
    items = [{"id": i, "x": row} for i, row in enumerate(rows)]
    items[9]["x"] = rows[9, :3]
    with pytest.raises(ray.exceptions.RayError) as caught:
        hray.predict(ray.data.from_items(items), str(model), batch_size=4, concurrency=1).take_all()
    error = hray.cause(caught.value)
    assert type(error).__name__ == "FeedError"
    assert "(id=9), column 'x': a row of shape [3]; the model expects float32 [8] per row" in str(error)


def test_the_command_joins_the_running_cluster(model, rows, tmp_path):
    np.savez(tmp_path / "rows.npz", x=rows)
    address = ray.get_runtime_context().gcs_address
    out = tmp_path / "out.npz"
    done = halfway("batch", model, "--input", tmp_path / "rows.npz", "--output", out, "--ray", address,
                   "--workers", "1", "--batch-size", "7")
    assert done.returncode == 0, done.stderr
    with np.load(out) as result:
        np.testing.assert_array_equal(result["index"], np.arange(ROWS))
        np.testing.assert_allclose(result["y"], reference_rows(model, rows), rtol=1e-5, atol=1e-6)
    bad = {"x": np.zeros((ROWS, 5), np.float32)}
    np.savez(tmp_path / "bad.npz", **bad)
    done = halfway("batch", model, "--input", tmp_path / "bad.npz", "--output", tmp_path / "bad_out.npz", "--ray",
                   address, "--workers", "1")
    # Ray logs its own lines above; halfway's error is the last one
    assert done.returncode == 1 and "Traceback" not in done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("halfway: error: row 0 of the batch (index=") and "column 'x': a row of shape [5]" in last
    assert not (tmp_path / "bad_out.npz").exists()
