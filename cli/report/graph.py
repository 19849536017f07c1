"""A program as a picture: nodes (inputs, ops, outputs) and the tensors flowing between them,
each op marked by what it computes in (float16, float32, a cast) and whether it is a fused op;
written as Graphviz dot text."""

from __future__ import annotations

from attrs import frozen

from ...api.models import op_label, op_precision
from ...ir.block import Block
from ...ir.operator import Operator
from ...ir.program import Program

__all__ = ["Node", "Edge", "Graph", "program_graph", "to_dot", "STYLES", "FUSED_TYPES"]

FUSED_TYPES = frozenset({"fused_conv2d", "fused_conv2d_pool", "fc"})
"""Op types the fusion passes produce (besides any ``fused_*``)."""

STYLES = {  # kind -> (fill colour, legend text)
    "input": ("#eeeeee", "input / output"),
    "output": ("#eeeeee", "input / output"),
    "float16": ("#b9f6ca", "float16 op"),
    "float32": ("#bbdefb", "float32 op"),
    "other": ("#fff9c4", "op of another dtype"),
    "cast": ("#ffcc80", "cast"),
}


@frozen
class Node:
    id: str
    label: str
    kind: str
    fused: bool
    detail: str


@frozen
class Edge:
    source: str
    target: str
    label: str


@frozen
class Graph:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def _tensor(block: Block, name: str) -> str:
    var = block.find_var(name)
    dtype = var.dtype.name if var.dtype is not None else "?"
    return f"{dtype}{list(var.shape or ())}"


def _kind(op: Operator) -> str:
    if op.type == "cast":
        return "cast"
    precision = op_precision(op)
    return precision if precision in ("float16", "float32") else "other"


def _op_node(index: int, op: Operator) -> Node:
    fused = op.type in FUSED_TYPES or op.type.startswith("fused_")
    kind = _kind(op)
    return Node(f"op{index}", f"{op_label(op.type)}\n{kind if kind != 'other' else ''}".strip(), kind, fused,
                op.describe())


def program_graph(program: Program) -> Graph:
    """The global block of ``program`` as a graph (parameters are folded into op details)."""
    block = program.global_block()
    nodes: list[Node] = []
    edges: list[Edge] = []
    writer: dict[str, str] = {}
    for name in program.feed_names():
        nodes.append(Node(f"in:{name}", f"{name}\n{_tensor(block, name)}", "input", False, f"input {name}"))
        writer[name] = f"in:{name}"
    for index, op in enumerate(block.ops):
        if op.type in ("feed", "fetch"):
            continue
        node = _op_node(index, op)
        nodes.append(node)
        for name in dict.fromkeys(op.input_names()):
            if name in writer:
                edges.append(Edge(writer[name], node.id, _tensor(block, name)))
        for name in op.output_names():
            writer[name] = node.id
    for name in program.fetch_names():
        nodes.append(Node(f"out:{name}", f"{name}\n{_tensor(block, name)}", "output", False, f"output {name}"))
        if name in writer:
            edges.append(Edge(writer[name], f"out:{name}", _tensor(block, name)))
    return Graph(tuple(nodes), tuple(edges))


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph: Graph, title: str = "program") -> str:
    """Graphviz dot text: ops as filled boxes coloured by kind, fused ops with a bold double border."""
    lines = [f"digraph {_quoted(title)} {{", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=8, color="#607d8b"];']
    for node in graph.nodes:
        attrs = {"label": node.label + ("\nfused" if node.fused else ""), "fillcolor": STYLES[node.kind][0],
                 "tooltip": node.detail}
        if node.kind in ("input", "output"):
            attrs["shape"] = "ellipse"
        if node.fused:
            attrs["peripheries"] = "2"
            attrs["penwidth"] = "2"
        lines.append(f"  {_quoted(node.id)} [{', '.join(f'{k}={_quoted(v)}' for k, v in attrs.items())}];")
    for edge in graph.edges:
        lines.append(f"  {_quoted(edge.source)} -> {_quoted(edge.target)} [label={_quoted(edge.label)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
