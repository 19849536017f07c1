"""The executor: runs a program on a place, choosing a kernel per op from its input dtypes.

An op's dtype is the dtype of its decisive input slots (``OpSchema.decisive_slots``; the first
input slot unless the schema says otherwise). Floating inputs of other slots must agree with it,
except slots the schema lets keep their own dtype (batch_norm's statistics, shape tensors). The
kernel is the one registered for (op type, place backend, that dtype) — so a program whose
edges were cast to float16 runs float16 kernels op after op, with no flag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from halfway.ir.block import Block
from halfway.ir.dtypes import DType
from halfway.ir.errors import FeedError, HalfwayError, KernelNotFoundError
from halfway.ir.operator import Operator
from halfway.ir.program import Program
from halfway.ir.schema import InferContext, OpSchema, TensorInfo, get_schema
from halfway.ir.scope import Scope
from halfway.ir.variable import Variable
from halfway.ir.verifier import verify
from halfway.kernels.registry import KernelKey, KernelSpec, find_kernel
from halfway.executor.memory import Lifetime, plan_memory
from halfway.executor.place import CPUPlace, Place
from halfway.executor.prepared import PreparedProgram, PrepareReport, Step, numel_bytes

__all__ = ["Executor", "op_dtype"]

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
        prepared = self.prepare(program, list(feed), fetch_names, scope or Scope(), feed_shapes=feed_shapes)
        return prepared.run(feed)

    def prepare(self, program: Program, feed_names: Sequence[str], fetch_names: Sequence[str | Variable],
                scope: Scope, *, feed_shapes: Mapping[str, Sequence[int]] | None = None) -> PreparedProgram:
        """Verify, infer shapes, choose kernels and plan memory once for these feeds and fetches.

        ``feed_shapes`` fixes dims the program leaves unknown (-1); without it they must be known.
        """
        verify(program, feed_names=feed_names)
        return _Preparer(program.global_block(), self.place.backend, scope).prepare(
            list(feed_names), _names(fetch_names), dict(feed_shapes or {}))


def _names(items: Sequence[str | Variable]) -> list[str]:
    return [v.name if isinstance(v, Variable) else v for v in items]


def op_dtype(op: Operator, schema: OpSchema, infos: Mapping[str, TensorInfo]) -> DType:
    """The dtype that picks ``op``'s kernel (see the module docstring); HalfwayError on a clash."""
    decisive = [(n, infos[n].dtype) for s in schema.decisive_slots for n in op.input(s) if n in infos]
    if not decisive:
        outputs = [infos[n].dtype for n in op.output_names() if n in infos]
        return outputs[0] if outputs else DType.float32
    floating = [(n, d) for n, d in decisive if d.is_floating]
    dtype = floating[0][1] if floating else decisive[0][1]
    kept = set(schema.keep_dtype_slots)
    for slot in (s.name for s in schema.inputs if s.name not in kept):
        for name in op.input(slot):
            other = infos[name].dtype if name in infos else None
            if other is not None and other.is_floating and dtype.is_floating and other is not dtype:
                raise HalfwayError(f"op {op.describe()}: input {slot}={name} is {other.name} but the op runs "
                                   f"{dtype.name} (from {decisive[0][0]}); cast it or transpile the program")
    return dtype


class _Preparer:
    def __init__(self, block: Block, backend: str, scope: Scope) -> None:
        self.block = block
        self.backend = backend
        self.scope = scope
        self.infos: dict[str, TensorInfo] = {}
        self.slots: dict[str, int] = {}
        self.values: list[np.ndarray | None] = []

    def slot(self, name: str) -> int:
        if name not in self.slots:
            self.slots[name] = len(self.values)
            self.values.append(None)
        return self.slots[name]

    def prepare(self, feed_names: list[str], fetch_names: list[str], feed_shapes: dict[str, Any]) -> PreparedProgram:
        feeds = [self._bind_feed(name, feed_shapes.get(name)) for name in feed_names]
        ops = [op for op in self.block.ops if op.type not in _SKIPPED]
        report = PrepareReport()
        steps = [self._step(i, op, report) for i, op in enumerate(ops)]
        for name in fetch_names:
            if name not in self.infos:
                raise FeedError(f"cannot fetch {name!r}: no op computes it and it is neither fed nor a parameter")
        lifetimes = self._lifetimes(steps, fetch_names)
        report.memory = plan_memory(lifetimes, self._inplace_pairs(steps, lifetimes))
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
        self.values[self.slot(name)] = value
        return info

    def _step(self, index: int, op: Operator, report: PrepareReport) -> Step:
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
        key = KernelKey(op.type, self.backend, dtype)
        try:
            factory = find_kernel(op.type, self.backend, dtype)
        except KernelNotFoundError as e:
            raise KernelNotFoundError(f"op #{op.index} {op.describe()} with input dtypes "
                                      f"{_dtypes(inputs)}: {e}") from None
        kernel = factory(KernelSpec(op.type, dtype, ctx._attrs, inputs, outputs))
        report.kernels.append((op.index, op.type, key))
        in_slots = tuple(self.slot(n) for s in inputs for n in op.input(s))
        out_slots = tuple(self.slot(n) for s in outputs for n in op.output(s))
        return Step(op, key, kernel, in_slots, out_slots, ())

    def _lifetimes(self, steps: list[Step], fetch_names: list[str]) -> list[Lifetime]:
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for i, step in enumerate(steps):
            for s in step.outputs:
                first.setdefault(s, i)
                last.setdefault(s, i)
            for s in step.inputs:
                if s in first:
                    last[s] = i
        end = len(steps)
        for name in fetch_names:
            if self.slots[name] in first:
                last[self.slots[name]] = end
        names = {s: n for n, s in self.slots.items()}
        activations = [s for s in first if self.values[s] is None]  # not a parameter updated in place
        return [Lifetime(names[s], numel_bytes(self.infos[names[s]]), first[s], last[s]) for s in activations]

    def _inplace_pairs(self, steps: list[Step], lifetimes: list[Lifetime]) -> dict[str, str]:
        pairs = {}
        for step in steps:
            for in_slot, out_slot in get_schema(step.op.type).inplace.items():
                if step.op.input(in_slot) and step.op.output(out_slot):
                    pairs[step.op.output(out_slot)[0]] = step.op.input(in_slot)[0]
        return pairs

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


def _inferred(ctx: InferContext, slot: str, index: int, op: Operator) -> TensorInfo:
    infos = ctx.outputs.get(slot, [])
    if index < len(infos) and infos[index] is not None:
        return infos[index]
    raise HalfwayError(f"op {op.describe()}: shape inference gave no {slot}[{index}]")


def _dtypes(inputs: Mapping[str, tuple[TensorInfo, ...]]) -> str:
    return ", ".join(f"{slot}={'/'.join(i.dtype.name for i in infos)}" for slot, infos in inputs.items())
