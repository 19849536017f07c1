"""The library services' errors beyond the IR's (``halfway.ir.errors``)."""

from __future__ import annotations

from ..ir.errors import HalfwayError

__all__ = ["SpecError"]


class SpecError(HalfwayError):
    """A spec string that names nothing: a place other than ``cpu``, ``opencl`` or ``opencl:N``,
    an input other than ``name=file.npy`` or ``file.npz`` (the command line exits with code 2)."""
