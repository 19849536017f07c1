"""A program picture that needs no Graphviz: an SVG laid out in layers, inside one HTML page.

Layout: a node's layer is one below the deepest node feeding it (inputs on top), so ops appear
in topological order from top to bottom; nodes of one layer sit side by side in program order.
An edge to the next layer is a straight curve; one skipping layers (a residual connection)
bends out to the right so it does not cross the ops it passes. Hovering a node shows the op with
its inputs and outputs; hovering an edge shows the tensor's dtype and shape. The page embeds the
dot text too, for Graphviz users. Nothing is fetched: it works offline.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from html import escape

from .graph import STYLES, Graph, Node

__all__ = ["layers", "to_svg", "to_html"]

WIDTH, HEIGHT = 180, 42
GAP_X, GAP_Y, MARGIN = 28, 34, 20
LEGEND_HEIGHT = 30


def layers(graph: Graph) -> dict[str, int]:
    """Node id -> layer (0 for nodes nothing feeds); edges must go forward in node order."""
    incoming: dict[str, list[str]] = defaultdict(list)
    for edge in graph.edges:
        incoming[edge.target].append(edge.source)
    layer: dict[str, int] = {}
    for node in graph.nodes:
        layer[node.id] = max((layer[s] + 1 for s in incoming[node.id] if s in layer), default=0)
    return layer


def _positions(graph: Graph) -> tuple[dict[str, tuple[float, float]], float, float]:
    layer = layers(graph)
    rows: dict[int, list[Node]] = defaultdict(list)
    for node in graph.nodes:
        rows[layer[node.id]].append(node)
    widest = max((len(r) for r in rows.values()), default=1)
    width = 2 * MARGIN + widest * (WIDTH + GAP_X) + WIDTH  # room on the right for bent edges
    centre = MARGIN + widest * (WIDTH + GAP_X) / 2
    where = {}
    for depth, row in rows.items():
        left = centre - len(row) * (WIDTH + GAP_X) / 2 + GAP_X / 2
        for i, node in enumerate(row):
            where[node.id] = (left + i * (WIDTH + GAP_X), MARGIN + LEGEND_HEIGHT + depth * (HEIGHT + GAP_Y))
    height = 2 * MARGIN + LEGEND_HEIGHT + (max(rows, default=0) + 1) * (HEIGHT + GAP_Y)
    return where, width, height


def _node_svg(node: Node, x: float, y: float) -> str:
    fill = STYLES[node.kind][0]
    rx = HEIGHT / 2 if node.kind in ("input", "output") else 8
    stroke = 'stroke="#263238" stroke-width="3"' if node.fused else 'stroke="#546e7a" stroke-width="1"'
    lines = node.label.split("\n") + (["⚡ fused"] if node.fused else [])
    step = HEIGHT / (len(lines) + 1)
    classes = [' class="main"'] + [""] * (len(lines) - 1)
    text = "".join(f'<tspan x="{x + WIDTH / 2:.1f}" y="{y + step * (i + 1) + 4:.1f}"{cls}>{escape(line)}</tspan>'
                   for i, (line, cls) in enumerate(zip(lines, classes)))
    return (f'<g class="node {node.kind}"><title>{escape(node.detail)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{WIDTH}" height="{HEIGHT}" rx="{rx}" fill="{fill}" {stroke}/>'
            f'<text text-anchor="middle">{text}</text></g>')


def _edge_svg(source: tuple[float, float], target: tuple[float, float], label: str, skips: bool) -> str:
    x1, y1 = source[0] + WIDTH / 2, source[1] + HEIGHT
    x2, y2 = target[0] + WIDTH / 2, target[1]
    if skips:
        bend = max(x1, x2) + WIDTH * 0.75
        path = f"M{x1:.1f},{y1:.1f} C{bend:.1f},{y1 + GAP_Y:.1f} {bend:.1f},{y2 - GAP_Y:.1f} {x2:.1f},{y2:.1f}"
    else:
        mid = (y1 + y2) / 2
        path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{mid:.1f} {x2:.1f},{mid:.1f} {x2:.1f},{y2:.1f}"
    return f'<path class="edge" d="{path}" marker-end="url(#arrow)"><title>{escape(label)}</title></path>'


def _legend() -> str:
    items, x = [], MARGIN
    seen = set()
    for kind, (fill, text) in STYLES.items():
        if text in seen:
            continue
        seen.add(text)
        items.append(f'<rect x="{x}" y="{MARGIN - 6}" width="14" height="14" rx="3" fill="{fill}" stroke="#546e7a"/>'
                     f'<text x="{x + 20}" y="{MARGIN + 5}">{escape(text)}</text>')
        x += 30 + 7 * len(text)
    items.append(f'<rect x="{x}" y="{MARGIN - 6}" width="14" height="14" rx="3" fill="#fff" stroke="#263238" '
                 f'stroke-width="3"/><text x="{x + 20}" y="{MARGIN + 5}">fused op</text>')
    return f'<g class="legend">{"".join(items)}</g>'


def to_svg(graph: Graph) -> str:
    where, width, height = _positions(graph)
    layer = layers(graph)
    edges = [_edge_svg(where[e.source], where[e.target], e.label, layer[e.target] - layer[e.source] > 1)
             for e in graph.edges]
    nodes = [_node_svg(n, *where[n.id]) for n in graph.nodes]
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="Helvetica, Arial, sans-serif" font-size="11">'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
            'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#607d8b"/></marker></defs>'
            '<style>.edge{fill:none;stroke:#607d8b;stroke-width:1.3}.edge:hover{stroke:#d84315;stroke-width:3}'
            '.main{font-weight:bold}.node:hover rect{stroke:#d84315}</style>'
            f'{_legend()}{"".join(edges)}{"".join(nodes)}</svg>')


def to_html(graph: Graph, title: str, dot: str) -> str:
    """One self-contained page: a summary line, the SVG, and the dot source."""
    kinds = Counter(n.kind for n in graph.nodes)
    fused = sum(n.fused for n in graph.nodes)
    ops = sum(kinds[k] for k in ("float16", "float32", "other", "cast"))
    summary = (f"{ops} ops: {kinds['float16']} float16, {kinds['float32']} float32, {kinds['cast']} casts, "
               f"{kinds['other']} other; {fused} fused. Hover a node for the op, an edge for its tensor.")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title><style>body{{font-family:Helvetica,Arial,sans-serif;margin:1.5em}}"
            "pre{background:#f5f5f5;padding:1em;overflow:auto}</style></head><body>"
            f"<h1>{escape(title)}</h1><p>{escape(summary)}</p>\n{to_svg(graph)}\n"
            "<details><summary>Graphviz dot source (render with <code>dot -Tsvg</code>)</summary>"
            f"<pre>{escape(dot)}</pre></details></body></html>\n")
