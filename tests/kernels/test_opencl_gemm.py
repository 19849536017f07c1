"""The tensor-core GEMM's host side on any OpenCL device: its tile table against the kernel's
local-memory and work-item layout rules, and the channels-last operands of a convolution (the
portable transpose kernel, and the host reorder of a constant filter that replaces it). The
tensor-core kernel itself builds only on NVIDIA; tests/test_opencl_kernels.py checks it there."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.extras import import_pyopencl

cl = import_pyopencl()

from halfway.kernels.opencl import gemm  # noqa: E402
from halfway.kernels.opencl.base import DeviceArray  # noqa: E402
from halfway.kernels.opencl.runtime import get_runtime  # noqa: E402

LOCAL_MEMORY = 48 * 1024
"""What NVIDIA's OpenCL gives a work-group (its CL_DEVICE_LOCAL_MEM_SIZE)."""


@pytest.fixture(scope="module")
def rt():
    return get_runtime()


def upload(rt, array: np.ndarray) -> DeviceArray:
    return DeviceArray(rt.upload(array), array.shape, array.dtype)


def download(rt, array: DeviceArray) -> np.ndarray:
    host = np.empty(array.shape, array.dtype)
    cl.enqueue_copy(rt.queue, host, array.buffer)
    return host


@pytest.mark.parametrize("sizes", gemm.MMA_TUNE_TILES)
def test_tensor_core_tiles_fit_the_kernel(sizes):
    tile = gemm.Tile(True, sizes)
    defines = tile.defines()
    (bm, bn), threads = tile.block, tile.local[0]
    slices = defines["STAGES"] * (bm + bn) * defines["BK"] * 2
    assert slices <= LOCAL_MEMORY
    assert threads // 32 * 16 * (defines["NI"] * 8 + 8) * 4 <= slices  # the epilogue's float bands
    assert defines["NI"] % 2 == 0  # B fragments come in pairs from one ldmatrix.x4
    assert threads % bn == 0 and threads % defines["BK"] == 0  # each work-item keeps its columns
    assert defines["PENDING"] == defines["STAGES"] - 2 >= 0


@pytest.mark.parametrize("planes, rows, cols, rows_out", [
    (3, 37, 70, 40),  # columns not a multiple of 8: read an element at a time
    (2, 70, 72, 72),  # two tiles of rows, 16-byte reads
    (1, 130, 96, 136),  # a partial third tile of rows, padded
    (2, 3, 50, 8),  # a stem's few channels: a work-item per column
    (1, 13, 17, 16),
])
def test_transpose_pads_the_new_rows_with_zeros(rt, planes, rows, cols, rows_out):
    x = np.random.default_rng(0).standard_normal((planes, rows, cols)).astype(np.float16)
    run, out = gemm._transpose(rt, upload(rt, x), planes, rows, cols, rows_out)
    run()
    expected = np.zeros((planes, cols, rows_out), np.float16)
    expected[:, :, :rows] = x.transpose(0, 2, 1)
    np.testing.assert_array_equal(download(rt, out), expected)


def conv_operands(rt, c: int, kernel: int, constant: bool):
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, c, kernel, kernel)).astype(np.float16)
    x = rng.standard_normal((2, c, 9, 9)).astype(np.float16)
    pad = kernel // 2
    shape = gemm.ConvShape(c, 9, 9, 16, 16, c, 9, 9, kernel, kernel, 1, 1, 1, 1, pad, pad)
    k = c * kernel * kernel
    g = gemm.Gemm(16, 2 * 81, k, 1, (16 * k, k, 1), (0, 0, 0), (0, 0, 0))
    ops = gemm._channels_last(rt, g, shape, upload(rt, w), upload(rt, x), w if constant else None, False)
    for run in ops.launches:
        run()
    return w, x, ops


@pytest.mark.parametrize("c, kernel", [(3, 3), (8, 3), (5, 1)])
@pytest.mark.parametrize("constant", [True, False])
def test_channels_last_operands(rt, c, kernel, constant):
    w, x, ops = conv_operands(rt, c, kernel, constant)
    padded = -(-c // 8) * 8
    ohwi = np.zeros((16, kernel, kernel, padded), np.float16)
    ohwi[..., :c] = w.transpose(0, 2, 3, 1)
    nhwc = np.zeros((2, 9, 9, padded), np.float16)
    nhwc[..., :c] = x.transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(download(rt, ops.a).reshape(ohwi.shape), ohwi)
    np.testing.assert_array_equal(download(rt, ops.b).reshape(nhwc.shape), nhwc)
    assert (ops.conv.C, ops.conv.CG) == (padded, padded)
    assert ops.g.k == kernel * kernel * padded and ops.g.a == (16 * ops.g.k, ops.g.k, 1)
    assert len(ops.launches) == (1 if constant else 2)


@pytest.mark.parametrize("constant", [True, False])
@pytest.mark.parametrize("stride", [1, 2])
def test_nhwc_input_is_the_channels_last_operand_as_it_lies(rt, constant, stride):
    """An NHWC input of 16 channels (the channels_last pass's) is read where it lies, strided or not;
    only a filter that is not constant is reordered on the device."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float16)
    x = upload(rt, rng.standard_normal((2, 9, 9, 16)).astype(np.float16))
    out = -(-9 // stride)
    shape = gemm.ConvShape(16, 9, 9, 16, 16, 16, out, out, 3, 3, stride, stride, 1, 1, 1, 1)
    g = gemm.Gemm(16, 2 * out * out, 144, 1, (16 * 144, 144, 1), (0, 0, 0), (0, 0, 0))
    ops = gemm._channels_last(rt, g, shape, upload(rt, w), x, w if constant else None, True)
    assert ops.b is x and ops.conv == shape and ops.g.k == 144 and len(ops.launches) == (0 if constant else 1)
    for run in ops.launches:
        run()
    np.testing.assert_array_equal(download(rt, ops.a).reshape(16, 3, 3, 16), w.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("c, side, stride", [(5, 9, 2), (70, 12, 3), (16, 7, 2)])
def test_strided_pointwise_convolution_copies_only_the_pixels_it_reads(rt, c, side, stride):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((16, c, 1, 1)).astype(np.float16)
    x = rng.standard_normal((2, c, side, side)).astype(np.float16)
    out = -(-side // stride)
    shape = gemm.ConvShape(c, side, side, 16, 16, c, out, out, 1, 1, stride, stride, 1, 1, 0, 0)
    g = gemm.Gemm(16, 2 * out * out, c, 1, (16 * c, c, 1), (0, 0, 0), (0, 0, 0))
    ops = gemm._channels_last(rt, g, shape, upload(rt, w), upload(rt, x), w, False)
    for run in ops.launches:
        run()
    padded = -(-c // 8) * 8
    nhwc = np.zeros((2, out, out, padded), np.float16)
    nhwc[..., :c] = x[:, :, ::stride, ::stride].transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(download(rt, ops.b).reshape(nhwc.shape), nhwc)
    assert ops.conv[1:3] == (out, out) and ops.conv[10:12] == (1, 1)


def test_pointwise_filter_of_whole_chunks_is_used_as_it_is(rt):
    w, _, ops = conv_operands(rt, 8, 1, constant=False)
    assert len(ops.launches) == 1  # the input's transpose only
    np.testing.assert_array_equal(download(rt, ops.a).reshape(w.shape), w)


@pytest.mark.parametrize("conv_side, gemm_n, strides, expected", [
    (56, None, None, 8),  # 3136 outputs per channel plane: eight at a time stay inside it
    (14, None, None, 2),  # 196: a chunk of eight would cross into the next image, one of two not
    (7, None, None, 0),  # 49: one at a time
    (None, 768, ((768 * 128, 768, 1)), 8),
    (None, 770, ((770 * 128, 770, 1)), 2),  # rows aligned to 4 bytes, not 16
    (None, 769, ((769 * 128, 769, 1)), 0),
    (None, 768, ((0, 1, 128)), 0),  # transposed output: columns are not consecutive
])
def test_tensor_core_epilogue_stores_several_only_where_they_are_consecutive(conv_side, gemm_n, strides, expected):
    if conv_side is not None:
        side = conv_side
        shape = gemm.ConvShape(64, side, side, 256, 256, 64, side, side, 1, 1, 1, 1, 1, 1, 0, 0)
        g = gemm.Gemm(256, 2 * side * side, 64, 1, (0, 64, 1), (0, 0, 0), (0, 0, 0))
        assert gemm._vector_out(g, shape) is expected
    else:
        g = gemm.Gemm(128, gemm_n, 512, 1, (0, 512, 1), (0, gemm_n, 1), strides)
        assert gemm._vector_out(g, None) is expected
