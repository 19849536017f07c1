"""Chains of pointwise ops run by the compiled register machine (``kernels.numpy.pointwise``):
every unary row whose primitives the machine has, and scale, against float64 math; the ops it
lacks left to run alone."""

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import Executor
from halfway.ir.ops.expr import X, call, const
from halfway.ir.ops.families import UNARY
from halfway.kernels.numpy import jit
from halfway.kernels.numpy.pointwise import chainable, compiled_chain, row_expr
from tests.kernels.test_jit import DOMAINS, FLOAT_ROWS, REFERENCES

pytestmark = pytest.mark.skipif(not jit.JIT, reason="the chains are numba's")

RNG = np.random.default_rng(7)


def _prepare(build, shape=(3, 700)):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        out = build(layers.data("x", list(shape)))
    return Executor().prepare(prog, ["x"], [out.name], halfway.Scope())


def _input(name, shape):
    low, high = DOMAINS.get(name, (-9.0, 9.0))
    return RNG.uniform(low, high, shape).astype(np.float32)


@pytest.mark.parametrize("name", FLOAT_ROWS)
def test_a_row_between_scales_runs_as_one_chain_as_its_float64_math(name):
    """scale, the row, scale: one compiled call where the machine computes the row, each op
    alone where it does not; both as float64 math does (the row's input kept in its domain)."""
    attrs = UNARY[name].defaults()
    prepared = _prepare(lambda x: layers.scale(getattr(layers, name)(layers.scale(x, scale=1.0), **attrs),
                                               scale=0.5, bias=0.25))
    x = _input(name, (3, 700))
    held = {k: v if isinstance(v, bool) else float(np.float32(v)) for k, v in attrs.items()}
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        want = REFERENCES[name](x.astype(np.float64), held) * 0.5 + 0.25
        got = prepared.run({"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    op = prepared.report.kernels[1][0]
    chained = [chain for chain in prepared.report.chains if op in chain]
    assert bool(chained) == chainable(row_expr(name, attrs))


def test_the_machine_computes_todays_activations():
    """The rows of today's models chain (the test above would pass with none chaining)."""
    for name in ("relu", "relu6", "leaky_relu", "hard_swish", "hard_sigmoid", "sigmoid", "tanh", "gelu", "silu",
                 "abs", "square", "sqrt"):
        assert chainable(row_expr(name, UNARY[name].defaults())), name
    assert not chainable(call("log", X))
    assert not chainable(call("sigmoid", X * 2.0))  # computed in float64 by the activations' loops


def test_a_long_chain_is_one_run_and_numpys_arithmetic_bit_for_bit():
    def build(x):
        for i in range(200):
            x = layers.relu(x) if i % 2 else layers.scale(x, scale=0.75, bias=-0.5)
        return x

    prepared = _prepare(build, (4, 4))
    assert prepared.report.chains == [tuple(range(200))]
    assert "200 ops in 1 chain(s)" in prepared.report.summary()
    x = _input("relu", (4, 4))
    want = x.copy()
    for i in range(200):
        want = np.maximum(want, np.float32(0)) if i % 2 else want * np.float32(0.75) + np.float32(-0.5)
    np.testing.assert_array_equal(prepared.run({"x": x})[0], want)


def test_a_large_tensor_is_cut_into_parts_and_keeps_nans():
    run = compiled_chain([X * 2.0, call("max", X, const(0.0))])
    x = RNG.standard_normal(300_001).astype(np.float32)
    x[::1000] = np.nan
    np.testing.assert_array_equal(run(x), np.maximum(x * np.float32(2), np.float32(0)))
    assert run(x.astype(np.float64)) is None
    assert run(x[::2]) is None


def test_a_chain_the_machine_declines_runs_op_by_op_and_names_the_failing_op():
    """A transposed (strided) input goes through the ops one by one; numpy's errors then name
    the op that raised."""
    prepared = _prepare(lambda x: layers.relu(layers.sqrt(layers.transpose(x, [1, 0]))), (3, 5))
    assert prepared.report.chains
    x = _input("sqrt", (3, 5))
    np.testing.assert_allclose(prepared.run({"x": x})[0], np.sqrt(x.T), rtol=1e-6)
    with np.errstate(invalid="raise"), pytest.raises(halfway.HalfwayError, match=r"op #1 sqrt.*FloatingPointError"):
        prepared.run({"x": -x})


def _prepare_two(build, shape=(3, 5)):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        out = build(layers.data("x", list(shape)), layers.data("y", list(shape)))
    return Executor().prepare(prog, ["x", "y"], [out.name], halfway.Scope())


def test_binary_ops_chain_with_one_side_input_whichever_slot_holds_the_chain():
    """sub(y, chain) and div(chain, y) chain with y as the side input: the chain's value is
    the op's Y in the first, its X in the second (sub and div do not commute)."""
    prepared = _prepare_two(lambda x, y: layers.relu(layers.elementwise_div(
        layers.elementwise_sub(y, layers.scale(x, scale=2.0, bias=1.0)), y)))
    assert prepared.report.chains == [(0, 1, 2, 3)]
    x, y = _input("relu", (3, 5)), _input("relu", (3, 5)) + np.float32(10)
    two, one = np.float32(2), np.float32(1)
    want = np.maximum((y - (x * two + one)) / y, np.float32(0))
    np.testing.assert_array_equal(prepared.run({"x": x, "y": y})[0], want)


def test_a_second_side_input_or_a_broadcast_one_ends_the_chain():
    prepared = _prepare_two(lambda x, y: layers.elementwise_add(layers.relu(layers.elementwise_mul(x, y)), x))
    assert prepared.report.chains == [(0, 1)]  # mul's side is y, add's would be x
    x, y = _input("relu", (3, 5)), _input("relu", (3, 5))
    np.testing.assert_array_equal(prepared.run({"x": x, "y": y})[0], np.maximum(x * y, np.float32(0)) + x)

    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [3, 5])
        out = layers.relu(layers.elementwise_add(layers.relu(x), layers.data("b", [5])))
    prepared = Executor().prepare(prog, ["x", "b"], [out.name], halfway.Scope())
    assert prepared.report.chains == []
