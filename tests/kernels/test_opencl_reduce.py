"""The OpenCL reduce ops against the numpy kernels of the same ops: one dim, several, every dim,
with and without keep_dim, float32 and float16."""

from __future__ import annotations

import pytest

from tests.support.extras import import_pyopencl

import_pyopencl()

from tests.kernels.test_opencl_kernels import FLOATS, check, rand

pytestmark = pytest.mark.opencl


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"])
@pytest.mark.parametrize("attrs", [{"dim": [1]}, {"dim": [0, -1], "keep_dim": True}, {"reduce_all": True},
                                   {"dim": [2, 3]}])
def test_reductions(place, op_type, attrs, dtype):
    x = rand(3, 5, 4, 2) * (0.1 if op_type == "reduce_prod" else 1.0) + (1.0 if op_type == "reduce_prod" else 0.0)
    check(place, op_type, {"X": x.astype(dtype)}, attrs)
