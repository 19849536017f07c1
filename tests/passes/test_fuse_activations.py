import math

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir.builder import append_op, create_parameter
from halfway.ir.initializers import Constant
from halfway.passes import PassManager
from tests.support.passcheck import fuse_and_compare, op_types


def _const(value):
    return create_parameter("c", [], initializer=Constant(value))


def _one(op_type, inputs, **attrs):
    return append_op(op_type, inputs, attrs)["Out"][0]


def _gelu(form, swap=False, half=0.5):
    """GELU decomposed as exporters write it; ``swap`` puts the constants first."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 8])

        def mul(a, b):
            return _one("elementwise_mul", {"X": b, "Y": a} if swap else {"X": a, "Y": b})

        def add(a, b):
            return _one("elementwise_add", {"X": b, "Y": a} if swap else {"X": a, "Y": b})

        if form == "erf":
            inner = _one("erf", {"X": _one("elementwise_div", {"X": x, "Y": _const(math.sqrt(2))})})
        else:
            cube = mul(_one("pow", {"X": x}, factor=3.0), _const(0.044715))
            inner = _one("tanh", {"X": mul(add(x, cube), _const(math.sqrt(2 / math.pi)))})
        y = mul(mul(x, _const(half)), add(inner, _const(1.0)))
    return prog, halfway.init_scope(prog, seed=0), [y.name]


@pytest.mark.parametrize("form", ["erf", "tanh"])
@pytest.mark.parametrize("swap", [False, True])
def test_gelu_forms_become_gelu(form, swap):
    prog, scope, outs = _gelu(form, swap)
    result = fuse_and_compare(prog, scope, "fuse_activations", outs)
    (gelu,) = result.program.global_block().ops
    assert gelu.type == "gelu" and gelu.attr("approximate") == (form == "tanh")
    x = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)
    (got,) = halfway.Executor().run(result.program, {"x": x}, outs, result.scope)
    if form == "erf":
        want = x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    else:
        want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_wrong_constant_is_a_near_miss_naming_it():
    prog, scope, outs = _gelu("erf", half=0.25)
    result = PassManager("fuse_activations", debug=True).run(prog, scope, fetch=outs)
    assert "gelu" not in op_types(result.program)
    assert any("the factor" in m.reason and "not 0.5" in m.reason for m in result.records[0].near_misses)


@pytest.mark.parametrize("sigmoid_first", [False, True])
def test_x_times_sigmoid_becomes_silu(sigmoid_first):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 8])
        s = layers.sigmoid(x)
        y = _one("elementwise_mul", {"X": s, "Y": x} if sigmoid_first else {"X": x, "Y": s})
    result = fuse_and_compare(prog, halfway.init_scope(prog), "fuse_activations", [y.name])
    assert [o.type for o in result.program.global_block().ops] == ["silu"]


def test_sigmoid_of_another_var_is_left_alone():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x, z = layers.data("x", [2, 8]), layers.data("z", [2, 8])
        y = _one("elementwise_mul", {"X": x, "Y": layers.sigmoid(z)})
    assert not fuse_and_compare(prog, halfway.init_scope(prog), "fuse_activations", [y.name]).modified


def _gated(form, up_first=False, up_shape=(2, 3, 8)):
    """LLaMA's MLP gate: silu(gate) * up, the silu as one op or as gate * sigmoid(gate)."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        gate, up = layers.data("gate", [2, 3, 8]), layers.data("up", list(up_shape))
        if form == "silu":
            act = _one("silu", {"X": gate})
        else:
            act = _one("elementwise_mul", {"X": gate, "Y": layers.sigmoid(gate)})
        y = _one("elementwise_mul", {"X": up, "Y": act} if up_first else {"X": act, "Y": up})
    return prog, halfway.init_scope(prog), [y.name]


@pytest.mark.parametrize("form", ["silu", "sigmoid"])
@pytest.mark.parametrize("up_first", [False, True])
def test_silu_of_the_gate_times_up_becomes_swiglu(form, up_first):
    prog, scope, outs = _gated(form, up_first)
    rng = np.random.default_rng(1)
    feed = {n: (rng.standard_normal((2, 3, 8)) * 4).astype(np.float32) for n in ("gate", "up")}
    result = fuse_and_compare(prog, scope, "fuse_activations", outs, feed=feed)
    (op,) = result.program.global_block().ops
    assert op.type == "swiglu" and op.input("X") == ("gate",) and op.input("Y") == ("up",)
    (got,) = halfway.Executor().run(result.program, feed, outs, result.scope)
    gate = feed["gate"].astype(np.float64)
    np.testing.assert_allclose(got, gate / (1 + np.exp(-gate)) * feed["up"], rtol=1e-6, atol=1e-6)


def test_a_broadcast_up_is_a_swiglu_near_miss():
    prog, scope, outs = _gated("silu", up_shape=(8,))
    result = PassManager("fuse_activations", debug=True).run(prog, scope, fetch=outs)
    assert "swiglu" not in op_types(result.program)
    assert any("differ in shape" in m.reason for record in result.records for m in record.near_misses)
