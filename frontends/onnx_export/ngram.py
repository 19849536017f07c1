"""Exporter of the n-gram op: tfidf_vectorizer, as ONNX's TfIdfVectorizer."""

from __future__ import annotations

from ...ir.operator import Operator
from .context import ExportContext
from .registry import exports

__all__: list[str] = []


@exports("tfidf_vectorizer")
def tfidf_vectorizer(ctx: ExportContext, op: Operator) -> None:
    ctx.node("TfIdfVectorizer", [op.input("X")[0]], [op.output("Out")[0]], mode=op.attr("mode"),
             min_gram_length=op.attr("min_gram_length"), max_gram_length=op.attr("max_gram_length"),
             max_skip_count=op.attr("max_skip_count"), ngram_counts=list(op.attr("ngram_counts")),
             ngram_indexes=list(op.attr("ngram_indexes")), pool_int64s=list(op.attr("pool_int64s")),
             weights=list(op.attr("weights")) or None)
