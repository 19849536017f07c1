"""Type-check halfway with mypy, which cannot follow ``package-dir``.

halfway's folders are packages under other names (``ir/`` is ``halfway.ir``), and the editable
install maps them with an import hook that mypy does not run. This script lays out the package as
it is installed, as symlinks in ``build/typecheck/halfway`` (``halfway/ir -> ../../../ir``), runs
mypy on it with the settings of ``[tool.mypy]`` in ``pyproject.toml``, and reports the source
paths (``ir/block.py``), not the symlinks.

    python scripts/typecheck.py [MYPY OPTIONS...]
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tomllib
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"
LOCATION = re.compile(r"^(?P<path>[^:\s]+\.pyi?)(?P<rest>:\d+.*)$")


def package_dirs() -> dict[str, Path]:
    """``[tool.setuptools.package-dir]``: package name -> its folder."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {name: ROOT / folder for name, folder in config["tool"]["setuptools"]["package-dir"].items()}


def lay_out(tree: Path, roots: dict[str, Path]) -> None:
    """Symlink every root into ``tree`` at its package's path. A root with other roots inside it
    (``halfway`` holds ``halfway.ir``) becomes a folder of links to its entries."""
    shutil.rmtree(tree, ignore_errors=True)
    for name in sorted(roots, key=lambda n: n.count(".")):
        target = tree.joinpath(*name.split("."))
        children = {n.split(".")[name.count(".") + 1] for n in roots if n.startswith(name + ".")}
        if not children:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(roots[name], target_is_directory=True)
            continue
        target.mkdir(parents=True)
        for entry in roots[name].iterdir():
            if entry.name not in children and entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())


def source_path(line: str) -> str:
    """A mypy output line with its path, if any, as the source file's path from the root."""
    match = LOCATION.match(line)
    if match is None:
        return line
    path = Path(os.path.realpath(ROOT / match["path"]))
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    return f"{shown}{match['rest']}"


def main(argv: list[str]) -> int:
    lay_out(TREE, package_dirs())
    os.chdir(ROOT)
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), *argv])
    for line in stdout.splitlines():
        print(source_path(line))
    print(stderr, end="", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
