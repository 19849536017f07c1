"""Kernels by (op type, backend, dtype); importing this registers the numpy kernels."""

from halfway.kernels import numpy as _numpy_kernels  # noqa: F401  (registers them)
from halfway.kernels.registry import (KernelKey, KernelSpec, find_kernel, has_kernel, register_kernel,
                                      registered_kernels)

__all__ = ["KernelKey", "KernelSpec", "find_kernel", "has_kernel", "register_kernel", "registered_kernels"]
