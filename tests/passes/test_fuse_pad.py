"""fuse_pad: TensorFlow-style pads before convs and pools become their paddings, checked against
ONNX Runtime on small ONNX models."""

import numpy as np
import pytest

from tests.support.onnx_graph import Graph, check_passes
from tests.support.passcheck import op_types

FEEDS = {"x": np.random.default_rng(0).normal(0, 2, (2, 4, 7, 7)).astype(np.float32)}
ASYMMETRIC = (0, 0, 0, 1, 0, 0, 1, 2)  # ONNX's begins then ends: H 0/1, W 1/2


def _conv(g: Graph, x: str, **attrs) -> str:
    rng = np.random.default_rng(1)
    w, b = g.const(rng.normal(0, 0.5, (4, 4, 3, 3)).astype(np.float32)), g.const(rng.normal(0, 0.5, 4).astype(np.float32))
    return g.node("Conv", x, w, b, **attrs)


def _tf_same_pads(g: Graph, x: str) -> str:
    """TensorFlow's "SAME" pads for a 3x3 window of stride 2, computed from x's shape as an
    export writes them: total = max((ceil(size / 2) - 1) * 2 + 3 - size, 0), begin = total // 2."""
    size = g.node("Slice", g.node("Shape", x), g.ints(2), g.ints(4))
    out = g.node("Div", g.node("Add", size, g.ints(1)), g.ints(2))
    total = g.node("Max", g.node("Sub", g.node("Add", g.node("Mul", g.node("Sub", out, g.ints(1)), g.ints(2)), g.ints(3)),
                                 size), g.ints(0))
    begin = g.node("Div", total, g.ints(2))
    return g.node("Concat", g.ints(0, 0), begin, g.ints(0, 0), g.node("Sub", total, begin), axis=0)


@pytest.mark.parametrize("pads", ["constant", "folded", "from_shape"])
@pytest.mark.parametrize("dims", [[2, 4, 7, 7], ["batch", 4, 7, 7]])
def test_pad_before_a_conv_becomes_its_paddings(pads, dims):
    g = Graph()
    x = g.input("x", np.float32, dims)
    if pads == "constant":
        given = g.ints(*ASYMMETRIC)
    elif pads == "folded":  # TensorFlow's [[0, 0], [0, 0], [0, 1], [1, 2]], transposed and flattened
        pairs = g.node("Concat", g.ints(0, 0), g.ints(0, 0), g.ints(0, 1), g.ints(1, 2), axis=0)
        given = g.node("Reshape", g.node("Transpose", g.node("Reshape", pairs, g.ints(4, 2)), perm=[1, 0]), g.ints(-1))
    else:
        given = _tf_same_pads(g, x)
    y = _conv(g, g.node("Pad", x, given), strides=[2, 2])
    program = check_passes(g.model([y]), FEEDS)
    assert op_types(program) == {"feed": 1, "fused_conv2d": 1, "fetch": 1}
    want = [1, 1, 1, 1] if pads == "from_shape" else [0, 1, 1, 2]
    assert list(program.global_block().ops[1].attr("paddings")) == want


def test_pad_adds_to_the_convs_own_padding():
    g = Graph()
    y = _conv(g, g.node("Pad", g.input("x", np.float32, [2, 4, 7, 7]), g.ints(*ASYMMETRIC)), pads=[1, 1, 1, 1])
    program = check_passes(g.model([y]), FEEDS)
    assert list(program.global_block().ops[1].attr("paddings")) == [1, 2, 2, 3]


@pytest.mark.parametrize("pool, value, fused", [
    ("MaxPool", -np.inf, True), ("MaxPool", float(np.finfo(np.float32).min), True),
    ("MaxPool", 0.0, False),  # a max over zeros is no max over the input
    ("AveragePool", 0.0, True), ("AveragePool", 1.0, False),
])
def test_pad_before_a_pool(pool, value, fused):
    g = Graph()
    padded = g.node("Pad", g.input("x", np.float32, ["batch", 4, 7, 7]), g.ints(*ASYMMETRIC), g.const(np.float32(value)))
    y = g.node(pool, padded, kernel_shape=[3, 3], strides=[2, 2])
    types = op_types(check_passes(g.model([y]), FEEDS))
    assert types == ({"feed": 1, "pool2d": 1, "fetch": 1} if fused else {"feed": 1, "pad": 1, "pool2d": 1, "fetch": 1})


@pytest.mark.parametrize("pads, attrs", [
    ((0, 1, 0, 0, 0, 1, 0, 0), {}),  # pads the channels
    (ASYMMETRIC, {"mode": "reflect"}),
])
def test_pads_a_conv_cannot_hold_stay(pads, attrs):
    g = Graph()
    x = g.input("x", np.float32, [2, 4, 7, 7])
    padded = g.node("Pad", x, g.ints(*pads), **attrs)
    if pads[1]:
        padded = g.node("Slice", padded, g.ints(0), g.ints(4), g.ints(1))
    types = op_types(check_passes(g.model([_conv(g, padded)]), FEEDS))
    assert types["pad"] + types["pad3d"] == 1 and types["fused_conv2d"] == 1


def test_avg_pool_rounding_up_keeps_its_pad():
    g = Graph()
    padded = g.node("Pad", g.input("x", np.float32, [2, 4, 7, 7]), g.ints(*ASYMMETRIC))
    y = g.node("AveragePool", padded, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    assert op_types(check_passes(g.model([y]), FEEDS))["pad"] == 1
