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
    ("a:relu(X=a)", "inside its own inputs"),
    ("relu(X=a $)", "unexpected character"),
])
def test_bad_patterns(text, message):
    with pytest.raises(PassError, match=message):
        pattern(text)


def test_constraints_must_name_captures():
    with pytest.raises(PassError, match="unknown captures"):
        pattern(CONV_RELU, attrs={"cnv": {"groups": 1}})


def _centred(extra_reader=False, other_square=False):
    """x - mean(x), squared and divided by: the centred value read twice, as layer_norm's."""
    prog = halfway.Program()
    block = prog.global_block()
    block.create_var("x", shape=[2, 4], need_check_feed=True)
    for name in ("m", "d", "d2", "sq", "y", "z"):
        block.create_var(name, shape=[2, 4])
    block.append_op("reduce_mean", {"X": "x"}, {"Out": "m"}, {"dim": [-1], "keep_dim": True})
    block.append_op("elementwise_sub", {"X": "x", "Y": "m"}, {"Out": "d"})
    block.append_op("elementwise_sub", {"X": "x", "Y": "m"}, {"Out": "d2"})
    block.append_op("elementwise_mul", {"X": "d", "Y": "d2" if other_square else "d"}, {"Out": "sq"})
    div = block.append_op("elementwise_div", {"X": "d", "Y": "sq"}, {"Out": "y"})
    if extra_reader:
        block.append_op("relu", {"X": "d"}, {"Out": "z"})
    return div


CENTRED = "elementwise_div(X=d:elementwise_sub(X=x, Y=_), Y=elementwise_mul(X=d, Y=d))"


def test_an_op_read_again_by_name_is_one_op_read_at_each_place():
    div = _centred()
    found = pattern(CENTRED).match(div)
    assert found is not None and found.captures["d"].output("Out") == ("d",)
    assert [o.type for o in found.ops] == ["elementwise_sub", "elementwise_mul", "elementwise_div"]
    assert pattern(CENTRED).reads == {"d": 3}
    # the reference may come before the op it names
    div.set_input("X", ["sq"])
    div.set_input("Y", ["d"])
    assert pattern("elementwise_div(X=elementwise_mul(X=d, Y=d), Y=d:elementwise_sub(X=x, Y=_))").match(div)


@pytest.mark.parametrize("kind", ["another reader", "another value"])
def test_a_reference_needs_the_same_value_and_no_other_reader(kind):
    div = _centred(extra_reader=kind == "another reader", other_square=kind == "another value")
    assert pattern(CENTRED).match(div) is None


def test_a_shared_op_may_have_readers_outside_the_match():
    div = _centred(extra_reader=True)
    square = op("elementwise_mul", X=var("d"), Y=var("d"))
    plain = op("elementwise_div", X=op("elementwise_sub", "d", X=var("x"), Y=var("_")), Y=square)
    shared = op("elementwise_div", X=op("elementwise_sub", "d", shared=True, X=var("x"), Y=var("_")), Y=square)
    assert halfway.passes.Pattern(plain).match(div) is None
    assert halfway.passes.Pattern(shared).match(div) is not None


def test_a_commuting_op_matches_either_order_and_forgets_the_first_try():
    div = _centred()
    block = div.block
    block.create_var("w", shape=[4], persistable=True)
    block.create_var("out", shape=[2, 4])
    mul = block.append_op("elementwise_mul", {"X": "w", "Y": "y"}, {"Out": "out"})
    written = op("elementwise_mul", X=op("elementwise_div", "norm", X=var("a"), Y=var("_")), Y=var("w", persistable=True))
    commuting = op("elementwise_mul", commutes=True, X=op("elementwise_div", "norm", X=var("a"), Y=var("_")),
                   Y=var("w", persistable=True))
    assert halfway.passes.Pattern(written).match(mul) is None
    found = halfway.passes.Pattern(commuting).match(mul)
    assert found.captures == {"norm": div, "a": "d", "w": "w"} and found.ops == [div, mul]
    # the first try binds v to w, then fails on Y; the swapped try starts afresh
    any_first = op("elementwise_mul", commutes=True, X=var("v"), Y=var("p", persistable=True))
    assert halfway.passes.Pattern(any_first).match(mul).captures == {"p": "w", "v": "y"}
    with pytest.raises(PassError, match="binds X and Y"):
        op("relu", commutes=True, X=var("a"))
