"""Saves that survive a kill at any point, saves that overlap, and loads that check the files
belong together."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from halfway.ir import Program, SerdeError
from halfway.ir.io import load_inference_model, save_inference_model
from halfway.ir.scope import Scope

FORK = multiprocessing.get_context("fork")


def _model(width: int, seed: int) -> tuple[Program, Scope]:
    """y = x * w with w of ``width`` seeded values."""
    prog = Program()
    block = prog.global_block()
    block.create_var("x", shape=[width])
    block.create_var("w", shape=[width], persistable=True)
    block.create_var("y", shape=[width])
    block.append_op("elementwise_mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, {"axis": -1})
    return prog, Scope({"w": np.random.default_rng(seed).standard_normal(width).astype(np.float32)})


def _save(prefix: Path, width: int, seed: int) -> None:
    prog, scope = _model(width, seed)
    save_inference_model(prefix, ["x"], ["y"], prog, scope)


def _killed_save(prefix: Path, kill_at: int) -> None:
    """In a child: save the width-5 model, dying (no cleanup at all) at file move ``kill_at``."""
    real, moves = os.replace, []

    def replace(src, dst):
        moves.append(dst)
        if len(moves) == kill_at:
            os._exit(9)
        real(src, dst)

    os.replace = replace
    _save(prefix, 5, 1)
    os._exit(0)


def _run_child(target, *args) -> int:
    child = FORK.Process(target=target, args=args)
    child.start()
    child.join(60)
    return child.exitcode


def _hidden(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith("."))


@pytest.mark.parametrize("kill_at", [1, 2, 3])
def test_a_save_killed_at_any_move_leaves_the_old_model_or_a_clear_error(tmp_path, kill_at):
    prefix = tmp_path / "net"
    _save(prefix, 3, 0)
    old = load_inference_model(prefix)[3]["w"]
    assert _run_child(_killed_save, prefix, kill_at) == 9
    try:
        value = load_inference_model(prefix)[3]["w"]
    except SerdeError as e:
        assert "a save of this model was interrupted" in str(e) and "net.pdiparams" in str(e)
    else:
        np.testing.assert_array_equal(value, old)
    assert _hidden(tmp_path)  # the dead save's temporaries
    _save(prefix, 4, 2)
    assert load_inference_model(prefix)[3]["w"].shape == (4,)
    assert _hidden(tmp_path) == []


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


def test_overlapping_saves_to_one_path_leave_one_whole_model(tmp_path):
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
