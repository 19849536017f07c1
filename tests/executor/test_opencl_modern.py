"""Every modern fixture (``tests/modern.py``) after the default passes, in float32 and transpiled to
float16, run by OpenCL kernels alone (``OpenCLPlace(strict=True)``: no numpy fallback) at its first
case, against ONNX Runtime's saved outputs (float32: ``tests.support.modern.compare``, rel 1e-4; float16:
the largest error within 1e-2 of the largest magnitude)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.extras import import_pyopencl

import_pyopencl()

import halfway
from halfway.executor import OpenCLPlace
from tests.support.modern import FIXTURE_DIR, cases, compare, fixtures

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


@pytest.mark.parametrize("name", [f["name"] for f in fixtures()])
def test_float16_fixture_runs_on_opencl_kernels(name):
    """The float16 transpile of the fused program, on OpenCL kernels alone, within 1e-2 of float32
    (the largest error over the largest reference magnitude) and finite."""
    program, feeds, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"))
    result = halfway.PassManager().run(program, scope, fetch=fetches)
    half, _ = halfway.float16_transpile(result.program, result.scope, fetch_names=fetches, target="opencl")
    inputs, want = cases(name)[0]
    prepared = halfway.Executor(OpenCLPlace(strict=True)).prepare(half, feeds, fetches, result.scope,
                                                                  feed_shapes={n: inputs[n].shape for n in feeds})
    assert prepared.report.fallbacks == [], prepared.report.summary()
    for fetch, got in zip(fetches, prepared.run({n: inputs[n] for n in feeds})):
        reference = want[fetch].astype(np.float64)
        error = float(np.abs(got - reference).max() / max(float(np.abs(reference).max()), 1e-30))
        assert np.all(np.isfinite(got)) and error <= 1e-2, f"{name} float16 on OpenCL: {fetch}: error {error:.2e}"
