"""Places: where a program runs. Each names the kernel backend it dispatches to."""

from __future__ import annotations

from attrs import frozen

__all__ = ["Place", "CPUPlace"]


class Place:
    backend: str = ""


@frozen
class CPUPlace(Place):
    """numpy kernels on the host CPU."""

    backend: str = "numpy"

    def __str__(self) -> str:
        return "cpu"
