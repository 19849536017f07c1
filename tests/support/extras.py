"""Optional extras in tests: the module, or a skip saying which extra to install."""

from __future__ import annotations

from types import ModuleType

import pytest

__all__ = ["import_pyopencl"]


def import_pyopencl() -> ModuleType:
    """pyopencl, or a skip of the calling module. pocl-binary-distribution alone leaves a
    ``pyopencl`` folder (its ``.libs``) that imports as an empty namespace package."""
    cl = pytest.importorskip("pyopencl")
    if not hasattr(cl, "get_platforms"):
        pytest.skip("pyopencl is not installed (pip install 'halfway[opencl]')", allow_module_level=True)
    return cl
