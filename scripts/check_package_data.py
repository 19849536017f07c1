"""Check that an installed halfway holds every file of the source tree that pyproject.toml names
as package data (the demo models, the OpenCL sources, the graph page's assets, the .proto).

    python scripts/check_package_data.py ROOT    # run by the interpreter that has halfway installed,
                                                 # outside ROOT, so that it imports the installed copy
"""

from __future__ import annotations

import sys
import tomllib
from importlib.resources import files
from pathlib import Path


def missing_data(root: Path) -> dict[str, list[str]]:
    """Package -> the data files of ``root`` that its installed copy lacks (an entry that matches
    no file in ``root`` counts as missing too)."""
    declared = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    lacking: dict[str, list[str]] = {}
    for package, patterns in declared.items():
        source = root.joinpath(*package.split(".")[1:])
        wanted = {p.relative_to(source) for pattern in patterns for p in source.glob(pattern) if p.is_file()}
        absent = sorted(str(p) for p in wanted if not files(package).joinpath(*p.parts).is_file())
        if absent or not wanted:
            lacking[package] = absent or patterns
        else:
            print(f"{package}: {len(wanted)} data files")
    return lacking


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    lacking = missing_data(Path(sys.argv[1]).resolve())
    for package, names in lacking.items():
        print(f"the installed {package} lacks {', '.join(names)}", file=sys.stderr)
    sys.exit(1 if lacking else 0)
