"""cache_attention: a decoder's past/present attention -> ``cached_attention`` over caches it owns.

An exported decoder takes its keys and values so far as inputs (``past_key_values.{i}.key``,
[B, kv heads, past, D]) and returns them with the new tokens' appended (``present.{i}.key``), the
attention reading the concatenation; the program this pass leaves holds a cache per layer and
is driven as ``halfway.api.llm`` drives a checkpoint's (``frontends.checkpoint.decoder``)::

    past_k ─ concat(axis 2) ─ present_k (fetch)          k_new ─┐
    k_new ──┘    └─ [repeat heads] ─┐                   v_new ─ cached_attention(KCache, VCache, Past)
    q ──────────────────────────── sdpa(Q, K, V, Mask) ─ out      q ─┘                           └ out

1. Every fetch written by a two-input ``concat`` along the sequence axis of a feed (through
   one-input concats) and a new value is a present; its feed is the past. A present cut to its
   last n positions, and its past likewise (``slice``: transformers' sliding-window layers keep
   window - 1), attends within a window of n + 1.
2. Every ``scaled_dot_product_attention`` (head-major) whose K and V come from two presents,
   through the ops that repeat key/value heads for the query heads (``unsqueeze2``, ``expand_v2``,
   ``reshape2``), becomes ``cached_attention`` of its Q and the new keys and values, over the
   persistable caches ``layers.{i}.key_cache`` / ``value_cache`` [-1, kv heads, max_length, D]
   (layer i the attention's rank) and the feed ``past_lengths``, within its presents' window,
   else the option ``windows``' for its layer. Its mask is dropped: what the
   exports build from ``attention_mask`` is the causal mask over each sequence's tokens, which
   the op applies from ``past_lengths`` (a batch runs right-padded).
3. The logits' rows are picked by the feed ``rows`` (indices into the B * S new tokens) before
   the output projection when a ``matmul_v2`` of [B, S, H] states writes them, else after it;
   logits of another float type are cast to float32 (a float16 program's, as a checkpoint's).
4. Feeds become ``input_ids``, ``position_ids``, ``past_lengths``, ``rows``; the fetch ``logits``
   [R, vocab]; what only the pasts, presents and masks needed is removed.

Declines (a PassError naming what it found) rather than half-converting: no present fetch, an
attention not reading presents, a past no attention reads, an input left that only a mask
should have read, no ``input_ids`` or ``position_ids`` feed.
"""

from __future__ import annotations

import attrs

from ..ir.block import Block
from ..ir.dtypes import DType
from ..ir.errors import PassError
from ..ir.io import set_feed_fetch
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from ..ir.variable import Variable
from .base import PassResult, get_pass, register_pass

__all__ = ["CacheAttentionOptions", "Present", "FEEDS", "LOGITS", "cache_names"]

FEEDS = ("input_ids", "position_ids", "past_lengths", "rows")
LOGITS = "logits"
_REPEAT_HEADS = ("unsqueeze2", "expand_v2", "reshape2")
"""The ops exports repeat key/value heads with (``repeat_kv``: unsqueeze, expand, reshape)."""


@attrs.frozen
class CacheAttentionOptions:
    """``max_length``: the cache positions per sequence. ``windows``: per layer, a sliding window
    the graph does not say (ONNX Runtime GenAI's ``local_window_size``: ``genai.attention_windows``),
    0 for none; () for none anywhere."""

    max_length: int = 2048
    windows: tuple[int, ...] = attrs.field(default=(), converter=tuple)


def cache_names(layer: int) -> tuple[str, str]:
    """The key and value cache vars of ``layer``."""
    return f"layers.{layer}.key_cache", f"layers.{layer}.value_cache"


def _fail(message: str) -> PassError:
    return PassError(f"pass 'cache_attention': {message}")


@attrs.frozen
class Present:
    """A layer's present keys or values: the fetch, the past feed, the new value, and the layer's
    sliding window (0: none)."""

    fetch: str
    past: str
    new: str
    window: int


def _kept_positions(op: Operator) -> int:
    """How many last positions a ``slice`` along the sequence axis keeps (0: not such a slice)."""
    starts, ends = op.attr("starts", ()), op.attr("ends", ())
    if op.type != "slice" or tuple(op.attr("axes", ())) not in ((2,), (-2,)) or len(starts) != 1:
        return 0
    return -starts[0] if starts[0] < 0 and ends[0] >= 2 ** 31 - 1 else 0


def _to_feed(block: Block, name: str) -> str:
    """``name`` past the one-input concats (copies) and the sequence slices that write it."""
    op = block.find_var(name).producer()
    while op is not None and ((op.type == "concat" and len(op.input("X")) == 1) or _kept_positions(op)):
        name = op.input_names()[0]
        op = block.find_var(name).producer()
    return name


def _presents(block: Block, feeds: list[str], fetches: list[str]) -> dict[str, Present]:
    """The concatenation of each present fetch -> the present (step 1)."""
    found = {}
    for name in fetches:
        op = block.find_var(name).producer()
        kept = _kept_positions(op) if op is not None else 0
        concat = op.input_names()[0] if op is not None and kept else name
        op = block.find_var(concat).producer()
        if op is None or op.type != "concat" or len(op.input("X")) != 2 or op.attr("axis", 0) not in (2, -2):
            continue
        past, new = op.input("X")
        past = _to_feed(block, past)
        if past in feeds:
            found[concat] = Present(name, past, new, kept + 1 if kept else 0)
    return found


def _present_of(block: Block, name: str, presents: dict[str, Present]) -> Present | None:
    """The present ``name`` repeats heads of, or None."""
    while name not in presents:
        op = block.find_var(name).producer()
        if op is None or op.type not in _REPEAT_HEADS + ("concat",) or len(op.input("X")) != 1:
            return None
        name = op.input("X")[0]
    return presents[name]


def _attentions(block: Block, presents: dict[str, Present]) -> list[tuple[Operator, Present, Present]]:
    """Each head-major attention over presents, with its key and value presents (step 2)."""
    found = []
    for op in block.ops:
        if op.type != "scaled_dot_product_attention":
            continue
        k, v = (_present_of(block, op.input(slot)[0], presents) for slot in ("K", "V"))
        if k is None or v is None:
            raise _fail(f"{op.describe()} does not read the present keys and values "
                        f"({', '.join(p.fetch for p in presents.values())})")
        if op.attr("q_num_heads", 0) or op.output("Scores"):
            raise _fail(f"{op.describe()}: a sequence-major attention or one whose scores are read is not cached")
        found.append((op, k, v))
    return found


def _cache(block: Block, name: str, like: Variable, max_length: int) -> Variable:
    """A persistable cache var [-1, kv heads, max_length, D] shaped as the past ``like``."""
    _, heads, _, depth = like.tensor_shape
    if heads < 0 or depth < 0:
        raise _fail(f"the past {like.name} {list(like.tensor_shape)} must give its heads and head size")
    return block.create_var(name, dtype=like.tensor_dtype, shape=(-1, heads, max_length, depth), persistable=True)


def _cached(block: Block, layer: int, attention: Operator, k: Present, v: Present, max_length: int,
            window: int) -> Operator:
    """The cached_attention replacing ``attention``, within ``window`` where its presents say none."""
    k_cache, v_cache = (_cache(block, name, block.var(p.past), max_length) for name, p in zip(cache_names(layer), (k, v)))
    q = block.var(attention.input("Q")[0])
    return Operator("cached_attention",
                    {"Q": [q.name], "K": [k.new], "V": [v.new], "KCache": [k_cache.name], "VCache": [v_cache.name],
                     "Past": ["past_lengths"]},
                    {"Out": list(attention.output("Out")), "KCacheOut": [k_cache.name], "VCacheOut": [v_cache.name]},
                    {"scale": attention.attr("scale", 0.0), "softcap": attention.attr("softcap", 0.0),
                     "window": max(k.window, v.window) or window})


def _rows(block: Block, logits: Variable) -> None:
    """Pick the ``rows`` of the logits, before the output projection where it can (step 3); the
    result is the var ``LOGITS`` [R, vocab]."""
    op = logits.producer()
    vocab = logits.tensor_shape[-1]
    if op is not None and op.type == "matmul_v2" and len(block.var(op.input("X")[0]).tensor_shape) == 3:
        states = block.var(op.input("X")[0])
        op.set_input("X", _gather_rows(block, op, states))
        logits.set_shape((-1, vocab))
        if logits.name != LOGITS:
            block.rename_var(logits.name, LOGITS)
        return
    if logits.name == LOGITS:
        block.rename_var(LOGITS, block.unique_name(f"{LOGITS}.all"))
    out = block.create_var(LOGITS, dtype=logits.tensor_dtype, shape=(-1, vocab))
    gathered = _gather_rows(block, None, logits)
    block.append_op("assign", {"X": [gathered]}, {"Out": [out.name]})


def _float32_logits(block: Block) -> None:
    """``LOGITS`` as float32: a cast of the logits of another float type (step 3)."""
    logits = block.var(LOGITS)
    if logits.tensor_dtype is DType.float32:
        return
    narrow = block.unique_name(f"{LOGITS}.{logits.tensor_dtype.name}")
    block.rename_var(LOGITS, narrow)
    block.create_var(LOGITS, dtype=DType.float32, shape=logits.tensor_shape)
    block.append_op("cast", {"X": [narrow]}, {"Out": [LOGITS]},
                    {"in_dtype": int(logits.tensor_dtype), "out_dtype": int(DType.float32)})


def _gather_rows(block: Block, before: Operator | None, x: Variable) -> str:
    """``x`` [.., H] flattened to [-1, H] and its ``rows`` gathered, inserted before ``before``
    (None: at the end)."""
    width = x.tensor_shape[-1]
    flat = block.create_var(block.unique_name(f"{x.name}.flat"), dtype=x.tensor_dtype, shape=(-1, width))
    picked = block.create_var(block.unique_name(f"{x.name}.rows"), dtype=x.tensor_dtype, shape=(-1, width))
    index = block.op_index(before) if before is not None else len(block.ops)
    block.insert_ops(index, [
        Operator("reshape2", {"X": [x.name]}, {"Out": [flat.name]}, {"shape": [-1, width]}),
        Operator("gather", {"X": [flat.name], "Index": ["rows"]}, {"Out": [picked.name]}, {"axis": 0}),
    ])
    return picked.name


def _check(feeds: list[str], presents: dict[str, Present], fetches: list[str]) -> str:
    """The logits fetch, once the program is known to be a decoder with presents."""
    if not presents:
        raise _fail(f"no fetch is a present key or value (the past one concatenated with the new ones); fetches: "
                    f"{', '.join(fetches)}")
    missing = [name for name in FEEDS[:2] if name not in feeds]
    if missing:
        raise _fail(f"no {' or '.join(missing)} feed; feeds: {', '.join(feeds)}")
    rest = [name for name in fetches if name not in {p.fetch for p in presents.values()}]
    if len(rest) != 1:
        raise _fail(f"one fetch besides the presents must be the logits, found {rest}")
    return rest[0]


def _declare_feeds(block: Block) -> None:
    for name in ("past_lengths", "rows"):
        if block.has_var(name):
            raise _fail(f"the program already has a var {name!r}")
        block.create_var(name, dtype=DType.int64, shape=(-1,), need_check_feed=True)


def _drop_old_feeds(block: Block, feeds: list[str]) -> None:
    """Remove the feeds the converted program no longer reads (step 4)."""
    for name in feeds:
        if name in FEEDS:
            continue
        uses = block.uses(name)
        if uses:
            raise _fail(f"input {name!r} is still read by {uses[0][0].describe()} once the attentions read caches "
                        f"(only their masks and the presents may read it)")
        block.remove_var(name, force=True)


@register_pass("cache_attention", options=CacheAttentionOptions)
def cache_attention(program: Program, scope: Scope | None, options: CacheAttentionOptions) -> PassResult:
    """Turn a past/present decoder into one over caches (module docstring)."""
    block = program.global_block()
    feeds, fetches = program.feed_names(), program.fetch_names()
    presents = _presents(block, feeds, fetches)
    logits = block.var(_check(feeds, presents, fetches))
    attentions = _attentions(block, presents)
    unread = {p.fetch for p in presents.values()} - {p.fetch for _, k, v in attentions for p in (k, v)}
    if unread:
        raise _fail(f"no attention reads the presents {sorted(unread)}")
    windows = options.windows or (0,) * len(attentions)
    if len(windows) != len(attentions):
        raise _fail(f"{len(windows)} sliding windows given for {len(attentions)} attentions")
    _declare_feeds(block)
    for layer, ((attention, k, v), window) in enumerate(zip(attentions, windows)):
        block.replace_op(attention, [_cached(block, layer, attention, k, v, options.max_length, window)])
    _rows(block, logits)
    _float32_logits(block)
    set_feed_fetch(block, list(FEEDS), [LOGITS])
    get_pass("dce").apply(program, scope)
    _drop_old_feeds(block, feeds)
    return PassResult(program, modified=True, stats={"attentions_cached": len(attentions)})
