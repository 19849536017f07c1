"""Schema of the n-gram op: tfidf_vectorizer, ONNX's TfIdfVectorizer over integer tokens.

X [C] or [B, C] holds token ids; the n-grams to count are ``pool_int64s``, grouped by length
(``ngram_counts`` the start of each length's group), each counted at output position
``ngram_indexes[i]``. N-grams of ``min_gram_length`` to ``max_gram_length`` tokens are taken at
every start, their tokens 1 to ``max_skip_count + 1`` apart (unigrams once). Out [output size] or
[B, output size] (float32) holds the counts (TF), ``weights`` where a count is not 0 (IDF), or
their product (TFIDF).
"""

from __future__ import annotations

from ..attrs import AttrType
from ..dtypes import DType
from ..schema import AttrSpec, InferContext, OpSchema, Slot, register_op

__all__ = ["ngram_table"]


def ngram_table(pool: list[int], counts: list[int], indexes: list[int]) -> dict[tuple[int, ...], int]:
    """N-gram -> its output position: the pool's groups of 1-, 2-, ... token n-grams."""
    table: dict[tuple[int, ...], int] = {}
    starts = [*counts, len(pool)]
    position = 0
    for n, (begin, end) in enumerate(zip(starts, starts[1:]), start=1):
        for at in range(begin, end, n):
            table[tuple(pool[at:at + n])] = indexes[position]
            position += 1
    return table


def _infer_tfidf(ctx: InferContext) -> None:
    x = ctx.input("X")
    ctx.check(len(x.shape) in (1, 2) and x.dtype in (DType.int32, DType.int64),
              f"X must be int32 or int64 tokens [C] or [B, C], is {x.dtype.name} {list(x.shape)}")
    low, high = ctx.attr("min_gram_length"), ctx.attr("max_gram_length")
    ctx.check(1 <= low <= high, f"min_gram_length {low} and max_gram_length {high} must be 1 <= min <= max")
    ctx.check(ctx.attr("mode") in ("TF", "IDF", "TFIDF"), f"mode {ctx.attr('mode')!r} is none of TF, IDF, TFIDF")
    size = max(ctx.attr("ngram_indexes"), default=-1) + 1
    ctx.set_output("Out", [size] if len(x.shape) == 1 else [x.shape[0], size], DType.float32)


register_op(OpSchema(
    "tfidf_vectorizer", inputs=[Slot("X")], outputs=[Slot("Out")],
    attrs=[AttrSpec("mode", AttrType.STRING, "TF"), AttrSpec("min_gram_length", AttrType.INT, 1),
           AttrSpec("max_gram_length", AttrType.INT, 1), AttrSpec("max_skip_count", AttrType.INT, 0),
           AttrSpec("ngram_counts", AttrType.LONGS, ()), AttrSpec("ngram_indexes", AttrType.LONGS, ()),
           AttrSpec("pool_int64s", AttrType.LONGS, ()), AttrSpec("weights", AttrType.FLOATS, ())],
    infer=_infer_tfidf,
    doc="The counts (TF), weights (IDF) or weighted counts (TFIDF) of the pool's n-grams in each row of tokens "
        "(module docstring).",
))
