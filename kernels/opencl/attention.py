"""The OpenCL kernels of the transformer ops. scaled_dot_product_attention (``attention.cl``): one
launch, an online softmax over K/V tiles in local memory (the flash-attention scheme), float32
math in every float16 mode. Masks (bool or additive, broadcast, a last dim shorter than the keys), KeyLengths,
causal masking and softcap are applied to each tile's scores; the Scores output (the full
matrix this kernel never forms) is left to numpy. Q, K, V and Out are indexed through their
strides (build defines), so the sequence-major [B, S, H * D] layout (q_num_heads set) reads
and writes the projections as they are.

For float16 buffers on NVIDIA devices of compute capability 8.0 and up, head sizes that are
multiples of 16 up to 128 run on tensor cores instead (``attention_mma.cl``: 64 query rows a
work-group, both products on mma.sync, the softmax in registers); ``tensor_core_refusal`` says
why any other attention keeps the portable kernel.

Head sizes are compile-time constants (each row keeps its query and accumulator in private
memory), so a program is built per (head size, sequence lengths, heads) signature: prepare
time, not run time.

cached_attention appends the step's keys and values to the caches (``kv_append.cl``) and runs
the portable kernel over the caches with PAST: each sequence's rows sit at its own past length,
which the causal mask and the sliding window measure from, and the key tiles stop at it; a
decode step (a few rows) gives each row a work-group whose work-items share its keys
(``decode_attention.cl``), where the portable kernel would give it one work-item. Past
lengths are read on the device, so a decode step binds nothing new. rotary_embedding is one
work-item per element (``rotary.cl``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ...ir.dtypes import DType
from ..numpy.conv import slot_positions
from ..registry import KernelSpec, register_kernel
from .base import (
    Binder,
    DeviceArray,
    Launch,
    Unsupported,
    broadcast_strides,
    copy_launch,
    index_defines,
    launch,
    launch_1d,
    param_defines,
    source,
)
from .gemm import uses_tensor_cores
from .runtime import Runtime
from .tensor import split_pieces

__all__ = ["MAX_HEAD_SIZE", "MMA_MAX_HEAD_SIZE", "MMA_ROWS", "DECODE_ROWS", "DECODE_CHUNK", "tensor_core_refusal"]

FLOATS = (DType.float32, DType.float16)
MAX_HEAD_SIZE = 256
"""The largest head size the kernel keeps in private memory."""
MMA_MAX_HEAD_SIZE = 128
"""The largest head size of the tensor-core kernel (its Q and O fragments stay in registers)."""
MMA_ROWS = 64
"""Query rows of a tensor-core work-group: four warps of 16."""
DECODE_ROWS = 8
"""cached_attention with at most this many new rows (a decode step) runs ``decode_attention.cl``."""
DECODE_CHUNK = 256
"""Keys a decode work-group scores into local memory at a time."""


def tensor_core_refusal(rt: Runtime, dtype: DType, depth: int, v_depth: int) -> str | None:
    """Why this attention keeps the portable kernel, or None where it runs on tensor cores."""
    if not uses_tensor_cores(rt, dtype):
        return "tensor cores take float16 buffers on NVIDIA devices of compute capability 8.0 and up"
    if depth % 16 or v_depth % 16 or max(depth, v_depth) > MMA_MAX_HEAD_SIZE:
        return f"head sizes {depth} and {v_depth}: tensor cores take multiples of 16 up to {MMA_MAX_HEAD_SIZE}"
    return None


def _mma_key_tile(depth: int, v_depth: int) -> int:
    """Keys per tile: two stages of K and V tiles stay within 32 KiB of local memory."""
    return 64 if depth + v_depth <= 128 else 32


class _Kernel(NamedTuple):
    """A kernel's program files and entry point, and its work-group: query rows, work-items, keys
    per tile."""

    files: tuple[str, ...]
    entry: str
    rows: int
    threads: int
    keys: int


def _choose_kernel(rt: Runtime, dtype: DType, depth: int, v_depth: int) -> _Kernel:
    if tensor_core_refusal(rt, dtype, depth, v_depth) is None:
        return _Kernel(("mma.h", "attention_score.h", "attention_mma.cl"), "attention_mma", MMA_ROWS, 2 * MMA_ROWS,
                       _mma_key_tile(depth, v_depth))
    rows = 32 if rt.caps.is_gpu else 16
    return _Kernel(("attention_score.h", "attention.cl"), "attention", rows, rows, rows)


def _mask_defines(rt: Runtime, spec: KernelSpec, scores: tuple[int, ...]) -> tuple[dict[str, object], list[int]]:
    """The mask's defines and its strides over (batch, head, query row, key)."""
    if not spec.has_input("Mask"):
        return {}, [0, 0, 0, 0]
    mask = spec.input("Mask")
    width = mask.shape[-1] if mask.shape else scores[-1]
    strides = broadcast_strides([mask.shape], (*scores[:3], width))[1 + 4:]
    defines: dict[str, object] = {"MW": width}
    if mask.dtype is DType.bool:
        defines["MASK_BOOL"] = ""
    else:
        float_mask = param_defines(rt, mask.dtype)
        defines.update({"MASK_T": float_mask["P"], "LOADM(p, i)": float_mask["LOADP(p, i)"]})
    return defines, strides


def _head_major(shape: tuple[int, ...], heads: int) -> tuple[int, ...]:
    """[B, H, S, D] of a head-major operand, or of a sequence-major [B, S, H * D] one of ``heads`` heads."""
    return (shape[0], heads, shape[1], shape[2] // heads) if heads else tuple(shape)


def _strides(heads: int, length: int, depth: int, sequence_major: bool) -> tuple[int, int, int]:
    """The (batch, head, sequence) strides of a [B, H, S, D] operand stored head-major or as [B, S, H * D]."""
    if sequence_major:
        return length * heads * depth, depth, heads * depth
    return heads * length * depth, length * depth, depth


def _attention(spec: KernelSpec) -> Binder:
    if spec.outputs.get("Scores"):
        raise Unsupported("scaled_dot_product_attention with a Scores output")
    q_split, kv_split = spec.attrs["q_num_heads"], spec.attrs["kv_num_heads"]
    (batch, q_heads, q_len, depth), k, v = (_head_major(spec.input(slot).shape, heads) for slot, heads in
                                            (("Q", q_split), ("K", kv_split), ("V", kv_split)))
    kv_heads, kv_len, v_depth = k[1], k[2], v[3]
    if max(depth, v_depth) > MAX_HEAD_SIZE:
        raise Unsupported(f"head size {max(depth, v_depth)} over {MAX_HEAD_SIZE}")
    attrs = spec.attrs
    if spec.has_input("Mask") and spec.input("Mask").dtype not in (DType.bool, *FLOATS):
        raise Unsupported(f"a {spec.input('Mask').dtype.name} mask")
    defines: dict[str, object] = {
        "D": depth, "DV": v_depth, "HQ": q_heads, "HKV": kv_heads, "SQ": q_len, "SKV": kv_len,
        "SCALE": f"{float(np.float32(attrs['scale'] or 1 / math.sqrt(depth)))!r}f"}
    for prefix, (heads, length, size), split in (
            ("Q", (q_heads, q_len, depth), q_split), ("K", (k[1], k[2], k[3]), kv_split),
            ("V", (v[1], v[2], v[3]), kv_split), ("O", (q_heads, q_len, v_depth), q_split)):
        defines.update(zip((f"{prefix}_B", f"{prefix}_H", f"{prefix}_S"), _strides(heads, length, size, bool(split))))
    if attrs["softcap"] > 0:
        defines["SOFTCAP"] = f"{float(np.float32(attrs['softcap']))!r}f"
    if attrs["zero_nan"]:
        defines["ZERO_NAN"] = ""
    if attrs["is_causal"]:
        defines.update({"CAUSAL": "", "OFFSET": attrs["causal_offset"]})
    if spec.has_input("KeyLengths"):
        defines.update({"LENGTHS": "", **index_defines(spec.input("KeyLengths").dtype)})

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        mask_defines, strides = _mask_defines(rt, spec, (batch, q_heads, q_len, kv_len))
        chosen = _choose_kernel(rt, spec.dtype, depth, v_depth)
        text = source(*chosen.files, defines={**defines, **mask_defines, "BQ": chosen.rows, "BK": chosen.keys})
        kernel = rt.kernel(text, chosen.entry, rt.float_options(spec.dtype))
        mask = ins[3].buffer if spec.has_input("Mask") else None
        lengths = ins[-1].buffer if spec.has_input("KeyLengths") else None
        return [launch(rt, kernel, (-(-q_len // chosen.rows) * chosen.threads, batch * q_heads), (chosen.threads, 1),
                       *(a.buffer for a in ins[:3]), outs[0].buffer, mask, lengths, *(np.int32(s) for s in strides))]

    return bind


register_kernel("scaled_dot_product_attention", "opencl", FLOATS)(_attention)


def _decode_threads(v_depth: int) -> int:
    """The work-items of a decode row: the power of two that covers V's head size (32 to 256)."""
    return min(256, max(32, 1 << (v_depth - 1).bit_length()))


def _cached_attention(spec: KernelSpec) -> Binder:
    """The caches appended to (``kv_append.cl``, a launch for the keys and one for the values),
    then ``attention.cl`` over them with PAST: each sequence's row positions and keys from its
    Past; a decode step's few rows (``DECODE_ROWS``) run ``decode_attention.cl``, a work-group a
    row, which appends them itself (and rotates Q and K, and reads a packed Q's keys and values
    where they lie, where the op has them so): one launch. Tensor cores are left to
    ``scaled_dot_product_attention``."""
    return _CachedAttention(spec).bind


class _CachedAttention:
    """One cached_attention op's defines, and its launches on a device."""

    def __init__(self, spec: KernelSpec) -> None:
        attrs = spec.attrs
        self.spec, self.packed = spec, attrs["packed"]
        self.q_split, self.kv_split = attrs["q_num_heads"], attrs["kv_num_heads"]
        kc, vc, q = spec.input("KCache").shape, spec.input("VCache").shape, spec.input("Q").shape
        self.batch, self.q_len, self.kv_heads, self.length = q[0], q[1] if self.q_split else q[2], kc[1], kc[2]
        self.depth, self.v_depth = kc[3], vc[3]
        self.q_heads = self.q_split or q[1]
        if max(self.depth, self.v_depth) > MAX_HEAD_SIZE:
            raise Unsupported(f"head size {max(self.depth, self.v_depth)} over {MAX_HEAD_SIZE}")
        if spec.has_input("KeyMask") and spec.input("KeyMask").dtype is not DType.bool:
            raise Unsupported(f"a {spec.input('KeyMask').dtype.name} KeyMask")
        self.index = index_defines(spec.input("Past").dtype)
        self.defines = self._defines(attrs)
        self.mask_strides = [self.length, 0, 0, 1] if spec.has_input("KeyMask") else [0, 0, 0, 0]
        self.new = [_strides(self.kv_heads, self.q_len, size, bool(self.kv_split)) for size in (self.depth, self.v_depth)]
        self.where = slot_positions(spec)
        self.turns = _Turns.of(spec, self.depth) if spec.has_input("Cos") else None

    def _defines(self, attrs: Mapping[str, Any]) -> dict[str, object]:
        q_heads, kv_heads, q_len, depth, v_depth = self.q_heads, self.kv_heads, self.q_len, self.depth, self.v_depth
        defines: dict[str, object] = {
            "D": depth, "DV": v_depth, "HQ": q_heads, "HKV": kv_heads, "SQ": q_len, "SKV": self.length,
            "CAUSAL": "", "OFFSET": 0, "PAST": "",
            "SCALE": f"{float(np.float32(attrs['scale'] or 1 / math.sqrt(depth)))!r}f", **self.index}
        for prefix, (heads, rows, size), split in (
                ("Q", (q_heads, q_len, depth), self.q_split), ("K", (kv_heads, self.length, depth), 0),
                ("V", (kv_heads, self.length, v_depth), 0), ("O", (q_heads, q_len, v_depth), self.q_split)):
            defines.update(zip((f"{prefix}_B", f"{prefix}_H", f"{prefix}_S"), _strides(heads, rows, size, bool(split))))
        if attrs["softcap"] > 0:
            defines["SOFTCAP"] = f"{float(np.float32(attrs['softcap']))!r}f"
        if attrs["window"] > 0:
            defines["WINDOW"] = attrs["window"]
        if self.spec.has_input("KeyMask"):
            defines.update({"MASK_BOOL": "", "MW": self.length})
        return defines

    def bind(self, rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        given = {slot: ins[at] for slot, at in self.where.items()}
        tables = [given[slot].buffer if slot in given else None for slot in ("Cos", "Sin", "PositionIds")]
        out = outs[0]
        assert out is not None
        if self.q_len <= DECODE_ROWS:
            launches = [self._decode(rt, given, tables, out)]
        else:
            launches = self._tiled(rt, given, tables, out)
        caches = ((given["KCache"], outs[1]), (given["VCache"], outs[2]))
        return launches + [copy_launch(rt, cache, copy) for cache, copy in caches if copy is not None]

    def _decode(self, rt: Runtime, given: dict[str, DeviceArray], tables: list[Any], out: DeviceArray) -> Launch:
        """``decode_attention.cl``: one launch, the step's keys and values read where they are."""
        threads = min(_decode_threads(self.v_depth), rt.caps.max_work_group_size)
        q = given["Q"]
        if self.packed:  # one [B, S, W] buffer: the query, the keys and the values at their offsets
            width = q.shape[-1]
            rows = (self.q_len * width, self.depth, width)
            steps = {"Q_B": rows[0], "Q_H": self.depth, "Q_S": width, "Q_OFF": 0,
                     "KN_OFF": self.q_heads * self.depth, "VN_OFF": (self.q_heads + self.kv_heads) * self.depth,
                     **dict(zip(("KN_B", "KN_H", "KN_S"), rows)),
                     **dict(zip(("VN_B", "VN_H", "VN_S"), (rows[0], self.v_depth, width)))}
            k = v = q
        else:
            steps = {"Q_OFF": 0, "KN_OFF": 0, "VN_OFF": 0, **dict(zip(("KN_B", "KN_H", "KN_S"), self.new[0])),
                     **dict(zip(("VN_B", "VN_H", "VN_S"), self.new[1]))}
            k, v = given["K"], given["V"]
        text = source("attention_score.h", "decode_attention.cl", defines={
            **self.defines, **steps, **(self.turns.defines(rt) if self.turns else {}), "NT": threads,
            "CH": DECODE_CHUNK, "ACC": -(-self.v_depth // threads)})
        kernel = rt.kernel(text, "decode_attention", rt.float_options(self.spec.dtype))
        mask = given["KeyMask"].buffer if "KeyMask" in given else None
        return launch(rt, kernel, (threads * self.batch * self.q_heads * self.q_len,), (threads,), q.buffer, k.buffer,
                      v.buffer, given["KCache"].buffer, given["VCache"].buffer, out.buffer, mask,
                      given["Past"].buffer, *tables, *(np.int32(s) for s in self.mask_strides))

    def _tiled(self, rt: Runtime, given: dict[str, DeviceArray], tables: list[Any], out: DeviceArray) -> list[Launch]:
        """A packed Q split, the rotations, the appends, then ``attention.cl``: buffers of their own
        for what the op computes before the attention."""
        launches: list[Launch] = []
        if self.packed:
            q, k, v = self._unpacked(rt, given["Q"], launches)
        else:
            q, k, v = given["Q"], given["K"], given["V"]
        if self.turns is not None:
            q, k = (self.turns.rotated(rt, self.spec.dtype, x, heads, tables, launches)
                    for x, heads in ((q, self.q_split), (k, self.kv_split)))
        options = rt.float_options(self.spec.dtype)
        past = given["Past"]
        for values, cache, size, strides in ((k, given["KCache"], self.depth, self.new[0]),
                                             (v, given["VCache"], self.v_depth, self.new[1])):
            defines = {"W": size, "HKV": self.kv_heads, "SQ": self.q_len, "SKV": self.length, **self.index,
                       **dict(zip(("X_B", "X_H", "X_S"), strides))}
            launches.append(_append(rt, values, cache, past, defines, options))
        rows = 32 if rt.caps.is_gpu else 16
        text = source("attention_score.h", "attention.cl", defines={**self.defines, "BQ": rows, "BK": rows})
        mask = given["KeyMask"].buffer if "KeyMask" in given else None
        launches.append(launch(rt, rt.kernel(text, "attention", options),
                               (-(-self.q_len // rows) * rows, self.batch * self.q_heads), (rows, 1), q.buffer,
                               given["KCache"].buffer, given["VCache"].buffer, out.buffer, mask, past.buffer,
                               *(np.int32(s) for s in self.mask_strides)))
        return launches

    def _unpacked(self, rt: Runtime, packed: DeviceArray, launches: list[Launch]) -> list[DeviceArray]:
        """A packed Q's query, keys and values in buffers of their own ([B, S, H * D] each)."""
        widths = [self.q_heads * self.depth, self.kv_heads * self.depth, self.kv_heads * self.v_depth]
        pieces = [DeviceArray(rt.alloc(self.batch * self.q_len * w * packed.dtype.itemsize),
                              (self.batch, self.q_len, w), packed.dtype) for w in widths]
        launches += split_pieces(packed.shape, 2, widths)(rt, [packed], pieces)
        return pieces


def _append(rt: Runtime, values: DeviceArray, cache: DeviceArray, past: DeviceArray, defines: Mapping[str, object],
            options: tuple[str, ...]) -> Launch:
    """``kv_append.cl``: a step's keys (or values) written to their cache at each sequence's past."""
    kernel = rt.kernel(source("kv_append.cl", defines=defines), "kv_append", options)
    return launch_1d(rt, kernel, values.size, values.buffer, cache.buffer, past.buffer, np.int32(values.size))


class _Turns(NamedTuple):
    """The rotary embedding an op applies (rotary_embedding's, or cached_attention's of Q and K):
    its attributes and how its tables are read."""

    rotary: int
    interleaved: bool
    ids: DType | None
    one_batch: bool
    tables: DType

    @classmethod
    def of(cls, spec: KernelSpec, head: int) -> _Turns:
        ids = spec.input("PositionIds").dtype if spec.has_input("PositionIds") else None
        return cls(spec.attrs["rotary_dim"] or head, spec.attrs["interleaved"], ids,
                   ids is None and spec.input("Cos").shape[0] == 1, spec.input("Cos").dtype)

    def defines(self, rt: Runtime) -> dict[str, object]:
        """decode_attention.cl's ROTARY defines (rotary.cl's, but for the row and the heads)."""
        flags = {flag: "" for flag, on in (("ROTARY", True), ("INTERLEAVED", self.interleaved),
                                           ("IDS", self.ids is not None), ("ONE_BATCH", self.one_batch)) if on}
        ids = {"PIDX": index_defines(self.ids)["IDX"]} if self.ids is not None else {}
        return {"ROT": self.rotary, "HALF": self.rotary // 2, **flags, **ids, **param_defines(rt, self.tables)}

    def launch(self, rt: Runtime, dtype: DType, x: DeviceArray, heads: int, tables: Sequence[Any],
               out: DeviceArray) -> Launch:
        """``rotary.cl`` over ``x`` ([B, S, heads * D] with ``heads``, else [B, H, S, D]) into ``out``."""
        shape = x.shape
        sequence_major = len(shape) == 3
        head = shape[-1] // heads if sequence_major else shape[-1]
        h, s = (heads, shape[1]) if sequence_major else (shape[1], shape[2])
        flags = {flag: "" for flag, on in (("SEQ_MAJOR", sequence_major), ("INTERLEAVED", self.interleaved),
                                           ("IDS", self.ids is not None), ("ONE_BATCH", self.one_batch)) if on}
        defines = {"D": head, "H": h, "S": s, "ROT": self.rotary, "HALF": self.rotary // 2, **flags,
                   **(index_defines(self.ids) if self.ids is not None else {"IDX": "int"}),
                   **param_defines(rt, self.tables)}
        kernel = rt.kernel(source("rotary.cl", defines=defines), "rotary", rt.float_options(dtype))
        return launch_1d(rt, kernel, x.size, x.buffer, *tables, out.buffer, np.int64(x.size))

    def rotated(self, rt: Runtime, dtype: DType, x: DeviceArray, heads: int, tables: Sequence[Any],
                launches: list[Launch]) -> DeviceArray:
        """A new buffer of ``x`` rotated, its launch appended to ``launches``."""
        out = DeviceArray(rt.alloc(x.nbytes), x.shape, x.dtype)
        launches.append(self.launch(rt, dtype, x, heads, tables, out))
        return out


register_kernel("cached_attention", "opencl", FLOATS)(_cached_attention)


def _rotary_embedding(spec: KernelSpec) -> Binder:
    """``rotary.cl``: one work-item per element."""
    x = spec.input("X").shape
    heads = spec.attrs["num_heads"]
    turns = _Turns.of(spec, x[-1] // heads if len(x) == 3 else x[-1])
    has_ids = spec.has_input("PositionIds")

    def bind(rt: Runtime, ins: Sequence[DeviceArray], outs: Sequence[DeviceArray | None]) -> list[Launch]:
        tables = [ins[1].buffer, ins[2].buffer, ins[3].buffer if has_ids else None]
        return [turns.launch(rt, spec.dtype, ins[0], heads, tables, outs[0])]

    return bind


register_kernel("rotary_embedding", "opencl", FLOATS)(_rotary_embedding)
