"""A register-tiled multiply-add loop, written in LLVM IR through a numba intrinsic, for the direct
and depthwise convolutions (``jit_direct``, ``jit_windows``) and the products by packed weights
(``jit_gemm``): ``out[k, p] = sum_i w[i, k] * src[offs[i] + p]`` for ``OUTS`` output rows ``k``
and positions ``p``.

numba compiles a loop over arrays, not over registers: the direct convolution written as numba
loops kept its accumulators in memory, a load and a store of each per three multiply-adds, and ran
at about 60 GMAC/s a core on YOLO's 32 -> 32 layers. Here each tile of ``VECTORS * LANES`` positions
keeps ``OUTS * VECTORS`` vector accumulators in registers for its whole sum: per step ``i`` of the sum
it loads ``VECTORS`` vectors of the source (``src[offs[i] + p:...]``, one input channel and tap)
and ``OUTS`` weights, each broadcast, for ``OUTS * VECTORS`` FMAs (16 FMAs per 10 loads with
AVX-512, where a core issues two FMAs and two loads a cycle). The same loop runs at 120-130
GMAC/s a core. The last tile of a row of positions that the tile does not divide is computed with
masked loads and stores, so nothing past ``npos`` is read or written.

The vector width follows the host: 16 float32 lanes with AVX-512, 8 with AVX, 4 otherwise (the
IR is generic; LLVM splits wider vectors where it must). The sums are rounded as FMAs in the
order of ``i``.
"""

from __future__ import annotations

import functools
import itertools

import llvmlite.binding as llvm
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["LANES", "OUTS", "VECTORS", "WINDOW_VECTORS", "make_tile_sums", "tile_sums", "window_sums"]


def _host_lanes() -> int:
    """float32 lanes of the host's widest vectors (LLVM's view of its features)."""
    features = llvm.get_host_cpu_features()
    if features.get("avx512f"):
        return 16
    return 8 if features.get("avx") else 4


LANES = _host_lanes()
OUTS = 8 if LANES == 16 else 4
"""Output rows a tile computes: with ``VECTORS`` their accumulators take 16 of AVX-512's 32
vector registers (12 of AVX's 16), leaving room for the loaded vectors and a broadcast weight.
Fewer (4 or 6) ran 10% slower on YOLO's layers; 12 no faster."""
VECTORS = 2 if LANES == 16 else 3
"""Vectors of positions a tile of ``tile_sums`` spans."""
WINDOW_VECTORS = 4
"""Vectors of positions a tile of ``window_sums`` (one output row) spans."""


_I32, _I64 = ir.IntType(32), ir.IntType(64)
_ALIGN = ir.Constant(_I32, 4)
"""The alignment the loads and stores assume: a float's (positions start anywhere)."""


def _int(value: int) -> ir.Constant:
    return ir.Constant(_I64, value)


def _splat(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """``value`` in every lane of a vector."""
    vector = ir.VectorType(value.type, LANES)
    first = builder.insert_element(ir.Constant(vector, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(first, ir.Constant(vector, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, LANES), [0] * LANES))


class _Tile:
    """Emits a tile's sum (``emit``): ``outs * vectors`` accumulators, the loop over the sum's
    steps, the stores; with masks for a partial tile."""

    def __init__(self, builder: ir.IRBuilder, args: list[ir.Value], outs: int, vectors: int) -> None:
        self.builder, self.outs, self.vectors = builder, outs, vectors
        self.src, self.offs, self.steps, self.w, self.w_step, self.w_row, self.out, self.stride, _ = args
        self.vector = ir.VectorType(ir.FloatType(), LANES)
        pointer, mask = ir.PointerType(self.vector), ir.VectorType(ir.IntType(1), LANES)
        declare = functools.partial(cgutils.get_or_insert_function, builder.module)
        self.fma = declare(ir.FunctionType(self.vector, [self.vector] * 3), f"llvm.fma.v{LANES}f32")
        self.masked_load = declare(ir.FunctionType(self.vector, [pointer, _I32, mask, self.vector]),
                                   f"llvm.masked.load.v{LANES}f32.p0")
        self.masked_store = declare(ir.FunctionType(ir.VoidType(), [self.vector, pointer, _I32, mask]),
                                    f"llvm.masked.store.v{LANES}f32.p0")
        self.accumulators = [[cgutils.alloca_once(builder, self.vector) for _ in range(vectors)] for _ in range(outs)]

    def _at(self, address: ir.Value, offset: ir.Value, kind: ir.Type) -> ir.Value:
        """A pointer to a ``kind`` at element ``offset`` of the buffer at integer ``address``."""
        element = kind.element if isinstance(kind, ir.VectorType) else kind
        base = self.builder.gep(self.builder.inttoptr(address, ir.PointerType(element)), [offset])
        return self.builder.bitcast(base, ir.PointerType(kind))

    def emit(self, p: ir.Value, masks: list[ir.Value] | None) -> None:
        """The tile at position ``p``; ``masks`` the lanes of each of its vectors that a partial
        tile computes."""
        builder, zero = self.builder, ir.Constant(self.vector, None)
        for slot in itertools.chain.from_iterable(self.accumulators):
            builder.store(zero, slot)
        with cgutils.for_range(builder, self.steps) as loop:
            i = loop.index
            start = builder.add(builder.load(self._at(self.offs, i, _I64)), p)
            vectors = []
            for j in range(self.vectors):
                at = self._at(self.src, builder.add(start, _int(j * LANES)), self.vector)
                vectors.append(builder.load(at, align=4) if masks is None
                               else builder.call(self.masked_load, [at, _ALIGN, masks[j], zero]))
            step = builder.mul(i, self.w_step)
            for k, slots in enumerate(self.accumulators):
                at = builder.add(step, builder.mul(self.w_row, _int(k)))
                weight = _splat(builder, builder.load(self._at(self.w, at, ir.FloatType())))
                for vector, slot in zip(vectors, slots):
                    builder.store(builder.call(self.fma, [vector, weight, builder.load(slot)]), slot)
        for k, slots in enumerate(self.accumulators):
            row = builder.add(builder.mul(self.stride, _int(k)), p)
            for j, slot in enumerate(slots):
                at = self._at(self.out, builder.add(row, _int(j * LANES)), self.vector)
                if masks is None:
                    builder.store(builder.load(slot), at, align=4)
                else:
                    builder.call(self.masked_store, [builder.load(slot), at, _ALIGN, masks[j]])

    def masks(self, left: ir.Value) -> list[ir.Value]:
        """Per vector of a partial tile, its lanes below ``left`` positions."""
        lanes = ir.Constant(ir.VectorType(_I64, LANES), list(range(LANES)))
        return [self.builder.icmp_signed("<", lanes, _splat(self.builder, self.builder.sub(left, _int(j * LANES))))
                for j in range(self.vectors)]


def make_tile_sums(outs: int, vectors: int):
    """The loop for ``outs`` output rows and tiles of ``vectors`` vectors, as an intrinsic
    ``sums(src, offs, steps, w, w_step, w_row, out, stride, npos)``: ``out[k * stride + p] =
    sum_{i < steps} w[i * w_step + k * w_row] * src[offs[i] + p]`` for ``k < outs`` and ``p <
    npos``; every argument an int64, the buffers as addresses (float32, ``offs`` int64), which the
    caller keeps alive. The weights are packed step by step (``w_step = outs, w_row = 1``) or read
    where they lie, a matrix's rows (``w_step = 1, w_row`` its row length)."""
    tile = LANES * vectors

    def codegen(context, builder, signature, args):
        emitter, count = _Tile(builder, list(args), outs, vectors), args[8]
        full = builder.mul(builder.sdiv(count, _int(tile)), _int(tile))
        with cgutils.for_range_slice(builder, _int(0), full, _int(tile)) as (p, _):
            emitter.emit(p, None)
        left = builder.sub(count, full)
        with builder.if_then(builder.icmp_signed(">", left, _int(0)), likely=False):
            emitter.emit(full, emitter.masks(left))
        return context.get_dummy_value()

    def sums(typingctx, src, offs, steps, w, w_step, w_row, out, stride, npos):  # pragma: no cover - compiled
        return types.none(*[types.int64] * 9), codegen

    sums.__name__ = sums.__qualname__ = f"tile_sums_{outs}x{vectors}x{LANES}"
    return intrinsic(sums)


tile_sums = make_tile_sums(OUTS, VECTORS)
"""The direct convolution's: ``OUTS`` output channels from shared input runs."""
window_sums = make_tile_sums(1, WINDOW_VECTORS)
"""The depthwise convolution's: one output channel from its own input's runs (a load per FMA,
where the loads of two vectors' sums in memory cost 2.5 per FMA)."""
