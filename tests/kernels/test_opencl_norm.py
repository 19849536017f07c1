"""The OpenCL row normalisations (layer_norm, skip_layer_norm, rms_norm, skip_rms_norm) against the numpy kernels of the same ops:
rows shorter and longer than a work-group, with and without Scale and Bias, float32 and float16."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.extras import import_pyopencl

import_pyopencl()

from tests.kernels.test_opencl_kernels import FLOATS, check, rand

pytestmark = pytest.mark.opencl


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, begin", [((2, 3, 37), 2), ((3, 5, 7), 1), ((4, 300), 1)])
def test_layer_norm(place, shape, begin, dtype):
    x = rand(*shape, dtype=dtype) * 3 + 1
    width = int(np.prod(shape[begin:]))
    params = {"Scale": rand(width), "Bias": rand(width)}
    check(place, "layer_norm", {"X": x, **params}, {"begin_norm_axis": begin, "epsilon": 1e-5},
          params=tuple(params))
    check(place, "layer_norm", {"X": x}, {"begin_norm_axis": begin}, outputs={"Y": 1, "Mean": 1, "Variance": 1})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(2, 3, 37), (2, 260)])
def test_rms_norm(place, shape, dtype):
    x = rand(*shape, dtype=dtype) * 3
    check(place, "rms_norm", {"X": x, "Scale": rand(shape[-1])}, {"begin_norm_axis": len(shape) - 1,
                                                                   "epsilon": 1e-6}, params=("Scale",))
    check(place, "rms_norm", {"X": x}, {"begin_norm_axis": 1})



@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, begin", [((2, 3, 37), 2), ((4, 300), 1)])
def test_skip_layer_norm(place, shape, begin, dtype):
    x, y = rand(*shape, dtype=dtype) * 3 + 1, rand(*shape, dtype=dtype)
    width = int(np.prod(shape[begin:]))
    params = {"Scale": rand(width), "Bias": rand(width)}
    check(place, "skip_layer_norm", {"X": x, "Y": y, **params}, {"begin_norm_axis": begin, "epsilon": 1e-5},
          params=tuple(params), outputs={"Out": 1, "Sum": 1})
    check(place, "skip_layer_norm", {"X": x, "Y": y}, {"begin_norm_axis": begin})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape, begin", [((2, 3, 37), 2), ((4, 300), 1)])
def test_skip_rms_norm(place, shape, begin, dtype):
    x, y = rand(*shape, dtype=dtype) * 3 + 1, rand(*shape, dtype=dtype)
    scale = {"Scale": rand(int(np.prod(shape[begin:])))}
    check(place, "skip_rms_norm", {"X": x, "Y": y, **scale}, {"begin_norm_axis": begin, "epsilon": 1e-6},
          params=("Scale",), outputs={"Out": 1, "Sum": 1})
    check(place, "skip_rms_norm", {"X": x, "Y": y}, {"begin_norm_axis": begin})
