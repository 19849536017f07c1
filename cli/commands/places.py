"""Places named on the command line: ``cpu``, ``opencl`` (the default OpenCL device) or
``opencl:N`` (device N as ``halfway devices`` numbers them)."""

from __future__ import annotations

from collections.abc import Sequence

from ...executor.place import CPUPlace, OpenCLPlace, Place
from ...ir.errors import HalfwayError
from ..report.console import Output
from .base import UsageError

__all__ = ["parse_place", "parse_places", "default_places", "place_label"]


def parse_places(specs: Sequence[str] | None, output: Output | None = None, tune: bool = False) -> list[Place]:
    """The places of repeated --place options; none given: ``default_places(output)``. ``tune``:
    OpenCL places tune their kernels (``OpenCLPlace.tune``)."""
    return [parse_place(spec, tune) for spec in specs] if specs else default_places(output, tune)


def parse_place(spec: str, tune: bool = False) -> Place:
    kind, _, index = spec.partition(":")
    if kind == "cpu" and not index:
        return CPUPlace()
    if kind == "opencl" and (not index or index.isdigit()):
        return _opencl_place(int(index) if index else None, tune)
    raise UsageError(f"--place {spec!r}: expected cpu, opencl or opencl:N")


def _opencl_place(index: int | None, tune: bool = False) -> OpenCLPlace:
    """Device ``index``, or the default device under its index; opened now, so a missing device
    or driver is reported here, by name."""
    if index is None:
        from ...kernels.opencl.runtime import cl, find_device

        device = find_device(None)
        index = [d for p in cl.get_platforms() for d in p.get_devices()].index(device)
    place = OpenCLPlace(index, tune=tune)
    place.runtime  # noqa: B018
    return place


def place_label(place: Place) -> str:
    """``cpu`` or ``opencl:N``, short for tables (``str(place)`` names the device)."""
    return f"opencl:{place.device}" if isinstance(place, OpenCLPlace) else str(place)


def default_places(output: Output | None = None, tune: bool = False) -> list[Place]:
    """The CPU, and the default OpenCL device when there is one; else ``output`` notes why not."""
    try:
        return [CPUPlace(), _opencl_place(None, tune)]
    except HalfwayError as e:
        if output is not None:
            output.note(f"running on the CPU only: {e}")
        return [CPUPlace()]
