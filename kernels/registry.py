"""The kernel registry: kernels keyed by (op type, backend, dtype), and the choice of the kernel
that runs an op on a backend, fallback included.

A kernel is registered as a *factory*: called once at prepare time with a ``KernelSpec`` (the
op's attrs with defaults, input and output tensor infos), it returns the kernel that runs on
every ``run``. On the numpy backend that is a callable taking the op's input arrays
positionally, in schema slot order (``spec.input_keys``), and returning one array per entry of
``spec.output_keys`` — a bare array when there is one output, else a tuple (``None`` for an
output nobody reads, such as XShape). Other backends define their own kernel form (OpenCL: a
binder, see ``halfway.kernels.opencl.base``). A factory raises ``Unsupported`` for a
configuration its kernel does not cover.

Backends register their kernels when their kernel modules are imported, and nobody has to import
them by hand: the first lookup for a backend imports its modules — the built-in ones named in
``BUILTIN_KERNEL_MODULES``, then every entry point of the ``halfway.backends`` group whose name is
the backend's (a module, or a function called with no arguments), so a third-party package can
bring a backend or more kernels for one::

    [project.entry-points."halfway.backends"]
    mydevice = "my_package.halfway_backend"

Float16 kernels store float16 but accumulate in float32. ``register_kernel(..., dtypes=(float32,
float16))`` registers a float32 factory for float16 too, wrapped so its floating inputs are
widened to float32 and its float16 outputs narrowed back: float16 storage, float32 arithmetic.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

import numpy as np
from attrs import field, frozen

from ..ir.dtypes import DType
from ..ir.errors import HalfwayError, KernelNotFoundError, SchemaError
from ..ir.schema import TensorInfo

__all__ = ["KernelKey", "KernelSpec", "Selection", "Unsupported", "register_kernel", "find_kernel", "select_kernel",
           "registered_kernels", "has_kernel", "load_backend", "BUILTIN_KERNEL_MODULES", "ENTRY_POINT_GROUP",
           "FALLBACK_BACKEND"]

Kernel = Callable[..., Any]
KernelFactory = Callable[["KernelSpec"], Kernel]


@frozen
class KernelKey:
    op_type: str
    backend: str
    dtype: DType

    def __str__(self) -> str:
        return f"{self.op_type}/{self.backend}/{self.dtype.name}"


@frozen
class KernelSpec:
    """What a kernel factory sees: the op's resolved attrs and its tensors by slot.

    ``inplace``: the kernel may write its output into its first input's array (the memory plan
    found that nothing reads that array afterwards, and that it is no feed, parameter or view of
    one). A kernel is free to ignore it.

    ``constants``: per input slot, the values of those inputs that are parameters no op writes
    (None for the others), in their stored dtype. A prepared program binds its parameters once,
    so a factory may precompute from them (a transformed filter, say) instead of on every run.
    """

    op_type: str
    dtype: DType
    attrs: Mapping[str, Any]
    inputs: Mapping[str, tuple[TensorInfo, ...]]
    outputs: Mapping[str, tuple[TensorInfo, ...]]
    inplace: bool = False
    constants: Mapping[str, tuple[np.ndarray | None, ...]] = field(factory=dict)

    @property
    def input_keys(self) -> list[tuple[str, int]]:
        return [(slot, i) for slot, infos in self.inputs.items() for i in range(len(infos))]

    @property
    def output_keys(self) -> list[tuple[str, int]]:
        return [(slot, i) for slot, infos in self.outputs.items() for i in range(len(infos))]

    def has_input(self, slot: str) -> bool:
        return bool(self.inputs.get(slot))

    def input(self, slot: str, index: int = 0) -> TensorInfo:
        return self.inputs[slot][index]

    def output(self, slot: str, index: int = 0) -> TensorInfo:
        return self.outputs[slot][index]

    def constant(self, slot: str, index: int = 0) -> np.ndarray | None:
        """The parameter value bound to ``slot`` (see ``constants``), or None."""
        values = self.constants.get(slot, ())
        return values[index] if index < len(values) else None


class Unsupported(KernelNotFoundError):
    """A factory's kernel does not cover this configuration (an NHWC layout, an attr given as a
    tensor): ``select_kernel`` falls back as if no kernel were registered, naming the reason."""


@frozen
class Selection:
    """The kernel ``select_kernel`` chose: its key (whose backend is the fallback's when it fell
    back), its factory, the kernel made from the spec, and why it fell back (None when not)."""

    key: KernelKey
    factory: KernelFactory
    kernel: Any
    fallback: str | None = None


BUILTIN_KERNEL_MODULES: dict[str, tuple[str, ...]] = {
    "numpy": ("halfway.kernels.numpy",),
    "opencl": ("halfway.kernels.opencl",),
}
"""The modules that register each built-in backend's kernels, imported at its first lookup."""

ENTRY_POINT_GROUP = "halfway.backends"
FALLBACK_BACKEND = "numpy"

_KERNELS: dict[KernelKey, KernelFactory] = {}
_LOADED: set[str] = set()
_LOADING: set[str] = set()  # being imported by the thread holding _LOAD_LOCK: its own lookups go on
_LOAD_LOCK = threading.RLock()  # another thread's lookup waits for the modules to finish registering


def register_kernel(op_type: str, backend: str = "numpy",
                    dtypes: Iterable[Any] = (DType.float32, DType.float16), *,
                    override: bool = False) -> Callable[[KernelFactory], KernelFactory]:
    """Register the decorated factory for ``op_type`` on ``backend`` for each of ``dtypes``.

    On the numpy backend a float16 entry reuses the float32 factory through ``widen_float16``
    unless the factory is registered for float16 on its own (a dtypes list without float32).
    """
    wanted = [DType.from_any(d) for d in dtypes]
    load_backend(backend)  # the built-ins first, so that replacing one needs override=True

    def decorate(factory: KernelFactory) -> KernelFactory:
        for dtype in wanted:
            key = KernelKey(op_type, backend, dtype)
            if key in _KERNELS and not override:
                raise SchemaError(f"a kernel for {key} is already registered; pass override=True to replace it")
            widen = dtype is DType.float16 and DType.float32 in wanted and backend == "numpy"
            _KERNELS[key] = widen_float16(factory) if widen else factory
        return factory

    return decorate


def find_kernel(op_type: str, backend: str, dtype: DType) -> KernelFactory:
    """The factory registered for exactly (op_type, backend, dtype).

    Raises:
        KernelNotFoundError: none is; the message lists what is registered for ``op_type``.
    """
    load_backend(backend)
    key = KernelKey(op_type, backend, dtype)
    try:
        return _KERNELS[key]
    except KeyError:
        raise KernelNotFoundError(f"no kernel for {key}; registered for {op_type}: {_listed(op_type)}") from None


def select_kernel(spec: KernelSpec, backend: str) -> Selection:
    """The kernel that runs the op ``spec`` describes on ``backend``, made from ``spec``.

    Lookup order (the key is (``spec.op_type``, backend, ``spec.dtype``)):

    1. the kernel registered for ``backend``, unless its factory raises ``Unsupported`` for this
       spec;
    2. else the one registered for ``FALLBACK_BACKEND`` (numpy), with ``fallback`` saying why:
       the executor moves the op's inputs to the host and its outputs back, and its report lists
       the op (a strict place refuses it);
    3. else ``KernelNotFoundError`` listing what is registered for the op type and, when the
       backend's factory declined, why.
    """
    key = KernelKey(spec.op_type, backend, spec.dtype)
    load_backend(backend)
    factory = _KERNELS.get(key)
    if factory is None:
        reason = f"no {backend} kernel for {spec.dtype.name}"
    else:
        try:
            return Selection(key, factory, factory(spec))
        except Unsupported as e:
            if backend == FALLBACK_BACKEND:
                raise
            reason = str(e)
    if backend == FALLBACK_BACKEND:
        raise KernelNotFoundError(f"no kernel for {key}; registered for {spec.op_type}: {_listed(spec.op_type)}")
    fallback = KernelKey(spec.op_type, FALLBACK_BACKEND, spec.dtype)
    load_backend(FALLBACK_BACKEND)
    factory = _KERNELS.get(fallback)
    if factory is None:
        raise KernelNotFoundError(f"no kernel for {key} ({reason}) nor for {fallback}; registered for "
                                  f"{spec.op_type}: {_listed(spec.op_type)}")
    return Selection(fallback, factory, factory(spec), reason)


def has_kernel(op_type: str, backend: str, dtype: DType) -> bool:
    """Whether a kernel is registered for exactly (op_type, backend, dtype)."""
    load_backend(backend)
    return KernelKey(op_type, backend, dtype) in _KERNELS


def registered_kernels(backend: str | None = None) -> list[KernelKey]:
    """The registered keys of ``backend``, or of every built-in and declared backend."""
    for name in [backend] if backend is not None else [*BUILTIN_KERNEL_MODULES, *_declared()]:
        load_backend(name)
    keys = [k for k in _KERNELS if backend is None or k.backend == backend]
    return sorted(keys, key=lambda k: (k.op_type, k.backend, k.dtype.name))


def load_backend(backend: str) -> None:
    """Import ``backend``'s kernel modules once: the built-in ones, then the ``halfway.backends``
    entry points named ``backend``.

    Raises:
        HalfwayError: a module failed to import; it names the backend and the module (once: later
            lookups see what the backend's modules registered).
    """
    if backend in _LOADED:
        return
    with _LOAD_LOCK:
        if backend in _LOADED or backend in _LOADING:
            return
        _LOADING.add(backend)
        try:
            _load(backend)
        finally:
            _LOADING.discard(backend)
            _LOADED.add(backend)


def _load(backend: str) -> None:
    loaders = [(name, lambda name=name: importlib.import_module(name))
               for name in BUILTIN_KERNEL_MODULES.get(backend, ())]
    loaders += [(f"entry point {ep.value}", ep.load) for ep in entry_points(group=ENTRY_POINT_GROUP, name=backend)]
    for source, load in loaders:
        try:
            target = load()
            if callable(target) and not inspect.ismodule(target):
                target()
        except Exception as e:
            if isinstance(e, HalfwayError):
                raise type(e)(f"loading the {backend} backend's kernels ({source}): {e}") from e
            raise HalfwayError(f"loading the {backend} backend's kernels ({source}) failed: "
                               f"{type(e).__name__}: {e}") from e


def _declared() -> list[str]:
    return sorted({ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def _listed(op_type: str) -> str:
    have = sorted(str(k) for k in _KERNELS if k.op_type == op_type)
    return ", ".join(have) if have else "none"


def widen_float16(factory: KernelFactory) -> KernelFactory:
    """Run a float32 factory on float16 tensors: widen inputs, narrow float16 outputs."""

    def make(spec: KernelSpec) -> Kernel:
        wide = KernelSpec(spec.op_type, DType.float32, spec.attrs, _widened(spec.inputs), _widened(spec.outputs),
                          constants=spec.constants)
        kernel = factory(wide)
        narrow = [info.dtype is DType.float16 for infos in spec.outputs.values() for info in infos]
        f32, f16 = np.float32, np.float16

        def run(*args: np.ndarray) -> Any:
            out = kernel(*[a.astype(f32) if a is not None and a.dtype == f16 else a for a in args])
            if len(narrow) == 1:
                return out.astype(f16) if narrow[0] and out is not None else out
            return tuple(o.astype(f16) if n and o is not None else o for o, n in zip(out, narrow))

        return run

    return make


def _widened(tensors: Mapping[str, tuple[TensorInfo, ...]]) -> dict[str, tuple[TensorInfo, ...]]:
    return {slot: tuple(TensorInfo(t.shape, DType.float32 if t.dtype is DType.float16 else t.dtype) for t in infos)
            for slot, infos in tensors.items()}
