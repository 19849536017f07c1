"""``halfway run``: outputs against Paddle's own, inputs from files, and bad input specs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.clirun import RESNET_TINY, halfway, halfway_json, one_line_error

IO = np.load(RESNET_TINY.with_name("resnet_tiny_io.npz"))
FETCH = str(IO["__fetch_names__"][0])


def test_outputs_match_paddle_and_are_saved(tmp_path):
    np.save(tmp_path / "image.npy", IO["image"])
    out = tmp_path / "out.npz"
    done = halfway("run", RESNET_TINY, "--input", f"image={tmp_path / 'image.npy'}", "-o", out)
    assert done.returncode == 0, done.stderr
    saved = np.load(out)
    assert list(saved.files) == [FETCH]
    np.testing.assert_allclose(saved[FETCH], IO[FETCH], rtol=1e-5, atol=1e-6)
    assert FETCH in done.stdout and f"saved 1 output(s) to {out}" in done.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_json_describes_inputs_and_outputs(tmp_path):
    np.savez(tmp_path / "inputs.npz", image=IO["image"].astype(np.float64))  # float64 converts when asked
    one_line_error(halfway("run", RESNET_TINY, "--input", tmp_path / "inputs.npz"),
                   "input 'image' is float64, the model takes float32", "--cast-inputs")
    done = halfway("run", RESNET_TINY, "--input", tmp_path / "inputs.npz", "--cast-inputs", "--json")
    assert done.returncode == 0 and "input 'image': float64 converted to float32 (--cast-inputs)" in done.stderr
    facts = json.loads(done.stdout)
    expected = IO[FETCH]
    stats = facts["outputs"][FETCH]
    assert stats["shape"] == list(expected.shape) and stats["dtype"] == "float32"
    assert stats["argmax"] == [int(expected.argmax())]
    assert stats["max"] == pytest.approx(float(expected.max()), rel=1e-5)
    assert stats["mean"] == pytest.approx(float(expected.mean()), rel=1e-5)
    assert facts["inputs"]["image"]["dtype"] == "float32"


def test_random_inputs_are_seeded():
    first = halfway_json("run", RESNET_TINY, "--random", "--seed", "3")["outputs"][FETCH]
    again = halfway_json("run", RESNET_TINY, "--seed", "3")["outputs"][FETCH]
    other = halfway_json("run", RESNET_TINY, "--random", "--seed", "4")["outputs"][FETCH]
    assert first == again and first != other
    inputs = halfway_json("run", RESNET_TINY, "--seed", "3")["inputs"]["image"]
    image = np.random.default_rng(3).random(IO["image"].shape).astype(np.float32)  # floats in [0, 1)
    assert inputs["mean"] == pytest.approx(float(image.mean()), rel=1e-6)
    assert 0 <= inputs["min"] and inputs["max"] < 1


def _bad_inputs(tmp_path):
    np.save(tmp_path / "wrong_shape.npy", np.zeros((1, 3, 8, 8), np.float32))
    np.save(tmp_path / "ints.npy", np.zeros(IO["image"].shape, np.int64))
    (tmp_path / "garbage.npy").write_bytes(b"not numpy at all")
    (tmp_path / "garbage.npz").write_bytes(b"not a zip either")
    return [
        (["foo"], 2, "expected name=file.npy"),
        (["image="], 2, "expected name=file.npy"),
        ([f"image={tmp_path / 'missing.npy'}"], 1, "missing.npy"),
        ([f"nosuch={tmp_path / 'wrong_shape.npy'}"], 1, "'nosuch'"),
        ([f"image={tmp_path / 'wrong_shape.npy'}"], 1, "shape"),
        ([f"image={tmp_path / 'ints.npy'}"], 1, "int64"),
        ([f"image={tmp_path / 'garbage.npy'}"], 1, "garbage.npy"),
        ([str(tmp_path / "garbage.npz")], 1, "garbage.npz"),
    ]


def test_bad_input_specs_are_one_line_and_save_nothing(tmp_path):
    out = tmp_path / "out.npz"
    for specs, code, fragment in _bad_inputs(tmp_path):
        args = [a for spec in specs for a in ("--input", spec)]
        done = halfway("run", RESNET_TINY, *args, "-o", out)
        one_line_error(done, fragment)
        assert done.returncode == code, (specs, done.stderr)
        assert not out.exists()


def test_bad_places_and_outputs(tmp_path):
    one_line_error(halfway("run", RESNET_TINY, "--place", "tpu"), "'tpu'")
    assert halfway("run", RESNET_TINY, "--place", "opencl:x").returncode == 2
    one_line_error(halfway("run", RESNET_TINY, "-o", tmp_path / "out.txt"), ".npz")
    one_line_error(halfway("run", RESNET_TINY, "-o", tmp_path / "no" / "dir" / "out.npz"), "does not exist")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.opencl
def test_opencl_runs_match_paddle(tmp_path):
    np.save(tmp_path / "image.npy", IO["image"])
    out = tmp_path / "out.npz"
    done = halfway("run", RESNET_TINY, "--place", "opencl:0", "--input", f"image={tmp_path / 'image.npy'}", "-o", out)
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(out)[FETCH], IO[FETCH], rtol=1e-4, atol=1e-6)
    one_line_error(halfway("run", RESNET_TINY, "--place", "opencl:99"), "out of range")


@pytest.mark.opencl
def test_tune_reaches_the_opencl_place(tmp_path):
    from halfway.api.places import parse_place
    from halfway.cli.commands.places import parse_places

    assert parse_place("opencl:0", tune=True).tune and not parse_place("opencl:0").tune
    assert [getattr(p, "tune", None) for p in parse_places(["cpu", "opencl:0"], tune=True)] == [None, True]
    out = tmp_path / "out.npz"
    done = halfway("run", RESNET_TINY, "--place", "opencl:0", "--tune", "--seed", "1", "-o", out,
                   env={"HALFWAY_CACHE_DIR": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    want = halfway_json("run", RESNET_TINY, "--seed", "1")["outputs"][FETCH]
    assert float(np.load(out)[FETCH].max()) == pytest.approx(want["max"], rel=1e-4)
