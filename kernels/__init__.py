"""Kernels by (op type, backend, dtype). Each backend's kernel modules are imported by the
registry at the backend's first lookup (``halfway.kernels.registry.load_backend``)."""

from .registry import (
                                      KernelKey,
                                      KernelSpec,
                                      Selection,
                                      Unsupported,
                                      find_kernel,
                                      has_kernel,
                                      register_kernel,
                                      registered_kernels,
                                      select_kernel,
)

__all__ = ["KernelKey", "KernelSpec", "Selection", "Unsupported", "find_kernel", "has_kernel", "register_kernel",
           "registered_kernels", "select_kernel"]
