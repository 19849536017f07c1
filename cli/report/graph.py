"""A program as a picture: nodes (inputs, ops, outputs) and the tensors flowing between them,
each op marked by what it computes in (float16, float32, a cast) and whether it is a fused op,
with its attributes and the tensors of its slots; written as Graphviz dot text, or as the page of
``graph_page``."""

from __future__ import annotations

import json
from typing import Any

from attrs import frozen

from ...api.model_facts import op_label, op_precision
from ...ir.block import Block
from ...ir.operator import Operator
from ...ir.program import Program

__all__ = ["Tensor", "Node", "Edge", "Graph", "program_graph", "to_dot", "attr_text", "STYLES", "FUSED_TYPES"]

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


LONG_ATTR = 16
"""Attribute lists longer than this show their first items and their length."""


@frozen
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]

    def text(self) -> str:
        """``float32[1, 3, 224, 224]``."""
        return f"{self.dtype}{list(self.shape)}"


@frozen
class Node:
    """An input, an op or an output. ``attrs`` are (name, value as JSON text); ``inputs`` and
    ``outputs`` are (slot, tensor) in the op's slot order (the var itself for an input/output)."""

    id: str
    label: str
    kind: str
    fused: bool
    detail: str
    attrs: tuple[tuple[str, str], ...] = ()
    inputs: tuple[tuple[str, Tensor], ...] = ()
    outputs: tuple[tuple[str, Tensor], ...] = ()


@frozen
class Edge:
    source: str
    target: str
    label: str
    var: str = ""


@frozen
class Graph:
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def _tensor(block: Block, name: str) -> Tensor:
    var = block.find_var(name)
    return Tensor(name, var.dtype.name if var.dtype is not None else "?", tuple(var.shape or ()))


def attr_text(value: Any) -> str:
    """An attribute's value as JSON (a long list cut to its first items, with its length)."""
    if isinstance(value, (list, tuple)) and len(value) > LONG_ATTR:
        head = json.dumps(list(value[:LONG_ATTR]), default=str)
        return f"{head[:-1]}, …] ({len(value)} values)"
    return json.dumps(value, default=str)


def _slots(block: Block, slots: Any) -> tuple[tuple[str, Tensor], ...]:
    return tuple((slot, _tensor(block, name)) for slot, names in slots.items() for name in names)


def _kind(op: Operator) -> str:
    if op.type == "cast":
        return "cast"
    precision = op_precision(op)
    return precision if precision in ("float16", "float32") else "other"


def _op_node(index: int, op: Operator, block: Block) -> Node:
    fused = op.type in FUSED_TYPES or op.type.startswith("fused_")
    kind = _kind(op)
    attrs = tuple((name, attr_text(value)) for name, value in op.attrs.items())
    return Node(f"op{index}", f"{op_label(op.type)}\n{kind if kind != 'other' else ''}".strip(), kind, fused,
                op.describe(), attrs, _slots(block, op.inputs), _slots(block, op.outputs))


def _io_node(side: str, block: Block, name: str) -> Node:
    tensor = _tensor(block, name)
    prefix = "in" if side == "input" else "out"
    slots = ((side, tensor),)
    return Node(f"{prefix}:{name}", f"{name}\n{tensor.text()}", side, False, f"{side} {name}",
                outputs=slots if side == "input" else (), inputs=slots if side == "output" else ())


def _edge(source: str, target: str, block: Block, name: str) -> Edge:
    return Edge(source, target, _tensor(block, name).text(), name)


def program_graph(program: Program) -> Graph:
    """The global block of ``program`` as a graph (parameters are folded into op details)."""
    block = program.global_block()
    nodes: list[Node] = []
    edges: list[Edge] = []
    writer: dict[str, str] = {}
    for name in program.feed_names():
        nodes.append(_io_node("input", block, name))
        writer[name] = f"in:{name}"
    for index, op in enumerate(block.ops):
        if op.type in ("feed", "fetch"):
            continue
        node = _op_node(index, op, block)
        nodes.append(node)
        for name in dict.fromkeys(op.input_names()):
            if name in writer:
                edges.append(_edge(writer[name], node.id, block, name))
        for name in op.output_names():
            writer[name] = node.id
    for name in program.fetch_names():
        nodes.append(_io_node("output", block, name))
        if name in writer:
            edges.append(_edge(writer[name], f"out:{name}", block, name))
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
