"""fuse_projections: products of one input by constant weights become one product on the weights
side by side and a split; products that differ, or whose weight is no parameter, stay."""

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.builder import append_op, create_parameter
from halfway.passes import PassManager
from tests.support.passcheck import fuse_and_compare, op_types

WIDTHS = (8, 4, 4)


def _projections(kind="fc", acts=("", "", ""), fed_weight=False, widths=WIDTHS):
    """x [2, 3, 8] projected three ways (fc with a bias, or matmul_v2), each output read apart."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 8])
        outs = []
        for i, (act, width) in enumerate(zip(acts, widths)):
            w = layers.data("w", [8, width]) if fed_weight and i == 1 else create_parameter("w", [8, width])
            if kind == "fc":
                inputs = {"Input": x, "W": w, "Bias": create_parameter("b", [width])}
                y = append_op("fc", inputs, {"in_num_col_dims": 2, "activation_type": act})["Out"][0]
            else:
                y = append_op("matmul_v2", {"X": x, "Y": w})["Out"][0]
            outs.append(layers.tanh(y).name)
    return prog, halfway.init_scope(prog, seed=3), outs


def _feed(fed_weight=False):
    rng = np.random.default_rng(1)
    feed = {"x": rng.standard_normal((2, 3, 8)).astype(np.float32)}
    if fed_weight:
        feed["w"] = rng.standard_normal((8, 4)).astype(np.float32)
    return feed


@pytest.mark.parametrize("kind", ["fc", "matmul_v2"])
def test_three_projections_of_one_input_become_one_product_and_a_split(kind):
    prog, scope, outs = _projections(kind)
    result = fuse_and_compare(prog, scope, "fuse_projections", outs, feed=_feed())
    types = op_types(result.program)
    assert types[kind] == 1 and types["split"] == 1
    product = next(op for op in result.program.global_block().ops if op.type == kind)
    weight = result.scope[product.input("W" if kind == "fc" else "Y")[0]]
    assert weight.shape == (8, sum(WIDTHS))
    split = next(op for op in result.program.global_block().ops if op.type == "split")
    assert list(split.attr("sections")) == list(WIDTHS) and split.attr("axis") == 2


def test_only_products_of_one_kind_fuse():
    prog, scope, outs = _projections(acts=("relu", "", "relu"))
    result = fuse_and_compare(prog, scope, "fuse_projections", outs, feed=_feed())
    fcs = [op for op in result.program.global_block().ops if op.type == "fc"]
    assert sorted(op.attr("activation_type") for op in fcs) == ["", "relu"]
    assert result.scope[fcs[0].input("W")[0]].shape in ((8, 12), (8, 4))


def test_a_fed_weight_stays_apart():
    prog, scope, outs = _projections(kind="matmul_v2", fed_weight=True)
    result = fuse_and_compare(prog, scope, "fuse_projections", outs, feed=_feed(fed_weight=True))
    assert op_types(result.program)["matmul_v2"] == 2 and op_types(result.program)["split"] == 1


def test_a_lone_product_says_why():
    prog, scope, outs = _projections(widths=(8,), acts=("",))
    result = PassManager("fuse_projections", debug=True).run(prog, scope, fetch=outs)
    assert not result.records[0].modified
    assert any("no other product of x" in m.reason for r in result.records for m in r.near_misses)


def _mlp(kind="matmul_v2", x_shape=(2, 3, 8), transposed=False):
    """A SwiGLU MLP's gate and up projections of x (fc with a bias, or matmul_v2), gated."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", list(x_shape))
        products = []
        for width in (8, 8):
            w = create_parameter("w", [width, 8] if transposed else [8, width])
            if kind == "fc":
                inputs = {"Input": x, "W": w, "Bias": create_parameter("b", [width])}
                products.append(append_op("fc", inputs, {"in_num_col_dims": 2})["Out"][0])
            else:
                products.append(append_op("matmul_v2", {"X": x, "Y": w}, {"trans_y": transposed})["Out"][0])
        out = append_op("swiglu", {"X": products[0], "Y": products[1]})["Out"][0]
    return prog, halfway.init_scope(prog, seed=4), [out.name]


@pytest.mark.parametrize("kind", ["fc", "matmul_v2"])
def test_gate_and_up_projections_become_one_gated_fc(kind):
    prog, scope, outs = _mlp(kind)
    result = fuse_and_compare(prog, scope, "fuse_projections", outs, feed=_feed())
    (fc,) = result.program.global_block().ops
    assert fc.type == "fc" and fc.attr("activation_type") == "swiglu"
    assert result.scope[fc.input("W")[0]].shape == (8, 16) and bool(fc.input("Bias")) == (kind == "fc")


@pytest.mark.parametrize("kwargs, reason", [
    ({"x_shape": (8,)}, "x of rank 1"),
    ({"transposed": True}, "transposes an operand"),
])
def test_gates_that_differ_say_why(kwargs, reason):
    prog, scope, outs = _mlp(**kwargs)
    result = PassManager("fuse_projections", debug=True).run(prog, scope, fetch=outs)
    assert op_types(result.program)["swiglu"] == 1
    assert any(reason in m.reason for r in result.records for m in r.near_misses)


def test_an_input_written_again_between_its_products_says_why():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 8])
        h = layers.relu(x)
        first = append_op("matmul_v2", {"X": h, "Y": create_parameter("w", [8, 4])})["Out"][0]
        append_op("tanh", {"X": h}, outputs={"Out": [h]})  # in place
        second = append_op("matmul_v2", {"X": h, "Y": create_parameter("w", [8, 4])})["Out"][0]
    result = PassManager("fuse_projections", debug=True).run(prog, halfway.init_scope(prog), fetch=[first.name,
                                                                                                   second.name])
    assert op_types(result.program)["matmul_v2"] == 2
    assert any("is written again between" in m.reason for r in result.records for m in r.near_misses)
