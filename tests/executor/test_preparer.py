"""The preparer and the one prepared program, on both built-in backends: the fallback matrix
(an OpenCL-only op, a numpy-only op, an unsupported configuration, strict), errors naming the op
they come from, and CPU programs run from several threads at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import CPUPlace, Executor, OpenCLPlace
from halfway.ir import DType, HalfwayError, KernelNotFoundError
from halfway.ir.schema import OpSchema, Slot, register_op, same_as
from halfway.kernels.opencl.base import launch_1d
from halfway.kernels.registry import Unsupported, register_kernel

for _op in ("t_prep_cl_only", "t_prep_np_only", "t_prep_nchw", "t_prep_fail", "t_prep_cl_fail"):
    register_op(OpSchema(_op, inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X"),
                         attrs=[], doc="a test op"), override=True)

NEGATE = """
__kernel void negate(__global const float *x, __global float *y, const int n) {
    int i = get_global_id(0);
    if (i < n) y[i] = -x[i];
}
"""


def _cl_negate(spec):
    def bind(rt, ins, outs):
        kernel = rt.kernel(NEGATE, "negate")
        return [launch_1d(rt, kernel, ins[0].size, ins[0].buffer, outs[0].buffer, np.int32(ins[0].size))]

    return bind


def _np_negate(spec):
    return lambda x: -x


register_kernel("t_prep_cl_only", "opencl", (DType.float32,), override=True)(_cl_negate)
register_kernel("t_prep_np_only", "numpy", (DType.float32,), override=True)(_np_negate)
register_kernel("t_prep_nchw", "numpy", (DType.float32,), override=True)(_np_negate)


@register_kernel("t_prep_nchw", "opencl", (DType.float32,), override=True)
def _cl_rank_two_only(spec):
    if len(spec.input("X").shape) != 2:
        raise Unsupported(f"rank {len(spec.input('X').shape)} has no OpenCL kernel here")
    return _cl_negate(spec)


@register_kernel("t_prep_fail", "numpy", (DType.float32,), override=True)
def _np_fails(spec):
    def run(x):
        raise ValueError("the kernel broke")

    return run


@register_kernel("t_prep_cl_fail", "opencl", (DType.float32,), override=True)
def _cl_fails(spec):
    def launch():
        raise RuntimeError("the device broke")

    return lambda rt, ins, outs: [launch]


def _program(*op_types: str, shape=(2, 3)) -> tuple[halfway.Program, str]:
    """x -> relu -> each of ``op_types`` in turn -> scale."""
    prog = halfway.Program()
    block = prog.global_block()
    with halfway.program_guard(prog):
        y = layers.relu(layers.data("x", list(shape)))
    for i, op_type in enumerate(op_types):
        out = block.create_var(f"t{i}", shape=list(shape), dtype=DType.float32)
        block.append_op(op_type, {"X": [y.name]}, {"Out": [out.name]})
        y = out
    with halfway.program_guard(prog):
        y = layers.scale(y, scale=2.0, bias=1.0)
    return prog, y.name


def _reference(x: np.ndarray, negations: int) -> np.ndarray:
    return np.maximum(x, 0) * (-1) ** negations * 2 + 1


X = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)


@pytest.mark.opencl
def test_an_op_with_only_an_opencl_kernel_runs_on_opencl():
    prog, out = _program("t_prep_cl_only")
    prepared = Executor(OpenCLPlace()).prepare(prog, ["x"], [out], halfway.Scope())
    assert prepared.report.fallbacks == []
    assert str(prepared.report.kernels[1][2]) == "t_prep_cl_only/opencl/float32"
    np.testing.assert_allclose(prepared.run({"x": X})[0], _reference(X, 1), rtol=1e-6)


def test_an_op_with_only_an_opencl_kernel_has_none_on_the_cpu():
    prog, out = _program("t_prep_cl_only")
    with pytest.raises(KernelNotFoundError, match=r"op #1 t_prep_cl_only.*registered for t_prep_cl_only: "
                                                  r"t_prep_cl_only/opencl/float32"):
        Executor().prepare(prog, ["x"], [out], halfway.Scope())


@pytest.mark.opencl
def test_numpy_only_and_unsupported_ops_fall_back_with_transfers():
    prog, out = _program("t_prep_np_only", "t_prep_nchw", "t_prep_cl_only", shape=(1, 2, 3))
    x = X.reshape(1, 2, 3)
    prepared = Executor(OpenCLPlace()).prepare(prog, ["x"], [out], halfway.Scope())
    report = prepared.report
    assert report.fallbacks == [(1, "t_prep_np_only", "no opencl kernel for float32"),
                                (2, "t_prep_nchw", "rank 3 has no OpenCL kernel here")]
    assert [key.backend for _, _, key in report.kernels] == ["opencl", "numpy", "numpy", "opencl", "opencl"]
    assert "op #2 t_prep_nchw -> numpy: rank 3 has no OpenCL kernel here" in report.summary()
    np.testing.assert_allclose(prepared.run({"x": x})[0], _reference(x, 3), rtol=1e-6)


@pytest.mark.opencl
def test_a_supported_configuration_does_not_fall_back():
    prog, out = _program("t_prep_nchw")
    prepared = Executor(OpenCLPlace()).prepare(prog, ["x"], [out], halfway.Scope())
    assert prepared.report.fallbacks == []
    np.testing.assert_allclose(prepared.run({"x": X})[0], _reference(X, 1), rtol=1e-6)


@pytest.mark.opencl
def test_strict_place_names_every_op_that_would_fall_back():
    prog, out = _program("t_prep_np_only", "t_prep_cl_only", "t_prep_nchw", shape=(1, 2, 3))
    with pytest.raises(KernelNotFoundError, match=r"strict place .*op #1 t_prep_np_only \(no opencl kernel for "
                                                  r"float32\); op #3 t_prep_nchw \(rank 3 has no OpenCL kernel"):
        Executor(OpenCLPlace(strict=True)).prepare(prog, ["x"], [out], halfway.Scope())


def test_a_failing_kernel_is_named_on_the_cpu():
    prog, out = _program("t_prep_fail")
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope())
    with pytest.raises(HalfwayError, match=r"while executing op #1 t_prep_fail\(X=relu\.tmp_0\) -> \(Out=t0\) "
                                           r"\[t_prep_fail/numpy/float32\]: ValueError: the kernel broke"):
        prepared.run({"x": X})


@pytest.mark.opencl
@pytest.mark.parametrize("op_type, key", [("t_prep_cl_fail", "t_prep_cl_fail/opencl/float32"),
                                          ("t_prep_fail", "t_prep_fail/numpy/float32")])
def test_a_failing_kernel_is_named_on_opencl(op_type, key):
    prog, out = _program(op_type)
    prepared = Executor(OpenCLPlace()).prepare(prog, ["x"], [out], halfway.Scope())
    with pytest.raises(HalfwayError, match=rf"while executing op #1 {op_type}\(X=relu\.tmp_0\) .*\[{key}\]: "
                                           r"(RuntimeError: the device|ValueError: the kernel) broke"):
        prepared.run({"x": X})
    plain, plain_out = _program()  # the queue still works afterwards
    np.testing.assert_allclose(Executor(OpenCLPlace()).run(plain, {"x": X}, [plain_out])[0], _reference(X, 0),
                               rtol=1e-6)


def test_profile_names_every_op_on_the_cpu():
    prog, out = _program("t_prep_np_only")
    times = Executor(CPUPlace()).prepare(prog, ["x"], [out], halfway.Scope()).profile({"x": X})
    assert [where.split("(")[0] for where, _ in times] == ["op #0 relu", "op #1 t_prep_np_only", "op #2 scale"]
    assert all(seconds >= 0 for _, seconds in times)


def test_one_cpu_program_runs_from_many_threads_at_once():
    prog, out = _program("t_prep_np_only", "t_prep_np_only", shape=(64, 32))
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope())
    feeds = [np.random.default_rng(seed).standard_normal((64, 32)).astype(np.float32) for seed in range(16)]

    def run(x: np.ndarray) -> bool:
        return all(np.allclose(prepared.run({"x": x})[0], _reference(x, 2), rtol=1e-6) for _ in range(50))

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(run, feeds))
