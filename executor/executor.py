"""The executor: runs a program on a place, choosing a kernel per op from its input dtypes
(``halfway.ir.op_dtype``): the one registered for (op type, place backend, that dtype)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from attrs import define, evolve

from halfway.ir.block import Block
from halfway.ir.dtypes import DType
from halfway.ir.errors import FeedError, HalfwayError, KernelNotFoundError
from halfway.ir.operator import Operator
from halfway.ir.op_dtype import op_dtype
from halfway.ir.program import Program
from halfway.ir.schema import InferContext, OpSchema, TensorInfo, get_schema
from halfway.ir.scope import Scope
from halfway.ir.variable import Variable
from halfway.ir.verifier import verify
from halfway.kernels.registry import KernelFactory, KernelKey, KernelSpec, find_kernel
from halfway.executor.memory import Value, plan_memory
from halfway.executor.place import CPUPlace, Place
from halfway.executor.prepared import PreparedProgram, PrepareReport, Step, numel_bytes, read_only

__all__ = ["Executor"]

_SKIPPED = ("feed", "fetch")


class Executor:
    """Runs programs on ``place`` (default: the CPU with numpy kernels)."""

    def __init__(self, place: Place | None = None) -> None:
        self.place = place or CPUPlace()

    def run(self, program: Program, feed: Mapping[str, np.ndarray] | None = None,
            fetch_list: Sequence[str | Variable] | None = None, scope: Scope | None = None) -> list[np.ndarray]:
        """Prepare and run once. ``fetch_list`` defaults to the program's fetch ops."""
        feed = dict(feed or {})
        fetch_names = _names(fetch_list) if fetch_list is not None else program.fetch_names()
        feed_shapes = {n: np.shape(v) for n, v in feed.items()}
        prepared = self.prepare(program, list(feed), fetch_names, scope if scope is not None else Scope(),
                                feed_shapes=feed_shapes)
        return prepared.run(feed)

    def prepare(self, program: Program, feed_names: Sequence[str], fetch_names: Sequence[str | Variable],
                scope: Scope, *, feed_shapes: Mapping[str, Sequence[int]] | None = None,
                reuse_memory: bool = True) -> PreparedProgram:
        """Verify, infer shapes, choose kernels and plan memory once for these feeds and fetches.

        ``feed_shapes`` fixes dims the program leaves unknown (-1); without it they must be known.
        ``reuse_memory=False`` plans a buffer per value and runs no kernel in place (results are
        the same; a baseline for the memory figures and for checking the plan).

        Parameters are bound here, and kernels may precompute from them (Winograd-transformed
        filters, batch norm's per-channel affine): to run with new parameter values, prepare again.
        """
        verify(program, feed_names=feed_names)
        if self.place.backend == "opencl":
            from halfway.executor.opencl import prepare_opencl  # needs pyopencl: imported on demand

            return prepare_opencl(self.place, program.global_block(), scope, list(feed_names), _names(fetch_names),
                                  dict(feed_shapes or {}), reuse_memory)
        return _Preparer(program.global_block(), self.place.backend, scope, reuse_memory).prepare(
            list(feed_names), _names(fetch_names), dict(feed_shapes or {}))


def _names(items: Sequence[str | Variable]) -> list[str]:
    return [v.name if isinstance(v, Variable) else v for v in items]


class _Preparer:
    def __init__(self, block: Block, backend: str, scope: Scope, reuse: bool) -> None:
        self.block = block
        self.backend = backend
        self.scope = scope
        self.reuse = reuse
        self.infos: dict[str, TensorInfo] = {}
        self.slots: dict[str, int] = {}
        self.values: list[np.ndarray | None] = []
        self.written = {name for op in block.ops for name in op.output_names()}

    def slot(self, name: str) -> int:
        if name not in self.slots:
            self.slots[name] = len(self.values)
            self.values.append(None)
        return self.slots[name]

    def prepare(self, feed_names: list[str], fetch_names: list[str], feed_shapes: dict[str, Any]) -> PreparedProgram:
        feeds = [self._bind_feed(name, feed_shapes.get(name)) for name in feed_names]
        ops = [op for op in self.block.ops if op.type not in _SKIPPED]
        pending = [self._resolve(op) for op in ops]
        for name in fetch_names:
            if name not in self.infos:
                raise FeedError(f"cannot fetch {name!r}: no op computes it and it is neither fed nor a parameter")
        report = PrepareReport()
        report.memory = plan_memory(self._plan_values(pending, fetch_names), reuse=self.reuse)
        steps = [self._step(p, report) for p in pending]
        self._set_frees(steps, fetch_names)
        return PreparedProgram(steps, self.values, feeds, [self.slots[n] for n in fetch_names], fetch_names, report)

    def _bind_feed(self, name: str, shape: Sequence[int] | None) -> tuple[str, int, TensorInfo]:
        if not self.block.has_var(name):
            raise FeedError(f"unknown feed name {name!r}; the program declares no such var")
        var = self.block.var(name)
        declared = TensorInfo(var.shape or (), var.dtype if var.dtype is not None else DType.float32)
        if shape is not None:
            shape = tuple(shape)
            if len(shape) != len(declared.shape) or any(d not in (-1, s) for d, s in zip(declared.shape, shape)):
                raise FeedError(f"feed {name!r} has shape {list(shape)}, expected {list(declared.shape)} (-1 = any)")
            declared = TensorInfo(shape, declared.dtype)
        elif any(d < 0 for d in declared.shape):
            raise FeedError(f"feed {name!r} has unknown dims {list(declared.shape)}; pass feed_shapes to prepare")
        self.infos[name] = declared
        return name, self.slot(name), declared

    def _input_info(self, op: Operator, name: str) -> TensorInfo:
        if name in self.infos:
            return self.infos[name]
        value = self.scope.find(name)
        var = self.block.find_var(name)
        if value is None or not var.persistable:
            what = "not fed" if not var.persistable else "missing from the scope"
            raise HalfwayError(f"op {op.describe()}: input {name!r} is {what}")
        info = TensorInfo(value.shape, DType.from_any(value.dtype))
        self.infos[name] = info
        self.values[self.slot(name)] = read_only(value)
        return info

    def _resolve(self, op: Operator) -> _Pending:
        """Infer ``op``'s output infos and find its kernel factory."""
        schema = get_schema(op.type)
        inputs = {s.name: tuple(self._input_info(op, n) for n in op.input(s.name)) for s in schema.inputs
                  if op.input(s.name)}
        constants = {slot: [self.scope.find(n) for n in op.input(slot)] for slot in inputs}
        ctx = InferContext(schema, {s: list(v) for s, v in inputs.items()}, op.attrs, constants)
        if schema.infer is not None:
            schema.infer(ctx)
        outputs = {s.name: tuple(_inferred(ctx, s.name, i, op) for i in range(len(op.output(s.name))))
                   for s in schema.outputs if op.output(s.name)}
        for slot, infos in outputs.items():
            self.infos.update(zip(op.output(slot), infos))
        dtype = op_dtype(op, schema, self.infos)
        try:
            factory = find_kernel(op.type, self.backend, dtype)
        except KernelNotFoundError as e:
            raise KernelNotFoundError(f"op #{op.index} {op.describe()} with input dtypes "
                                      f"{_dtypes(inputs)}: {e}") from None
        spec = KernelSpec(op.type, dtype, ctx._attrs, inputs, outputs, constants=self._parameters(op, inputs))
        in_slots = tuple(self.slot(n) for s in inputs for n in op.input(s))
        out_slots = tuple(self.slot(n) for s in outputs for n in op.output(s))
        return _Pending(op, schema, factory, spec, in_slots, out_slots)

    def _parameters(self, op: Operator, inputs: Mapping[str, Any]) -> dict[str, tuple[np.ndarray | None, ...]]:
        """Per input slot of ``op``, the bound values of its inputs that are parameters no op
        writes (None for the others): what the kernel may precompute from."""
        found = {slot: tuple(None if n in self.written else self.values[self.slots[n]] for n in op.input(slot))
                 for slot in inputs}
        return {slot: values for slot, values in found.items() if any(v is not None for v in values)}

    def _plan_values(self, pending: list[_Pending], fetch_names: list[str]) -> list[Value]:
        """Every value the steps touch, for the memory plan: activations with the step writing
        them; feeds and parameters (the caller's memory) with none."""
        names = {s: n for n, s in self.slots.items()}
        values: dict[str, Value] = {}
        for i, p in enumerate(pending):
            for s in p.inputs:
                values.setdefault(names[s], Value(names[s], numel_bytes(self.infos[names[s]]), None, i)).last = i
            for name, view_of, inplace_of in _output_sources(p.op, p.schema):
                if name in values:  # a parameter updated in place, or a var written twice
                    values[name].last = i
                    continue
                owned = self.values[self.slots[name]] is None
                values[name] = Value(name, numel_bytes(self.infos[name]), i if owned else None, i, view_of, inplace_of)
        for name in fetch_names:
            if name in values:
                values[name].last = len(pending)
        return list(values.values())

    def _step(self, p: _Pending, report: PrepareReport) -> Step:
        planned = report.memory.inplace
        inplace = any(inplace_of is not None and planned.get(name) == inplace_of
                      for name, _, inplace_of in _output_sources(p.op, p.schema))
        kernel = p.factory(evolve(p.spec, inplace=inplace))
        key = KernelKey(p.op.type, self.backend, p.spec.dtype)
        report.kernels.append((p.op.index, p.op.type, key))
        return Step(p.op, key, kernel, p.inputs, p.outputs, ())

    def _set_frees(self, steps: list[Step], fetch_names: list[str]) -> None:
        keep = {self.slots[n] for n in fetch_names}
        keep |= {s for s, v in enumerate(self.values) if v is not None}  # parameters
        last_read: dict[int, int] = {}
        for i, step in enumerate(steps):
            for s in step.inputs + step.outputs:
                last_read[s] = i
        frees: dict[int, list[int]] = {}
        for s, i in last_read.items():
            if s not in keep:
                frees.setdefault(i, []).append(s)
        for i, step in enumerate(steps):
            step.frees = tuple(frees.get(i, ()))


@define
class _Pending:
    """An op resolved but not yet bound: its kernel is made once the memory plan says whether
    it may write in place."""

    op: Operator
    schema: OpSchema
    factory: KernelFactory
    spec: KernelSpec
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def _output_sources(op: Operator, schema: OpSchema) -> Iterator[tuple[str, str | None, str | None]]:
    """(output name, input it may be a view of, input it may overwrite) for each output of ``op``."""
    overwrites = {out: inp for inp, out in schema.inplace.items()}
    for slot, names in op.outputs.items():
        for i, name in enumerate(names):
            view = op.input(schema.views[slot]) if slot in schema.views else ()
            source = op.input(overwrites[slot]) if slot in overwrites and i == 0 else ()
            yield name, view[0] if view else None, source[0] if source else None


def _inferred(ctx: InferContext, slot: str, index: int, op: Operator) -> TensorInfo:
    infos = ctx.outputs.get(slot, [])
    if index < len(infos) and infos[index] is not None:
        return infos[index]
    raise HalfwayError(f"op {op.describe()}: shape inference gave no {slot}[{index}]")


def _dtypes(inputs: Mapping[str, tuple[TensorInfo, ...]]) -> str:
    return ", ".join(f"{slot}={'/'.join(i.dtype.name for i in infos)}" for slot, infos in inputs.items())
