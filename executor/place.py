"""Places: where a program runs. Each names the kernel backend it dispatches to."""

from __future__ import annotations

from typing import Any

from attrs import field, frozen

__all__ = ["Place", "CPUPlace", "OpenCLPlace"]


class Place:
    """Where a program runs: ``backend`` names the backend (``halfway.executor.backend``) and the
    kernels it dispatches to; ``strict`` refuses ops that would fall back to numpy."""

    backend: str = ""
    strict: bool = False


@frozen
class CPUPlace(Place):
    """numpy kernels on the host CPU."""

    backend: str = "numpy"

    def __str__(self) -> str:
        return "cpu"


@frozen
class OpenCLPlace(Place):
    """OpenCL kernels on one device (through pyopencl).

    ``device``: an index into all devices of all platforms, a substring of a platform or device
    name, or None for ``HALFWAY_OPENCL_DEVICE``, else the first GPU, else the first device.
    ``precision``: "low" (native half arithmetic where the device has cl_khr_fp16), "normal"
    (float16 buffers, float32 arithmetic) or "high" (float16 programs run with float32 buffers).
    ``strict``: an op without an OpenCL kernel is an error instead of a numpy fallback.
    ``tune``: kernels with several configurations (tensor-core GEMMs and convolutions) time each on
    the device as the program is prepared, and keep the fastest (remembered per device and shape
    across processes: ``halfway.kernels.opencl.tuning``). Without it they take a choice measured
    before, else their own heuristic's.
    """

    device: int | str | None = None
    precision: str = "normal"
    strict: bool = False
    tune: bool = False
    backend: str = field(default="opencl", init=False)

    @property
    def runtime(self) -> Any:
        """The device's runtime (``halfway.kernels.opencl.Runtime``), created on first use."""
        from ..kernels.opencl.runtime import get_runtime

        return get_runtime(self.device, self.precision)

    def __str__(self) -> str:
        return f"opencl:{self.runtime.caps.name}"
