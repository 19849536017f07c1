"""A save killed at any step, a second save killed at any step after it, and a failing save
killed while it puts the old files back: the path always loads one whole model, and the next
complete save leaves no temporary or backup behind."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest

from halfway.ir import SerdeError
from halfway.ir.io import load_inference_model, save_inference_model
from tests.support.savemodels import scaled_model

FORK = multiprocessing.get_context("fork")
STEPS = ("replace", "unlink", "link")
"""The calls by which a save changes a folder; a kill lands between two of them."""


def _save(prefix: Path, model: tuple[int, int]) -> None:
    prog, scope = scaled_model(*model)
    save_inference_model(prefix, ["x"], ["y"], prog, scope)


def _weights(model: tuple[int, int]) -> np.ndarray:
    return scaled_model(*model)[1]["w"]


def _child(prefix: Path, model: tuple[int, int], kill_at: int, fail_at: int) -> None:
    """Save ``model``, failing (ENOSPC) at step ``fail_at`` and dying without any cleanup at step
    ``kill_at`` (0: never); exit 3 when the save ended before that step."""
    calls = [0]

    def step(real):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] == kill_at:
                os._exit(9)
            if calls[0] == fail_at:
                raise OSError(28, "No space left on device")
            return real(*args, **kwargs)
        return call

    for name in STEPS:
        setattr(os, name, step(getattr(os, name)))
    try:
        _save(prefix, model)
    except SerdeError:  # the failure asked for
        pass
    os._exit(3)


def _killed(prefix: Path, model: tuple[int, int], kill_at: int, fail_at: int = 0) -> bool:
    """Whether the save was killed (False: it ended before step ``kill_at``)."""
    child = FORK.Process(target=_child, args=(prefix, model, kill_at, fail_at))
    child.start()
    child.join(60)
    assert child.exitcode in (3, 9)
    return child.exitcode == 9


def _loads_one_of(prefix: Path, models: list[tuple[int, int]]) -> None:
    value = load_inference_model(prefix)[3]["w"]
    assert any(value.shape == _weights(m).shape and np.array_equal(value, _weights(m)) for m in models), value


def _hidden(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.startswith(".") and not name.endswith(".sha256"))


OLD, WIDER, REWEIGHED, THIRD = (3, 0), (5, 1), (3, 7), (4, 2)
"""The first model, one of another program, one of the same program with other weights, a third."""


@pytest.mark.parametrize("new", [WIDER, REWEIGHED], ids=["new program", "new weights"])
def test_every_kill_of_two_saves_in_a_row_leaves_a_wholescaled_model(tmp_path, new):
    kill_at = 1
    while True:
        folder = tmp_path / f"k{kill_at}"
        folder.mkdir()
        prefix = folder / "net"
        _save(prefix, OLD)
        if not _killed(prefix, new, kill_at):
            break
        _loads_one_of(prefix, [OLD, new])
        second = 1
        while _killed(prefix, THIRD, second):
            _loads_one_of(prefix, [OLD, new, THIRD])
            second += 1
        _loads_one_of(prefix, [THIRD])
        _save(prefix, OLD)
        _loads_one_of(prefix, [OLD])
        assert _hidden(folder) == []
        kill_at += 1
    assert kill_at > 6  # the save has that many steps to kill at


@pytest.mark.parametrize("fail_at", [2, 4, 6])
def test_a_failed_save_killed_while_putting_the_old_files_back_leaves_a_wholescaled_model(tmp_path, fail_at):
    kill_at = fail_at + 1
    while True:
        folder = tmp_path / f"k{kill_at}"
        folder.mkdir()
        prefix = folder / "net"
        _save(prefix, OLD)
        if not _killed(prefix, WIDER, kill_at, fail_at):
            break
        _loads_one_of(prefix, [OLD, WIDER])
        _save(prefix, THIRD)
        _loads_one_of(prefix, [THIRD])
        assert _hidden(folder) == []
        kill_at += 1
    _loads_one_of(prefix, [OLD])


def test_a_killed_save_that_cannot_be_finished_is_an_error_and_leaves_a_whole_model(tmp_path, monkeypatch):
    prefix = tmp_path / "net"
    _save(prefix, OLD)
    assert _killed(prefix, WIDER, 5)  # the manifest and the program moved: the parameters wait in a temporary

    def refuse(src, dst):
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(SerdeError, match=r"net\.pdmodel: cannot finish the save of it that was killed \(Permission "
                                         r"denied\); nothing new was written"):
        _save(prefix, THIRD)
    monkeypatch.undo()
    _loads_one_of(prefix, [WIDER])
