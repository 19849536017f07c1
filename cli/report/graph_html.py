"""The graph page: one self-contained HTML file (no network, no Graphviz) that draws the program
laid out by ``graph_layout`` and lets one pan, zoom, search ops and tensors, and read an op's
attributes and tensors on click.

Python lays the graph out and writes it into the page as JSON; ``assets/graph.js`` draws it and
handles the interaction, ``assets/graph.css`` styles it and ``assets/graph.html`` is the page
around them. The three are package data, inlined into every page.
"""

from __future__ import annotations

import json
from collections import Counter
from html import escape
from importlib.resources import files
from string import Template
from typing import Any

from .graph import STYLES, Graph, Node, Tensor
from .graph_layout import Layout, layout

__all__ = ["to_html", "node_size", "page_data"]

NODE_HEIGHT = 42.0
CHAR_WIDTH, PADDING = 6.6, 24.0
MIN_WIDTH, MAX_WIDTH = 90.0, 300.0
LABEL_CHARS = 40
"""Node lines and edge labels longer than this are cut (the details panel shows them whole)."""


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1):]


def _lines(node: Node) -> list[str]:
    lines = [_short(line) for line in node.label.split("\n")]
    return [("⚡ " + lines[0]) if node.fused else lines[0], *lines[1:]]


def node_size(node: Node) -> tuple[float, float]:
    """Width (from its longest line) and height of a node's box."""
    longest = max(len(line) for line in _lines(node))
    return min(MAX_WIDTH, max(MIN_WIDTH, longest * CHAR_WIDTH + PADDING)), NODE_HEIGHT


def _tensors(slots: tuple[tuple[str, Tensor], ...]) -> list[list[Any]]:
    return [[slot, t.name, t.dtype, list(t.shape)] for slot, t in slots]


def _node_data(node: Node, where: Layout) -> dict[str, Any]:
    box = where.boxes[node.id]
    return {"id": node.id, "lines": _lines(node), "kind": node.kind, "fused": node.fused, "detail": node.detail,
            "x": round(box.x, 1), "y": round(box.y, 1), "w": round(box.width, 1), "h": round(box.height, 1),
            "attrs": [list(a) for a in node.attrs], "inputs": _tensors(node.inputs),
            "outputs": _tensors(node.outputs)}


def _edge_data(graph: Graph, where: Layout) -> list[dict[str, Any]]:
    """Edges in route order; the first edge of each (source, var) carries the tensor's label."""
    edges = {(e.source, e.target, e.var): e for e in graph.edges}
    labelled: set[tuple[str, str]] = set()
    out = []
    for route in where.routes:
        edge = edges[(route.source, route.target, route.key)]
        item: dict[str, Any] = {"s": edge.source, "t": edge.target, "var": edge.var, "tensor": edge.label,
                                "d": route.d}
        if (edge.source, edge.var) not in labelled:
            labelled.add((edge.source, edge.var))
            item |= {"label": f"{_short(edge.var, 28)} {edge.label}", "lx": round(route.start[0] + 4, 1),
                     "ly": round(route.start[1] + 13, 1)}
        out.append(item)
    return out


def _summary(graph: Graph) -> str:
    kinds = Counter(n.kind for n in graph.nodes)
    fused = sum(n.fused for n in graph.nodes)
    ops = sum(kinds[k] for k in ("float16", "float32", "other", "cast"))
    return (f"{ops} ops: {kinds['float16']} float16, {kinds['float32']} float32, {kinds['cast']} casts, "
            f"{kinds['other']} other; {fused} fused")


def page_data(graph: Graph, title: str) -> dict[str, Any]:
    """What the page's script draws: the laid-out nodes and edges, the legend and a summary."""
    sizes = {n.id: node_size(n) for n in graph.nodes}
    where = layout(sizes, [(e.source, e.target, e.var) for e in graph.edges])
    return {"title": title, "summary": _summary(graph), "width": round(where.width, 1),
            "height": round(where.height, 1), "styles": STYLES,
            "nodes": [_node_data(n, where) for n in graph.nodes], "edges": _edge_data(graph, where)}


def _asset(name: str) -> str:
    return files(__package__).joinpath("assets", name).read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    """``text`` that cannot end the ``<script>`` element it is inlined in."""
    return text.replace("</", "<\\/")


def to_html(graph: Graph, title: str) -> str:
    """One self-contained page drawing ``graph``."""
    data = json.dumps(page_data(graph, title), ensure_ascii=False, separators=(",", ":"))
    return Template(_asset("graph.html")).substitute(
        title=escape(title), style=_asset("graph.css"),
        data=_script_safe(data), script=_script_safe(_asset("graph.js")))
