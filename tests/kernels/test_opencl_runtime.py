"""The OpenCL runtime: device choice, the float16 mode and the tensor-core decision from device
capabilities (faked here: the CI device is PoCL's CPU), GEMM tile choice, and the errors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from tests.support.extras import import_pyopencl

cl = import_pyopencl()

from halfway.executor import OpenCLPlace
from halfway.ir.dtypes import DType
from halfway.ir.errors import HalfwayError
from halfway.kernels.opencl import runtime
from halfway.kernels.opencl.gemm import Gemm, choose_tile, split_k, uses_tensor_cores
from halfway.kernels.opencl.runtime import DeviceCaps, Float16Mode, find_device, float16_mode

Mode = Float16Mode


def caps(fp16: bool = False, capability: tuple[int, int] | None = None, gpu: bool = True) -> DeviceCaps:
    return DeviceCaps("fake", "vendor", gpu, fp16, capability, 1024, 49152, 132)


@pytest.mark.parametrize("fp16, precision, mode", [
    (True, "low", Mode.NATIVE), (True, "normal", Mode.STORAGE), (True, "high", Mode.HIGH),
    (False, "low", Mode.STORAGE), (False, "normal", Mode.STORAGE), (False, "high", Mode.HIGH),
])
def test_float16_mode_from_capabilities(fp16, precision, mode):
    assert float16_mode(caps(fp16=fp16), precision) is mode


def test_bad_precision_is_refused():
    with pytest.raises(HalfwayError, match="precision must be one of low, normal, high"):
        float16_mode(caps(), "medium")


@pytest.mark.parametrize("capability, expected", [((9, 0), True), ((8, 0), True), ((7, 5), False), (None, False)])
def test_tensor_cores_from_compute_capability(capability, expected):
    assert caps(capability=capability).tensor_cores is expected


def fake_runtime(device_caps: DeviceCaps, precision: str) -> SimpleNamespace:
    mode = float16_mode(device_caps, precision)
    fake = SimpleNamespace(caps=device_caps, mode=mode)
    fake.storage = lambda dtype: runtime.Runtime.storage(fake, dtype)
    return fake


@pytest.mark.parametrize("capability, precision, dtype, mma", [
    ((9, 0), "normal", DType.float16, True), ((9, 0), "low", DType.float16, True),
    ((9, 0), "high", DType.float16, False), ((9, 0), "normal", DType.float32, False),
    ((7, 0), "normal", DType.float16, False), (None, "normal", DType.float16, False),
])
def test_tensor_core_gemm_only_for_float16_buffers_on_capable_devices(capability, precision, dtype, mma):
    rt = fake_runtime(caps(capability=capability), precision)
    assert uses_tensor_cores(rt, dtype) is mma
    big = Gemm(4096, 4096, 4096, 1, (0, 4096, 1), (0, 4096, 1), (0, 4096, 1))
    assert choose_tile(rt, dtype, big).mma is mma


def test_tiles_shrink_until_every_compute_unit_has_work():
    rt = fake_runtime(caps(), "normal")
    big = Gemm(4096, 4096, 64, 1, (0, 64, 1), (0, 4096, 1), (0, 4096, 1))
    small = Gemm(64, 49, 512, 1, (0, 512, 1), (0, 49, 1), (0, 49, 1))
    assert choose_tile(rt, DType.float32, big).block == (128, 128)
    assert choose_tile(rt, DType.float32, small).block == (32, 32)


@pytest.mark.parametrize("m, n, k, block, splits", [
    (4096, 4096, 4096, (128, 128), 1),  # no padding anywhere: the largest tile
    (64, 100352, 576, (64, 128), 1),  # ResNet-50's 64-channel layers: no padded rows
    (256, 100352, 64, (128, 128), 1),
    (512, 1568, 4608, (64, 64), 1),  # the first size with a tile per compute unit
    (128, 768, 768, (32, 32), 2),  # too few tiles of any size: the smallest, and split K
])
def test_tensor_core_tiles_fill_the_device_at_least_cost(m, n, k, block, splits):
    rt = fake_runtime(caps(capability=(9, 0)), "normal")
    g = Gemm(m, n, k, 1, (0, k, 1), (0, n, 1), (0, n, 1))
    tile = choose_tile(rt, DType.float16, g)
    assert tile.mma and tile.block == block
    assert split_k(rt, tile, g)[0] == splits


@pytest.mark.parametrize("m, n, k, b, splits", [
    (1, 4096, 25088, (0, 4096, 1), 16),  # VGG-19's fc6 at batch 1: 32 blocks of 128 columns
    (1, 1000, 2048, (0, 1000, 1), 16),  # ResNet-50's fc at batch 1: 8 blocks, 128 k per split
    (8, 4096, 4096, (0, 4096, 1), 16),  # eight rows (a decoder at batch 8)
    (1, 65536, 4096, (0, 65536, 1), 1),  # 512 blocks: enough to keep the device's memory busy
    (9, 4096, 4096, (0, 4096, 1), None),  # too many rows
    (1, 1000, 1024, (0, 1000, 1), None),  # too few weights
    (1, 4096, 4096, (0, 1, 4096), 2),  # transposed weights: gemv_t, 256 blocks of 16 columns
    (1, 4096, 4092, (0, 1, 4092), None),  # transposed, columns of no whole 16-byte vectors
    (1, 1004, 2048, (0, 1004, 1), None),  # rows of no whole 16-byte vectors
])
def test_gemv_for_few_rows_of_large_weights(m, n, k, b, splits):
    rt = fake_runtime(caps(capability=(9, 0)), "normal")
    g = Gemm(m, n, k, 1, (0, k, 1), b, (0, n, 1))
    tile, gemv = choose_tile(rt, DType.float16, g), splits is not None
    assert (tile.gemv, tile.mma) == (gemv, not gemv)
    if gemv:
        assert split_k(rt, tile, g)[0] == splits


def test_devices_by_index_name_and_environment(monkeypatch):
    first = find_device(0)
    assert find_device(first.name.strip()[:6].lower()) == first
    assert find_device(first.platform.name.split()[0].upper()) == first
    monkeypatch.setenv(runtime.DEVICE_ENV, "0")
    assert find_device() == first
    with pytest.raises(HalfwayError, match="no OpenCL device matches 'no-such-device'; devices: 0: "):
        find_device("no-such-device")
    with pytest.raises(HalfwayError, match="index 99 is out of range"):
        find_device(99)


def fake_devices(monkeypatch, *devices: SimpleNamespace) -> None:
    """``devices`` as the machine's one platform; each builds programs unless it has ``error``."""
    monkeypatch.delenv(runtime.DEVICE_ENV, raising=False)
    platform = SimpleNamespace(get_devices=lambda: list(devices))
    monkeypatch.setattr(cl, "get_platforms", lambda: [platform])
    monkeypatch.setattr(runtime, "build_error", lambda device: getattr(device, "error", None))


def test_default_device_is_a_gpu_when_there_is_one(monkeypatch):
    cpu = SimpleNamespace(type=cl.device_type.CPU, name="cpu")
    gpu = SimpleNamespace(type=cl.device_type.GPU, name="gpu")
    fake_devices(monkeypatch, cpu, gpu)
    assert find_device() is gpu
    fake_devices(monkeypatch, cpu)
    assert find_device() is cpu


def test_default_device_builds_programs(monkeypatch):
    broken_gpu = SimpleNamespace(type=cl.device_type.GPU, name="gpu", error="error: no compiler")
    cpu = SimpleNamespace(type=cl.device_type.CPU, name="cpu")
    fake_devices(monkeypatch, broken_gpu, cpu)
    assert find_device() is cpu
    assert find_device(0) is broken_gpu  # asked for by index or name: the user's choice stands
    broken_cpu = SimpleNamespace(type=cl.device_type.CPU, name="cpu", error="error: unknown target CPU 'generic'")
    fake_devices(monkeypatch, broken_gpu, broken_cpu)
    with pytest.raises(HalfwayError, match=r"no OpenCL device can build programs \(0: gpu: error: no compiler; "
                                           r"1: cpu: error: unknown target CPU 'generic'\)"):
        find_device()


def test_build_error_is_what_the_device_compiler_says():
    for device in [d for p in cl.get_platforms() for d in p.get_devices()]:
        try:
            cl.Program(cl.Context([device]), "__kernel void k(__global int *x) { x[0] = 1; }").build()
            direct = None
        except cl.Error as e:
            direct = str(e)
        error = runtime.build_error(device)
        assert (error is None) == (direct is None)
        assert error is None or error in direct


def test_no_platform_names_the_install(monkeypatch):
    def no_platform():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")

    monkeypatch.setattr(cl, "get_platforms", no_platform)
    with pytest.raises(HalfwayError, match=r"no OpenCL platform.*pip install 'halfway\[opencl\]'"):
        find_device()


@pytest.mark.opencl
def test_runtime_is_shared_per_device_and_precision():
    place = OpenCLPlace()
    assert place.runtime is OpenCLPlace().runtime
    assert OpenCLPlace(precision="high").runtime is not place.runtime
    assert str(place).startswith("opencl:")


@pytest.mark.opencl
def test_program_cache_keys_on_source_and_options():
    rt = OpenCLPlace().runtime
    text = "__kernel void k(__global float* x) { x[0] = VALUE; }"
    before = rt.compiled_programs
    one, again = rt.program(text, ["-DVALUE=1"]), rt.program(text, ["-DVALUE=1"])
    other = rt.program(text, ["-DVALUE=2"])
    assert one is again and other is not one and rt.compiled_programs == before + 2
    out = rt.upload(np.zeros(1, np.float32))
    cl.Kernel(other, "k")(rt.queue, (1,), None, out)
    host = np.empty(1, np.float32)
    cl.enqueue_copy(rt.queue, host, out)
    assert host[0] == 2
    with pytest.raises(HalfwayError, match="OpenCL build failed"):
        rt.program("__kernel void broken( {")
