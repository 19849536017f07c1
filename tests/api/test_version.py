"""``halfway.__version__`` and ``halfway --version``: the installed distribution's version, else
the source tree's."""

from __future__ import annotations

import importlib.metadata
import tomllib

import halfway
from halfway.api import version as module
from tests.support.clirun import ROOT
from tests.support.clirun import halfway as cli


def test_the_version_is_the_installed_distributions():
    installed = importlib.metadata.version("halfway")
    assert halfway.__version__ == installed
    done = cli("--version")
    assert done.returncode == 0 and done.stdout == f"halfway {installed}\n"


def test_a_source_tree_nobody_installed_reads_its_pyproject(monkeypatch, tmp_path):
    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert module.version() == declared
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert module._source_version(tmp_path / "pyproject.toml") == module.UNKNOWN
    assert module._source_version(tmp_path / "absent.toml") == module.UNKNOWN
