"""Places named on the command line: repeated ``--place`` options (``halfway.api.places``), or
the places there are."""

from __future__ import annotations

from collections.abc import Sequence

from ...api.places import opencl_place, parse_place
from ...executor.place import CPUPlace, Place
from ...ir.errors import HalfwayError
from ..report.console import Output

__all__ = ["parse_places", "default_places"]


def parse_places(specs: Sequence[str] | None, output: Output | None = None, tune: bool = False) -> list[Place]:
    """The places of repeated --place options; none given: ``default_places(output)``. ``tune``:
    OpenCL places tune their kernels (``OpenCLPlace.tune``)."""
    return [parse_place(spec, tune) for spec in specs] if specs else default_places(output, tune)


def default_places(output: Output | None = None, tune: bool = False) -> list[Place]:
    """The CPU, and the default OpenCL device when there is one; else ``output`` notes why not."""
    try:
        return [CPUPlace(), opencl_place(None, tune)]
    except HalfwayError as e:
        if output is not None:
            output.note(f"running on the CPU only: {e}")
        return [CPUPlace()]
