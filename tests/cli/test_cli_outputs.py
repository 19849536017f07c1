"""One rule for the files commands write (``halfway.cli.commands.outputs``): the name says the
format, the folder must exist, and files take the user's umask; an .onnx save writes its
``.sha256`` manifest only when asked."""

from __future__ import annotations

import hashlib
import os
import stat

import numpy as np
import onnx
import pytest

from tests.support.batchdata import mlp_model, mlp_rows
from tests.support.clirun import DEMO_ONNX, halfway, one_line_error

WRITES = {"run": ".npz", "graph": ".html", "transpile": ".onnx", "batch": ".npz"}
"""Each command writing a file, and an extension it writes."""


@pytest.fixture
def command(tmp_path):
    """``command(name, out)``: the arguments of ``name`` writing ``out``."""
    model = mlp_model(tmp_path / "mlp.onnx")
    np.savez(tmp_path / "rows.npz", x=mlp_rows(6, seed=0))

    def arguments(name, out):
        if name == "batch":
            return ["batch", model, "--input", tmp_path / "rows.npz", "--output", out]
        return [name, DEMO_ONNX, "-o", out]

    return arguments


INPUTS = ["mlp.onnx", "rows.npz"]


@pytest.mark.parametrize("typo", [".onxx", ".npy", ".svgg", ".txt"])
def test_an_extension_a_command_does_not_write_is_a_usage_error(tmp_path, command, typo):
    for name in WRITES:
        done = halfway(*command(name, tmp_path / f"out{typo}"))
        one_line_error(done, "is not one halfway writes; give a name ending")
        assert done.returncode == 2, (name, done.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == INPUTS  # nothing written: no out.onxx.pdmodel


def test_a_missing_folder_is_an_error_for_every_command(tmp_path, command):
    for name, suffix in WRITES.items():
        done = halfway(*command(name, tmp_path / "missing" / f"out{suffix}"))
        one_line_error(done, "does not exist")
        assert done.returncode == 1, (name, done.stderr)
    one_line_error(halfway("demo", "--out", tmp_path / "missing" / "demo"), "--out", "does not exist")
    assert sorted(p.name for p in tmp_path.iterdir()) == INPUTS


def test_files_take_the_users_umask(tmp_path, command):
    old = os.umask(0o022)
    try:
        for name, suffix in WRITES.items():
            assert halfway(*command(name, tmp_path / f"{name}{suffix}")).returncode == 0, name
        assert halfway("transpile", DEMO_ONNX, "-o", tmp_path / "paddle").returncode == 0
    finally:
        os.umask(old)
    written = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir() if p.name not in INPUTS}
    assert set(written) >= {"run.npz", "graph.html", "transpile.onnx", "batch.npz", "paddle.pdmodel",
                            "paddle.pdiparams"}
    assert written == dict.fromkeys(written, 0o644)


def test_an_onnx_manifest_only_when_asked(tmp_path):
    model = tmp_path / "m.onnx"
    assert halfway("transpile", DEMO_ONNX, "-o", model, "--onnx-manifest").returncode == 0
    manifest = tmp_path / "m.onnx.sha256"
    assert manifest.read_text() == f"{hashlib.sha256(model.read_bytes()).hexdigest()}  m.onnx\n"
    done = halfway("transpile", DEMO_ONNX, "-o", model, "--fp16")
    assert done.returncode == 0 and f"wrote {model}\n" in done.stdout
    assert not manifest.exists()  # it named the old bytes
    onnx.checker.check_model(onnx.load(model))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
