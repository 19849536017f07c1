import pytest

import halfway
from halfway.ir.errors import PassError
from halfway.passes import op, pattern, var


def _chain(consumers=1, fetch=False, relu_attrs=None):
    """x -> conv2d(w) -> t -> relu -> y, with extra readers of t on request."""
    prog = halfway.Program()
    block = prog.global_block()
    block.create_var("x", shape=[1, 2, 4, 4], need_check_feed=True)
    block.create_var("w", shape=[3, 2, 1, 1], persistable=True)
    for name in ("t", "y", "z0", "z1"):
        block.create_var(name, shape=[1, 3, 4, 4])
    conv = block.append_op("conv2d", {"Input": "x", "Filter": "w"}, {"Output": "t"})
    relu = block.append_op("relu", {"X": "t"}, {"Out": "y"}, relu_attrs)
    for i in range(consumers - 1):
        block.append_op("sigmoid", {"X": "t"}, {"Out": f"z{i}"})
    if fetch:
        block.create_var("fetch", kind=halfway.VarKind.FETCH_LIST)
        block.append_op("fetch", {"X": "t"}, {"Out": "fetch"}, {"col": 0})
    return prog, conv, relu


CONV_RELU = "act:relu(X=conv:conv2d(Input=x, Filter=w:param))"


def test_text_and_builder_forms_agree():
    built = op("relu", "act", X=op("conv2d", "conv", Input=var("x"), Filter=var("w", persistable=True)))
    parsed = pattern(CONV_RELU)
    assert parsed.root == built
    assert parsed.root_types == {"relu"}


def test_match_captures_ops_and_vars():
    prog, conv, relu = _chain()
    found = pattern(CONV_RELU).match(relu)
    assert found.captures == {"act": relu, "conv": conv, "x": "x", "w": "w"}
    assert found.ops == [conv, relu]
    assert pattern(CONV_RELU).match(conv) is None


@pytest.mark.parametrize("kind", ["two consumers", "fetched"])
def test_intermediate_read_elsewhere_never_matches(kind):
    prog, _, relu = _chain(consumers=2) if kind == "two consumers" else _chain(fetch=True)
    assert pattern(CONV_RELU).match(relu) is None


def test_constraints_attr_param_and_slots():
    prog, conv, relu = _chain()
    assert pattern(CONV_RELU, attrs={"conv": {"groups": 1}}).match(relu) is not None
    assert pattern(CONV_RELU, attrs={"conv": {"groups": 2}}).match(relu) is None
    assert pattern(CONV_RELU, attrs={"conv": {"groups": lambda g: g > 1}}).match(relu) is None
    assert pattern("act:relu(X=conv:conv2d(Input=x:param, Filter=w))").match(relu) is None
    assert pattern(CONV_RELU, where={"x": lambda v: v.shape == (1, 2, 4, 4)}).match(relu) is not None
    float16_x = op("relu", X=op("conv2d", Input=var("x", dtype="float16"), Filter=var("w")))
    assert halfway.passes.Pattern(float16_x).match(relu) is None
    float32_x = op("relu", X=op("conv2d", Input=var("x", dtype="float32"), Filter=var("w")))
    assert halfway.passes.Pattern(float32_x).match(relu) is not None
    # an unnamed extra input slot blocks a closed pattern, not an open one
    prog.global_block().create_var("r", shape=[1, 3, 4, 4])
    conv.set_input("ResidualData", ["r"])
    assert pattern(CONV_RELU).match(relu) is None
    assert pattern("act:relu(X=conv:conv2d(Input=x, Filter=w:param, ...))").match(relu) is not None


def test_claimed_ops_and_repeated_captures():
    prog, conv, relu = _chain()
    assert pattern(CONV_RELU).match(relu, claimed={id(conv): conv}) is None
    block = prog.global_block()
    block.create_var("s", shape=[1, 3, 4, 4])
    add = block.append_op("elementwise_add", {"X": "y", "Y": "y"}, {"Out": "s"})
    assert pattern("elementwise_add(X=a, Y=a)").match(add).captures == {"a": "y"}
    assert pattern("elementwise_add(X=a, Y=b)").match(add).captures == {"a": "y", "b": "y"}
    add.set_input("Y", ["t"])
    assert pattern("elementwise_add(X=a, Y=a)").match(add) is None


def test_lists_and_output_slot():
    prog = halfway.Program()
    block = prog.global_block()
    for name in ("a", "b", "c"):
        block.create_var(name, shape=[2])
    concat = block.append_op("concat", {"X": ["a", "b"]}, {"Out": "c"})
    assert pattern("concat(X=[p, q])").match(concat).captures == {"p": "a", "q": "b"}
    assert pattern("concat(X=[p])").match(concat) is None
    prog, conv, relu = _chain()
    assert pattern("relu(X=conv2d(Input=x, Filter=w).Output)").match(relu) is not None
    assert pattern("relu(X=conv2d(Input=x, Filter=w).Other)").match(relu) is None


@pytest.mark.parametrize("text, message", [
    ("relu(X=", "expected"),
    ("x", "root must be an op"),
    ("relu(X=a:weird)", "unknown var flag"),
    ("relu(X=a) extra", "unexpected"),
    ("a:relu(X=a)", "for an op and a var"),
    ("relu(X=a $)", "unexpected character"),
])
def test_bad_patterns(text, message):
    with pytest.raises(PassError, match=message):
        pattern(text)


def test_constraints_must_name_captures():
    with pytest.raises(PassError, match="unknown captures"):
        pattern(CONV_RELU, attrs={"cnv": {"groups": 1}})
