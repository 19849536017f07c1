"""The OpenCL fused attention against the numpy kernel of scaled_dot_product_attention: sequences
that are no multiple of a tile, grouped-query heads, bool and additive masks that broadcast or
stop short of the keys, key lengths, causal masking with an offset, softcap, float32 and float16
storage, and rows whose keys all drop (NaN, as numpy). The float16 cases of head sizes that are
multiples of 16 run on tensor cores on NVIDIA devices of compute capability 8.0 and up
(``attention_mma.cl``) and on the portable kernel elsewhere, and which one a device takes is
checked against its capabilities."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.extras import import_pyopencl

import_pyopencl()

from halfway.ir.dtypes import DType
from halfway.kernels.opencl.attention import tensor_core_refusal
from tests.kernels.test_opencl_kernels import FLOATS, RNG, check, rand
from tests.kernels.test_opencl_runtime import caps, fake_runtime
from tests.support.oprun import run_op

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
    zeroed = run_op("scaled_dot_product_attention", args, {"zero_nan": True}, place=place).out
    np.testing.assert_allclose(zeroed, np.where(np.isnan(want), 0, want), rtol=2e-5, atol=2e-5)


def test_attention_of_a_long_sequence_against_float64_math(place):
    """Many key tiles: the online softmax's rescaling against a softmax in float64."""
    q, k, v = (RNG.standard_normal((1, 2, 300, 32)) * 2 for _ in range(3))
    got = run_op("scaled_dot_product_attention", {"Q": q.astype(np.float32), "K": k.astype(np.float32),
                                                  "V": v.astype(np.float32)}, place=place).out
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(32)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(got, probs / probs.sum(-1, keepdims=True) @ v, rtol=1e-4, atol=1e-5)


# -- the tensor-core kernel ------------------------------------------------------------------------
def half_qkv(batch: int, heads: int, kv_heads: int, q_len: int, kv_len: int, depth: int = 64,
             v_depth: int | None = None) -> dict:
    return {"Q": rand(batch, heads, q_len, depth, dtype=np.float16),
            "K": rand(batch, kv_heads, kv_len, depth, dtype=np.float16),
            "V": rand(batch, kv_heads, kv_len, v_depth or depth, dtype=np.float16)}


def bool_mask(*shape: int) -> np.ndarray:
    return rand(*shape) > -0.8


MMA_CASES = {
    "tails": (half_qkv(2, 4, 4, 77, 100), {}),
    "one_short_tile": (half_qkv(1, 2, 2, 5, 9), {}),
    "causal": (half_qkv(1, 4, 4, 130, 130), {"is_causal": True}),
    "causal_offset": (half_qkv(1, 2, 2, 50, 90), {"is_causal": True, "causal_offset": 40}),
    "causal_rows_without_keys": (half_qkv(1, 2, 2, 70, 70), {"is_causal": True, "causal_offset": -3}),
    "grouped_query": (half_qkv(2, 8, 2, 65, 129), {}),
    "bool_mask": ({**half_qkv(2, 4, 4, 40, 100), "Mask": bool_mask(2, 1, 1, 100)}, {}),
    "additive_mask": ({**half_qkv(2, 4, 4, 40, 100), "Mask": rand(40, 100).astype(np.float16) * 2}, {}),
    "short_mask": ({**half_qkv(1, 4, 4, 66, 100), "Mask": bool_mask(1, 4, 66, 70)}, {}),
    "softcap": (half_qkv(1, 2, 2, 33, 47), {"scale": 0.3, "softcap": 2.0}),
    "head_size_128": (half_qkv(1, 2, 1, 70, 90, 128), {"is_causal": True}),
    "head_sizes_16_and_32": (half_qkv(1, 2, 2, 30, 40, 16, 32), {}),
    "value_head_size_128": (half_qkv(1, 2, 2, 30, 70, 64, 128), {}),
}


@pytest.mark.parametrize("case", MMA_CASES)
def test_tensor_core_attention(place, case):
    """float16 head sizes the tensor-core kernel takes on NVIDIA devices of compute capability 8.0+
    (elsewhere the portable kernel runs them), against numpy at float16 tolerances."""
    inputs, attrs = MMA_CASES[case]
    check(place, "scaled_dot_product_attention", inputs, attrs)


def test_tensor_core_attention_key_lengths_and_rows_without_keys(place):
    inputs = half_qkv(3, 2, 1, 70, 100)
    mask = np.ones((3, 1, 70, 100), bool)
    mask[1, :, 2] = False
    args = {**inputs, "Mask": mask, "KeyLengths": np.array([100, 7, 0], np.int64)}
    got = check(place, "scaled_dot_product_attention", args)["Out"][0]
    assert np.isnan(got[1, :, 2]).all() and np.isnan(got[2]).all() and not np.isnan(got[0]).any()
    zeroed = check(place, "scaled_dot_product_attention", args, {"zero_nan": True})["Out"][0]
    assert (zeroed[1, :, 2] == 0).all() and (zeroed[2] == 0).all() and not np.isnan(zeroed).any()


@pytest.mark.parametrize("attrs", [{}, {"is_causal": True}])
def test_sequence_major_tensor_core_attention(place, attrs):
    """BERT's layout: Q, K, V and Out as [B, S, H * D] with D = 64, a padding mask over the keys."""
    inputs = {name: value.transpose(0, 2, 1, 3).reshape(2, value.shape[2], -1)
              for name, value in half_qkv(2, 4, 2, 100, 100).items()}
    inputs["Mask"] = np.where(np.arange(100) < np.array([[100], [61]]), 0.0, -np.inf).astype(np.float16)[:, None, None]
    got = check(place, "scaled_dot_product_attention", inputs, {"q_num_heads": 4, "kv_num_heads": 2, **attrs})
    assert got["Out"][0].shape == (2, 100, 4 * 64)


def test_the_device_takes_the_tensor_core_kernel_where_it_has_tensor_cores(place):
    rt = place.runtime
    assert (tensor_core_refusal(rt, DType.float16, 64, 64) is None) is rt.caps.tensor_cores


@pytest.mark.parametrize("capability, precision, dtype, depths, why", [
    ((9, 0), "normal", DType.float16, (64, 64), None),
    ((8, 0), "normal", DType.float16, (128, 16), None),
    ((9, 0), "low", DType.float16, (64, 64), None),
    ((9, 0), "normal", DType.float16, (8, 8), "head sizes 8 and 8: tensor cores take multiples of 16 up to 128"),
    ((9, 0), "normal", DType.float16, (64, 72), "multiples of 16"),
    ((9, 0), "normal", DType.float16, (256, 256), "up to 128"),
    ((9, 0), "normal", DType.float32, (64, 64), "float16 buffers on NVIDIA"),
    ((9, 0), "high", DType.float16, (64, 64), "float16 buffers on NVIDIA"),
    ((7, 5), "normal", DType.float16, (64, 64), "compute capability 8.0"),
    (None, "normal", DType.float16, (64, 64), "compute capability 8.0"),
])
def test_which_attention_runs_on_tensor_cores(capability, precision, dtype, depths, why):
    refusal = tensor_core_refusal(fake_runtime(caps(capability=capability), precision), dtype, *depths)
    assert refusal is None if why is None else why in refusal


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("layout", ["4d", "3d"])
@pytest.mark.parametrize("interleaved, rotary_dim", [(False, 0), (True, 4)])
def test_rotary_embedding_with_one_table_for_the_batch(place, layout, interleaved, rotary_dim, dtype):
    """Cos and Sin of [1, S, R / 2] (what fuse_rotary makes of positions counting from 0) serve
    every row of the batch."""
    x = rand(3, 4, 7, 8, dtype=dtype) if layout == "4d" else rand(3, 7, 32, dtype=dtype)
    half = (rotary_dim or 8) // 2
    tables = {"Cos": rand(1, 7, half), "Sin": rand(1, 7, half)}
    check(place, "rotary_embedding", {"X": x, **tables},
          {"interleaved": interleaved, "rotary_dim": rotary_dim, "num_heads": 4 if layout == "3d" else 0})
