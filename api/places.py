"""Places named by a string: ``cpu``, ``opencl`` (the default OpenCL device) or ``opencl:N``
(device N as ``halfway devices`` numbers them)."""

from __future__ import annotations

from ..executor.place import CPUPlace, OpenCLPlace, Place
from .errors import SpecError

__all__ = ["parse_place", "opencl_place", "place_label"]


def parse_place(spec: str, tune: bool = False) -> Place:
    """The place ``spec`` names, opened now; ``tune``: an OpenCL place tunes its kernels
    (``OpenCLPlace.tune``).

    Raises:
        SpecError: a spec that names no place.
        HalfwayError: an OpenCL place without a device or driver.
    """
    kind, _, index = spec.partition(":")
    if kind == "cpu" and not index:
        return CPUPlace()
    if kind == "opencl" and (not index or index.isdigit()):
        return opencl_place(int(index) if index else None, tune)
    raise SpecError(f"--place {spec!r}: expected cpu, opencl or opencl:N")


def opencl_place(index: int | None = None, tune: bool = False) -> OpenCLPlace:
    """Device ``index``, or the default device under its index; opened now, so a missing device
    or driver is reported here, by name."""
    if index is None:
        from ..kernels.opencl.runtime import cl, find_device

        device = find_device(None)
        index = [d for p in cl.get_platforms() for d in p.get_devices()].index(device)
    place = OpenCLPlace(index, tune=tune)
    place.runtime  # noqa: B018
    return place


def place_label(place: Place) -> str:
    """``cpu`` or ``opencl:N``, short for tables (``str(place)`` names the device)."""
    return f"opencl:{place.device}" if isinstance(place, OpenCLPlace) else str(place)
