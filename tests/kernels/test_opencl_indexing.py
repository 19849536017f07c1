"""The OpenCL indexing kernels (where, gather, lookup_table_v2, gather_nd, take_along_axis, cumsum) against the
numpy kernels of the same ops, on floats, integers and bool, with negative indices."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.extras import import_pyopencl

import_pyopencl()

from tests.kernels.test_opencl_kernels import DATA, FLOATS, RNG, check, data, rand
from tests.support.oprun import run_op

pytestmark = pytest.mark.opencl


@pytest.mark.parametrize("dtype", DATA)
def test_where_broadcasts_its_three_operands(place, dtype):
    cond = rand(4, 1, 5) > 0
    check(place, "where", {"Condition": cond, "X": data(3, 5, dtype=dtype), "Y": data(4, 3, 1, dtype=dtype)})


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", DATA)
def test_gather(place, dtype, index_dtype):
    x = data(4, 6, 3, dtype=dtype)
    index = np.array([5, 0, -1, 2, 2], index_dtype)
    check(place, "gather", {"X": x, "Index": index}, {"axis": 1})
    check(place, "gather", {"X": x, "Index": index[:3] % 4}, {"axis": 0})  # an embedding lookup


@pytest.mark.parametrize("dtype", FLOATS)
def test_lookup_table_v2(place, dtype):
    """An embedding's rows on the device (a decode step's first op); with a padding_idx, numpy."""
    table, ids = data(7, 5, dtype=dtype), np.array([[6, 0, 3], [3, 3, 1]], np.int64)
    check(place, "lookup_table_v2", {"W": table, "Ids": ids})
    ran = run_op("lookup_table_v2", {"W": table, "Ids": ids}, {"padding_idx": 3}, place=place)
    assert [why for _, _, why in ran.report.fallbacks] == ["lookup_table_v2 with a padding_idx"]


@pytest.mark.parametrize("dtype", DATA)
def test_gather_nd(place, dtype):
    x = data(4, 5, 3, dtype=dtype)
    index = np.array([[[1, 4], [3, -1]], [[0, 0], [2, 3]]], np.int64)
    check(place, "gather_nd", {"X": x, "Index": index})


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_take_along_axis(place, dtype):
    x = data(3, 6, 4, dtype=dtype)
    index = RNG.integers(-6, 6, (3, 2, 4)).astype(np.int64)
    check(place, "take_along_axis", {"Input": x, "Index": index}, {"Axis": 1}, outputs={"Result": 1})


@pytest.mark.parametrize("dtype", FLOATS + [np.int32, np.int64])
@pytest.mark.parametrize("attrs", [{"axis": 1}, {"axis": -1, "exclusive": True}, {"axis": 0, "reverse": True},
                                   {"axis": 0, "flatten": True}])
def test_cumsum(place, dtype, attrs):
    x = rand(4, 7, 3) if dtype in FLOATS else RNG.integers(-50, 50, (4, 7, 3))
    check(place, "cumsum", {"X": x.astype(dtype)}, attrs, rtol=2e-3 if dtype == np.float16 else None)
