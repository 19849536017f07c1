"""The one rule for the files a command writes (``run -o``, ``graph -o``, ``transpile -o``,
``batch --output``, ``demo --out``), checked before any work:

- the name says the format: an extension the command does not write is a usage error (exit 2),
  never a file of another format under a surprising name (``typo.onxx.pdmodel``);
- the folder it goes in must exist: a missing one is an error (exit 1, as a missing input file),
  where a misspelt folder would otherwise be created without a word;
- a folder is no file name (``transpile`` alone also takes an existing folder, ``demo --out``
  names the folder it fills).

Files are written atomically with the user's umask (``halfway.ir.tempfiles``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ...ir.errors import SerdeError
from .base import UsageError

__all__ = ["check_target", "check_folder"]


def check_target(path: str, suffixes: Sequence[str], *, option: str = "-o", prefix: bool = False,
                 folder: bool = False) -> None:
    """UsageError unless ``path`` ends in one of ``suffixes`` (or, with ``prefix``, has no
    extension; with ``folder``, is an existing folder); SerdeError unless its folder exists."""
    target = Path(path)
    if folder and target.is_dir():
        return
    if target.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name ending {_listed(suffixes)}")
    suffix = target.suffix
    if suffix not in suffixes and not (prefix and not suffix):
        also = (", a path prefix without an extension" if prefix else "") + (", an existing folder" if folder else "")
        found = f"the extension {suffix!r} is not one halfway writes" if suffix else "no extension"
        raise UsageError(f"{option} {path}: {found}; give a name ending {_listed(suffixes)}{also}")
    check_folder(str(target.absolute().parent), option, path)


def check_folder(folder: str, option: str, path: str) -> None:
    """SerdeError naming ``option`` and ``path`` unless ``folder`` exists."""
    if not Path(folder).is_dir():
        raise SerdeError(f"{option} {path}: the folder {folder} does not exist; create it first")


def _listed(suffixes: Sequence[str]) -> str:
    return " or ".join([", ".join(suffixes[:-1]), suffixes[-1]] if len(suffixes) > 1 else suffixes)
