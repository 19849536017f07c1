"""``@pytest.mark.opencl``: the test runs programs on the default OpenCL device, and is skipped,
with the reason, where no device builds programs (``halfway.kernels.opencl.build_error``: PyPI's
PoCL, for one, cannot target CPUs newer than its LLVM)."""

from __future__ import annotations

import functools

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "opencl: needs an OpenCL device that builds programs")


@functools.cache
def _no_opencl_reason() -> str | None:
    from halfway.ir.errors import HalfwayError
    from halfway.kernels.opencl.runtime import find_device

    try:
        find_device()
    except HalfwayError as e:
        return str(e)
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("opencl") is not None and (reason := _no_opencl_reason()) is not None:
        pytest.skip(reason)
