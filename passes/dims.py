"""Which run-time dims (and entries of small integer vectors) of block 0 are provably equal.

A program imported with symbolic batch and sequence dims declares those dims -1, so nothing in
the var table says that the sequence dim of a layer_norm's output is the one a ``shape`` op
read three ops earlier from another var. ``probe_dims`` finds out by *probing*: it runs every
op's own shape inference (the op schemas, nothing written twice) on stand-in sizes, and the
reference evaluator (``halfway.ir.evaluate``) on the small integer vectors of the shape arithmetic.

Each unknown dim that the block cannot derive (a feed's batch, a data-dependent size) is a
*symbol*, named by the var and axis where it first appears (feed dims of one name, the
``DIM_NAMES`` attr an ONNX import gives them, are one symbol), with a stand-in size: a distinct
prime above 10^5. There are two probes, with the primes in ascending order of symbols in one
and in descending order in the other. A dim or integer of the result decodes as

1. a known size: the var declares it (for dims); the same value in both probes and produced by
   exact arithmetic only (for vector entries: ``EXACT_OPS``, where agreement of two probes
   means a polynomial identity, not a comparison with a threshold that the large stand-ins
   happen to pass);
2. a symbol: the stand-in of one symbol in both probes (``min(a, b)`` does not decode: the
   reversed order makes it pick different symbols);
3. otherwise a new symbol (dims; a product such as ``batch * sequence``), or unknown (vector
   entries: None).

Vars that ops of other blocks (a loop's body) write have no dims in the table.

Dims a var declares (>= 0) always win over the probes. An op whose inference fails on the
stand-ins gets new symbols for the dims it does not declare.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.block import Block
from ..ir.dtypes import DType
from ..ir.errors import HalfwayError
from ..ir.evaluate import evaluate_op
from ..ir.operator import Operator
from ..ir.schema import InferContext, TensorInfo, get_schema, has_schema
from ..ir.scope import Scope

__all__ = ["Symbol", "Dim", "DimTable", "EXACT_OPS", "probe_dims"]

Symbol = tuple[str, int]
"""A run-time size: dim ``axis`` of var ``name``, where it first appeared."""
Dim = int | Symbol
"""A known size or a symbol."""

EXACT_OPS = frozenset({"shape", "cast", "assign", "concat", "stack", "unsqueeze2", "squeeze2", "reshape2",
                       "flatten_contiguous_range", "slice", "gather", "fill_constant", "elementwise_add",
                       "elementwise_sub", "elementwise_mul", "where"})
"""Ops whose integer results the probes follow: moves of entries and ring arithmetic (no
division, comparison or clipping, whose results at the stand-in sizes need not hold at others).
``equal`` and ``not_equal`` are followed where every entry compares alike at all sizes."""

_CLIPPING = frozenset({"slice", "strided_slice"})
"""Ops whose output dims may be clipped to a size (a slice's end past the dim): at the large
stand-ins a clipped dim looks constant while at run time it may be the smaller one."""
_SMALL = 64
"""The most entries of an integer tensor whose values the probes follow."""
_PRIMES_FROM, _PRIMES_TO = 1009, 46337


class DimTable:
    """The result of ``probe_dims``: per var, its dims (known sizes and symbols) and, for small
    integer vectors the probes followed, the decoded entries (int, Symbol, or None: unknown)."""

    def __init__(self) -> None:
        self.dims: dict[str, tuple[Dim, ...]] = {}
        self.vectors: dict[str, tuple[Dim | None, ...]] = {}

    def dims_of(self, name: str) -> tuple[Dim, ...] | None:
        return self.dims.get(name)

    def vector(self, name: str) -> tuple[Dim | None, ...] | None:
        """The entries of a small integer var (a 0-d one as one entry), or None when not followed."""
        return self.vectors.get(name)


def probe_dims(block: Block, scope: Scope | None = None) -> DimTable:
    """The dims of every var that ops of ``block`` read or write, and the entries of its small
    integer vectors (module docstring). ``scope`` holds the parameters the shape arithmetic may read."""
    return _Prober(block, scope).run()


class _Prober:
    def __init__(self, block: Block, scope: Scope | None) -> None:
        self.block, self.scope = block, scope
        self.table = DimTable()
        self.shapes: tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]] = ({}, {})
        self.values: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] = ({}, {})
        self.exact: set[str] = set()
        self.sizes: dict[Symbol, tuple[int, int]] = {}
        self.symbols: dict[tuple[int, int], Symbol] = {}
        self.primed: list[tuple[int, int]] = []
        self.opaque: set[Symbol] = set()
        self.named: dict[str, Symbol | None] = {}
        program = block.program
        self.elsewhere = {n for other in (program.blocks if program is not None else ()) if other is not block
                          for op in other.ops for n in op.output_names()}
        """Vars that ops of other blocks write: the probes know nothing of them."""
        self._primes = _primes()

    def run(self) -> DimTable:
        static = all(d >= 0 for var in self.block.vars.values() for d in (var.shape or ()))
        for op in self.block.ops:
            if op.type in ("feed", "fetch"):
                continue
            for name in op.input_names():
                if name not in self.table.dims:
                    self._declare(name)
            if static:
                self._declare_outputs(op)
            else:
                self._visit(op)
        return self.table

    def _declare_outputs(self, op: Operator) -> None:
        """A block of known shapes only has nothing to probe: its outputs' dims are declared."""
        for name in op.output_names():
            self.table.vectors.pop(name, None)
            self._set_dims(name, tuple(_declared(self.block, name)))

    # -- symbols ---------------------------------------------------------------------------------
    def _symbol(self, name: str, axis: int, pair: tuple[int, int] | None = None) -> Symbol | None:
        """A new symbol for dim ``axis`` of ``name``, with the stand-ins ``pair`` (the sizes the
        probes computed for it) or the next two primes; None when the primes ran out."""
        if pair is None:
            count = len(self.primed)
            if 2 * count + 2 > len(self._primes):
                return None
            pair = (self._primes[count], self._primes[-1 - count])
            self.primed.append(pair)
        symbol = (name, axis)
        self.sizes[symbol] = pair
        self.symbols[pair] = symbol
        return symbol

    def _named(self, dim_name: str, name: str, axis: int) -> Symbol | None:
        """The symbol of the feed dim named ``dim_name`` (one per name), or a new one when unnamed."""
        if not dim_name:
            return self._symbol(name, axis)
        if dim_name not in self.named:
            self.named[dim_name] = self._symbol(name, axis)
        return self.named[dim_name]

    def _stand_in(self, dim: Dim, probe: int) -> int:
        return dim if isinstance(dim, int) else self.sizes[dim][probe]

    # -- vars ------------------------------------------------------------------------------------
    def _declare(self, name: str) -> None:
        """A var no op of the block wrote so far (a feed, a parameter): its declared dims, a new
        symbol for each unknown one; a small integer parameter's value."""
        var = self.block.find_var(name)
        shape = tuple(var.shape or ()) if var is not None else ()
        names = var.dim_names() if var is not None else []
        self._set_dims(name, tuple(d if d >= 0 else self._named(names[i], name, i) for i, d in enumerate(shape)))
        value = self.scope.find(name) if self.scope is not None and var is not None and var.persistable else None
        if value is not None and value.dtype.kind in "iub" and value.size <= _SMALL:
            for probe in (0, 1):
                self.values[probe][name] = value
            self.exact.add(name)
            self.table.vectors[name] = tuple(int(v) for v in value.reshape(-1))

    def _set_dims(self, name: str, dims: tuple[Dim | None, ...]) -> None:
        if any(d is None for d in dims) or name in self.elsewhere:
            self.table.dims.pop(name, None)
            for probe in (0, 1):
                self.shapes[probe].pop(name, None)
            return
        known: tuple[Dim, ...] = dims  # type: ignore[assignment]
        self.table.dims[name] = known
        for probe in (0, 1):
            self.shapes[probe][name] = tuple(self._stand_in(d, probe) for d in known)

    # -- ops -------------------------------------------------------------------------------------
    def _visit(self, op: Operator) -> None:
        outputs = op.output_names()
        for name in outputs:
            self.values[0].pop(name, None)
            self.values[1].pop(name, None)
            self.table.vectors.pop(name, None)
            self.exact.discard(name)
        inferred = [self._infer(op, probe, opaque=False) for probe in (0, 1)]
        if inferred[0] is None or inferred[1] is None:
            inferred = [self._infer(op, probe, opaque=True) for probe in (0, 1)]
        for slot, names in op.outputs.items():
            for index, name in enumerate(names):
                found = [infos.get(slot, [])[index] if infos is not None and index < len(infos.get(slot, [])) else None
                         for infos in inferred]
                self._set_dims(name, self._output_dims(op, name, found))
        self._follow_values(op)

    def _infer(self, op: Operator, probe: int, *, opaque: bool) -> Mapping[str, list[Any]] | None:
        """The op's output infos at the probe's stand-in sizes, or None where inference refuses.
        ``opaque``: the dims nothing is known about go in as -1 (unknown), as at import: a
        mask's head dim that is 1 at run time broadcasts with the heads then."""
        if not has_schema(op.type) or op.sub_blocks():
            return None
        schema = get_schema(op.type)
        inputs: dict[str, list[TensorInfo]] = {}
        values: dict[str, list[np.ndarray | None]] = {}
        for slot, names in op.inputs.items():
            if any(n not in self.shapes[probe] for n in names):
                return None
            inputs[slot] = [TensorInfo(self._shape(n, probe, opaque), _dtype(self.block, n)) for n in names]
            values[slot] = [self.values[probe].get(n) for n in names]
        try:
            ctx = InferContext(schema, inputs, op.attrs, values)
            if schema.infer is not None:
                schema.infer(ctx)
        except (HalfwayError, ValueError, TypeError, IndexError, KeyError, ArithmeticError):
            return None
        return ctx.outputs

    def _shape(self, name: str, probe: int, opaque: bool) -> tuple[int, ...]:
        shape = self.shapes[probe][name]
        if not opaque:
            return shape
        return tuple(-1 if d in self.opaque else s for d, s in zip(self.table.dims[name], shape))

    def _output_dims(self, op: Operator, name: str, found: Sequence[TensorInfo | None]) -> tuple[Dim | None, ...]:
        declared = _declared(self.block, name)
        a, b = (tuple(info.shape) if info is not None else None for info in found)
        probed = a is not None and b is not None and len(a) == len(b) == len(declared)
        dims: list[Dim | None] = []
        for axis, size in enumerate(declared):
            if size >= 0:
                dims.append(size)
                continue
            pair = (a[axis], b[axis]) if probed else (-1, -1)  # type: ignore[index]
            if pair[0] == pair[1] >= 0 and op.type not in _CLIPPING:
                dims.append(pair[0])
            elif pair in self.symbols:
                dims.append(self.symbols[pair])
            elif pair[0] != pair[1] and min(pair) > 0:
                dims.append(self._symbol(name, axis, pair))
            else:
                dims.append(self._symbol(name, axis))
                self.opaque.add((name, axis))
        return tuple(dims)

    def _sure_comparison(self, op: Operator) -> bool:
        """An ``equal``/``not_equal`` of two followed vectors whose every entry compares alike
        at all sizes (``_sure``): ``where(shape == -1, 1, shape)``, as exports of expand write."""
        x, y = (self.table.vector(op.input(slot)[0]) if op.input(slot) else None for slot in ("X", "Y"))
        if x is None or y is None or len(x) != len(y) and 1 not in (len(x), len(y)):
            return False
        width = max(len(x), len(y))
        return all(_sure(x[i % len(x)], y[i % len(y)]) for i in range(width))

    def _follow_values(self, op: Operator) -> None:
        """Compute the op's small integer outputs in both probes where its inputs are followed."""
        if op.type not in EXACT_OPS or op.type == "slice" and len(op.input_names()) > 1:
            if op.type not in ("equal", "not_equal") or not self._sure_comparison(op):
                return
        out = op.output_names()[0]
        var = self.block.find_var(out)
        if var is None or var.dtype is None or np.dtype(var.dtype.numpy).kind not in "iub":
            return
        if op.type == "shape":
            name = op.input("Input")[0]
            if name not in self.shapes[0]:
                return
            results = [np.asarray(self.shapes[p][name], dtype=np.int64) for p in (0, 1)]
            if any(r.max(initial=0) > np.iinfo(var.dtype.numpy).max for r in results):
                return
            results = [r.astype(var.dtype.numpy) for r in results]
        else:
            names = op.input_names()
            if any(n not in self.exact for n in names):
                return
            if any(int(np.prod(self.shapes[p].get(out, (_SMALL + 1,)))) > _SMALL for p in (0, 1)):
                return
            try:
                found = [evaluate_op(op, {n: self.values[p][n] for n in names}).get(out) for p in (0, 1)]
            except HalfwayError:
                return
            if found[0] is None or found[1] is None or found[0].shape != found[1].shape:
                return
            results = [found[0], found[1]]
        for probe, result in enumerate(results):
            self.values[probe][out] = result
        self.exact.add(out)
        self.table.vectors[out] = tuple(int(a) if a == b else self.symbols.get((int(a), int(b)))
                                        for a, b in zip(results[0].reshape(-1), results[1].reshape(-1)))


def _sure(a: Dim | None, b: Dim | None) -> bool:
    """Whether comparing entries ``a`` and ``b`` for equality gives the same answer at every
    size: two known sizes, one symbol with itself, or a symbol (never negative) with a negative."""
    if a is None or b is None:
        return False
    if isinstance(a, int) and isinstance(b, int) or a == b:
        return True
    return (isinstance(a, int) and a < 0) or (isinstance(b, int) and b < 0)


def _declared(block: Block, name: str) -> tuple[int, ...]:
    """The dims ``name`` is declared with (-1: unknown)."""
    var = block.find_var(name)
    return tuple(var.shape or ()) if var is not None else ()


def _dtype(block: Block, name: str) -> DType:
    var = block.find_var(name)
    return var.dtype if var is not None and var.dtype is not None else DType.float32


@functools.cache
def _primes() -> list[int]:
    """The primes in [_PRIMES_FROM, _PRIMES_TO): the stand-in sizes."""
    sieve = np.ones(_PRIMES_TO, dtype=bool)
    sieve[:2] = False
    for p in range(2, int(_PRIMES_TO ** 0.5) + 1):
        if sieve[p]:
            sieve[p * p::p] = False
    return [int(p) for p in np.flatnonzero(sieve[_PRIMES_FROM:]) + _PRIMES_FROM]
