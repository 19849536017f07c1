"""Parameter files: Paddle's combined ``.pdiparams`` and the legacy one-file-per-parameter layout.

Both hold tensor records; a combined file is records one after another with no header, count or
names, a legacy file holds exactly one. A record (little-endian)::

    uint32 version (0)
    uint64 lod_level; per level: uint64 nbytes, then nbytes / 8 uint64 offsets
    uint32 tensor_version (0)
    int32  size of the VarType.TensorDesc
    bytes  the TensorDesc (data_type, dims)
    bytes  the data, C order: numel * itemsize (a 0-d tensor has no dims and one element;
           float16 as float16, bfloat16 as its uint16 bits)

Which vars a file holds, in which order: ``param_specs(program)`` (the persistable vars except
the feed/fetch lists, readers and raw vars, sorted by name byte-wise). ``write_params`` and
``read_params`` put records in that order themselves, whatever order they are given.

Readers trust nothing in the bytes: every count and size is checked against the bytes left before
anything is allocated, and every defect is a SerdeError naming the file, the record and the var.
LoD offsets are checked and returned by ``decode_tensor``; ``read_params`` drops them, as the
scope holds plain arrays (parameters carry none).
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from . import serde
from .dtypes import DType, VarKind
from .errors import HalfwayError, SerdeError
from .program import Program

__all__ = ["ParamSpec", "TensorRecord", "param_specs", "param_mismatch", "encode_tensor", "decode_tensor",
           "write_params", "read_params", "read_param_file"]

MAX_RANK = 32
"""The most dims a record may have (numpy's own limit in 1.x; Paddle's is 9)."""

_NOT_PARAMS = frozenset({VarKind.FEED_MINIBATCH, VarKind.FETCH_LIST, VarKind.READER, VarKind.RAW})
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_U64 = struct.Struct("<Q")
_LOD_OFFSET = np.dtype("<u8")


class ParamSpec(NamedTuple):
    """What the program says about a parameter. ``dtype``/``shape`` None: not checked; -1: any size."""

    name: str
    dtype: DType | None
    shape: tuple[int, ...] | None


class TensorRecord(NamedTuple):
    """One decoded record: the array (bfloat16 as uint16 bits), its wire dtype, its LoD offsets
    (one uint64 array per level), and the offset just past the record."""

    array: np.ndarray
    dtype: DType
    lod: tuple[np.ndarray, ...]
    end: int


# -- which vars -------------------------------------------------------------------------------------
def param_specs(program: Program) -> list[ParamSpec]:
    """The vars a parameter file of ``program`` holds, in file order.

    Persistable vars of every block, except kinds FEED_MINIBATCH, FETCH_LIST, READER and RAW,
    sorted by name (code-point order, which is UTF-8 byte order); a name declared in several blocks
    counts once. Raises SerdeError for persistable vars of kinds whose values halfway cannot hold
    (selected rows, tensor arrays, vocabularies, ...).
    """
    found: dict[str, Any] = {}
    for var in program.all_vars():
        if var.persistable and var.kind not in _NOT_PARAMS:
            found.setdefault(var.name, var)
    unsupported = [f"{name!r} ({var.kind.name})" for name, var in found.items()
                   if var.kind is not VarKind.DENSE_TENSOR]
    if unsupported:
        raise SerdeError(f"persistable vars of kinds halfway cannot store: {_listing(unsupported)}; "
                         "only DENSE_TENSOR parameters can be saved or loaded")
    return [ParamSpec(name, found[name].dtype, found[name].shape) for name in sorted(found)]


def param_mismatch(spec: ParamSpec, dtype: DType, shape: tuple[int, ...]) -> str | None:
    """Why a value of ``dtype`` and ``shape`` cannot be ``spec``'s value, or None if it can.

    A -1 dim of the spec (unknown before run time) matches any size; the rank must still agree.
    """
    dtype_ok = spec.dtype is None or dtype is spec.dtype
    shape_ok = spec.shape is None or (len(shape) == len(spec.shape)
                                      and all(e in (-1, f) for e, f in zip(spec.shape, shape)))
    if dtype_ok and shape_ok:
        return None
    expected = f"{spec.dtype.name if spec.dtype is not None else '?'}{list(spec.shape or ())}"
    return f"var {spec.name!r} is {expected} in the program but the value is {dtype.name}{list(shape)}"


# -- one record -------------------------------------------------------------------------------------
def encode_tensor(array: np.ndarray, dtype: DType | None = None, lod: Sequence[Sequence[int]] = ()) -> bytes:
    """The record holding ``array``.

    ``dtype`` is the wire dtype where the numpy dtype does not say it (bfloat16 held as uint16
    bits); by default it is the array's. Raises SerdeError if the array's dtype cannot hold it.
    """
    if not isinstance(array, np.ndarray):
        raise SerdeError(f"expected a numpy array, got {type(array).__name__}")
    wire = _wire_dtype(array, dtype)
    parts = [_U32.pack(0), _U64.pack(len(lod))]
    for level in lod:
        offsets = np.asarray(level, dtype=_LOD_OFFSET).tobytes()
        parts += [_U64.pack(len(offsets)), offsets]
    desc = serde.tensor_desc_to_bytes(wire, tuple(array.shape))
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    parts += [_U32.pack(0), _I32.pack(len(desc)), desc, data]
    return b"".join(parts)


def _wire_dtype(array: np.ndarray, dtype: DType | None) -> DType:
    native = array.dtype.newbyteorder("=")
    try:
        wire = DType.from_any(native if dtype is None else dtype)
        held_as = wire.numpy
    except HalfwayError as e:
        raise SerdeError(f"cannot store an array of dtype {array.dtype}: {e}") from None
    if native != held_as:
        raise SerdeError(f"a {wire.name} tensor must be held as a numpy {held_as} array, got {array.dtype}")
    return wire


def decode_tensor(data: bytes, offset: int = 0, *, source: str = "<bytes>", what: str = "record") -> TensorRecord:
    """Decode the record starting at ``offset`` of ``data``.

    ``source`` (the file) and ``what`` (e.g. ``record #3 ('conv2d_0.w_0')``) start every error
    message. Raises SerdeError on any defect; allocates nothing larger than the bytes left.
    """
    cursor = _Cursor(data, offset, f"{source}: {what} at byte {offset}")
    version = cursor.unpack(_U32, "version")
    if version != 0:
        raise cursor.error(f"version is {version}; only version 0 exists")
    lod = tuple(cursor.lod_level(level) for level in range(cursor.lod_levels()))
    tensor_version = cursor.unpack(_U32, "tensor version")
    if tensor_version != 0:
        raise cursor.error(f"tensor version is {tensor_version}; only version 0 exists")
    dtype, dims = cursor.tensor_desc()
    array = cursor.array(_numpy_dtype(dtype, cursor), dims)
    return TensorRecord(array, dtype, lod, cursor.pos)


def _numpy_dtype(dtype: DType, cursor: _Cursor) -> np.dtype:
    try:
        return dtype.numpy
    except HalfwayError:
        raise cursor.error(f"holds {dtype.name} data, which halfway cannot load") from None


class _Cursor:
    """Reads fields off ``data`` from ``pos``, checking each against the bytes left."""

    __slots__ = ("data", "pos", "context")

    def __init__(self, data: bytes, pos: int, context: str) -> None:
        self.data = data
        self.pos = pos
        self.context = context

    @property
    def left(self) -> int:
        return len(self.data) - self.pos

    def error(self, message: str) -> SerdeError:
        return SerdeError(f"{self.context}: {message}")

    def need(self, nbytes: int, field: str) -> None:
        if nbytes > self.left:
            raise self.error(f"truncated: the {field} needs {nbytes} bytes at byte {self.pos}, "
                             f"{max(self.left, 0)} left")

    def unpack(self, fmt: struct.Struct, field: str) -> int:
        self.need(fmt.size, field)
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def lod_levels(self) -> int:
        levels = self.unpack(_U64, "LoD level count")
        if levels > self.left // _U64.size:
            raise self.error(f"claims {levels} LoD levels; only {self.left} bytes are left")
        return levels

    def lod_level(self, level: int) -> np.ndarray:
        nbytes = self.unpack(_U64, f"size of LoD level {level}")
        if nbytes % _LOD_OFFSET.itemsize:
            raise self.error(f"LoD level {level} is {nbytes} bytes, not a whole number of uint64 offsets")
        self.need(nbytes, f"LoD level {level}")
        return self.read_array(_LOD_OFFSET, nbytes // _LOD_OFFSET.itemsize)

    def tensor_desc(self) -> tuple[DType, tuple[int, ...]]:
        size = self.unpack(_I32, "tensor description size")
        if size < 0:
            raise self.error(f"tensor description size is {size}")
        self.need(size, "tensor description")
        try:
            dtype, dims = serde.tensor_desc_from_bytes(bytes(self.data[self.pos:self.pos + size]))
        except SerdeError as e:
            raise self.error(str(e)) from None
        self.pos += size
        if len(dims) > MAX_RANK:
            raise self.error(f"tensor has {len(dims)} dims; at most {MAX_RANK} are supported")
        if any(d < 0 for d in dims):
            raise self.error(f"tensor dims {list(dims)} hold a negative size")
        return dtype, dims

    def array(self, dtype: np.dtype, dims: tuple[int, ...]) -> np.ndarray:
        numel = math.prod(dims)
        nbytes = numel * dtype.itemsize
        if nbytes > self.left:
            raise self.error(f"truncated: a {dtype.name} tensor of dims {list(dims)} needs {nbytes} bytes "
                             f"of data, {self.left} left")
        return self.read_array(dtype, numel, dims)

    def read_array(self, dtype: np.dtype, count: int, dims: tuple[int, ...] | None = None) -> np.ndarray:
        """A copy (owning its memory, native byte order) of ``count`` little-endian items."""
        wire = np.frombuffer(self.data, dtype=dtype.newbyteorder("<"), count=count, offset=self.pos)
        self.pos += wire.nbytes
        return (wire if dims is None else wire.reshape(dims)).astype(dtype, copy=True)


# -- whole files ------------------------------------------------------------------------------------
def write_params(params: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]], *,
                 dtypes: Mapping[str, DType | None] | None = None) -> bytes:
    """A combined parameter file holding ``params`` (name -> array), in file order (by name).

    ``dtypes`` gives a var's wire dtype where the array's does not say it (bfloat16). Raises
    SerdeError naming the var for a name given twice or an array that cannot be stored.
    """
    items = list(params.items() if isinstance(params, Mapping) else params)
    _no_duplicates([name for name, _ in items], "parameter")
    records = []
    for name, array in sorted(items, key=lambda item: item[0]):
        try:
            records.append(encode_tensor(array, (dtypes or {}).get(name)))
        except SerdeError as e:
            raise SerdeError(f"parameter {name!r}: {e}") from None
    return b"".join(records)


def read_params(data: bytes, expected: Iterable[ParamSpec | tuple[str, Any, Any]], *,
                source: str = "<bytes>") -> dict[str, np.ndarray]:
    """Decode a combined parameter file holding the ``expected`` (name, dtype, shape) vars.

    Returns name -> array in file order. Raises SerdeError naming ``source`` on any defect: a bad
    record, a record whose dtype or shape disagrees with its var, fewer records than vars, or
    bytes left after the last one.
    """
    specs = sorted((_spec(item) for item in expected), key=lambda spec: spec.name)
    _no_duplicates([spec.name for spec in specs], "expected var")
    values: dict[str, np.ndarray] = {}
    offset = 0
    for index, spec in enumerate(specs):
        if offset == len(data):
            missing = [repr(s.name) for s in specs[index:]]
            raise SerdeError(f"{source}: ends after {index} records but the program has {len(specs)} "
                             f"parameters; no values for {_listing(missing)}")
        what = f"record #{index} ({spec.name!r})"
        record = decode_tensor(data, offset, source=source, what=what)
        _check(spec, record, f"{source}: {what} at byte {offset}")
        values[spec.name] = record.array
        offset = record.end
    if offset != len(data):
        raise SerdeError(f"{source}: {len(data) - offset} bytes left after the last of {len(specs)} "
                         "parameters (more records than the program has parameters, or a corrupt file)")
    return values


def read_param_file(data: bytes, expected: ParamSpec | tuple[str, Any, Any], *,
                    source: str = "<bytes>") -> np.ndarray:
    """Decode a legacy per-parameter file: exactly one record, the value of ``expected``."""
    spec = _spec(expected)
    record = decode_tensor(data, 0, source=source, what=f"parameter {spec.name!r}")
    _check(spec, record, source)
    if record.end != len(data):
        raise SerdeError(f"{source}: {len(data) - record.end} bytes left after the record of "
                         f"{spec.name!r}; a parameter file holds exactly one")
    return record.array


def _spec(item: ParamSpec | tuple[str, Any, Any]) -> ParamSpec:
    name, dtype, shape = item
    return ParamSpec(name, None if dtype is None else DType.from_any(dtype),
                     None if shape is None else tuple(shape))


def _check(spec: ParamSpec, record: TensorRecord, context: str) -> None:
    problem = param_mismatch(spec, record.dtype, record.array.shape)
    if problem is not None:
        raise SerdeError(f"{context}: {problem}")


def _no_duplicates(names: list[str], what: str) -> None:
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise SerdeError(f"{what} names given more than once: {_listing([repr(n) for n in twice])}")


def _listing(items: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
