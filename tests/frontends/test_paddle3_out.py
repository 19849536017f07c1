"""What Paddle 3.3.1 made of the .pdmodel files halfway writes (``scripts/check_paddle_reads_halfway.py``
recorded it beside the files in ``fixtures/paddle3/float16`` and ``fixtures/paddle3/from_pir``):
halfway still writes those files byte for byte, Paddle made a predictor of each, and ran the
programs halfway imported from PIR to Paddle's own outputs."""

import json
from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway.api.float16 import float16_transpile
from halfway.executor import Executor
from halfway.ir.dtypes import DType
from halfway.ir.io import save_inference_model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle3"
CHECKS = {folder: json.loads((FIXTURES / folder / "paddle_check.json").read_text()) for folder in ("float16", "from_pir")}
CASES = [(folder, name) for folder, check in CHECKS.items() for name in sorted(check["models"])]


def _written_now(folder: str, name: str):
    """The program halfway makes today of the model the fixture in ``folder`` was made from."""
    if folder == "from_pir":
        return halfway.load(FIXTURES / "pir" / name)
    program, feeds, fetches, scope = halfway.load(FIXTURES / "legacy" / f"{name}.pdmodel")
    return float16_transpile(program, scope)[0], feeds, fetches, scope


@pytest.mark.parametrize(("folder", "name"), CASES)
def test_halfway_writes_the_files_paddle_checked(tmp_path, folder, name):
    program, feeds, fetches, scope = _written_now(folder, name)
    save_inference_model(tmp_path / name, feeds, fetches, program, scope)
    for suffix in (".pdmodel", ".pdiparams"):
        assert (tmp_path / f"{name}{suffix}").read_bytes() == (FIXTURES / folder / f"{name}{suffix}").read_bytes()


@pytest.mark.parametrize(("folder", "name"), CASES)
def test_paddle_made_a_predictor_with_halfways_feeds_and_fetches(folder, name):
    _, feeds, fetches, _ = halfway.load(FIXTURES / folder / f"{name}.pdmodel")
    entry = CHECKS[folder]["models"][name]
    assert CHECKS[folder]["paddle"].startswith("3.")
    assert (entry["inputs"], entry["outputs"]) == (feeds, fetches)


@pytest.mark.parametrize("name", sorted(CHECKS["from_pir"]["models"]))
def test_paddle_ran_pir_imports_to_its_own_outputs(name):
    errors = CHECKS["from_pir"]["models"][name]["run"]
    _, _, fetches, _ = halfway.load(FIXTURES / "from_pir" / f"{name}.pdmodel")
    assert sorted(errors) == sorted(fetches)
    assert max(errors.values()) <= 1e-4


@pytest.mark.parametrize("name", sorted(CHECKS["float16"]["models"]))
def test_the_float16_program_holds_float16_and_stays_close_to_paddle(name):
    program, feeds, fetches, scope = halfway.load(FIXTURES / "float16" / f"{name}.pdmodel")
    assert any(var.dtype is DType.float16 for var in program.persistable_vars())
    io = np.load(FIXTURES / "legacy" / f"{name}_io.npz")
    got = Executor().run(program, {n: io[n] for n in feeds}, fetches, scope)
    for fetch, value in zip(fetches, got):
        assert value.dtype == np.float32
        assert np.abs(value - io[fetch]).max() <= 2e-2 * np.abs(io[fetch]).max(), fetch
