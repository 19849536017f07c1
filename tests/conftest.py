"""Test session setup.

``@pytest.mark.opencl``: the test runs programs on the default OpenCL device, and is skipped,
with the reason, where no device builds programs (``halfway.kernels.opencl.build_error``: PyPI's
PoCL, for one, cannot target CPUs newer than its LLVM) or pyopencl is not installed. With
``HALFWAY_REQUIRE_OPENCL=1`` (CI sets it) a session in which no such test ran fails.

Every test runs between a snapshot and a restore of the op-schema, kernel and pass registries
(``isolated_registries``): a schema, kernel or pass a test registers, or replaces with
``override=True``, is gone when the next test starts.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Iterator
from typing import Any

import pytest

REQUIRE_OPENCL = "HALFWAY_REQUIRE_OPENCL"
REGISTRIES = (("halfway.ir.schema", "_REGISTRY"), ("halfway.kernels.registry", "_KERNELS"),
              ("halfway.passes.base", "_PASSES"))
"""The registries tests add to: (module, name of its dict)."""


_OPENCL_RAN = pytest.StashKey[int]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "opencl: needs an OpenCL device that builds programs")
    config.stash[_OPENCL_RAN] = 0


@functools.cache
def _no_opencl_reason() -> str | None:
    from halfway.ir.errors import HalfwayError

    try:
        from halfway.kernels.opencl.runtime import find_device

        find_device()
    except HalfwayError as e:
        return str(e)
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("opencl") is not None and (reason := _no_opencl_reason()) is not None:
        pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report = yield
    if report.when == "call" and not report.skipped and item.get_closest_marker("opencl") is not None:
        item.config.stash[_OPENCL_RAN] += 1
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get(REQUIRE_OPENCL) != "1" or session.config.stash[_OPENCL_RAN]:
        return
    reason = _no_opencl_reason() or "no test marked opencl was selected"
    writer = session.config.get_terminal_writer()
    writer.line()
    writer.line(f"{REQUIRE_OPENCL}=1 but no OpenCL test ran: {reason}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@functools.cache
def _load_builtin_registrations() -> None:
    """Import what registers built-in schemas, kernels and passes, so that a snapshot holds them
    all (a backend first imported inside a test would otherwise lose its kernels at the restore)."""
    import halfway  # noqa: F401  (schemas, numpy kernels, passes)
    from halfway.ir.errors import HalfwayError

    try:
        import halfway.executor.opencl  # noqa: F401  (OpenCL kernels)
    except (HalfwayError, ImportError):
        pass


def _registries() -> list[dict[Any, Any]]:
    return [getattr(importlib.import_module(module), name) for module, name in REGISTRIES]


@pytest.fixture(autouse=True)
def isolated_registries() -> Iterator[None]:
    """Restore the op-schema, kernel and pass registries after the test, as they were before it."""
    _load_builtin_registrations()
    registries = _registries()
    snapshots = [dict(registry) for registry in registries]
    yield
    for registry, snapshot in zip(registries, snapshots):
        registry.clear()
        registry.update(snapshot)


@pytest.fixture(scope="session")
def place() -> Any:
    """The default OpenCL device's place, for the tests marked ``opencl`` (skipped without one)."""
    from halfway.executor import OpenCLPlace

    return OpenCLPlace()
