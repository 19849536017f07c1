"""A seeded mutation fuzz of load_inference_model over resnet_tiny's .pdmodel and .pdiparams.

Every mutated file must load or raise HalfwayError (never another exception), within a memory
and time bound. Run with ``-s`` to see the one-line summary of the figures.
"""

import random
import resource
import shutil
import struct
import time
import traceback
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from halfway.ir import HalfwayError
from halfway.ir.io import load_inference_model, save_inference_model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"
SEED = 20250611
MUTANTS_PER_FILE = 1100
TRACE_EVERY = 2  # tracemalloc slows a load about 3x: trace every other one, watch RSS for all
MAX_PEAK_MIB = 64
MAX_RSS_GROWTH_MIB = 256
MAX_MS_PER_LOAD = 5000
INTERESTING = [0, 1, 2, 7, 8, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
               2**62, 2**63 - 1, 2**63, 2**64 - 1]


# -- where the length and count fields are -------------------------------------------------------------
def _varint(data: bytes, pos: int) -> tuple[int, int] | None:
    value, shift = 0, 0
    while pos < len(data) and shift < 70:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos
    return None


def _encode_varint(value: int) -> bytes:
    value &= 2**64 - 1
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not out[-1] & 0x80:
            return bytes(out)


def _proto_fields(data: bytes, start: int, end: int, depth: int = 0) -> list[tuple[str, int, int]] | None:
    """(kind, position, size) of every varint and length prefix in a protobuf message, recursing into
    payloads that parse as messages; None if data[start:end] is not one."""
    fields: list[tuple[str, int, int]] = []
    pos = start
    while pos < end:
        key = _varint(data, pos)
        if key is None or key[1] > end or key[0] >> 3 == 0:
            return None
        wire, pos = key[0] & 7, key[1]
        if wire == 0:
            value = _varint(data, pos)
            if value is None or value[1] > end:
                return None
            fields.append(("varint", pos, value[1] - pos))
            pos = value[1]
        elif wire == 2:
            length = _varint(data, pos)
            if length is None or length[1] + length[0] > end:
                return None
            fields.append(("length", pos, length[1] - pos))
            inner = _proto_fields(data, length[1], length[1] + length[0], depth + 1) if depth < 12 else None
            fields += inner or []
            pos = length[1] + length[0]
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            return None
    return fields if pos == end else None


def _params_fields(data: bytes) -> list[tuple[str, int, int]]:
    """The fixed-size header fields of every record, and the varints of each TensorDesc."""
    fields, pos = [], 0
    while pos < len(data):
        fields += [("u32", pos, 4), ("u64", pos + 4, 8), ("u32", pos + 12, 4), ("i32", pos + 16, 4)]
        (size,) = struct.unpack_from("<i", data, pos + 16)
        desc_start = pos + 20
        desc_fields = _proto_fields(data, desc_start, desc_start + size)
        assert desc_fields is not None
        fields += desc_fields
        numel, cursor = 1, desc_start
        while cursor < desc_start + size:
            key, cursor = _varint(data, cursor)
            value, cursor = _varint(data, cursor)
            numel *= value if key >> 3 == 2 else 1
        pos = desc_start + size + 4 * numel  # resnet_tiny holds float32 only
    assert pos == len(data)
    return fields


# -- mutations ---------------------------------------------------------------------------------------
Mutator = Callable[[bytes, random.Random, list], tuple[bytes, str]]


def _bit_flips(data, rng, _):
    out = bytearray(data)
    spots = [rng.randrange(len(out) * 8) for _ in range(rng.randint(1, 8))]
    for bit in spots:
        out[bit // 8] ^= 1 << (bit % 8)
    return bytes(out), f"flip bits {spots}"


def _byte_replacements(data, rng, _):
    out = bytearray(data)
    spots = []
    for _ in range(rng.randint(1, 8)):
        pos = rng.randrange(len(out))
        out[pos] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        spots.append((pos, out[pos]))
    return bytes(out), f"set bytes {spots}"


def _truncation(data, rng, _):
    cut = rng.randrange(len(data))
    return data[:cut], f"truncate to {cut} bytes"


def _insertion(data, rng, _):
    pos, extra = rng.randrange(len(data) + 1), rng.randbytes(rng.randint(1, 64))
    return data[:pos] + extra + data[pos:], f"insert {extra.hex()} at {pos}"


def _duplicated_chunk(data, rng, _):
    start = rng.randrange(len(data))
    end = min(len(data), start + rng.randint(1, 512))
    pos = rng.choice([end, rng.randrange(len(data) + 1)])
    return data[:pos] + data[start:end] + data[pos:], f"copy [{start}:{end}] to {pos}"


def _deleted_chunk(data, rng, _):
    start = rng.randrange(len(data))
    end = min(len(data), start + rng.randint(1, 64))
    return data[:start] + data[end:], f"delete [{start}:{end}]"


def _field_corruption(data, rng, fields):
    """Set a length prefix, count, version, size, dim or enum value to an interesting number."""
    kind, pos, size = rng.choice(fields)
    old = _varint(data, pos)[0] if kind in ("varint", "length") else \
        int.from_bytes(data[pos:pos + size], "little", signed=kind == "i32")
    value = rng.choice(INTERESTING + [old + 1, old - 1, old * 2, len(data), rng.getrandbits(64),
                                      -1, -2, -(2**31)])
    if kind in ("varint", "length"):
        new = _encode_varint(value)
    else:
        new = (value % 2 ** (8 * size)).to_bytes(size, "little")
    return data[:pos] + new + data[pos + size:], f"set {kind} field at {pos} from {old} to {value}"


MUTATORS: list[Mutator] = [_bit_flips, _byte_replacements, _truncation, _insertion, _duplicated_chunk,
                           _deleted_chunk, _field_corruption, _field_corruption]


# -- the fuzz ------------------------------------------------------------------------------------------
class _Tally:
    """Outcomes and the cost figures of the loads."""

    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.failures: list[str] = []
        self.max_peak = self.max_seconds = 0.0
        self.traced = 0
        self.rss_before = _max_rss()
        self.started = time.perf_counter()

    def figures(self) -> dict[str, float]:
        errors = {k: v for k, v in self.outcomes.items() if k not in ("loaded", "FAIL")}
        return {"files": sum(self.outcomes.values()), "loaded": self.outcomes["loaded"],
                "halfway_errors": sum(errors.values()), "other_errors": self.outcomes["FAIL"],
                "max_peak_mib": self.max_peak / 2**20, "traced_loads": self.traced,
                "rss_growth_mib": (_max_rss() - self.rss_before) / 2**20,
                "slowest_load_ms": self.max_seconds * 1000, "total_s": time.perf_counter() - self.started}


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_loader_survives_mutated_files(tmp_path, record_property):
    model = (FIXTURES / "resnet_tiny.pdmodel").read_bytes()
    params = (FIXTURES / "resnet_tiny.pdiparams").read_bytes()
    targets = {"pdmodel": (model, _proto_fields(model, 0, len(model))),
               "pdiparams": (params, _params_fields(params))}
    rng = random.Random(SEED)
    tally = _Tally()
    for target, (original, fields) in targets.items():
        for i in range(MUTANTS_PER_FILE):
            mutator = rng.choice(MUTATORS)
            mutant, how = mutator(original, rng, fields)
            files = {"pdmodel": model, "pdiparams": params, target: mutant}
            for suffix, data in files.items():
                (tmp_path / f"m.{suffix}").write_bytes(data)
            outcome = _measured_load(tmp_path, tally, traced=i % TRACE_EVERY == 0, resave=target == "pdmodel")
            tally.outcomes[outcome.split(":")[0]] += 1
            if outcome.startswith("FAIL"):
                keep = tmp_path / "failures" / f"{target}-{i}"
                keep.mkdir(parents=True)
                for suffix in files:
                    shutil.copy(tmp_path / f"m.{suffix}", keep)
                tally.failures.append(f"{target} #{i} ({mutator.__name__}: {how}) kept in {keep}:\n{outcome}")
    figures = tally.figures()
    for key, value in figures.items():
        record_property(key, value)
    errors = {k: v for k, v in tally.outcomes.items() if k not in ("loaded", "FAIL")}
    print(f"\nloader fuzz (seed {SEED}): {figures['files']} mutated files ({MUTANTS_PER_FILE} .pdmodel, "
          f"{MUTANTS_PER_FILE} .pdiparams): {figures['loaded']} loaded, {figures['halfway_errors']} HalfwayError "
          f"{errors}, {figures['other_errors']} other; max traced peak {figures['max_peak_mib']:.2f} MiB "
          f"({figures['traced_loads']} loads traced), RSS growth {figures['rss_growth_mib']:.1f} MiB, slowest "
          f"load {figures['slowest_load_ms']:.0f} ms, total {figures['total_s']:.1f} s")
    assert not tally.failures, (f"{len(tally.failures)} loads raised non-HalfwayErrors; first ones:\n"
                                + "\n\n".join(tally.failures[:5]))
    assert figures["files"] >= 2000
    assert figures["max_peak_mib"] < MAX_PEAK_MIB
    assert figures["rss_growth_mib"] < MAX_RSS_GROWTH_MIB
    assert figures["slowest_load_ms"] < MAX_MS_PER_LOAD


def _measured_load(folder: Path, tally: _Tally, *, traced: bool, resave: bool) -> str:
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    try:
        return _load(folder, resave=resave)
    finally:
        tally.max_seconds = max(tally.max_seconds, time.perf_counter() - started)
        if traced:
            tally.max_peak = max(tally.max_peak, tracemalloc.get_traced_memory()[1])
            tally.traced += 1
            tracemalloc.stop()


def _load(folder: Path, *, resave: bool) -> str:
    """'loaded', the HalfwayError subclass raised, or 'FAIL: <traceback>' for anything else.

    With ``resave``, a mutant that loads is saved again, which must also succeed or raise
    HalfwayError (a changed program takes the save paths too).
    """
    try:
        program, feeds, fetches, scope = load_inference_model(folder / "m")
    except HalfwayError as e:
        return type(e).__name__
    except Exception:  # noqa: BLE001 - the point of the test
        return "FAIL: load\n" + traceback.format_exc()
    if not resave:
        return "loaded"
    try:
        save_inference_model(folder / "resaved" / "m", feeds, fetches, program, scope)
    except HalfwayError:
        pass
    except Exception:  # noqa: BLE001
        return "FAIL: save after load\n" + traceback.format_exc()
    return "loaded"


@pytest.mark.parametrize("target", ["pdmodel", "pdiparams"])
def test_field_maps_cover_the_files(target):
    data = (FIXTURES / f"resnet_tiny.{target}").read_bytes()
    fields = _proto_fields(data, 0, len(data)) if target == "pdmodel" else _params_fields(data)
    kinds = Counter(kind for kind, _, _ in fields)
    assert kinds["varint"] > 20 and (kinds["length"] > 20 if target == "pdmodel" else kinds["u64"] == 23)
