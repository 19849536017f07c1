"""The OpenCL runtime: device choice, capabilities, the float16 mode, one context and in-order
queue per device, and a program cache.

Float16 modes (chosen per device and ``precision``, as MNN does):

* ``native``: float16 buffers and ``half`` arithmetic (the device reports ``cl_khr_fp16`` and
  ``precision="low"``); GEMM and reductions still accumulate in float32.
* ``storage``: float16 buffers, float32 arithmetic through ``vload_half``/``vstore_half_rte``
  (core since OpenCL 1.0, so every device runs float16 programs with half the memory traffic).
  The default, and what ``precision="low"`` gives without ``cl_khr_fp16``.
* ``high``: float16 programs run with float32 buffers and float32 kernels.

Programs are cached per process by (source, build options, device), so each kernel variant
compiles once; pyopencl's on-disk binary cache spares the compile across processes.

pyopencl is imported at the first use of a device (``cl``), not with this module: the OpenCL
kernels register, and passes decide per op, on a machine without it.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from attrs import frozen

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError

__all__ = ["Float16Mode", "DeviceCaps", "Runtime", "float16_mode", "find_device", "build_error", "get_runtime",
           "PRECISIONS", "DEVICE_ENV", "cl"]

PRECISIONS = ("low", "normal", "high")
DEVICE_ENV = "HALFWAY_OPENCL_DEVICE"
INSTALL_HINT = "pip install 'halfway[opencl]' (pyopencl with the PoCL CPU device), or install your GPU's OpenCL driver"


class _PyOpenCL:
    """pyopencl, imported at the first name read from it; a missing pyopencl is a HalfwayError
    saying what to install. Every read goes to the module itself (so a test may patch it)."""

    def __getattr__(self, name: str) -> Any:
        try:
            import pyopencl
        except ImportError as e:
            raise HalfwayError(f"the OpenCL backend needs pyopencl: {INSTALL_HINT}") from e
        if not hasattr(pyopencl, "get_platforms"):  # only pocl-binary-distribution's pyopencl/.libs, no pyopencl
            raise HalfwayError(f"the OpenCL backend needs pyopencl: {INSTALL_HINT}")
        return getattr(pyopencl, name)


cl: Any = _PyOpenCL()


class Float16Mode(str, enum.Enum):
    NATIVE = "native"
    STORAGE = "storage"
    HIGH = "high"


@frozen
class DeviceCaps:
    """What kernel choice needs to know of a device."""

    name: str
    vendor: str
    is_gpu: bool
    fp16: bool
    compute_capability: tuple[int, int] | None
    max_work_group_size: int
    local_mem_size: int
    compute_units: int = 1
    max_work_item_sizes: tuple[int, ...] = ()

    @classmethod
    def of(cls, device: Any) -> DeviceCaps:
        extensions = device.extensions.split()
        capability = None
        if "cl_nv_device_attribute_query" in extensions:
            capability = (device.compute_capability_major_nv, device.compute_capability_minor_nv)
        return cls(device.name.strip(), device.vendor.strip(), bool(device.type & cl.device_type.GPU),
                   "cl_khr_fp16" in extensions, capability, device.max_work_group_size, device.local_mem_size,
                   device.max_compute_units, tuple(device.max_work_item_sizes))

    @property
    def tensor_cores(self) -> bool:
        """NVIDIA with compute capability >= 8.0: mma.sync m16n8k16 through inline PTX."""
        return self.compute_capability is not None and self.compute_capability >= (8, 0)


def float16_mode(caps: DeviceCaps, precision: str = "normal") -> Float16Mode:
    """How float16 programs run on a device with ``caps`` (see the module docstring)."""
    if precision not in PRECISIONS:
        raise HalfwayError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision == "high":
        return Float16Mode.HIGH
    if precision == "low" and caps.fp16:
        return Float16Mode.NATIVE
    return Float16Mode.STORAGE


def _all_devices() -> list[Any]:
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise HalfwayError(f"no OpenCL platform or device found; {INSTALL_HINT}")
    return devices


def _describe(devices: Sequence[Any]) -> str:
    return "; ".join(f"{i}: {d.platform.name.strip()} / {d.name.strip()}" for i, d in enumerate(devices))


PROBE_SOURCE = "__kernel void probe(__global float *x) { x[get_global_id(0)] += 1.0f; }"
_BUILD_ERRORS: dict[int, str | None] = {}


def build_error(device: Any) -> str | None:
    """Why ``device`` cannot build OpenCL programs (the first error of its build log), or None
    when it can; tried once per device and process. A driver can list a device its compiler
    cannot target: the PoCL of PyPI's wheels (LLVM 14) fails on CPUs newer than its LLVM, such
    as AMD's Zen 5, with "unknown target CPU 'generic'"."""
    key = device.int_ptr
    if key not in _BUILD_ERRORS:
        try:
            cl.Program(cl.Context([device]), PROBE_SOURCE).build()
            _BUILD_ERRORS[key] = None
        except cl.Error as e:
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            errors = [line for line in lines if line.startswith("error")]
            _BUILD_ERRORS[key] = (errors or lines or [type(e).__name__])[0]
    return _BUILD_ERRORS[key]


def _default_device(devices: Sequence[Any]) -> Any:
    """The first GPU that builds programs, else the first device that does."""
    gpus_first = sorted(devices, key=lambda d: not d.type & cl.device_type.GPU)
    for device in gpus_first:
        if build_error(device) is None:
            return device
    failures = "; ".join(f"{i}: {d.name.strip()}: {build_error(d)}" for i, d in enumerate(devices))
    raise HalfwayError(f"no OpenCL device can build programs ({failures}); install your GPU's OpenCL driver, or "
                       f"a PoCL whose LLVM knows this CPU")


def find_device(device: int | str | None = None) -> Any:
    """The OpenCL device named by ``device``: an index into all devices of all platforms, or a
    substring of a platform or device name (case-insensitive). None reads the
    ``HALFWAY_OPENCL_DEVICE`` environment variable, else takes the first GPU that builds
    programs, else the first device that does (``build_error``)."""
    devices = _all_devices()
    if device is None:
        device = os.environ.get(DEVICE_ENV) or None
    if device is None:
        return _default_device(devices)
    if isinstance(device, int) or (isinstance(device, str) and device.isdigit()):
        index = int(device)
        if not 0 <= index < len(devices):
            raise HalfwayError(f"OpenCL device index {index} is out of range; devices: {_describe(devices)}")
        return devices[index]
    wanted = device.lower()
    for d in devices:
        if wanted in d.name.lower() or wanted in d.platform.name.lower():
            return d
    raise HalfwayError(f"no OpenCL device matches {device!r}; devices: {_describe(devices)}")


class Runtime:
    """One device's context, in-order queue, program cache and float16 mode."""

    def __init__(self, device: Any, precision: str = "normal") -> None:
        self.device = device
        self.caps = DeviceCaps.of(device)
        self.precision = precision
        self.mode = float16_mode(self.caps, precision)
        self.context = cl.Context([device])
        self.queue = cl.CommandQueue(self.context)
        self._programs: dict[tuple[str, tuple[str, ...]], Any] = {}

    def __repr__(self) -> str:
        return f"Runtime({self.caps.name!r}, float16 mode {self.mode.value})"

    # -- dtypes ---------------------------------------------------------------------------------
    def storage(self, dtype: DType) -> np.dtype:
        """The numpy dtype a tensor of ``dtype`` has in device buffers."""
        if dtype is DType.float16 and self.mode is Float16Mode.HIGH:
            return np.dtype(np.float32)
        return dtype.numpy

    def float_options(self, dtype: DType) -> tuple[str, ...]:
        """Build options selecting the element type of the common header for ``dtype``."""
        if self.storage(dtype) == np.float32:
            return ()
        if self.mode is Float16Mode.NATIVE:
            return ("-DSTORAGE_HALF", "-DNATIVE_HALF")
        return ("-DSTORAGE_HALF",)

    # -- programs -------------------------------------------------------------------------------
    def program(self, source: str, options: Sequence[str] = ()) -> Any:
        """The built program for (source, options) on this device, compiled once per process."""
        key = (source, tuple(options))
        program = self._programs.get(key)
        if program is None:
            try:
                program = cl.Program(self.context, source).build(options=list(options))
            except cl.RuntimeError as e:
                raise HalfwayError(f"OpenCL build failed on {self.caps.name} with options {list(options)}: {e}") from e
            self._programs[key] = program
        return program

    def kernel(self, source: str, name: str, options: Sequence[str] = ()) -> Any:
        """A fresh kernel object (its own argument slots) of ``name`` in the cached program."""
        return cl.Kernel(self.program(source, options), name)

    @property
    def compiled_programs(self) -> int:
        return len(self._programs)

    # -- buffers --------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Any:
        return cl.Buffer(self.context, cl.mem_flags.READ_WRITE, max(int(nbytes), 4))

    def upload(self, array: np.ndarray) -> Any:
        data = np.ascontiguousarray(array)
        buffer = self.alloc(data.nbytes)
        if data.nbytes:
            cl.enqueue_copy(self.queue, buffer, data, is_blocking=True)
        return buffer

    def finish(self) -> None:
        self.queue.finish()


_RUNTIMES: dict[tuple[int, str], Runtime] = {}


def get_runtime(device: int | str | None = None, precision: str = "normal") -> Runtime:
    """The process-wide runtime of a device (see ``find_device``) for ``precision``."""
    float16_mode(DeviceCaps("", "", False, False, None, 1, 0), precision)  # validates precision first
    found = find_device(device)
    key = (found.int_ptr, precision)
    if key not in _RUNTIMES:
        _RUNTIMES[key] = Runtime(found, precision)
    return _RUNTIMES[key]
