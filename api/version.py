"""halfway's version: the installed distribution's (``importlib.metadata``), or, in a source
tree nobody installed, the one ``pyproject.toml`` beside the package declares."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

__all__ = ["version", "UNKNOWN"]

UNKNOWN = "0+unknown"
"""The version of a copy that is neither installed nor a source tree (a PEP 440 local version)."""


def version() -> str:
    """The version string, e.g. ``0.1.0``."""
    try:
        return importlib.metadata.version("halfway")
    except importlib.metadata.PackageNotFoundError:
        return _source_version(Path(__file__).resolve().parent.parent / "pyproject.toml")


def _source_version(pyproject: Path) -> str:
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return UNKNOWN
    found = project.get("version")
    return found if isinstance(found, str) else UNKNOWN
