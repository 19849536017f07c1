"""OpenCL kernels (through pyopencl): importing this registers them under backend "opencl".

``runtime`` holds devices, contexts, the float16 mode and the program cache; ``base`` the binder
protocol every kernel follows; one module per op family, as the numpy kernels; the OpenCL C
sources live in ``cl/``.
"""

# runtime first: without pyopencl it raises the HalfwayError that names the extra to install
from halfway.kernels.opencl.runtime import DeviceCaps, Float16Mode, Runtime, float16_mode, find_device, get_runtime
from halfway.kernels.opencl import elementwise, movement, nn
from halfway.kernels.opencl.base import ALIAS, DeviceArray, Unsupported

__all__ = ["elementwise", "movement", "nn", "ALIAS", "DeviceArray", "Unsupported", "DeviceCaps", "Float16Mode",
           "Runtime", "float16_mode", "find_device", "get_runtime"]
