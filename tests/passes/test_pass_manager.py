import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import Executor
from halfway.ir.errors import PassError
from halfway.ir.operator import Operator
from halfway.passes import DEFAULT_PIPELINE, Pass, PassManager, PassResult, get_pass, parse_pipeline, register_pass


def _cnn():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3, 8, 8])
        y = layers.conv2d(x, 4, 3, padding=1)
        y = layers.batch_norm(y, act="relu")
        y = layers.fc(y, 5)
    scope = halfway.init_scope(prog, seed=0)
    return prog, scope, y.name


def _snapshot(scope):
    return {name: scope[name].copy() for name in scope}


@register_pass("test_break_ir")
def break_ir(program, scope, options):
    """Makes an op read a var nobody declares."""
    op = program.global_block().ops[0]
    op.set_input("Input", ["nowhere"])
    return PassResult(program, True)


@register_pass("test_clobber_scope", needs_scope=True)
def clobber_scope(program, scope, options):
    """Writes a new parameter, then fails."""
    scope.set("extra", np.zeros(1, np.float32))
    program.global_block().create_var("junk", shape=[1])
    raise ValueError("boom")


@register_pass("test_shadow_param", needs_scope=True)
def shadow_param(program, scope, options):
    """Writes over an existing parameter name."""
    name = program.persistable_vars()[0].name
    scope.set(name, np.zeros_like(scope[name]))
    return PassResult(program, True)


@register_pass("test_wrong_numbers")
def wrong_numbers(program, scope, options):
    """Turns the first relu into a sigmoid (a numeric change the verifier cannot see)."""
    block = program.global_block()
    relu = next(o for o in block.ops if o.type == "relu")
    block.replace_op(relu, [Operator("sigmoid", relu.inputs, relu.outputs)])
    return PassResult(program, True)


def test_pipeline_forms():
    assert [p.name for p in parse_pipeline("fuse_conv_bn, fuse_conv_act")] == ["fuse_conv_bn", "fuse_conv_act"]
    inst = get_pass("fuse_fc")
    pm = PassManager(["fuse_conv_bn", inst], before=["test_wrong_numbers"], after=["fuse_conv_act"])
    assert pm.names == ["test_wrong_numbers", "fuse_conv_bn", "fuse_fc", "fuse_conv_act"]
    assert pm.passes[2] is inst
    names = DEFAULT_PIPELINE.split(",")
    assert names[names.index("fuse_conv_bn"):][:5] == ["fuse_conv_bn", "fuse_bn_relu_conv", "reorder_pool_conv",
                                                       "fuse_conv_act", "fuse_fc"]
    assert names.index("fuse_activations") < names.index("fuse_conv_act")  # a conv's SiLU reaches its epilogue
    with pytest.raises(PassError, match="no pass named 'nope'"):
        PassManager("fuse_fc,nope")
    with pytest.raises(PassError, match="pass names or Pass instances"):
        PassManager([42])


def test_runs_on_a_copy_and_keeps_the_callers_scope():
    prog, scope, out = _cnn()
    before, values = prog.to_bytes(), _snapshot(scope)
    result = PassManager("fuse_conv_bn,fuse_conv_act,fuse_fc", count_ops=True, timing=True).run(prog, scope)
    assert prog.to_bytes() == before and set(scope) == set(values)
    assert all(np.array_equal(scope[n], v) for n, v in values.items())
    assert result.modified and result.scope.parent is scope and len(result.scope) == 2
    bn, act, fc = result.records
    assert bn.op_delta == {"batch_norm": -1} and bn.stats["rewrites"] == 1
    assert act.op_delta == {"conv2d": -1, "elementwise_add": -1, "relu": -1, "fused_conv2d": 1}
    assert fc.op_delta == {"mul": -1, "elementwise_add": -1, "fc": 1}
    assert all(r.seconds >= 0 and r.cpu_seconds >= 0 for r in result.records)
    feed = {"x": np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    want = Executor().run(prog, feed, [out], scope)[0]
    got = Executor().run(result.program, feed, [out], result.scope)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_in_place_edits_the_given_program():
    prog, scope, _ = _cnn()
    result = PassManager("fuse_fc", in_place=True).run(prog, scope)
    assert result.program is prog and any(o.type == "fc" for o in prog.global_block().ops)
    assert result.records[0].seconds is None and result.records[0].op_delta == {}


def test_verifier_catches_a_broken_pass():
    prog, scope, _ = _cnn()
    before = prog.to_bytes()
    with pytest.raises(PassError, match="(?s)pass #1 .test_break_ir. failed.*nowhere") as info:
        PassManager("fuse_conv_bn,test_break_ir").run(prog, scope)
    assert isinstance(info.value.__cause__, halfway.VerifyError)
    assert prog.to_bytes() == before
    PassManager("test_break_ir", verify=False).run(prog, scope)


def test_failing_pass_leaves_program_and_scope_intact():
    prog, scope, _ = _cnn()
    before, values = prog.to_bytes(), _snapshot(scope)
    with pytest.raises(PassError, match="'test_clobber_scope' failed: ValueError: boom"):
        PassManager("fuse_conv_bn,test_clobber_scope").run(prog, scope)
    assert prog.to_bytes() == before and "extra" not in scope and set(scope) == set(values)
    with pytest.raises(PassError, match="test_shadow_param.*already exist"):
        PassManager("test_shadow_param").run(prog, scope)
    assert all(np.array_equal(scope[n], v) for n, v in values.items())


def test_dumps_before_and_after_each_pass(tmp_path):
    prog, scope, _ = _cnn()
    PassManager("fuse_conv_bn,fuse_fc", dump_dir=tmp_path / "ir").run(prog, scope)
    files = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert files == ["00_fuse_conv_bn.after.txt", "00_fuse_conv_bn.before.txt",
                     "01_fuse_fc.after.txt", "01_fuse_fc.before.txt"]
    assert "batch_norm(" in (tmp_path / "ir" / "00_fuse_conv_bn.before.txt").read_text()
    assert "batch_norm(" not in (tmp_path / "ir" / "00_fuse_conv_bn.after.txt").read_text()
    assert " fc(" in (tmp_path / "ir" / "01_fuse_fc.after.txt").read_text()


def test_debug_mode_catches_a_numeric_change():
    prog, scope, _ = _cnn()
    PassManager("fuse_conv_bn,fuse_conv_act,fuse_fc", debug=True).run(prog, scope)
    with pytest.raises(PassError, match="test_wrong_numbers.*changed the value of"):
        PassManager("fuse_conv_bn,test_wrong_numbers", debug=True).run(prog, scope)


def test_pass_instance_of_a_class():
    class Count(Pass):
        name = "count"

        def apply(self, program, scope):
            return PassResult(program, False, {"ops": len(program.global_block().ops)})

    prog, scope, _ = _cnn()
    result = PassManager([Count()]).run(prog, scope)
    assert result.records[0].stats == {"ops": len(prog.global_block().ops)} and not result.modified


def test_fetch_names_protect_outputs_of_a_program_without_fetch_ops():
    prog, scope, out = _cnn()
    block = prog.global_block()
    conv_out = next(o for o in block.ops if o.type == "conv2d").output("Output")[0]
    result = PassManager("fuse_conv_bn,fuse_conv_act,dce").run(prog, scope, fetch=[out, conv_out])
    assert result.program.fetch_names() == [out, conv_out] and prog.fetch_names() == []
    assert "fused_conv2d" not in {o.type for o in result.program.global_block().ops}
    with pytest.raises(PassError, match="cannot fetch \\['nope'\\]"):
        PassManager("fuse_fc").run(prog, scope, fetch=["nope"])
