"""Every modern fixture (``tests/modern.py``) after the default passes, run by OpenCL kernels
alone (``OpenCLPlace(strict=True)``: no numpy fallback) at its first case, against ONNX Runtime's
saved outputs (``tests.modern.compare``: rel 1e-4)."""

from __future__ import annotations

import pytest

from tests.extras import import_pyopencl

import_pyopencl()

import halfway
from halfway.executor import OpenCLPlace
from tests.modern import FIXTURE_DIR, cases, compare, fixtures

pytestmark = pytest.mark.opencl

@pytest.mark.parametrize("name", [f["name"] for f in fixtures()])
def test_fixture_runs_on_opencl_kernels(name):
    program, feeds, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"))
    result = halfway.PassManager().run(program, scope, fetch=fetches)
    inputs, want = cases(name)[0]
    prepared = halfway.Executor(OpenCLPlace(strict=True)).prepare(result.program, feeds, fetches, result.scope,
                                               feed_shapes={n: inputs[n].shape for n in feeds})
    assert prepared.report.fallbacks == [], prepared.report.summary()
    for fetch, got in zip(fetches, prepared.run({n: inputs[n] for n in feeds})):
        compare(got, want[fetch], f"{name} on OpenCL: output {fetch}")
