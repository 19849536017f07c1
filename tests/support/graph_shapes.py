"""Graphs of a known shape for the graph page's layout and browser tests."""

from __future__ import annotations

__all__ = ["transformer"]


def transformer(blocks: int) -> tuple[dict[str, tuple[float, float]], list[tuple[str, str, str]]]:
    """Sizes and edges of ``blocks`` pre-norm transformer blocks (attention with q, k, v; an MLP;
    two residual adds), all reading one mask; widths vary as op labels do."""
    sizes: dict[str, tuple[float, float]] = {"ids": (110.0, 42.0), "mask": (120.0, 42.0)}
    edges: list[tuple[str, str, str]] = []

    def op(name: str, *sources: str) -> str:
        sizes[name] = (90.0 + 13 * (len(sizes) % 7), 42.0)
        edges.extend((source, name, "out") for source in sources)
        return name

    stream = op("embed", "ids")
    for b in range(blocks):
        norm = op(f"ln1.{b}", stream)
        q, k, v = (op(f"{name}.{b}", norm) for name in "qkv")
        scores = op(f"softmax.{b}", op(f"scores.{b}", q, k), "mask")
        attended = op(f"proj.{b}", op(f"context.{b}", scores, v))
        stream = op(f"add1.{b}", attended, stream)
        mlp = op(f"fc2.{b}", op(f"gelu.{b}", op(f"fc1.{b}", op(f"ln2.{b}", stream))))
        stream = op(f"add2.{b}", mlp, stream)
    op("logits", op("ln_f", stream))
    return sizes, edges
