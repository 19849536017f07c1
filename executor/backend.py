"""The backend interface: what the executor needs of a device, and the registry that finds the
backend of a place by name.

A backend gives every tensor of a prepared program a *handle* (``allocate``: planned buffers for
activations, one upload per parameter, one buffer per feed), and turns a chosen kernel and the
handles of its op into a runnable (``bind``). A run is ``start`` (the run's own state), an
``upload`` per feed, every op's runnable called with the state (enqueued, on a device), a
``download`` per fetch, then ``finish``. Handles and the state are the backend's business: the
numpy backend's handles are indices into a per-run list of arrays, OpenCL's are device arrays
and its state keeps the host arrays of non-blocking uploads alive.

Backends are found by ``Place.backend``: the built-in ones by module name (``BUILTIN_BACKENDS``),
others through the ``halfway.backends`` entry points that also bring their kernels
(``halfway.kernels.registry.load_backend``): a module that calls ``register_backend``.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from attrs import define, frozen

from ..ir.dtypes import DType
from ..ir.errors import HalfwayError
from ..ir.operator import Operator
from ..ir.schema import OpSchema, TensorInfo
from ..kernels.registry import KernelSpec, load_backend
from .memory import MemoryPlan
from .place import Place

__all__ = ["Backend", "Binding", "ResolvedOp", "Run", "StepFailure", "register_backend", "backend_for", "registered_backends",
           "BUILTIN_BACKENDS"]

Run = Callable[[Any], None]
"""One op's work, given the run's state (see ``Backend.start``)."""

BUILTIN_BACKENDS: dict[str, str] = {"numpy": "halfway.executor.cpu", "opencl": "halfway.executor.opencl"}
"""The module defining each built-in backend, imported when a place first asks for it."""


@define
class ResolvedOp:
    """An op with its shapes inferred: the spec its kernel is made from, and the names of its
    inputs and outputs in ``spec.input_keys`` / ``spec.output_keys`` order."""

    op: Operator
    schema: OpSchema
    spec: KernelSpec
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def output_sources(self) -> Iterator[tuple[str, str | None, str | None]]:
        """(output, input it may be a view of, input it may overwrite) per output, from the schema."""
        overwrites = {out: inp for inp, out in self.schema.inplace.items()}
        for slot, names in self.op.outputs.items():
            for i, name in enumerate(names):
                view = self.op.input(self.schema.views[slot]) if slot in self.schema.views else ()
                source = self.op.input(overwrites[slot]) if slot in overwrites and i == 0 else ()
                yield name, view[0] if view else None, source[0] if source else None


@frozen
class Binding:
    """A bound op: what runs it (None: nothing to run, such as a view), how many device launches
    (kernel calls) that is, and optionally ``timed``: its work run once more, returning the
    seconds the device itself spent on it (``PreparedProgram.profile``; None: the host times it)."""

    run: Run | None
    launches: int
    timed: Callable[[], float] | None = None


class StepFailure(Exception):
    """Raised by a run that stands for several ops (``Backend.fuse``): ``error`` came from the op
    ``offset`` places into them."""

    def __init__(self, offset: int, error: Exception) -> None:
        super().__init__(offset, error)
        self.offset, self.error = offset, error


class Backend(abc.ABC):
    """One place's device as the executor drives it; made anew for every ``prepare``."""

    name: ClassVar[str]
    concurrent_runs: ClassVar[bool] = True
    """Whether runs of one prepared program may overlap: each run's values live in its own state.
    A backend whose handles are buffers bound once (OpenCL) says False, and the prepared program
    lets one run at a time use them."""
    static_shapes: ClassVar[bool] = False
    """Whether every tensor's shape must be known when the program is prepared (its buffers are
    allocated then). numpy's kernels return arrays of whatever shape a run makes, so a shape that
    depends on fed values (a Range of fed bounds, a Reshape to a fed shape) runs there."""

    def __init__(self, place: Place) -> None:
        self.place = place

    @property
    def device(self) -> str:
        return str(self.place)

    @property
    def float16_mode(self) -> str:
        """How float16 tensors are held ("" when they are plain float16 arrays)."""
        return ""

    def storage(self, dtype: DType) -> np.dtype:
        """The dtype a tensor of ``dtype`` has in this backend's memory."""
        return dtype.numpy

    def sharing(self, resolved: ResolvedOp, kernel: Any) -> Iterator[tuple[str, str | None, str | None]]:
        """Per output of ``resolved`` run by ``kernel``: (name, input it is a view of, input it may
        overwrite), for the memory plan. By default what the schema allows."""
        return resolved.output_sources()

    @abc.abstractmethod
    def allocate(self, tensors: Mapping[str, TensorInfo], plan: MemoryPlan, parameters: Mapping[str, np.ndarray],
                 feeds: Sequence[str], shared: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A handle per tensor: the plan's buffers for activations, ``parameters`` uploaded once,
        a buffer per feed; ``shared`` are handles of parameters already in this backend's memory
        (another prepared program's: ``Executor.prepare``'s ``share``), taken as they are."""

    @abc.abstractmethod
    def bind(self, kernel: Any, inputs: Sequence[Any], outputs: Sequence[Any], dying: Sequence[Any]) -> Binding:
        """Bind one op's ``kernel`` (made by a factory registered for this backend) to the handles
        of its inputs and outputs; ``dying`` are handles no later op reads (which a backend may
        release)."""

    def fuse(self, runs: Sequence[Run]) -> list[tuple[Run, int]]:
        """The runs a prepared program calls in turn in place of ``runs`` (the ops' own, in
        order), each with how many of ``runs`` it stands for; by default each op's own. A run
        standing for several raises ``StepFailure`` to say which of them failed."""
        return [(run, 1) for run in runs]

    @abc.abstractmethod
    def start(self) -> Any:
        """The state of one run, passed to every upload, op and download of that run."""

    @abc.abstractmethod
    def upload(self, state: Any, handle: Any, array: np.ndarray) -> None:
        """Put a host array (a feed, or a host kernel's result) into ``handle``'s memory."""

    @abc.abstractmethod
    def download(self, state: Any, handle: Any, dtype: DType) -> np.ndarray:
        """``handle``'s value on the host, as ``dtype``, once the work before it is done."""

    def finish(self, state: Any) -> None:
        """Wait for the run's work (also after a failure)."""

    # -- values that stay in the backend's memory between runs (``DeviceTensor``) ------------------
    @property
    def memory(self) -> Any:
        """What this backend's values live in: the values of backends of one memory feed each
        other's runs (None: the host's)."""
        return None

    def to_device(self, array: np.ndarray, dtype: DType) -> Any:
        """A new copy of the host ``array`` (of ``dtype``) in this backend's memory."""
        copy = np.array(array, dtype=self.storage(dtype))
        copy.flags.writeable = False
        return copy

    def upload_device(self, state: Any, handle: Any, value: Any) -> None:
        """Put ``value`` (of this memory) into ``handle``'s memory."""
        self.upload(state, handle, value)

    def fetch_device(self, state: Any, handle: Any, dtype: DType) -> Any:
        """A value of this memory holding ``handle``'s value (which a later run may overwrite)."""
        value = self.download(state, handle, dtype)
        value.flags.writeable = False
        return value

    def to_host(self, value: Any, dtype: DType) -> np.ndarray:
        """``value`` (of this memory) on the host, as ``dtype``."""
        return np.array(value, dtype=dtype.numpy)


_BACKENDS: dict[str, type[Backend]] = {}


def register_backend(backend: type[Backend], *, override: bool = False) -> type[Backend]:
    """Register ``backend`` under its ``name`` (usable as a class decorator)."""
    if backend.name in _BACKENDS and not override:
        raise HalfwayError(f"a backend named {backend.name!r} is already registered; pass override=True to replace it")
    _BACKENDS[backend.name] = backend
    return backend


def registered_backends() -> list[str]:
    return sorted(_BACKENDS)


def backend_for(place: Place) -> Backend:
    """A new backend for ``place``, found by ``place.backend``: a built-in one's module is
    imported, another's ``halfway.backends`` entry points are loaded.

    Raises:
        HalfwayError: no backend of that name is registered; it lists those that are.
    """
    name = place.backend
    if name not in _BACKENDS:
        if name in BUILTIN_BACKENDS:
            importlib.import_module(BUILTIN_BACKENDS[name])
        else:
            load_backend(name)
    if name not in _BACKENDS:
        known = sorted({*_BACKENDS, *BUILTIN_BACKENDS})
        raise HalfwayError(f"no backend {name!r} for place {place!r}; registered: {', '.join(known)} (a backend "
                           f"registers with register_backend, from a 'halfway.backends' entry point)")
    return _BACKENDS[name](place)
