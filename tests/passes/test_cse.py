"""cse: twins (one type, attrs and inputs; small parameters by value) are computed once; what
must stay apart stays apart."""

import numpy as np

import halfway
from halfway import layers
from halfway.ir.builder import append_op, create_parameter
from halfway.ir.initializers import Constant
from halfway.passes import get_pass
from tests.support.passcheck import add_fetch_ops, check_pass, op_types


def _one(op_type, inputs, **attrs):
    return append_op(op_type, inputs, attrs)["Out"][0]


def _masked_layers(value_b=-1e4, size=1):
    """Two layers each building ``where(c, 0, value)`` from one condition, then adding it to x."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4] if size == 1 else [2, size])
        c = layers.greater_than(x, create_parameter("zero", [], initializer=Constant(0.0)))
        h = x
        for value in (-1e4, value_b):
            fill = create_parameter("fill", [size], initializer=Constant(value))
            mask = _one("where", {"Condition": c, "X": create_parameter("keep", [size], initializer=Constant(0.0)),
                                  "Y": fill})
            h = _one("elementwise_add", {"X": h, "Y": mask})
    return prog, halfway.init_scope(prog), h.name


def _types(prog):
    return [op.type for op in prog.global_block().ops]


def _feed(size=4):
    return {"x": np.linspace(-1, 1, 2 * size, dtype=np.float32).reshape(2, size)}


def test_a_mask_built_per_layer_is_built_once():
    prog, scope, out = _masked_layers()
    result = check_pass("cse", prog, scope, _feed(), [out])
    assert result.stats["ops_merged"] == 1
    assert op_types(prog)["where"] == 1


def test_twins_of_twins_follow_in_one_sweep():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4])
        a, b = layers.relu(x), layers.relu(x)
        out = _one("elementwise_add", {"X": layers.exp(a), "Y": layers.exp(b)})
    scope = halfway.init_scope(prog)
    result = check_pass("cse", prog, scope, _feed(), [out.name])
    assert result.stats["ops_merged"] == 2 and _types(prog) == ["relu", "exp", "elementwise_add"]


def test_other_values_and_large_parameters_stay_apart():
    for kwargs in ({"value_b": -1e9}, {"size": 128}):
        prog, scope, out = _masked_layers(**kwargs)
        result = check_pass("cse", prog, scope, _feed(kwargs.get("size", 4)), [out])
        assert result.stats["ops_merged"] == 0, kwargs


def test_other_attrs_stay_apart():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4])
        out = _one("elementwise_add", {"X": layers.scale(x, 2.0), "Y": layers.scale(x, 3.0)})
    result = check_pass("cse", prog, halfway.init_scope(prog), _feed(), [out.name])
    assert result.stats["ops_merged"] == 0


def test_a_var_written_twice_stays():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4])
        h = layers.relu(x)
        layers.exp(h)
        append_op("tanh", {"X": h}, outputs={"Out": [h]})  # in place
        layers.exp(h)
    assert not get_pass("cse")(prog, halfway.init_scope(prog)).modified


def test_a_fetched_twin_keeps_its_name():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4])
        a, b = layers.exp(x), layers.exp(x)
    add_fetch_ops(prog, [b.name])
    result = get_pass("cse")(prog, halfway.init_scope(prog))
    assert not result.modified and _types(prog) == ["exp", "exp", "fetch"]
    del a


def test_random_ops_are_never_merged():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4])
        draws = [layers.dropout(x, 0.5, is_test=False) for _ in range(2)]
        _one("elementwise_add", {"X": draws[0], "Y": draws[1]})
    assert not get_pass("cse")(prog, halfway.init_scope(prog)).modified
