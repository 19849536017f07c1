"""The float16 transpiler on imported ONNX models: the nine models of ONNX's light zoo, with
seeded random weights, against their float32 run."""

import numpy as np
import pytest

import halfway
from halfway.executor import Executor
from halfway.ir import DType
from tests.support.onnx_zoo import LIGHT_MODELS, dummy_inputs, light_model, with_random_weights

EPS16 = float(np.finfo(np.float16).eps)


def _load(name):
    model = with_random_weights(light_model(name), seed=1)
    return halfway.load(model), dummy_inputs(model, seed=2)


def _kernel_dtypes(program, prepared):
    """Kernel dtype by the outputs an op writes, under their names before the transpile (a
    fetched var's writer now writes ``<name>.fp16``)."""
    ops = program.global_block().ops
    ran = {}
    for index, op_type, key in prepared.report.kernels:
        if op_type != "cast":
            ran.update((name.removesuffix(".fp16"), key.dtype) for name in ops[index].output_names())
    return ran


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_zoo_float16_matches_float32(name):
    (program, feeds, fetches, scope), feed = _load(name)
    ref_prepared = Executor().prepare(program, feeds, fetches, scope)
    ref = ref_prepared.run(feed)[0]
    # calibrated on the input it runs: the float16 program must stay finite where float32 is
    half, report = halfway.float16_transpile(program, scope, calibration_feeds=feed)
    prepared = Executor().prepare(half, feeds, fetches, scope)
    got = prepared.run(feed)[0]
    assert got.dtype == np.float32 and np.all(np.isfinite(ref)) and np.all(np.isfinite(got))
    scale = float(np.abs(ref).max())
    np.testing.assert_allclose(got, ref, rtol=0, atol=16 * EPS16 * scale)
    assert np.array_equal(ref.reshape(len(ref), -1).argmax(-1), got.reshape(len(got), -1).argmax(-1))
    # every op runs the kernel dtype the report gives it: float16 unless kept float32 with a reason
    ran = _kernel_dtypes(half, prepared)
    for entry in report.ops:
        if entry.dtype in ("float16", "float32"):
            assert ran[entry.output] is DType[entry.dtype], entry
    assert report.float16_ops
    for entry in report.float32_ops:  # with random weights some float32 values exceed float16's range
        assert entry.reason == "black list" or "calibration" in entry.reason or "follows float32" in entry.reason
    # one cast per var crossing a float16/float32 boundary
    casts = [op for op in half.global_block().ops if op.type == "cast"]
    sources = [op.input("X")[0] for op in casts]
    assert len(casts) == len(set(sources)) == len(report.casts)
