"""Temporaries and backups beside the files halfway writes, and the atomic write of one file.

A new file is first written whole to a temporary beside it, ``.<file>.<pid>.<random>.tmp``,
synced, with the mode of the file it replaces (a new file gets the umask's), then moved over it;
``.<file>.<pid>.<random>.bak`` is the name of a backup a save keeps while it may still put the
old file back. The pid says whose they are: the next write of the same file removes those of a
process that has ended (a killed run), never those of a live one.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from .errors import SerdeError

__all__ = ["Leftover", "leftovers", "remove_dead", "temp_name", "write_temp", "write_file", "remove", "sync_folder", "TEMP",
           "BACKUP"]

TEMP, BACKUP = "tmp", "bak"
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{12}\.(?P<kind>tmp|bak)$")


class Leftover(NamedTuple):
    """A temporary or a backup found beside ``name``: whose process is ``pid``."""

    path: Path
    name: str
    kind: str
    pid: int

    def dead(self) -> bool:
        """Whether the process that made it has ended."""
        return not _alive(self.pid)


def temp_name(target: Path, kind: str) -> Path:
    """A fresh name beside ``target`` for a temporary (``TEMP``) or a backup (``BACKUP``)."""
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.{kind}")


def leftovers(folder: Path, names: set[str] | None = None) -> Iterator[Leftover]:
    """The temporaries and backups in ``folder`` (of the files ``names``; None: of any file)."""
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return
    for entry in entries:
        match = _LEFTOVER.match(entry)
        if match and (names is None or match["name"] in names):
            yield Leftover(folder / entry, match["name"], match["kind"], int(match["pid"]))


def remove_dead(folder: Path, names: set[str]) -> None:
    """Remove the temporaries and backups of ``names`` whose process has ended."""
    for leftover in leftovers(folder, names):
        if leftover.dead():
            remove(leftover.path)


def write_temp(target: Path, data: bytes) -> Path:
    """``data`` in a synced temporary beside ``target``, with ``target``'s mode when it exists."""
    temp = temp_name(target, TEMP)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if target.exists():
            os.chmod(temp, stat.S_IMODE(target.stat().st_mode))
    except BaseException:
        remove(temp)
        raise
    return temp


def write_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: the file holds all of it or is as it was, and keeps
    its mode. A symbolic link is followed (its target is written, the link stays); temporaries of
    earlier writes whose process has ended are removed.

    Raises:
        SerdeError: naming ``path``: a folder, a missing folder, or a write that failed (nothing
            is written then).
    """
    link = Path(path)
    target = Path(os.path.realpath(link)) if link.is_symlink() else link
    if target.is_dir():
        raise SerdeError(f"{link}: is a directory; give a file name")
    if target.exists() and not target.is_file():
        raise SerdeError(f"{link}: not a regular file; give the name of a file to write")
    folder = target.absolute().parent
    if not folder.is_dir():
        raise SerdeError(f"{link}: the folder {folder} does not exist")
    remove_dead(folder, {target.name})
    try:
        temp = write_temp(target, data)
    except OSError as e:
        raise SerdeError(f"{link}: cannot write ({e.strerror or e}); nothing was written") from None
    try:
        os.replace(temp, target)
    except BaseException as e:
        remove(temp)
        if isinstance(e, OSError):
            raise SerdeError(f"{link}: cannot write ({e.strerror or e}); nothing was written") from None
        raise
    sync_folder(folder)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def sync_folder(folder: Path) -> None:
    """Sync ``folder``'s entries (the moves into it), where the platform can."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove(path: Path) -> None:
    """Remove a file, if it is there."""
    with contextlib.suppress(OSError):
        os.unlink(path)
