"""Saves that overlap, and loads that check the files belong together (saves killed at any
step: test_save_kills)."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from halfway.ir import Program, SerdeError
from halfway.ir.io import load_inference_model, save_inference_model
from halfway.ir.scope import Scope
from tests.support.savemodels import scaled_model

FORK = multiprocessing.get_context("fork")


def _save(prefix: Path, width: int, seed: int) -> None:
    prog, scope = scaled_model(width, seed)
    save_inference_model(prefix, ["x"], ["y"], prog, scope)


def _hidden(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


def test_parameters_of_another_save_are_reported(tmp_path):
    _save(tmp_path / "a", 3, 0)
    _save(tmp_path / "b", 3, 1)
    (tmp_path / "b.pdiparams").replace(tmp_path / "a.pdiparams")
    with pytest.raises(SerdeError, match=r"a\.pdiparams: does not belong to the program beside it"):
        load_inference_model(tmp_path / "a")


def test_files_written_over_a_save_by_another_tool_load(tmp_path):
    _save(tmp_path / "a", 3, 0)
    _save(tmp_path / "b", 4, 1)
    for suffix in (".pdmodel", ".pdiparams"):
        (tmp_path / f"b{suffix}").replace(tmp_path / f"a{suffix}")
    assert load_inference_model(tmp_path / "a")[3]["w"].shape == (4,)


def test_a_model_without_parameters_saved_over_one_with_them(tmp_path):
    prefix = tmp_path / "net"
    _save(prefix, 3, 0)
    prog = Program()
    block = prog.global_block()
    block.create_var("x", shape=[3])
    block.create_var("y", shape=[3])
    block.append_op("relu", {"X": ["x"]}, {"Out": ["y"]})
    save_inference_model(prefix, ["x"], ["y"], prog, Scope())
    assert not (tmp_path / "net.pdiparams").exists()
    _, feeds, fetches, scope = load_inference_model(prefix)
    assert (feeds, fetches, len(scope)) == (["x"], ["y"], 0)


def _save_many(prefix: Path, width: int, times: int) -> None:
    for i in range(times):
        _save(prefix, width, i)


def test_overlapping_saves_to_one_path_leave_one_wholescaled_model(tmp_path):
    prefix = tmp_path / "net"
    children = [FORK.Process(target=_save_many, args=(prefix, width, 30)) for width in (3, 700)]
    for child in children:
        child.start()
    for child in children:
        child.join(120)
        assert child.exitcode == 0
    value = load_inference_model(prefix)[3]["w"]
    assert value.shape in ((3,), (700,))
    assert _hidden(tmp_path) == []
