"""The numpy kernels as the reference evaluator's provider (``halfway.ir.reference``).

halfway's ``pyproject.toml`` declares ``numpy_kernel`` under the ``halfway.reference`` entry
points, so the evaluator computes the ops that are not family rows (convolutions, attention,
movement ops, ...) with the numpy backend's kernels, while the layers below the kernels import
none of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..ir.dtypes import DType
from ..ir.reference import Kernel, Slots
from .registry import KernelSpec, find_kernel

__all__ = ["numpy_kernel"]


def numpy_kernel(op_type: str, dtype: DType, attrs: Mapping[str, Any], inputs: Slots, outputs: Slots) -> Kernel:
    """The numpy backend's kernel for the op, made from its spec.

    Raises:
        KernelNotFoundError: none is registered for (op_type, numpy, dtype), or its factory does
            not cover this configuration (``Unsupported``).
    """
    kernel: Kernel = find_kernel(op_type, "numpy", dtype)(KernelSpec(op_type, dtype, attrs, inputs, outputs))
    return kernel
