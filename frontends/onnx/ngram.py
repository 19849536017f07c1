"""Converter of ONNX's n-gram op TfIdfVectorizer over integer tokens (to halfway's
tfidf_vectorizer: ``halfway.ir.ops.ngram``); a pool of strings is refused by name."""

from __future__ import annotations

from typing import Any

from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []


@converts("TfIdfVectorizer", makes="tfidf_vectorizer")
def tfidf_vectorizer(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    if attrs.get("pool_strings"):
        ctx.fail("a pool of strings (string tensors) is not supported; give pool_int64s")
    mode = attrs["mode"].decode() if isinstance(attrs["mode"], bytes) else attrs["mode"]
    ctx.emit("tfidf_vectorizer", {"X": node.input[0]}, {"Out": node.output[0]},
             {"mode": mode, "min_gram_length": attrs["min_gram_length"], "max_gram_length": attrs["max_gram_length"],
              "max_skip_count": attrs["max_skip_count"], "ngram_counts": list(attrs["ngram_counts"]),
              "ngram_indexes": list(attrs["ngram_indexes"]), "pool_int64s": list(attrs.get("pool_int64s", [])),
              "weights": [float(w) for w in attrs.get("weights", [])]})
