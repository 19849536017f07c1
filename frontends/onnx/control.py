"""Converter of ONNX's control-flow op Scan (opset 9 on), unrolled over its static number of
iterations: each iteration imports the body's nodes with the body's values renamed for that
iteration (values of the outer graph it reads keep their names), its scan inputs sliced from X
along their axes and its scan outputs stacked along theirs, in the directions the attrs give.
"""

from __future__ import annotations

from typing import Any

from onnx import GraphProto, NodeProto

from .context import GraphContext
from .registry import converts
from .tensors import tensor_array

__all__: list[str] = []


@converts("Scan", makes=("slice", "squeeze2", "unsqueeze2", "concat", "assign"))
def scan(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    if ctx.opset < 9:
        ctx.fail("Scan before opset 9 (with a batch dim and sequence_lens) is not supported")
    body: GraphProto = attrs["body"]
    count = int(attrs["num_scan_inputs"])
    states, scanned = list(node.input[:len(node.input) - count]), list(node.input[len(node.input) - count:])
    in_axes = list(attrs.get("scan_input_axes", [0] * count))
    in_backward = list(attrs.get("scan_input_directions", [0] * count))
    outputs = len(body.output) - len(states)
    out_axes = list(attrs.get("scan_output_axes", [0] * outputs))
    out_backward = list(attrs.get("scan_output_directions", [0] * outputs))
    ranks = [len(ctx.shape(x)) for x in scanned]
    in_axes = [ctx.axis(a, r, "scan_input_axes entry") for a, r in zip(in_axes, ranks)]
    lengths = {ctx.static_shape(x, "Scan")[a] for x, a in zip(scanned, in_axes)}
    if len(lengths) != 1:
        ctx.fail(f"the scan inputs run {sorted(lengths)} iterations; they must agree")
    steps = lengths.pop()
    pieces: list[list[str]] = [[] for _ in range(outputs)]
    for t in range(steps):
        names = {b.name: s for b, s in zip(body.input, states)}
        for b, x, axis, backward in zip(body.input[len(states):], scanned, in_axes, in_backward):
            index = steps - 1 - t if backward else t
            cut = ctx.temp(f"{x}.step")
            ctx.emit("slice", {"Input": x}, {"Out": cut}, {"axes": [axis], "starts": [index], "ends": [index + 1]})
            names[b.name] = ctx.temp(f"{x}.item")
            ctx.emit("squeeze2", {"X": cut}, {"Out": names[b.name]}, {"axes": [axis]})
        _run_body(ctx, body, names, t)
        results = [names.get(o.name, o.name) for o in body.output]
        states = results[:len(states)]
        for piece, result in zip(pieces, results[len(states):]):
            piece.append(result)
    for out, value in zip(node.output, states):
        if out:
            ctx.emit("assign", {"X": value}, {"Out": out})
    for out, piece, axis, backward in zip(node.output[len(states):], pieces, out_axes, out_backward):
        if out:
            ordered = piece[::-1] if backward else piece
            rank = len(ctx.shape(ordered[0])) + 1
            axis = ctx.axis(axis, rank, "scan_output_axes entry")
            grown = [ctx.temp(f"{out}.step") for _ in ordered]
            for value, name in zip(ordered, grown):
                ctx.emit("unsqueeze2", {"X": value}, {"Out": name}, {"axes": [axis]})
            ctx.emit("concat", {"X": grown}, {"Out": out}, {"axis": axis})


def _run_body(ctx: GraphContext, body: GraphProto, names: dict[str, str], step: int) -> None:
    """Import the body's nodes once, each value it defines renamed for ``step`` in ``names``."""
    assert ctx.convert_node is not None, "Scan's converter runs inside an import"
    for init in body.initializer:
        names[init.name] = ctx.temp(f"{init.name}.{step}")
        ctx.consts[names[init.name]] = tensor_array(init, f"Scan body initializer {init.name!r}")
    for inner in body.node:
        renamed = NodeProto()
        renamed.CopyFrom(inner)
        renamed.ClearField("input")
        renamed.input.extend(names.get(n, n) if n else "" for n in inner.input)
        renamed.ClearField("output")
        for out in inner.output:
            if out:
                names[out] = ctx.temp(f"{out}.{step}")
            renamed.output.append(names[out] if out else "")
        ctx.convert_node(renamed)
