"""Converters of ONNX's recurrent ops RNN, GRU and LSTM, unrolled over the (static) sequence into
halfway's matmul_v2, elementwise and activation ops.

Each step multiplies X_t by W^T and H_(t-1) by R^T (one product per input, its gates side by side,
split by slices) and applies ONNX's equations with its default activations (sigmoid, tanh):

    RNN:  H = tanh(x + h)
    GRU:  z = sigmoid(x_z + h_z), r = sigmoid(x_r + h_r), n = tanh(x_n + (r * H_prev) R_n^T + Rb_n)
          (or x_n + r * h_n with linear_before_reset), H = n + z * (H_prev - n)
    LSTM: i, f = sigmoid(x + h + P * C_prev), c = tanh(x_c + h_c), C = f * C_prev + i * c,
          o = sigmoid(x_o + h_o + P_o * C), H = o * tanh(C)

where x is X_t W^T + Wb and h is H_(t-1) R^T + Rb, gate by gate (ONNX's orders: LSTM i, o, f, c;
GRU z, r, h). ``sequence_lens`` holds each batch row's state past its length (and zeros its Y).
One direction, forward or reverse (reverse without sequence_lens); other activations, ``clip``
and LSTM's ``input_forget`` are refused by name.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import NodeProto

from .context import GraphContext
from .registry import converts

__all__: list[str] = []

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


class _Unrolled:
    """Emits one recurrent node's steps; names come from the node's first output."""

    def __init__(self, ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
        self.ctx, self.node, self.attrs = ctx, node, attrs
        self.inputs = [name if name else "" for name in node.input] + [""] * (8 - len(node.input))
        self.hidden = int(attrs["hidden_size"])
        self.hint = next(o for o in node.output if o) if any(node.output) else "rnn"
        self.dtype = ctx.info(node.input[0]).dtype

    def temp(self, what: str) -> str:
        return self.ctx.temp(f"{self.hint}.{what}")

    def op(self, op_type: str, inputs: dict[str, Any], attrs: dict[str, Any] | None = None, out: str | None = None) -> str:
        out = out or self.temp(op_type)
        self.ctx.emit(op_type, inputs, {"Out": out}, attrs or {})
        return out

    def binary(self, op_type: str, x: str, y: str) -> str:
        return self.op(op_type, {"X": x, "Y": y}, {"axis": -1})

    def gate(self, value: str, index: int) -> str:
        """Gate ``index`` of a [batch, gates * hidden] value."""
        h = self.hidden
        return self.op("slice", {"Input": value}, {"axes": [1], "starts": [index * h], "ends": [(index + 1) * h]})

    def matrix(self, name: str) -> str:
        """W or R [1, gates * hidden, n] as [gates * hidden, n]."""
        return self.op("squeeze2", {"X": name}, {"axes": [0]})

    def product(self, value: str, matrix: str, bias: str | None) -> str:
        """value @ matrix^T (+ bias)."""
        out = self.op("matmul_v2", {"X": value, "Y": matrix}, {"trans_y": True})
        return self.binary("elementwise_add", out, bias) if bias else out

    def state(self, index: int, batch: int) -> str:
        """initial_h / initial_c [1, batch, hidden] as [batch, hidden], zeros when absent."""
        name = self.inputs[index]
        if name:
            return self.op("squeeze2", {"X": name}, {"axes": [0]})
        return self.op("fill_constant", {}, {"shape": [batch, self.hidden], "dtype": int(self.dtype), "value": 0.0})


def _check(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> str:
    direction = attrs.get("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    activations = [a.decode() if isinstance(a, bytes) else a for a in attrs.get("activations", [])]
    if direction not in ("forward", "reverse"):
        ctx.fail(f"direction {direction!r} is not supported (forward and reverse are)")
    if activations and activations != _DEFAULT_ACTIVATIONS[node.op_type]:
        ctx.fail(f"activations {activations} are not supported (only ONNX's defaults "
                 f"{_DEFAULT_ACTIVATIONS[node.op_type]})")
    if "clip" in attrs or attrs.get("input_forget", 0):
        ctx.fail("clip and input_forget are not supported")
    if direction == "reverse" and len(node.input) > 4 and node.input[4]:
        ctx.fail("a reverse direction with sequence_lens is not supported")
    return direction


@converts("RNN", "GRU", "LSTM")
def recurrent(ctx: GraphContext, node: NodeProto, attrs: dict[str, Any]) -> None:
    direction = _check(ctx, node, attrs)
    u = _Unrolled(ctx, node, attrs)
    x = node.input[0]
    batchwise = bool(attrs.get("layout", 0))
    if batchwise:
        x = u.op("transpose2", {"X": x}, {"axis": [1, 0, 2]})
    steps, batch, _ = ctx.static_shape(x, node.op_type)
    gates, h = _GATES[node.op_type], u.hidden
    w, r = u.matrix(node.input[1]), u.matrix(node.input[2])
    biases: list[str | None] = [None, None]
    if u.inputs[3]:
        b = u.op("squeeze2", {"X": u.inputs[3]}, {"axes": [0]})
        biases = [u.op("slice", {"Input": b}, {"axes": [0], "starts": [i * gates * h], "ends": [(i + 1) * gates * h]})
                  for i in (0, 1)]
    hidden, cell = u.state(5, batch), u.state(6, batch) if node.op_type == "LSTM" else ""
    lengths = u.op("cast", {"X": u.inputs[4]}, {"in_dtype": int(ctx.info(u.inputs[4]).dtype),
                                                "out_dtype": int(u.dtype)}) if u.inputs[4] else ""
    outputs = []
    for t in (range(steps) if direction == "forward" else reversed(range(steps))):
        x_t = u.op("squeeze2", {"X": u.op("slice", {"Input": x}, {"axes": [0], "starts": [t], "ends": [t + 1]})},
                   {"axes": [0]})
        xw, hr = u.product(x_t, w, biases[0]), u.product(hidden, r, None)
        new_hidden, new_cell = _STEPS[node.op_type](u, xw, hr, hidden, cell, r, biases[1])
        if lengths:
            new_hidden, new_cell, y = _held(u, lengths, t, new_hidden, hidden, new_cell, cell)
        else:
            y = new_hidden
        hidden, cell = new_hidden, new_cell
        outputs.append((t, y))
    _write_outputs(u, [y for _, y in sorted(outputs)], hidden, cell, batchwise)


def _rnn_step(u: _Unrolled, xw: str, hr: str, hidden: str, cell: str, r: str, rb: str | None) -> tuple[str, str]:
    hr = u.binary("elementwise_add", hr, rb) if rb else hr
    return u.op("tanh", {"X": u.binary("elementwise_add", xw, hr)}), ""


def _gru_step(u: _Unrolled, xw: str, hr: str, hidden: str, cell: str, r: str, rb: str | None) -> tuple[str, str]:
    hr_b = u.binary("elementwise_add", hr, rb) if rb else hr
    z, reset = (u.op("sigmoid", {"X": u.binary("elementwise_add", u.gate(xw, i), u.gate(hr_b, i))}) for i in (0, 1))
    if u.attrs.get("linear_before_reset", 0):
        recurrent = u.binary("elementwise_mul", reset, u.gate(hr_b, 2))
    else:
        r_n = u.op("slice", {"Input": r}, {"axes": [0], "starts": [2 * u.hidden], "ends": [3 * u.hidden]})
        rb_n = u.op("slice", {"Input": rb}, {"axes": [0], "starts": [2 * u.hidden], "ends": [3 * u.hidden]}) if rb else None
        recurrent = u.product(u.binary("elementwise_mul", reset, hidden), r_n, rb_n)
    candidate = u.op("tanh", {"X": u.binary("elementwise_add", u.gate(xw, 2), recurrent)})
    kept = u.binary("elementwise_mul", z, u.binary("elementwise_sub", hidden, candidate))
    return u.binary("elementwise_add", candidate, kept), ""


def _lstm_step(u: _Unrolled, xw: str, hr: str, hidden: str, cell: str, r: str, rb: str | None) -> tuple[str, str]:
    hr_b = u.binary("elementwise_add", hr, rb) if rb else hr
    pre = [u.binary("elementwise_add", u.gate(xw, i), u.gate(hr_b, i)) for i in range(4)]  # i, o, f, c
    peep = u.op("squeeze2", {"X": u.inputs[7]}, {"axes": [0]}) if u.inputs[7] else ""

    def peeped(value: str, index: int, state: str) -> str:
        if not peep:
            return value
        weights = u.op("slice", {"Input": peep}, {"axes": [0], "starts": [index * u.hidden],
                                                  "ends": [(index + 1) * u.hidden]})
        return u.binary("elementwise_add", value, u.binary("elementwise_mul", weights, state))

    i = u.op("sigmoid", {"X": peeped(pre[0], 0, cell)})
    f = u.op("sigmoid", {"X": peeped(pre[2], 2, cell)})
    c = u.op("tanh", {"X": pre[3]})
    new_cell = u.binary("elementwise_add", u.binary("elementwise_mul", f, cell), u.binary("elementwise_mul", i, c))
    o = u.op("sigmoid", {"X": peeped(pre[1], 1, new_cell)})
    return u.binary("elementwise_mul", o, u.op("tanh", {"X": new_cell})), new_cell


_STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}


def _held(u: _Unrolled, lengths: str, t: int, new_hidden: str, hidden: str, new_cell: str,
          cell: str) -> tuple[str, str, str]:
    """The step's states where t < the row's length, the previous ones past it; Y zero past it."""
    step = u.ctx.add_const(u.temp("t"), np.array(t, u.dtype.numpy))
    live = u.op("unsqueeze2", {"X": u.op("cast", {"X": u.binary("greater_than", lengths, step)},
                                         {"in_dtype": 0, "out_dtype": int(u.dtype)})}, {"axes": [1]})

    def mixed(new: str, old: str) -> str:
        return u.binary("elementwise_add", old, u.binary("elementwise_mul", live, u.binary("elementwise_sub", new, old)))

    return mixed(new_hidden, hidden), mixed(new_cell, cell) if new_cell else "", u.binary("elementwise_mul", live,
                                                                                         new_hidden)


def _write_outputs(u: _Unrolled, ys: list[str], hidden: str, cell: str, batchwise: bool) -> None:
    """Y [seq, 1, batch, hidden] (batchwise: [batch, seq, 1, hidden]), Y_h and Y_c [1, batch, hidden]
    (batchwise: [batch, 1, hidden])."""
    outs = list(u.node.output) + [""] * (3 - len(u.node.output))
    if outs[0]:
        stacked = u.op("concat", {"X": [u.op("unsqueeze2", {"X": y}, {"axes": [0, 1]}) for y in ys]}, {"axis": 0})
        u.op("transpose2", {"X": stacked}, {"axis": [2, 0, 1, 3]}, outs[0]) if batchwise else \
            u.op("assign", {"X": stacked}, {}, outs[0])
    for out, value in ((outs[1], hidden), (outs[2], cell)):
        if out:
            u.op("unsqueeze2", {"X": value}, {"axes": [1 if batchwise else 0]}, out)
