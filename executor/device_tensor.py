"""Tensors kept in a prepared program's device memory between runs.

A run of an OpenCL program copies its feeds from the host and its fetches back: for ResNet-50's
float16 batch of 32 on an H100 the copy of the 19 MB float32 input takes longer than the network
(3.4 ms against 2.5). Where the input is made on the device, or a program's outputs feed another
program, that copy is waste. ``PreparedProgram.to_device`` copies host arrays into the device once;
``run`` takes the ``DeviceTensor``s it returns as feeds (a device-to-device copy into the
program's feed buffers) and, with ``on_device=True``, returns its fetches as ``DeviceTensor``s
(device-to-device copies of its fetch buffers, which the next run overwrites). Tensors of one
place's device feed any program prepared on that place. On the numpy backend a ``DeviceTensor``
holds a read-only host array, so code written for a device runs there unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from attrs import frozen

from ..ir.dtypes import DType

if TYPE_CHECKING:
    from .backend import Backend

__all__ = ["DeviceTensor"]


@frozen(eq=False)
class DeviceTensor:
    """A tensor of ``dtype`` in a backend's memory (``value``: the backend's handle, a device
    array on OpenCL, a read-only array on numpy)."""

    value: Any
    dtype: DType
    backend: Backend

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def memory(self) -> Any:
        """The memory it lives in (``Backend.memory``): programs on the same memory take it as a feed."""
        return self.backend.memory

    def numpy(self) -> np.ndarray:
        """A copy on the host, once the work that writes it is done."""
        return self.backend.to_host(self.value, self.dtype)

    def __repr__(self) -> str:
        return f"DeviceTensor({self.dtype.name}{list(self.shape)} on {self.backend.device})"
