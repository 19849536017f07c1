"""The files of one saved model, written so that a kill at any moment leaves a loadable model or
one that load reports clearly, and checked on load.

A model is several files (the program, its parameters, perhaps one file per parameter) that make
sense only together, and no file system moves several files at once. So a save also writes a
manifest beside the program file, ``<program file>.sha256`` in ``sha256sum``'s format, naming
every file of the save with its digest (``sha256sum -c`` checks it), and commits in this order:

1. lock the folder (``flock`` on the directory: saves into one folder, from any process or
   thread, run one at a time), and remove the temporaries of saves whose process is gone;
2. write every new file to a temporary beside it, ``.<file>.<pid>.<random>.tmp``, synced;
3. move into place the manifest, then the program file, then the parameter files; then remove
   files of the old model the new one does not have (a parameter file).

A reader (``Manifest``) trusts the manifest only when the program file matches it; then every
listed file must match too. So after a kill: before step 3, the old files (and their manifest, if
any) are untouched; after the manifest moved, the old program no longer matches it and the old
model loads as it was; after the program moved, parameters that do not match are reported as
belonging to an interrupted save, which the next save repairs. Files another tool wrote over a
saved model leave a manifest that matches nothing, and it is ignored.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from .errors import SerdeError

__all__ = ["MANIFEST_SUFFIX", "Manifest", "manifest_path", "read_file", "write_files", "folder_lock"]

MANIFEST_SUFFIX = ".sha256"
_MANIFEST_LIMIT = 1 << 24
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{12}\.(?:tmp|bak)$")


def manifest_path(program_file: Path) -> Path:
    return program_file.with_name(program_file.name + MANIFEST_SUFFIX)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- reading ----------------------------------------------------------------------------------------
class Manifest:
    """The digests a model's manifest records, when its program file matches them.

    ``Manifest.read(program_file, program_bytes)`` is None without a manifest, or with one the
    program does not match (a stale manifest, or a save stopped before moving its program).
    """

    __slots__ = ("path", "digests")

    def __init__(self, path: Path, digests: dict[str, str]) -> None:
        self.path = path
        self.digests = digests

    @classmethod
    def read(cls, program_file: Path, program_bytes: bytes) -> Manifest | None:
        path = manifest_path(program_file)
        try:
            if not path.is_file() or path.stat().st_size > _MANIFEST_LIMIT:
                return None
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        digests = {}
        for line in text.splitlines():
            digest, _, name = line.partition("  ")
            if len(digest) == 64 and name:
                digests[name] = digest
        if digests.get(program_file.name) != _digest(program_bytes):
            return None
        return cls(path, digests)

    def lists(self, file: Path) -> bool:
        return file.name in self.digests

    def check(self, file: Path, data: bytes) -> None:
        """SerdeError when ``file`` is listed with another digest than ``data``'s."""
        expected = self.digests.get(file.name)
        if expected is not None and expected != _digest(data):
            raise SerdeError(f"{file}: does not belong to the program beside it ({self.path} records another "
                             f"digest): a save of this model was interrupted, or another tool changed the "
                             f"file; save the model again")


# -- writing ----------------------------------------------------------------------------------------
def read_file(path: Path) -> bytes:
    """The bytes of a regular file; a FIFO, a device or a folder is refused before it is opened
    (reading one could block forever or never end).

    Raises:
        SerdeError: naming ``path``, when it is not a regular file or cannot be read.
    """
    if path.exists() and not path.is_file():
        raise SerdeError(f"{path}: not a regular file")
    try:
        return path.read_bytes()
    except OSError as e:
        raise SerdeError(f"{path}: cannot read ({e.strerror or e})") from None


def write_files(files: Mapping[Path, bytes], remove: tuple[Path, ...] = ()) -> None:
    """Write ``files`` (the program file first, in the order they are to be moved into place) and
    their manifest, then remove ``remove``, as the module docstring describes.

    Any failure before the last move puts back every file it replaced and removes what it made:
    existing files are then as they were. SerdeError names the file.
    """
    program_file = next(iter(files))
    created: list[Path] = []
    current = program_file
    try:
        for current in files:
            if current.is_dir():
                raise IsADirectoryError(errno.EISDIR, "is a directory")
        for current in files:
            _make_dirs(current.parent, created)
    except OSError as e:
        _remove_folders(created)
        raise SerdeError(f"{current}: cannot write ({e.strerror or e}); nothing was written") from None
    try:
        with folder_lock(program_file.parent, exclusive=True):
            _commit(files, remove)
    except BaseException:
        _remove_folders(created)
        raise


def _commit(files: Mapping[Path, bytes], remove: tuple[Path, ...]) -> None:
    program_file = next(iter(files))
    ordered = {manifest_path(program_file): _manifest_text(files).encode()} | dict(files)
    for folder in {file.parent for file in ordered}:
        _remove_leftovers(folder, {file.name for file in (*ordered, *remove)})
    temps: dict[Path, Path] = {}
    backups: dict[Path, Path | None] = {}
    current = program_file
    try:
        for current, data in ordered.items():
            temps[current] = _write_temp(current, data)
        for current, temp in temps.items():
            backups[current] = _backup(current)
            os.replace(temp, current)
        for current in remove:
            if current.exists() and current not in ordered:
                backups[current] = _backup(current)
                os.unlink(current)
    except BaseException as e:
        _undo(temps, backups)
        if isinstance(e, OSError):
            raise SerdeError(f"{current}: cannot write ({e.strerror or e}); nothing was written") from None
        raise
    for backup in backups.values():
        if backup is not None:
            _remove(backup)
    for folder in {file.parent for file in ordered}:
        _sync_folder(folder)


def _manifest_text(files: Mapping[Path, bytes]) -> str:
    folder = next(iter(files)).parent
    return "".join(f"{_digest(data)}  {os.path.relpath(file, folder)}\n" for file, data in files.items())


@contextlib.contextmanager
def folder_lock(folder: Path, *, exclusive: bool) -> Iterator[None]:
    """Hold ``flock`` on ``folder`` (shared for readers, exclusive for a save); where the file
    system cannot lock (or the platform has no flock), go on without."""
    try:
        import fcntl

        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)


def _remove_leftovers(folder: Path, names: set[str]) -> None:
    """Remove temporaries and backups of ``names`` left by saves whose process has ended."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        match = _LEFTOVER.match(entry)
        if match and match["name"] in names and not _alive(int(match["pid"])):
            _remove(folder / entry)


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


def _make_dirs(directory: Path, created: list[Path]) -> None:
    """Create ``directory`` and its missing parents, adding each one made to ``created``."""
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    for folder in reversed(missing):
        os.mkdir(folder)
        created.append(folder)


def _write_temp(target: Path, data: bytes) -> Path:
    temp = _unused_name(target, "tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if target.exists():
            os.chmod(temp, stat.S_IMODE(target.stat().st_mode))
    except BaseException:
        _remove(temp)
        raise
    return temp


def _backup(target: Path) -> Path | None:
    if not target.exists():
        return None
    backup = _unused_name(target, "bak")
    try:
        os.link(target, backup)
    except OSError:
        shutil.copy2(target, backup)
    return backup


def _unused_name(target: Path, kind: str) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(6)}.{kind}")


def _undo(temps: dict[Path, Path], backups: dict[Path, Path | None]) -> None:
    """Put back every replaced or removed target, then remove temporaries and backups."""
    for target, backup in backups.items():
        if backup is not None:
            with contextlib.suppress(OSError):
                os.replace(backup, target)
            _remove(backup)
        elif not temps[target].exists():
            _remove(target)
    for temp in temps.values():
        _remove(temp)


def _remove_folders(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
