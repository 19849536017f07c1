from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import Executor
from halfway.ir.builder import create_parameter
from halfway.ir.errors import PassError
from halfway.passes import PassManager
from tests.support.passcheck import fuse_and_compare, lively_params, op_types, random_cnn

FIXTURES = Path(__file__).parent.parent / "fixtures" / "paddle"


def _conv_bn(bias=True, conv_layout="NCHW", bn_layout="NCHW", groups=1, extra_reader=False):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 6, 5, 5] if conv_layout == "NCHW" else [2, 5, 5, 6])
        conv = layers.conv2d(x, 6, 3, padding=1, groups=groups, bias_attr=bias, data_format=conv_layout)
        y = layers.batch_norm(conv, data_layout=bn_layout, epsilon=1e-3)
        outs = [y.name] + ([layers.sigmoid(conv).name] if extra_reader else [])
    scope = halfway.init_scope(prog, seed=1)
    lively_params(scope, np.random.default_rng(2))
    return prog, scope, outs


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("groups", [1, 6])
def test_folds_into_conv_and_depthwise(bias, layout, groups):
    prog, scope, outs = _conv_bn(bias, layout, layout, groups)
    snapshot = {n: scope[n].copy() for n in scope}
    result = fuse_and_compare(prog, scope, "fuse_conv_bn", outs)
    conv_type = "depthwise_conv2d" if groups == 6 else "conv2d"
    assert op_types(result.program) == {conv_type: 1, "elementwise_add": 1}
    # new parameters under new names; the caller's arrays are untouched
    assert all(n.endswith("_0") and n not in snapshot for n in result.scope)
    assert set(scope) == set(snapshot) and all(np.array_equal(scope[n], v) for n, v in snapshot.items())
    halfway.verify(result.program)


@pytest.mark.parametrize("kind", ["two consumers", "fetched", "layouts differ"])
def test_near_misses_are_left_alone(kind):
    if kind == "layouts differ":
        prog, scope, outs = _conv_bn(bias=False, bn_layout="NHWC")
    else:
        prog, scope, outs = _conv_bn(bias=False, extra_reader=kind == "two consumers")
    if kind == "fetched":
        block = prog.global_block()
        conv_out = next(o for o in block.ops if o.type == "conv2d").output("Output")[0]
        block.create_var("fetch", kind=halfway.VarKind.FETCH_LIST)
        block.append_op("fetch", {"X": conv_out}, {"Out": "fetch"}, {"col": 0})
    result = fuse_and_compare(prog, scope, "fuse_conv_bn", outs)
    assert op_types(result.program)["batch_norm"] == 1 and not result.modified


def _matmul_bn(op_type, trans_y=False, trans_x=False):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [8, 5] if not trans_x else [5, 8])
        w = create_parameter("w", [7, 5] if trans_y else [5, 7])
        if op_type == "mul":
            h = layers.mul(x, w)
        else:
            h = layers.matmul(x, w, transpose_x=trans_x, transpose_y=trans_y)
        y = layers.batch_norm(h)
    scope = halfway.init_scope(prog, seed=3)
    lively_params(scope, np.random.default_rng(4))
    return prog, scope, [y.name]


@pytest.mark.parametrize("op_type, trans_y", [("matmul_v2", False), ("matmul_v2", True), ("mul", False)])
def test_folds_into_matmul_and_mul(op_type, trans_y):
    prog, scope, outs = _matmul_bn(op_type, trans_y)
    result = fuse_and_compare(prog, scope, "fuse_conv_bn", outs)
    assert op_types(result.program) == {op_type: 1, "elementwise_add": 1}


def test_transposed_input_is_left_alone():
    prog, scope, outs = _matmul_bn("matmul_v2", trans_x=True)
    assert not fuse_and_compare(prog, scope, "fuse_conv_bn", outs).modified


@pytest.mark.parametrize("seed", range(8))
def test_random_cnns_keep_their_outputs(seed):
    prog, scope, outs = random_cnn(seed)
    result = fuse_and_compare(prog, scope, "fuse_conv_bn", outs)
    for op in result.program.global_block().ops:
        if op.type == "batch_norm":
            producer = result.program.global_block().var(op.input("X")[0]).producer()
            assert producer is None or producer.type not in ("conv2d", "depthwise_conv2d")


def _fold_reshaped_bias(program, scope):
    """What constant folding makes of Paddle 3's reshape2(bias): a [1, C, 1, 1] parameter."""
    block = program.global_block()
    reshape = next(o for o in block.ops if o.type == "reshape2")
    out = reshape.output("Out")[0]
    scope[out] = scope[reshape.input("X")[0]].reshape(reshape.attr("shape"))
    block.var(out).persistable = True
    block.remove_op(reshape)
    block.remove_var(reshape.output("XShape")[0])


def test_paddle_resnet_matches_paddle_after_folding():
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / "resnet_tiny"))
    io = np.load(FIXTURES / "resnet_tiny_io.npz")
    _fold_reshaped_bias(program, scope)
    result = PassManager("fuse_conv_bn").run(program, scope)
    assert op_types(result.program)["batch_norm"] == 0
    got = Executor().run(result.program, {n: io[n] for n in feeds}, fetches, result.scope)
    np.testing.assert_allclose(got[0], io[fetches[0]], rtol=1e-5, atol=1e-6)


def test_needs_the_scope():
    prog, _, _ = _conv_bn()
    with pytest.raises(PassError, match="fuse_conv_bn.*Scope"):
        PassManager("fuse_conv_bn").run(prog)


@pytest.mark.parametrize("after_conv", [True, False])
def test_channel_scales_and_shifts_after_batch_norm_are_absorbed(after_conv):
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 4, 5, 5])
        y = layers.conv2d(x, 4, 3, padding=1, bias_attr=False) if after_conv else x
        y = layers.batch_norm(y)
        y = layers.elementwise_mul(y, create_parameter("s", [4]), axis=1)
        y = layers.elementwise_add(y, create_parameter("t", [1, 4, 1, 1]))
        y = layers.elementwise_mul(y, create_parameter("u", [5]))  # along W: not per channel
        y = layers.relu(y)
    scope = halfway.init_scope(prog, seed=11)
    lively_params(scope, np.random.default_rng(12))
    scope["t_0"] = np.random.default_rng(13).standard_normal((1, 4, 1, 1)).astype(np.float32)
    result = fuse_and_compare(prog, scope, "fuse_conv_bn", [y.name])
    expected = {"conv2d": 1, "elementwise_add": 1} if after_conv else {"batch_norm": 1}
    assert op_types(result.program) == {**expected, "elementwise_mul": 1, "relu": 1}
    assert result.records[0].stats["batch_norm + channel affine -> batch_norm"] == 2
