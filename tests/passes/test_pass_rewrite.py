import logging

import numpy as np
import pytest

import halfway
from halfway.ir.errors import IRError, PassError
from halfway.ir.operator import Operator
from halfway.passes import Rule, Rules, apply_rules, pattern
from halfway.passes.rewrite import Decline, NearMiss, collect_near_misses, copy_op


def _relu_chain(n):
    """x -> relu -> relu -> ... (n relus) -> out_{n-1}."""
    prog = halfway.Program()
    block = prog.global_block()
    block.create_var("x", shape=[4], need_check_feed=True)
    prev = "x"
    for i in range(n):
        block.create_var(f"r{i}", shape=[4])
        block.append_op("relu", {"X": prev}, {"Out": f"r{i}"})
        prev = f"r{i}"
    return prog


def _collapse(ctx, *, outer, inner, x):
    return copy_op(inner, outputs={"Out": outer.output("Out")})


COLLAPSE = Rules([
    # relu + relu -> relu
    Rule(pattern("outer:relu(X=inner:relu(X=x))"), _collapse, "relu + relu -> relu"),
])


def test_rewrites_until_fixpoint_deterministically():
    prog = _relu_chain(9)
    stats = apply_rules(prog, COLLAPSE, name="collapse relus")
    ops = prog.global_block().ops
    assert [o.type for o in ops] == ["relu"] and ops[0].input("X") == ("x",) and ops[0].output("Out") == ("r8",)
    assert stats.total == 8 and stats.sweeps >= 2
    assert set(prog.global_block().vars) == {"x", "r8"}
    again = _relu_chain(9)
    assert apply_rules(again, COLLAPSE, name="collapse relus").counts == stats.counts


def test_fetched_intermediate_survives():
    prog = _relu_chain(3)
    block = prog.global_block()
    block.create_var("fetch", kind=halfway.VarKind.FETCH_LIST)
    block.append_op("fetch", {"X": "r1"}, {"Out": "fetch"}, {"col": 0})
    apply_rules(prog, COLLAPSE, name="collapse relus")
    assert [o.output_names() for o in block.ops if o.type == "relu"] == [["r1"], ["r2"]]
    halfway.verify(prog)


def test_rules_compose_and_index_by_root_type():
    sig = Rules([Rule(pattern("sigmoid(X=x)"), lambda ctx, x: None, "never")])
    both = COLLAPSE + sig
    assert len(both) == 2 and [r.name for r in both.for_type("relu")] == ["relu + relu -> relu"]
    assert [r.name for r in both.for_type("sigmoid")] == ["never"] and both.for_type("tanh") == ()


def test_loop_guard():
    def flip(ctx, *, op):
        return copy_op(op, type="sigmoid" if op.type == "relu" else "relu")

    flipping = Rules([Rule(pattern("op:relu|sigmoid(X=x)"), lambda ctx, op, x: flip(ctx, op=op), "flip")])
    with pytest.raises(PassError, match="'flipper' still changed the program after 5 sweeps.*flip"):
        apply_rules(_relu_chain(2), flipping, name="flipper", max_sweeps=5)


@pytest.mark.parametrize("fn, message", [
    (lambda ctx, outer, inner, x: Operator("relu", {"X": "r3"}, {"Out": outer.output("Out")}), "reads \\['r3'\\]"),
    (lambda ctx, outer, inner, x: Operator("relu", {"X": x}, {"Out": inner.output("Out")}), "'r1' is read by"),
    (lambda ctx, outer, inner, x: Operator("relu", {"X": x}, {"Out": "r5"}), "writes \\['r5'\\]"),
    (lambda ctx, outer, inner, x: "relu", "detached Operators"),
])
def test_replacement_contract(fn, message):
    prog = _relu_chain(4)
    prog.global_block().create_var("s", shape=[4])
    prog.global_block().append_op("sigmoid", {"X": "r3"}, {"Out": "s"})
    rules = Rules([Rule(pattern("outer:relu(X=inner:relu(X=x))"), fn, "bad rule")])
    with pytest.raises(PassError, match=f"bad rule.*{message}"):
        apply_rules(prog, rules, name="bad")


def test_declined_rewrite_undoes_new_vars_and_params():
    prog = _relu_chain(2)
    scope = halfway.Scope()

    def decline(ctx, *, outer, inner, x):
        ctx.new_var("tmp", like=x)
        ctx.new_param("p", np.ones(2, np.float32))
        return None

    stats = apply_rules(prog, Rules([Rule(pattern("outer:relu(X=inner:relu(X=x))"), decline, "decline")]),
                        name="decline", scope=scope)
    assert stats.total == 0 and len(scope) == 0 and set(prog.global_block().vars) == {"x", "r0", "r1"}


def test_new_param_needs_a_scope():
    def make(ctx, *, outer, inner, x):
        ctx.new_param("p", np.ones(2, np.float32))

    with pytest.raises(PassError, match="needs a Scope"):
        apply_rules(_relu_chain(2), Rules([Rule(pattern("outer:relu(X=inner:relu(X=x))"), make, "make")]), name="m")


def test_splice_replaces_many_places_at_once():
    prog = _relu_chain(4)
    block = prog.global_block()
    r = block.ops
    block.splice([([r[0], r[1]], [Operator("sigmoid", {"X": "x"}, {"Out": "r1"})]),
                  ([r[3]], [Operator("tanh", {"X": "r2"}, {"Out": "r3"})])])
    assert [o.type for o in block.ops] == ["sigmoid", "relu", "tanh"]
    assert [o.type for o, _, _ in block.uses("r2")] == ["tanh"] and block.uses("r0") == ()
    assert r[0].block is None
    with pytest.raises(IRError, match="replaced twice"):
        block.splice([([block.ops[0]], []), ([block.ops[0]], [])])
    with pytest.raises(IRError, match="at least one op"):
        block.splice([([], [Operator("relu", {"X": "x"}, {"Out": "r0"})])])
    assert [o.type for o in block.ops] == ["sigmoid", "relu", "tanh"]


def _declining(result):
    def fn(ctx, *, outer, inner, x):
        ctx.new_var("tmp", like=x)
        if isinstance(result, Exception):
            raise result
        return result(ctx) if callable(result) else result

    return Rules([Rule(pattern("outer:relu(X=inner:relu(X=x))"), fn, "relu + relu -> relu")])


@pytest.mark.parametrize("result, reason", [
    (lambda ctx: ctx.decline("x is not ready"), "x is not ready"),
    (Decline("raised with a reason"), "raised with a reason"),
    (None, "declined without a reason"),
])
def test_a_declining_rule_is_a_near_miss_with_its_reason(result, reason, caplog):
    prog = _relu_chain(2)
    before = prog.to_bytes()
    with collect_near_misses() as misses, caplog.at_level(logging.DEBUG, logger="halfway.passes"):
        stats = apply_rules(prog, _declining(result), name="decline")
    assert prog.to_bytes() == before and stats.total == 0 and stats.declined == 1
    assert misses == [NearMiss("relu + relu -> relu", "relu(X=r0) -> (Out=r1)", reason)]
    assert f"near miss: 'relu + relu -> relu' at relu(X=r0) -> (Out=r1): {reason}" in caplog.text


def test_near_misses_are_collected_only_inside_the_block():
    apply_rules(_relu_chain(2), _declining(None), name="outside")
    with collect_near_misses() as misses:
        pass
    assert misses == []


@pytest.mark.parametrize("fn, message", [
    (lambda ctx, outer, inner, y: None, r"captures \['x'\] but the function has no parameter"),
    (lambda ctx, outer, inner, x, extra: None, r"parameters \['extra'\] are no capture .*misspelled"),
    (lambda ctx, outer, **_: None, r"\*\*kwargs, which would hide a misspelled capture"),
])
def test_captures_are_checked_against_the_function_when_the_rule_is_made(fn, message):
    with pytest.raises(PassError, match=f"rule 'checked' .*{message}"):
        Rule(pattern("outer:relu(X=inner:relu(X=x))"), fn, "checked")


def test_optional_parameters_and_anonymous_vars():
    rule = Rule(pattern("outer:relu(X=inner:relu(X=_))"), lambda ctx, outer, inner, b=None: None, "optional")
    assert rule.pattern.captures == {"outer", "inner"}


def test_an_in_place_rule_edits_the_block_and_returns_true():
    def drop(ctx, *, op, x):
        for reader, _, _ in ctx.block.uses(op.output("Out")[0]):
            reader.rename_input(op.output("Out")[0], x)
        ctx.block.remove_op(op)
        return True

    prog = _relu_chain(3)
    prog.global_block().append_op("fetch", {"X": "r2"}, {"Out": "fetch"}, {"col": 0})
    rules = Rules([Rule(pattern("op:relu(X=x)", where={"op": lambda o: o.output("Out")[0] != "r2"}), drop,
                        "relu -> removed", in_place=True)])
    stats = apply_rules(prog, rules, name="drop")
    assert [o.type for o in prog.global_block().ops] == ["relu", "fetch"]
    assert prog.global_block().ops[0].input("X") == ("x",) and stats.counts["relu -> removed"] == 2

    bad = Rules([Rule(pattern("op:relu(X=x)"), lambda ctx, op, x: [op], "bad", in_place=True)])
    with pytest.raises(PassError, match="an in-place rule returns True or declines"):
        apply_rules(_relu_chain(1), bad, name="bad")


def test_a_replacing_rule_that_returns_true_is_an_error_naming_it():
    bad = Rules([Rule(pattern("op:relu(X=x)"), lambda ctx, op, x: True, "says true")])
    with pytest.raises(PassError, match="rule 'says true': only an in-place rule returns True"):
        apply_rules(_relu_chain(1), bad, name="bad")
