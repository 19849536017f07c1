"""The preparer: verification aside, everything ``prepare`` does once, for every backend.

1. feeds are bound to their declared (or given) shapes; parameters to their scope values;
2. per op, in block order: shapes and dtypes are inferred, the dtype that picks the kernel
   (``halfway.ir.op_dtype``) read, and ``select_kernel`` asked for the kernel that runs it on
   the backend — or on numpy, with explicit transfers, listed in the report (a strict place
   refuses them, naming every such op). Shape arithmetic is computed here, on the host: a
   ``shape`` op's value is its input's inferred shape, and an op whose inputs are all such
   values (or parameters, at least one such value) is evaluated now when its outputs are small
   (``HOST_VALUE_LIMIT``). Those ops do not run; their values are bound like parameters, and
   shape inference reads them (a Reshape to a shape computed from a feed's). An output whose
   shape is still unknown then depends on fed values: numpy's kernels run it as it comes, a
   backend that allocates its buffers here (``Backend.static_shapes``) refuses it;
3. the memory plan groups views and in-place outputs (as the backend allows for its kernels)
   and assigns buffers by liveness; a kernel whose output the plan puts in place is made again
   with ``spec.inplace``;
4. the backend allocates a handle per tensor and binds each kernel to its op's handles; the
   parameters a program given as ``share`` binds from the same scope arrays, on the same device
   memory, keep that program's handles (weights uploaded once; state seen by both);
5. a program holding float16 values gets float16's range checks around its runs
   (``halfway.executor.float16_range``) unless ``check_float16_range`` is False.

A parameter some op writes (a persistable var that is also an op's output: a key/value cache
``cached_attention`` appends to, batch_norm's MeanOut) is *state*: it is bound as the scope's
array itself, not a read-only view, so that a numpy kernel may write it in place and the next run
(of this program, or of another prepared from the same scope) reads what it wrote. On a device the
state lives in the buffer uploaded from the scope's array, and programs prepared with ``share``
bind that buffer too; the scope's array then keeps the value it was uploaded with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from attrs import evolve

from ..ir.block import Block
from ..ir.dtypes import DType
from ..ir.errors import FeedError, HalfwayError, KernelNotFoundError
from ..ir.evaluate import evaluate_op
from ..ir.infer import infer_outputs
from ..ir.op_dtype import op_dtype
from ..ir.operator import Operator
from ..ir.schema import RANDOM_OPS, TensorInfo, get_schema
from ..ir.scope import Scope
from ..kernels.registry import KernelSpec, Selection, select_kernel
from .backend import Backend, ResolvedOp, Run
from .float16_range import float16_range
from .memory import Value, plan_memory
from .prepared import PreparedProgram, PrepareReport, Step, read_only

__all__ = ["Preparer", "SKIPPED_OPS", "HOST_VALUE_LIMIT"]

SKIPPED_OPS = ("feed", "fetch")
HOST_VALUE_LIMIT = 1 << 20
"""The most elements an op computed at prepare from shapes may output (a position-id range,
an attention mask built from a feed's shape); larger ones run with the program."""


class Preparer:
    """Prepares one block for one backend; used once."""

    def __init__(self, block: Block, backend: Backend, scope: Scope, *, reuse: bool = True,
                 strict: bool = False, check_float16_range: bool = True, share: PreparedProgram | None = None) -> None:
        self.block = block
        self.backend = backend
        self.scope = scope
        self.reuse = reuse
        self.strict = strict
        self.check_float16_range = check_float16_range
        self.share = share
        self.infos: dict[str, TensorInfo] = {}
        self.parameters: dict[str, np.ndarray] = {}
        self.sources: dict[str, np.ndarray] = {}
        """Parameter name -> its array in the scope (what ``share`` matches by identity)."""
        self.host_values: dict[str, np.ndarray] = {}
        self.written = {name for op in block.ops for name in op.output_names()}

    def prepare(self, feed_names: Sequence[str], fetch_names: Sequence[str],
                feed_shapes: Mapping[str, Sequence[int]]) -> PreparedProgram:
        feeds = [self._bind_feed(name, feed_shapes.get(name)) for name in feed_names]
        resolved = [r for op in self.block.ops if op.type not in SKIPPED_OPS and (r := self._resolve(op)) is not None]
        for name in fetch_names:
            if name not in self.infos:
                raise FeedError(f"cannot fetch {name!r}: no op computes it and it is neither fed nor a parameter")
        report = PrepareReport(backend=self.backend.name, device=self.backend.device,
                               float16_mode=self.backend.float16_mode)
        selections = [self._select(r, report) for r in resolved]
        if report.fallbacks and self.strict:
            raise KernelNotFoundError(
                f"strict place {self.backend.place}: these ops would fall back to numpy: " +
                "; ".join(f"op #{i} {t} ({why})" for i, t, why in report.fallbacks) +
                " (register kernels for them, or drop strict to run them on numpy with transfers)")
        report.memory = plan_memory(self._values(resolved, selections, fetch_names), reuse=self.reuse)
        shared = self._shared()
        uploads = {name: value for name, value in self.parameters.items() if name not in shared}
        handles = self.backend.allocate(self.infos, report.memory, uploads, list(feed_names), shared=shared)
        dying = self._dying(resolved, fetch_names)
        steps = [self._step(r, s, handles, dying.get(i, ()), report) for i, (r, s) in enumerate(zip(resolved, selections))]
        feed_handles = [(name, handles[name], info) for name, info in feeds]
        fetches = [(self._handle(handles, n), self.infos[n].dtype) for n in fetch_names]
        checks = (float16_range([step.op for step in steps], self.infos, self.parameters, list(feed_names), fetch_names)
                  if self.check_float16_range else None)
        resident = {name: (value, handles[name]) for name, value in self.sources.items() if name in handles}
        return PreparedProgram(self.backend, steps, feed_handles, fetches, fetch_names, report, checks, resident)

    # -- tensors --------------------------------------------------------------------------------
    def _bind_feed(self, name: str, shape: Sequence[int] | None) -> tuple[str, TensorInfo]:
        if not self.block.has_var(name):
            raise FeedError(f"unknown feed name {name!r}; the program declares no such var")
        computed = [op for op in self.block.ops if op.type not in SKIPPED_OPS and name in op.output_names()
                    and name not in op.input_names()]  # batch_norm's MeanOut updates its fed Mean
        if computed:
            raise FeedError(f"cannot feed {name!r}: op #{computed[0].index} {computed[0].describe()} computes it "
                            f"(feed the program's inputs; fetch {name!r} to read it)")
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
        return name, declared

    def _input_info(self, op: Operator, name: str) -> TensorInfo:
        if name in self.infos:
            return self.infos[name]
        value = self.scope.find(name)
        var = self.block.find_var(name)
        if not var.persistable:
            raise FeedError(f"op {op.describe()}: input {name!r} is not fed")
        if value is None:
            raise HalfwayError(f"op {op.describe()}: input {name!r} is missing from the scope")
        info = TensorInfo(value.shape, DType.from_any(value.dtype))
        self.infos[name] = info
        self.sources[name] = value
        self.parameters[name] = value if name in self.written else read_only(value)  # state: see the docstring
        return info

    def _shared(self) -> dict[str, Any]:
        """The handles ``share`` holds for parameters bound here from the same scope arrays, when
        both programs' values live in one device memory (numpy's runs read the arrays themselves)."""
        share = self.share
        if share is None or self.backend.memory is None or share.backend.memory is not self.backend.memory:
            return {}
        return {name: handle for name, (value, handle) in share.resident.items() if self.sources.get(name) is value}

    def _handle(self, handles: Mapping[str, Any], name: str) -> Any:
        if name not in handles:
            raise HalfwayError(f"var {name!r} has no {self.backend.name} buffer (a value nobody writes)")
        return handles[name]

    # -- kernel choice --------------------------------------------------------------------------
    def _resolve(self, op: Operator) -> ResolvedOp | None:
        """Infer ``op``'s output infos and make the spec its kernel is chosen by; None when the
        op was computed here, on the host."""
        schema = get_schema(op.type)
        inputs = {s.name: tuple(self._input_info(op, n) for n in op.input(s.name)) for s in schema.inputs
                  if op.input(s.name)}
        constants = {slot: [self._known(n) for n in op.input(slot)] for slot in inputs}
        outputs = infer_outputs(op, schema, inputs, constants)
        for slot, infos in outputs.items():
            self.infos.update(zip(op.output(slot), infos))
        if self._computed_on_host(op):
            return None
        if self.backend.static_shapes:
            _check_known_shapes(op, outputs, self.backend.name)
        spec = KernelSpec(op.type, op_dtype(op, schema, self.infos), schema.resolve_attrs(op.attrs), inputs, outputs,
                          constants=self._constants(op, inputs))
        return ResolvedOp(op, schema, spec, tuple(n for s in inputs for n in op.input(s)),
                          tuple(n for s in outputs for n in op.output(s)))

    def _known(self, name: str) -> np.ndarray | None:
        """The value of ``name`` known at prepare: computed here, or a parameter."""
        return self.host_values[name] if name in self.host_values else self.scope.find(name)

    def _computed_on_host(self, op: Operator) -> bool:
        """Compute ``op`` now when it is shape arithmetic (see the module docstring); its
        outputs are then host values, bound as parameters."""
        names = op.input_names()
        if op.type == "shape":
            info = self.infos[names[0]]
            if any(d < 0 for d in info.shape):  # dims a run-time value decides (a pad by computed pads)
                return False
            values = {op.output("Out")[0]: np.array(info.shape, dtype=np.int32)}
        elif (op.type in RANDOM_OPS or not any(n in self.host_values for n in names)
              or not all(n in self.host_values or n in self.parameters for n in names)
              or sum(_numel(self.infos[n].shape) for n in op.output_names()) > HOST_VALUE_LIMIT):
            return False
        else:
            values = evaluate_op(op, {n: self.host_values[n] if n in self.host_values else self.parameters[n]
                                      for n in names})
        for name, value in values.items():
            self.host_values[name] = self.parameters[name] = read_only(np.array(value, order="C"))
        return True

    def _constants(self, op: Operator, inputs: Mapping[str, Any]) -> dict[str, tuple[np.ndarray | None, ...]]:
        """Per input slot of ``op``, the bound values of its inputs that are parameters no op
        writes (None for the others): what the kernel may precompute from."""
        found = {slot: tuple(None if n in self.written and n not in self.host_values else self.parameters.get(n)
                       for n in op.input(slot)) for slot in inputs}
        return {slot: values for slot, values in found.items() if any(v is not None for v in values)}

    def _select(self, r: ResolvedOp, report: PrepareReport) -> Selection:
        try:
            selection = select_kernel(r.spec, self.backend.name)
        except HalfwayError as e:
            raise type(e)(f"op #{r.op.index} {r.op.describe()} with input dtypes {_dtypes(r.spec)}: {e}") from e
        if selection.fallback is not None:
            report.fallbacks.append((r.op.index, r.op.type, selection.fallback))
        return selection

    # -- memory ---------------------------------------------------------------------------------
    def _nbytes(self, name: str) -> int:
        info = self.infos[name]
        return int(np.prod([max(d, 0) for d in info.shape], dtype=np.int64)) * self.backend.storage(info.dtype).itemsize

    def _values(self, resolved: list[ResolvedOp], selections: list[Selection], fetch_names: Sequence[str]) -> list[Value]:
        """Every value the ops touch, for the memory plan: activations with the op writing them;
        feeds and parameters (the caller's memory) with none. A fallback's outputs share nothing."""
        values: dict[str, Value] = {}
        for i, (r, selection) in enumerate(zip(resolved, selections)):
            for name in r.inputs:
                values.setdefault(name, Value(name, self._nbytes(name), None, i)).last = i
            sources = (((n, None, None) for n, _, _ in r.output_sources()) if selection.fallback is not None
                       else self.backend.sharing(r, selection.kernel))
            for name, view_of, inplace_of in sources:
                if name in values:  # a parameter updated in place, or a var written twice
                    values[name].last = i
                    continue
                owned = name not in self.parameters
                values[name] = Value(name, self._nbytes(name), i if owned else None, i, view_of, inplace_of)
        for name in fetch_names:
            if name in values:
                values[name].last = len(resolved)
        return list(values.values())

    def _dying(self, resolved: list[ResolvedOp], fetch_names: Sequence[str]) -> dict[int, list[str]]:
        """Op index -> the activations and feeds no later op reads and nobody fetches."""
        keep = {*fetch_names, *self.parameters}
        last: dict[str, int] = {}
        for i, r in enumerate(resolved):
            for name in r.inputs + r.outputs:
                last[name] = i
        dying: dict[int, list[str]] = {}
        for name, i in last.items():
            if name not in keep:
                dying.setdefault(i, []).append(name)
        return dying

    # -- binding --------------------------------------------------------------------------------
    def _step(self, r: ResolvedOp, selection: Selection, handles: Mapping[str, Any], dying: Sequence[str],
              report: PrepareReport) -> Step:
        report.kernels.append((r.op.index, r.op.type, selection.key))
        kernel = selection.kernel
        planned = report.memory.inplace
        if selection.fallback is None and any(source is not None and planned.get(name) == source
                                              for name, _, source in self.backend.sharing(r, kernel)):
            kernel = selection.factory(evolve(r.spec, inplace=True))
        step = Step(r.op, selection.key, kernel, None)
        ins = [self._handle(handles, n) for n in r.inputs]
        outs = [handles.get(n) for n in r.outputs]
        try:
            if selection.fallback is not None:
                step.run, launches = self._transfer(r, kernel, ins, outs), 1
            else:
                binding = self.backend.bind(kernel, ins, outs, [handles[n] for n in dying if n in handles])
                step.run, step.timed, launches = binding.run, binding.timed, binding.launches
        except HalfwayError as e:
            raise type(e)(f"while preparing {step.where}: {e}") from e
        report.launches += launches
        return step

    def _transfer(self, r: ResolvedOp, kernel: Any, ins: list[Any], outs: list[Any]) -> Run:
        """A numpy kernel between a download of its inputs (parameters are on the host already)
        and an upload of its outputs."""
        backend = self.backend
        hosts = [self.parameters.get(n) for n in r.inputs]
        dtypes = [self.infos[n].dtype for n in r.inputs]
        single = len(outs) == 1

        def run(state: Any) -> None:
            args = [host if host is not None else backend.download(state, handle, dtype)
                    for host, handle, dtype in zip(hosts, ins, dtypes)]
            results = kernel(*args)
            for out, result in zip(outs, [results] if single else results):
                if out is not None and result is not None:
                    backend.upload(state, out, np.asarray(result))

        return run


def _numel(shape: Sequence[int]) -> int:
    return int(np.prod([max(d, 0) for d in shape], dtype=np.int64))


def _check_known_shapes(op: Operator, outputs: Mapping[str, Sequence[TensorInfo]], backend: str) -> None:
    """HalfwayError when an output's shape is still unknown with every feed's shape fixed: it
    depends on fed values (a Range of fed bounds, a Reshape to a fed shape)."""
    for slot, infos in outputs.items():
        for name, info in zip(op.output(slot), infos):
            if any(d < 0 for d in info.shape):
                raise HalfwayError(f"op {op.describe()}: the shape of output {name!r} ({list(info.shape)}, -1 = "
                                   f"unknown) depends on fed values; the {backend} backend allocates its buffers "
                                   f"when the program is prepared (run it on numpy, or feed fixed values as "
                                   f"parameters)")


def _dtypes(spec: KernelSpec) -> str:
    return ", ".join(f"{slot}={'/'.join(i.dtype.name for i in infos)}" for slot, infos in spec.inputs.items())
