"""Fuzzing the reader of ``halfway batch``'s rows: seeded .npy and .npz files of rows, their bytes
and headers mutated the ways malformed files are (bytes flipped or cut, header fields rewritten
to other dtypes, shapes and orders, zip members renamed or deflated), must each read or fail with
a HalfwayError, within a watchdog's time, and leave the folder as it was.

``HALFWAY_FUZZ_CASES`` (default 200) and ``HALFWAY_FUZZ_SEED`` (default 0) size a run; a larger
run by hand: ``HALFWAY_FUZZ_CASES=5000 python -m pytest -q tests/api/test_rows_fuzz.py -s``.
"""

from __future__ import annotations

import io
import os
import random
import zipfile
from pathlib import Path

import numpy as np

from halfway.api.batch.tables import read_rows
from tests.support.fuzzing import Tally, outcome, snapshot

CASES = int(os.environ.get("HALFWAY_FUZZ_CASES", "200"))
SEED = int(os.environ.get("HALFWAY_FUZZ_SEED", "0"))
TIMEOUT_S = 20.0
HEADERS = ["{'descr': '<f4', 'fortran_order': False, 'shape': (10**12, 8), }",
           "{'descr': '<f4', 'fortran_order': True, 'shape': (4, 8), }",
           "{'descr': '|O', 'fortran_order': False, 'shape': (4,), }",
           "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }",
           "{'descr': '<U99999999', 'fortran_order': False, 'shape': (4,), }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 8), }",
           "{'descr': '<f4', 'shape': (4, 8), }", "{'descr': 'zz', 'fortran_order': 0, 'shape': 7, }",
           "not a dict", "{" * 500]
"""Header texts a mutation writes in place of an .npy header."""


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _with_header(data: bytes, text: str) -> bytes:
    """``data`` (an .npy file) with its header replaced by ``text`` (as a 1.0 header)."""
    start = 10
    length = int.from_bytes(data[8:10], "little")
    body = text.encode("latin1", errors="replace") + b"\n"
    return b"\x93NUMPY\x01\x00" + len(body).to_bytes(2, "little") + body + data[start + length:]


def _mutated_npy(rng: random.Random, array: np.ndarray) -> bytes:
    data = bytearray(_npy(array))
    kind = rng.choice(["flip", "cut", "header", "header", "magic"])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == "cut":
        del data[rng.randrange(len(data)):]
    elif kind == "header":
        return _with_header(bytes(data), rng.choice(HEADERS))
    else:
        data[6:8] = bytes([rng.choice([0, 2, 3, 9]), 0])
    return bytes(data)


def _archive(members: dict[str, bytes], deflate: bool) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _case(index: int, folder: Path) -> tuple[str, Path]:
    """Write case ``index``'s rows into ``folder``: (label, the path halfway batch is given)."""
    rng = random.Random(SEED * 1_000_003 + index)
    array = np.random.default_rng(index).standard_normal((4, 8)).astype(np.float32)
    layout = rng.choice(["npz archive", "npz archive", "npy folder", "npz folder"])
    members = {"x.npy": _mutated_npy(rng, array), "id.npy": _npy(np.arange(4))}
    if rng.random() < 0.2:
        members[rng.choice(["notes.txt", "x.npy/", "../y.npy", "y.npy"])] = rng.choice([b"text", _npy(array[:2])])
    if layout == "npz archive":
        data = bytearray(_archive(members, rng.random() < 0.5))
        if rng.random() < 0.3:
            data[rng.randrange(len(data))] ^= 0xFF
        (folder / "rows.npz").write_bytes(bytes(data))
        return f"#{index} {layout}", folder / "rows.npz"
    rows = folder / "rows"
    rows.mkdir()
    for row in range(3):
        if layout == "npy folder":
            (rows / f"row{row}.npy").write_bytes(_mutated_npy(rng, array[row]) if row == 1 else _npy(array[row]))
        else:
            (rows / f"row{row}.npz").write_bytes(_archive(members if row == 1 else {"x.npy": _npy(array[row])},
                                                         deflate=True))
    return f"#{index} {layout}", rows


def test_mutated_rows_read_or_fail_with_a_halfway_error(tmp_path):
    tally = Tally("rows fuzz")
    for index in range(CASES):
        folder = tmp_path / str(index)
        folder.mkdir()
        label, path = _case(index, folder)
        before = snapshot(folder)
        tally.add(label, *outcome(lambda: read_rows(str(path), ["x"]), TIMEOUT_S), changed=snapshot(folder) != before)
    tally.check(SEED)
