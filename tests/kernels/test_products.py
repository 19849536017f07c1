"""kernels.numpy.products: how a product is cut among the threads — a product of few rows (a
decode step's) along the shared dim, each part reading a contiguous block of the weight's rows,
the parts' results summed — against float64 products."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from halfway.kernels.numpy import products, threads


@pytest.fixture
def parts(monkeypatch):
    """The parts each product is cut into, run in turn on this thread (as if a team of 3 helped)."""
    seen: list[list] = []
    monkeypatch.setattr(threads, "thread_count", lambda: 4)
    monkeypatch.setattr(products, "team_size", lambda: 3)
    monkeypatch.setattr(products, "single_threaded_blas", lambda: contextlib.nullcontext(True))

    def run(cut):
        seen.append(list(cut))
        for part in cut:
            part()

    monkeypatch.setattr(products, "run_parts", run)
    return seen


def _operands(m, k, n):
    rng = np.random.default_rng(m * k + n)
    return rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


@pytest.mark.parametrize("m", [1, 3, products.PACKED_ROWS - 1])
def test_few_rows_are_cut_along_the_depth(parts, m):
    a, b = _operands(m, 1000, 300)
    got = products.matmul(a, b)
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    (cut,) = parts
    blocks = [part.args[1] for part in cut]
    assert len(cut) == 4 and all(block.flags.c_contiguous and block.shape[1] == 300 for block in blocks)
    starts = np.cumsum([0] + [block.shape[0] for block in blocks])
    assert starts[-1] == 1000 and all(start % products.DEPTH_ALIGN == 0 for start in starts[:-1])
    for part, start, stop in zip(cut, starts, starts[1:]):
        assert np.shares_memory(part.args[0], a[:, start:stop]) and part.args[0].shape == (m, stop - start)


def test_a_small_product_of_few_rows_is_one_part(parts):
    a, b = _operands(1, 64, 64)
    np.testing.assert_allclose(products.matmul(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert parts == []


def test_more_rows_are_cut_by_rows_or_columns(parts):
    a, b = _operands(products.PACKED_ROWS, 1000, 3000)
    np.testing.assert_allclose(products.matmul(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    (cut,) = parts
    assert all(part.args[1].shape[0] == 1000 for part in cut)  # every part reads the whole depth
