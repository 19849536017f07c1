"""numpy kernels of the transformer ops (``halfway.ir.ops.attention``): scaled_dot_product_attention,
cached_attention, rotary_embedding and linear_attention (its recurrence token by token). float16 runs widened to float32 (the registry's default):
float16 storage, float32 scores and softmax; cached_attention's float16 kernel is registered on
its own, as widening would hand it float32 copies of the caches it writes in place.

Attention computes every head at once: query heads are grouped under their key/value head
([B, Hkv, G * Sq, D], a view of Q), so one 4-D ``np.matmul`` makes the scores of all heads
without repeating K or V, the mask and softmax run in place on that one scores array, and a
second ``np.matmul`` reads V. Long sequences run in blocks of query rows whose scores fit
``SCORE_BLOCK_BYTES`` (4 MiB), so the scratch stays one block rather than [B, H, Sq, Skv]; the
Scores output, a full matrix anyway, computes in one block. Sequence-major Q, K, V and Out
([B, S, H * D], q_num_heads set) are read and written through head-major views, not copied.

The products of one head are small, and OpenBLAS's threads cost them more than they save:
attention runs with OpenBLAS on one thread (``threads.single_threaded_blas``), its images, or
its heads, cut among the numpy backend's threads.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...ir.dtypes import DType
from ...ir.errors import HalfwayError
from ...ir.ops.attention import linear_attention_inputs
from ..registry import Kernel, KernelSpec, register_kernel
from .conv import slot_positions
from .jit import compiled_softmax
from .threads import MULTIPLY_ADDS_PER_ELEMENT, run_parts, single_threaded_blas, spans

__all__ = ["SCORE_BLOCK_BYTES", "rotate"]

_FLOATS = (DType.float32, DType.float16, DType.float64)


def _softmax_in_place(scores: np.ndarray) -> None:
    """Softmax along the last axis, max-subtracted; a row of -inf only becomes NaN (0 / 0)."""
    if compiled_softmax(scores, scores):
        return
    with np.errstate(invalid="ignore"):
        scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)


def _apply_mask(scores: np.ndarray, mask: np.ndarray) -> None:
    """Add a float mask or drop the keys a bool mask marks False; keys past its last dim drop."""
    width = mask.shape[-1] if mask.ndim else scores.shape[-1]
    covered = scores[..., :width]
    if mask.dtype == np.bool_:
        np.copyto(covered, -np.inf, where=~mask)
    else:
        covered += mask.astype(scores.dtype, copy=False)
    scores[..., width:] = -np.inf


def _apply_causal(scores: np.ndarray, offset: int) -> None:
    rows, cols = scores.shape[-2:]
    np.copyto(scores, -np.inf, where=np.arange(cols) > np.arange(rows)[:, None] + offset)


SCORE_BLOCK_BYTES = 4 << 20
"""The most bytes of scores one block of query rows holds (every head's scores for those rows);
a long sequence runs block by block, so the scratch is one block, not [B, H, Sq, Skv]."""


def _heads_first(x: np.ndarray, heads: int) -> np.ndarray:
    """A view of sequence-major [B, S, H * D] as head-major [B, H, S, D]."""
    return x.reshape(*x.shape[:2], heads, -1).transpose(0, 2, 1, 3)


def _block_rows(batch: int, heads: int, q_len: int, kv_len: int, itemsize: int, budget: int) -> int:
    """How many query rows fit ``budget`` bytes of scores (at least one)."""
    return max(1, min(q_len, budget // max(batch * heads * kv_len * itemsize, 1)))


Part = tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...], np.ndarray]
"""Q, K, V, the masks and the output's heads of one thread's share of an attention."""


def _parts(q: np.ndarray, k: np.ndarray, v: np.ndarray, masks: tuple[np.ndarray, ...], has_mask: bool,
           heads: np.ndarray) -> list[Part]:
    """Attention cut for the threads (``threads.spans``): ``(q, k, v, masks, heads)`` of runs of
    images, or for one image of key/value heads with their query heads; masks and key lengths cut
    along the axes they do not broadcast on."""
    batch, q_heads, q_len, depth = q.shape
    kv_heads, kv_len = k.shape[1], k.shape[2]
    group = q_heads // kv_heads
    work = q_len * kv_len * (depth + v.shape[-1]) * group // MULTIPLY_ADDS_PER_ELEMENT  # per key/value head
    if batch > 1:
        cuts = [(slice(a, b), slice(None)) for a, b in spans(batch, kv_heads * work)]
    else:
        cuts = [(slice(None), slice(a, b)) for a, b in spans(kv_heads, work)]
    parts: list[Part] = []
    for images, kv in cuts:
        qs = slice(None) if kv.stop is None else slice(kv.start * group, kv.stop * group)
        cut = [_broadcast_part(m, {-4: images, -3: qs}) for m in masks[:has_mask]]
        cut += [_broadcast_part(m.reshape(-1), {-1: images}) for m in masks[has_mask:]]
        parts.append((q[images, qs], k[images, kv], v[images, kv], tuple(cut), heads[images, qs]))
    return parts


def _broadcast_part(array: np.ndarray, axes: dict[int, slice]) -> np.ndarray:
    """``array`` cut by ``axes`` (counted from its last, as broadcasting aligns) where it has the
    axis at more than size 1."""
    index = [slice(None)] * array.ndim
    for axis, part in axes.items():
        if -axis <= array.ndim and array.shape[axis] != 1:
            index[axis] = part
    return array[tuple(index)]


@register_kernel("scaled_dot_product_attention", dtypes=_FLOATS)
def _attention(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    scale, softcap, stage = attrs["scale"], attrs["softcap"], attrs["scores_stage"]
    causal, offset = attrs["is_causal"], attrs["causal_offset"]
    q_split, kv_split = attrs["q_num_heads"], attrs["kv_num_heads"]
    keep_scores, zero_nan = "Scores" in spec.outputs, attrs["zero_nan"]

    has_mask = spec.has_input("Mask")

    def scores_of(q: np.ndarray, k: np.ndarray, masks: tuple[np.ndarray, ...], rows: slice,
                  kept: list[np.ndarray]) -> np.ndarray:
        """Softmax of the scores of query rows ``rows`` for every head, [B, Hkv, G * r, Skv]."""
        batch, q_heads, _, depth = q.shape
        kv_heads, kv_len = k.shape[1], k.shape[2]
        block = q[:, :, rows]
        scores = np.matmul(block.reshape(batch, kv_heads, -1, depth), k.swapaxes(-1, -2))
        scores *= q.dtype.type(scale or 1 / np.sqrt(depth))
        heads = scores.reshape(batch, q_heads, block.shape[2], kv_len)
        kept += [heads.copy()] if keep_scores and stage == 0 else []
        if softcap > 0:
            heads /= q.dtype.type(softcap)
            np.tanh(heads, out=heads)
            heads *= q.dtype.type(softcap)
        kept += [heads.copy()] if keep_scores and stage == 1 else []
        if has_mask:
            mask = masks[0]
            _apply_mask(heads, mask[..., rows, :] if mask.ndim >= 2 and mask.shape[-2] != 1 else mask)
        if len(masks) > has_mask:
            lengths = masks[-1].reshape(-1, 1, 1, 1)
            np.copyto(heads, -np.inf, where=np.arange(kv_len) >= lengths)
        if causal:
            _apply_causal(heads, offset + rows.start)
        kept += [heads.copy()] if keep_scores and stage == 2 else []
        _softmax_in_place(scores)
        kept += [heads] if keep_scores and len(kept) == 0 else []
        return scores

    def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, masks: tuple[np.ndarray, ...], heads: np.ndarray,
               kept: list[np.ndarray], budget: int) -> None:
        """Every head of ``q`` into ``heads`` (its place in the output), a block of query rows
        whose scores fit ``budget`` bytes at a time."""
        batch, q_heads, q_len, _ = q.shape
        kv_len, dv = k.shape[2], v.shape[-1]
        step = q_len if keep_scores else _block_rows(batch, q_heads, q_len, kv_len, q.dtype.itemsize, budget)
        for start in range(0, q_len, step):
            rows = slice(start, min(start + step, q_len))
            probs = scores_of(q, k, masks, rows, kept)
            heads[:, :, rows] = np.matmul(probs, v).reshape(batch, q_heads, rows.stop - start, dv)

    def run(q: np.ndarray, k: np.ndarray, v: np.ndarray, *masks: np.ndarray) -> Any:
        if q_split:
            q, k, v = _heads_first(q, q_split), _heads_first(k, kv_split), _heads_first(v, kv_split)
        batch, q_heads, q_len, _ = q.shape
        dv = v.shape[-1]
        out = np.empty((batch, q_len, q_heads * dv) if q_split else (batch, q_heads, q_len, dv), q.dtype)
        heads = _heads_first(out, q_heads) if q_split else out
        kept: list[np.ndarray] = []
        with single_threaded_blas() as single:
            parts = _parts(q, k, v, masks, has_mask, heads) if single and not keep_scores else []
            if len(parts) > 1:  # the parts' blocks of scores together fit the one budget
                budget = SCORE_BLOCK_BYTES // len(parts)
                run_parts([functools.partial(attend, *part, kept=kept, budget=budget) for part in parts])
            else:
                attend(q, k, v, masks, heads, kept, SCORE_BLOCK_BYTES)
        if zero_nan:
            np.copyto(out, 0, where=np.isnan(out))
        return (out, kept[0]) if keep_scores else out

    return run


def _visible(past: int, rows: int, keys: int, window: int, mask: np.ndarray | None) -> np.ndarray:
    """[rows, keys] bool: which cache positions each new token attends to (see cached_attention)."""
    positions = past + np.arange(rows)[:, None]
    keys_at = np.arange(keys)
    visible = keys_at <= positions
    if window > 0:
        visible &= positions - keys_at < window
    if mask is not None:
        visible &= mask[:keys].astype(bool)
    return visible


def _cached_attention(spec: KernelSpec) -> Kernel:
    """Per sequence: the new keys and values written into the caches at its Past, then the
    grouped scores of its query heads over the cache's first Past + S positions (one
    ``np.matmul`` for all heads, K and V read as they lie), float32 for a float16 cache; with
    rotary tables, Q and K rotated first (``rotate``, rotary_embedding's kernel); a packed Q
    split into views."""
    attrs = spec.attrs
    scale, softcap, window = attrs["scale"], attrs["softcap"], attrs["window"]
    q_split, kv_split = attrs["q_num_heads"], attrs["kv_num_heads"]
    wide = np.float64 if spec.dtype is DType.float64 else np.float32

    def attend(q: np.ndarray, keys: np.ndarray, values: np.ndarray, visible: np.ndarray) -> np.ndarray:
        """One sequence's heads [Hq, S, Dv] from q [Hq, S, D] and its cache's keys and values."""
        q_heads, rows, depth = q.shape
        kv_heads = keys.shape[0]
        grouped = q.reshape(kv_heads, -1, depth).astype(wide, copy=False)
        scores = np.matmul(grouped, keys.astype(wide, copy=False).swapaxes(-1, -2))
        scores *= wide(scale or 1 / np.sqrt(depth))
        if softcap > 0:
            np.tanh(scores / wide(softcap), out=scores)
            scores *= wide(softcap)
        heads = scores.reshape(q_heads, rows, -1)
        np.copyto(heads, -np.inf, where=~visible)
        _softmax_in_place(scores)
        heads[:, ~visible.any(axis=-1)] = 0  # rows without a key: 0, not softmax's NaN
        return np.matmul(scores, values.astype(wide, copy=False)).reshape(q_heads, rows, -1)

    where = slot_positions(spec)
    key_size = spec.input("KCache").shape[-1]
    ends = [q_split * key_size, (q_split + kv_split) * key_size]  # a packed Q's query, key and value

    def run(*args: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        given = {slot: args[at] for slot, at in where.items()}
        q, k_cache, v_cache, past, mask = (given["Q"], given["KCache"], given["VCache"], given["Past"],
                                           given.get("KeyMask"))
        q, k, v = np.split(q, ends, axis=-1) if attrs["packed"] else (q, given["K"], given["V"])
        if "Cos" in given:  # Q's and K's rotary embeddings
            turn = functools.partial(rotate, cos=given["Cos"], sin=given["Sin"], ids=given.get("PositionIds"),
                                     rotary=attrs["rotary_dim"], interleaved=attrs["interleaved"])
            q, k = turn(q, heads=q_split), turn(k, heads=kv_split)
        if q_split:
            q, k, v = _heads_first(q, q_split), _heads_first(k, kv_split), _heads_first(v, kv_split)
        batch, q_heads, rows, _ = q.shape
        length = k_cache.shape[2]
        out = np.empty((batch, rows, q_heads * v.shape[-1]) if q_split else (batch, q_heads, rows, v.shape[-1]),
                       q.dtype)
        heads = _heads_first(out, q_heads) if q_split else out
        for b in range(batch):
            start = int(past[b])
            if not 0 <= start <= length:
                raise HalfwayError(f"Past[{b}] = {start} is outside the cache's {length} positions")
            end = min(start + rows, length)
            k_cache[b, :, start:end] = k[b, :, :end - start]
            v_cache[b, :, start:end] = v[b, :, :end - start]
            visible = _visible(start, rows, end, window, None if mask is None else mask[b])
            heads[b] = attend(q[b], k_cache[b, :, :end], v_cache[b, :, :end], visible)
        return out, k_cache, v_cache

    return run


register_kernel("cached_attention", dtypes=(DType.float32, DType.float64))(_cached_attention)
register_kernel("cached_attention", dtypes=(DType.float16,))(_cached_attention)


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, ids: np.ndarray | None = None, *, heads: int,
           rotary: int, interleaved: bool) -> np.ndarray:
    """rotary_embedding of ``x`` (its schema says how), a new array."""
    if ids is not None:
        cos, sin = cos[ids], sin[ids]
    split = x.reshape(*x.shape[:2], heads, -1) if x.ndim == 3 else x
    axis = 2 if x.ndim == 3 else 1  # the heads axis the [B, S, R / 2] tables broadcast over
    cos, sin = (np.expand_dims(t.astype(x.dtype, copy=False), axis) for t in (cos, sin))
    width = rotary or split.shape[-1]
    first, second = ((slice(0, width, 2), slice(1, width, 2)) if interleaved
                     else (slice(0, width // 2), slice(width // 2, width)))
    x1, x2 = split[..., first], split[..., second]
    out = split.copy()
    out[..., first] = x1 * cos - x2 * sin
    out[..., second] = x1 * sin + x2 * cos
    return out.reshape(x.shape)


@register_kernel("rotary_embedding", dtypes=_FLOATS)
def _rotary_embedding(spec: KernelSpec) -> Kernel:
    attrs = spec.attrs
    return functools.partial(rotate, heads=attrs["num_heads"], rotary=attrs["rotary_dim"],
                             interleaved=attrs["interleaved"])


def _split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """[B, T, H * D] -> [B, H, T, D] in float32."""
    b, t, hd = x.shape
    return x.reshape(b, t, heads, hd // heads).transpose(0, 2, 1, 3).astype(np.float32)


@register_kernel("linear_attention", dtypes=(DType.float32, DType.float16, DType.float64))
def _linear_attention(spec: KernelSpec) -> Kernel:
    """ONNX's recurrence token by token in float32 (as its reference), the state read by each
    group of query heads."""
    attrs = spec.attrs
    q_heads, kv_heads = attrs["q_num_heads"], attrs["kv_num_heads"]
    gated, delta = linear_attention_inputs(attrs["update_rule"])
    at = slot_positions(spec)
    state_dtype = spec.output("PresentState").dtype.numpy if spec.outputs.get("PresentState") else None

    def run(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        q, k, v = (_split_heads(args[at[slot]], h) for slot, h in (("Q", q_heads), ("K", kv_heads), ("V", kv_heads)))
        b, _, t, head = q.shape
        state = (args[at["PastState"]].astype(np.float32) if "PastState" in at
                 else np.zeros((b, kv_heads, head, v.shape[3]), np.float32))
        decay = _per_head(args[at["Decay"]], kv_heads) if gated else None
        beta = _per_head(args[at["Beta"]], args[at["Beta"]].shape[2]) if delta else None
        scale = np.float32(attrs["scale"] or 1 / np.sqrt(head))
        out = np.empty((b, q_heads, t, v.shape[3]), np.float32)
        for i in range(t):
            if decay is not None:
                state = state * np.exp(decay[:, :, i])[..., None]
            value = v[:, :, i]
            if beta is not None:
                value = beta[:, :, i] * (value - np.einsum("bhdm,bhd->bhm", state, k[:, :, i]))
            state = state + k[:, :, i, :, None] * value[:, :, None, :]
            read = np.repeat(state, q_heads // kv_heads, axis=1)
            out[:, :, i] = scale * np.einsum("bhd,bhdm->bhm", q[:, :, i], read)
        merged = out.transpose(0, 2, 1, 3).reshape(b, t, -1).astype(args[0].dtype)
        return (merged, state.astype(state_dtype)) if state_dtype is not None else (merged,)

    return run


def _per_head(x: np.ndarray, heads: int) -> np.ndarray:
    """Decay or Beta [B, T, heads * n] (n a value per key dim, or one) as [B, heads, T, n] in float32."""
    b, t, last = x.shape
    return x.reshape(b, t, heads, last // heads).transpose(0, 2, 1, 3).astype(np.float32)
