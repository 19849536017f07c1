"""The files of one saved model, written so that a kill at any moment leaves the old model or
the new one loadable, and checked on load.

A model is several files (the program, its parameters, perhaps one file per parameter) that make
sense only together, and no file system moves several files at once. So a save also writes a
manifest beside the program file, ``<program file>.sha256`` in ``sha256sum``'s format, naming
every file of the save with its digest (``sha256sum -c`` checks it), and commits in this order:

1. lock the folder (``flock`` on the directory: saves into one folder, from any process or
   thread, run one at a time), and finish a save of the same program file that was killed while
   moving its files (below);
2. write every new file to a synced temporary beside it (``halfway.ir.tempfiles``);
3. move into place the manifest, then the program file, then the parameter files, each after a
   backup of the file it replaces; then remove files of the old model the new one does not have;
4. remove the backups, and the temporaries and backups of saves whose process has ended.

A reader (``Manifest``) trusts the manifest only when the program file matches it; then every
listed file must match too, or a temporary of it must (that of a save killed in step 3, which
waits there whole). So after a kill: before the manifest moved, the old files are untouched;
after it moved and before the program moved, the old program no longer matches it and the old
model loads as it was; after the program moved, the new model loads, its parameters read from
their temporaries until the next save of it moves them into place. A failure in step 3 puts the
old files back, the last moved first, keeping each new file at its temporary until all are
back, so a kill then too leaves one of the two models. Files another tool wrote over a saved
model leave a manifest that matches nothing, and it is ignored.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path

from .errors import SerdeError
from .tempfiles import BACKUP, TEMP, leftovers, remove, remove_dead, sync_folder, temp_name, write_temp

__all__ = ["MANIFEST_SUFFIX", "Manifest", "manifest_path", "read_file", "write_files", "folder_lock"]

MANIFEST_SUFFIX = ".sha256"
_MANIFEST_LIMIT = 1 << 24
_CHUNK = 1 << 22


def manifest_path(program_file: Path) -> Path:
    return program_file.with_name(program_file.name + MANIFEST_SUFFIX)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file_digest(path: Path) -> str | None:
    """The digest of a regular file's bytes, read in chunks; None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def _recorded(path: Path) -> dict[str, str]:
    """File name -> digest, as the manifest at ``path`` records them (nothing when it is missing,
    unreadable or too large to be one)."""
    try:
        if not path.is_file() or path.stat().st_size > _MANIFEST_LIMIT:
            return {}
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    digests = {}
    for line in text.splitlines():
        digest, _, name = line.partition("  ")
        if len(digest) == 64 and name:
            digests[name] = digest
    return digests


def _pending(file: Path, digest: str, *, dead_only: bool) -> Path | None:
    """A temporary of ``file`` holding the bytes of ``digest`` (of a process that has ended, with
    ``dead_only``): the new file of a save killed before it moved that one into place."""
    for leftover in leftovers(file.parent, {file.name}):
        if leftover.kind == TEMP and (not dead_only or leftover.dead()) and _file_digest(leftover.path) == digest:
            return leftover.path
    return None


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
        digests = _recorded(path)
        if digests.get(program_file.name) != _digest(program_bytes):
            return None
        return cls(path, digests)

    def lists(self, file: Path) -> bool:
        return file.name in self.digests

    def file_bytes(self, file: Path) -> bytes:
        """The bytes of ``file`` as the manifest records them: the file's own when they match,
        else those of its temporary left by a save killed before it moved that file into place.

        Raises:
            SerdeError: naming ``file``, when neither matches (or it is missing).
        """
        expected = self.digests[file.name]
        data = read_file(file) if file.exists() else None
        if data is not None and _digest(data) == expected:
            return data
        pending = _pending(file, expected, dead_only=False)
        if pending is not None:
            return read_file(pending)
        if data is None:
            return read_file(file)  # missing: its error
        raise SerdeError(f"{file}: does not belong to the program beside it ({self.path} records another "
                         f"digest): another tool changed the file; save the model again")


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


# -- writing ----------------------------------------------------------------------------------------
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
            _complete(program_file)
            _commit(files, remove)
    except BaseException:
        _remove_folders(created)
        raise


def _complete(program_file: Path) -> None:
    """Finish a save of ``program_file`` killed while it moved its files into place: every file
    its manifest lists that does not match is replaced by the temporary (of a process that has
    ended) that does. Nothing moves unless every listed file can be made to match."""
    digests = _recorded(manifest_path(program_file))
    folder = program_file.parent
    if not any(item.kind == TEMP and item.dead() for item in leftovers(folder, set(digests))):
        return
    moves = []
    for name, digest in digests.items():
        file = folder / name
        if _file_digest(file) == digest:
            continue
        pending = _pending(file, digest, dead_only=True)
        if pending is None:
            return
        moves.append((pending, file))
    try:
        for pending, file in moves:
            os.replace(pending, file)
    except OSError as e:
        raise SerdeError(f"{program_file}: cannot finish the save of it that was killed ({e.strerror or e}); "
                         f"nothing new was written") from None


def _commit(files: Mapping[Path, bytes], stale: tuple[Path, ...]) -> None:
    program_file = next(iter(files))
    ordered = {manifest_path(program_file): _manifest_text(files).encode()} | dict(files)
    temps: dict[Path, Path] = {}
    backups: dict[Path, Path | None] = {}
    current = program_file
    try:
        for current, data in ordered.items():
            temps[current] = write_temp(current, data)
        for current, temp in temps.items():
            backups[current] = _backup(current)
            os.replace(temp, current)
        for current in stale:
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
            remove(backup)
    names = {file.name for file in (*ordered, *stale)}
    for folder in {file.parent for file in ordered}:
        remove_dead(folder, names)
        sync_folder(folder)


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


def _make_dirs(directory: Path, created: list[Path]) -> None:
    """Create ``directory`` and its missing parents, adding each one made to ``created``."""
    missing = []
    while not directory.exists() and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    for folder in reversed(missing):
        os.mkdir(folder)
        created.append(folder)


def _backup(target: Path) -> Path | None:
    if not target.exists():
        return None
    backup = temp_name(target, BACKUP)
    _keep(target, backup)
    return backup


def _keep(target: Path, name: Path) -> None:
    """A second name for ``target``'s bytes: a hard link, or a copy where links fail."""
    try:
        os.link(target, name)
    except OSError:
        shutil.copy2(target, name)


def _undo(temps: dict[Path, Path], backups: dict[Path, Path | None]) -> None:
    """Put back every replaced or removed target, the last moved first; a new file moved into
    place goes back to its temporary first, and the temporaries are removed last."""
    for target, backup in reversed(backups.items()):
        temp = temps.get(target)
        moved_in = temp if temp is not None and not temp.exists() else None
        with contextlib.suppress(OSError):
            if moved_in is not None:
                _keep(target, moved_in)
            if backup is not None:
                os.replace(backup, target)
                remove(backup)  # still there when it was a link to the target itself
            elif moved_in is not None:
                os.unlink(target)
    for temp in temps.values():
        remove(temp)


def _remove_folders(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(folder)
