"""halfway's float16 programs saved as .pdmodel, as Paddle 3.3.1 checked them
(``scripts/check_paddle_float16.py`` records what paddle.inference made of the files in
``fixtures/paddle3/float16``): the files halfway writes today are those files, byte for byte."""

import json
from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway.executor import Executor
from halfway.float16 import float16_transpile
from halfway.ir.dtypes import DType
from halfway.ir.io import save_inference_model

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paddle3"
CHECK = json.loads((FIXTURES / "float16" / "paddle_check.json").read_text())
MODELS = sorted(CHECK["models"])


@pytest.mark.parametrize("name", MODELS)
def test_halfway_writes_the_files_paddle_checked(tmp_path, name):
    program, feeds, fetches, scope = halfway.load(FIXTURES / "legacy" / f"{name}.pdmodel")
    half, _ = float16_transpile(program, scope)
    save_inference_model(tmp_path / name, feeds, fetches, half, scope)
    for suffix in (".pdmodel", ".pdiparams"):
        assert (tmp_path / f"{name}{suffix}").read_bytes() == (FIXTURES / "float16" / f"{name}{suffix}").read_bytes()


@pytest.mark.parametrize("name", MODELS)
def test_paddle_made_a_predictor_with_halfways_feeds_and_fetches(name):
    _, feeds, fetches, _ = halfway.load(FIXTURES / "float16" / f"{name}.pdmodel")
    entry = CHECK["models"][name]
    assert CHECK["paddle"].startswith("3.")
    assert (entry["inputs"], entry["outputs"]) == (feeds, fetches)


@pytest.mark.parametrize("name", MODELS)
def test_the_float16_program_holds_float16_and_stays_close_to_paddle(name):
    program, feeds, fetches, scope = halfway.load(FIXTURES / "float16" / f"{name}.pdmodel")
    assert any(var.dtype is DType.float16 for var in program.persistable_vars())
    io = np.load(FIXTURES / "legacy" / f"{name}_io.npz")
    got = Executor().run(program, {n: io[n] for n in feeds}, fetches, scope)
    for fetch, value in zip(fetches, got):
        assert value.dtype == np.float32
        assert np.abs(value - io[fetch]).max() <= 2e-2 * np.abs(io[fetch]).max(), fetch
