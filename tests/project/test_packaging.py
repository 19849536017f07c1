"""The package as installed: the wheel setuptools builds from ``pyproject.toml`` ships every package
folder and data file of the source tree, and ``python -m halfway`` is the ``halfway`` command."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support.clirun import ROOT, halfway

SOURCE_IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache")
DATA = {"halfway.api": ["data/*.onnx"], "halfway.kernels.opencl": ["cl/*"], "halfway.cli.report": ["assets/*"],
        "halfway.proto": ["*.proto"]}
"""Package data, by package: the demo models, the OpenCL sources and the graph page's script,
style and frame, which the package needs at run time, and the wire format's schema."""
OUTSIDE = {"tests", "benchmarks", "scripts", "examples", "docs", "build", "dist"}
"""The root's folders that are not part of the package."""


def listed_packages() -> list[str]:
    """``packages`` of ``[tool.setuptools]``, each a folder under the root (the package ``halfway``)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"halfway": "."}
    return config["packages"]


def folder_of(package: str) -> Path:
    return ROOT.joinpath(*package.split(".")[1:])


def source_files() -> set[str]:
    """Every module of every listed package, and every data file, as paths inside the wheel."""
    expected = set()
    for package in listed_packages():
        inside = Path(*package.split("."))
        expected |= {(inside / module.name).as_posix() for module in folder_of(package).glob("*.py")}
    for package, patterns in DATA.items():
        folder = folder_of(package)
        files = [f for pattern in patterns for f in folder.glob(pattern) if f.is_file()]
        assert files, f"no data file of {package} matches {patterns}"
        expected |= {(Path(*package.split(".")) / f.relative_to(folder)).as_posix() for f in files}
    return expected


def test_every_package_folder_is_listed() -> None:
    folders = {init.parent for init in ROOT.rglob("__init__.py")
               if not ({".venv", ".git"} | OUTSIDE) & set(init.relative_to(ROOT).parts)}
    found = {".".join(["halfway", *folder.relative_to(ROOT).parts]) for folder in folders}
    assert found == set(listed_packages())


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The files of the wheel setuptools builds from a copy of the source tree (no network: the
    build runs in this interpreter, with its setuptools: the dev extra's, new enough for
    pyproject.toml's license field)."""
    pytest.importorskip("setuptools", minversion="77")
    tmp = tmp_path_factory.mktemp("wheel")
    tree = tmp / "src"
    shutil.copytree(ROOT, tree, ignore=SOURCE_IGNORE)
    code = f"from setuptools import build_meta; print(build_meta.build_wheel({str(tmp / 'dist')!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = tmp / "dist" / done.stdout.split()[-1]
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_wheel_ships_every_package_and_data_file(wheel_files: set[str]) -> None:
    missing = source_files() - wheel_files
    assert not missing, f"not in the wheel: {sorted(missing)}"


def test_wheel_holds_only_the_halfway_package(wheel_files: set[str]) -> None:
    tops = {name.split("/")[0] for name in wheel_files}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"halfway"}, tops
    assert not any("/tests/" in name or "__pycache__" in name for name in wheel_files)


def test_python_m_halfway_is_the_command() -> None:
    module = subprocess.run([sys.executable, "-m", "halfway", "passes", "--json"], capture_output=True, text=True,
                            cwd=ROOT.parent, check=False)
    command = halfway("passes", "--json")
    assert module.returncode == command.returncode == 0, module.stderr
    assert module.stdout == command.stdout
    usage = subprocess.run([sys.executable, "-m", "halfway", "no-such-command"], capture_output=True, text=True,
                           check=False)
    assert usage.returncode == 2 and "usage: halfway" in usage.stderr
