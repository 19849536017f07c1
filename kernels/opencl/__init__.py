"""OpenCL kernels (through pyopencl): importing this registers them under backend "opencl", as
the kernel registry does at the backend's first lookup. pyopencl is imported only when a device
is used (``runtime.cl``), so the kernels are known on a machine without it.

``runtime`` holds devices, contexts, the float16 mode and the program cache; ``base`` the binder
protocol every kernel follows; one module per op family, as the numpy kernels; the OpenCL C
sources live in ``cl/``.
"""

from . import attention, conv, elementwise, indexing, matmul, norm, pool, reduce, resize, tensor
from .base import ALIAS, DeviceArray, Unsupported
from .runtime import DeviceCaps, Float16Mode, Runtime, find_device, float16_mode, get_runtime

__all__ = ["attention", "conv", "elementwise", "indexing", "matmul", "norm", "pool", "reduce", "resize", "tensor", "ALIAS", "DeviceArray", "Unsupported", "DeviceCaps", "Float16Mode",
           "Runtime", "float16_mode", "find_device", "get_runtime"]
