"""The OpenCL fused attention against the numpy kernel of scaled_dot_product_attention: sequences
that are no multiple of a tile, grouped-query heads, bool and additive masks that broadcast or
stop short of the keys, key lengths, causal masking with an offset, softcap, float32 and float16
storage, and rows whose keys all drop (NaN, as numpy)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.extras import import_pyopencl

import_pyopencl()

from tests.oprun import run_op
from tests.test_opencl_kernels import FLOATS, RNG, check, rand

pytestmark = pytest.mark.opencl


def qkv(batch: int, heads: int, kv_heads: int, q_len: int, kv_len: int, depth: int, dtype) -> dict:
    return {"Q": rand(batch, heads, q_len, depth, dtype=dtype), "K": rand(batch, kv_heads, kv_len, depth, dtype=dtype),
            "V": rand(batch, kv_heads, kv_len, depth + 3, dtype=dtype)}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("attrs", [{}, {"is_causal": True}, {"is_causal": True, "causal_offset": 5},
                                   {"scale": 0.3, "softcap": 2.0}])
def test_attention(place, attrs, dtype):
    check(place, "scaled_dot_product_attention", qkv(2, 4, 2, 19, 37, 8, dtype), attrs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mask_shape", [(2, 1, 1, 37), (19, 37), (1, 4, 19, 30), (37,)])
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_attention_masks(place, mask_shape, kind, dtype):
    inputs = qkv(2, 4, 4, 19, 37, 16, dtype)
    mask = rand(*mask_shape) > -1.0 if kind == "bool" else (rand(*mask_shape) * 2).astype(dtype)
    check(place, "scaled_dot_product_attention", {**inputs, "Mask": mask})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("attrs", [{}, {"is_causal": True}])
def test_sequence_major_attention(place, attrs, dtype):
    """Q, K, V and Out as [B, S, H * D], read and written through strides, as numpy computes them."""
    inputs = {name: value.transpose(0, 2, 1, 3).reshape(2, value.shape[2], -1)
              for name, value in qkv(2, 4, 2, 19, 37, 8, dtype).items()}
    inputs["Mask"] = rand(19, 37).astype(dtype)
    got = check(place, "scaled_dot_product_attention", inputs, {"q_num_heads": 4, "kv_num_heads": 2, **attrs})
    assert got["Out"][0].shape == (2, 19, 4 * 11)


def test_attention_key_lengths_and_fully_masked_rows(place):
    inputs = qkv(3, 2, 1, 5, 20, 8, np.float32)
    mask = np.ones((3, 1, 5, 20), bool)
    mask[1, :, 2] = False  # a row with no key: NaN on both places
    args = {**inputs, "Mask": mask, "KeyLengths": np.array([20, 7, 1], np.int64)}
    got = run_op("scaled_dot_product_attention", args, place=place)
    assert got.report.fallbacks == [], got.report.summary()
    want = run_op("scaled_dot_product_attention", args).out
    assert np.isnan(want[1, :, 2]).all()
    np.testing.assert_allclose(got.out, want, rtol=2e-5, atol=2e-5)


def test_attention_of_a_long_sequence_against_float64_math(place):
    """Many key tiles: the online softmax's rescaling against a softmax in float64."""
    q, k, v = (RNG.standard_normal((1, 2, 300, 32)) * 2 for _ in range(3))
    got = run_op("scaled_dot_product_attention", {"Q": q.astype(np.float32), "K": k.astype(np.float32),
                                                  "V": v.astype(np.float32)}, place=place).out
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(32)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(got, probs / probs.sum(-1, keepdims=True) @ v, rtol=1e-4, atol=1e-5)
