"""Paddle-written models load and run on the numpy backend, matching Paddle's own outputs."""

from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway.executor import Executor

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"


@pytest.mark.parametrize("name", ["resnet_tiny", "mlp_tiny"])
def test_matches_paddle_outputs(name):
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / name))
    io = np.load(FIXTURES / f"{name}_io.npz")
    assert list(io["__fetch_names__"]) == fetches
    got = Executor().run(program, {n: io[n] for n in feeds}, fetches, scope)
    for fetch, value in zip(fetches, got):
        # Paddle's own runs differ by up to 4.5e-8 between graph optimisation settings
        np.testing.assert_allclose(value, io[fetch], rtol=1e-5, atol=1e-6)


def test_memory_plan_reuses_buffers_on_a_real_cnn():
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / "resnet_tiny"))
    prepared = Executor().prepare(program, feeds, fetches, scope)
    memory = prepared.report.memory
    assert 0 < memory.peak_bytes < memory.no_reuse_bytes
    assert memory.planned_bytes < memory.no_reuse_bytes
    # every kernel chosen is float32 for this float32 model
    assert {key.dtype.name for _, _, key in prepared.report.kernels} == {"float32"}
