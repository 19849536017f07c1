"""probe_dims: which run-time dims and shape-vector entries of an imported ONNX model are equal,
and which it must not claim (clipped slices, thresholds, comparisons that depend on the size)."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.passes.dims import probe_dims

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _table(nodes, inits=(), inputs=(("x", F, ["batch", "seq", 4]),)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(nodes[-1].output[0], F, None)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    program, _, _, scope = halfway.load(model)
    return probe_dims(program.global_block(), scope)


def _shape_of(source: str, out: str) -> list:
    """``out`` = a slice of ``source``'s shape, between the bounds ``_bounds(out, ...)`` gives."""
    return [helper.make_node("Shape", [source], [f"{out}.all"]),
            helper.make_node("Slice", [f"{out}.all", f"{out}.s", f"{out}.e"], [out])]


def _bounds(out: str, start: int, end: int) -> list:
    return [(f"{out}.s", np.array([start], np.int64)), (f"{out}.e", np.array([end], np.int64))]


def test_dims_follow_transposes_and_elementwise_ops():
    table = _table([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]), helper.make_node("Relu", ["t"], ["y"])])
    batch, seq, four = table.dims_of("x")
    assert four == 4 and batch != seq
    assert table.dims_of("y") == (seq, batch, 4)


def test_a_reshape_back_to_the_inputs_dims_has_them():
    """[B, S, 4] -> [B*S, 4] -> [B, S, 2, 2] by a shape vector made of x's own dims."""
    nodes = [helper.make_node("Reshape", ["x", "rows"], ["flat"]), *_shape_of("x", "lead"),
             helper.make_node("Concat", ["lead", "heads"], ["target"], axis=0),
             helper.make_node("Reshape", ["flat", "target"], ["y"])]
    table = _table(nodes, [("rows", np.array([-1, 4], np.int64)), ("heads", np.array([2, 2], np.int64)),
                           *_bounds("lead", 0, 2)])
    batch, seq, _ = table.dims_of("x")
    flat = table.dims_of("flat")[0]
    assert flat not in (batch, seq)
    assert table.vector("target") == (batch, seq, 2, 2)
    assert table.dims_of("y") == (batch, seq, 2, 2)


def test_a_slice_clipped_at_a_size_is_not_that_size():
    """x[:, :3] is 3 wide only where seq >= 3; x[:, 1:] is none of x's dims."""
    nodes = [helper.make_node("Slice", ["x", "zero", "three", "one"], ["head"]),
             helper.make_node("Slice", ["x", "one", "big", "one"], ["tail"]),
             helper.make_node("Add", ["head", "head"], ["y"])]
    table = _table(nodes, [("zero", np.array([0], np.int64)), ("three", np.array([3], np.int64)),
                           ("one", np.array([1], np.int64)), ("big", np.array([2**62], np.int64))])
    batch, seq, _ = table.dims_of("x")
    assert table.dims_of("head")[1] not in (3, seq)
    assert table.dims_of("tail")[1] not in (seq, batch)


def test_thresholds_on_sizes_stay_unknown():
    """min(seq, 512) looks constant at large sizes; min(batch, seq) is either one."""
    nodes = [*_shape_of("x", "b"), *_shape_of("x", "s"),
             helper.make_node("Min", ["s", "limit"], ["clipped"]), helper.make_node("Min", ["b", "s"], ["least"]),
             helper.make_node("Concat", ["clipped", "least"], ["both"], axis=0),
             helper.make_node("Relu", ["x"], ["y"])]
    table = _table(nodes, [("limit", np.array([512], np.int64)), *_bounds("b", 0, 1), *_bounds("s", 1, 2)])
    assert table.vector("s") == (table.dims_of("x")[1],)
    assert table.vector("clipped") is None and table.vector("both") is None


def test_a_comparison_is_followed_only_where_every_size_agrees():
    """shape == -1 is false at every size (a symbol is never negative); shape == 1 depends on it."""
    nodes = [*_shape_of("x", "lead"),
             helper.make_node("Equal", ["lead", "minus"], ["never"]), helper.make_node("Equal", ["lead", "ones"], ["maybe"]),
             helper.make_node("Where", ["never", "ones", "lead"], ["kept"]),
             helper.make_node("Expand", ["x", "kept"], ["y"])]
    table = _table(nodes, [("minus", np.array([-1, -1, -1], np.int64)), ("ones", np.array([1, 1, 1], np.int64)),
                           *_bounds("lead", 0, 3)])
    batch, seq, _ = table.dims_of("x")
    assert table.vector("never") == (0, 0, 0) and table.vector("maybe") is None
    assert table.vector("kept") == (batch, seq, 4)
    assert table.dims_of("y") == table.dims_of("x")


def test_feed_dims_of_one_name_are_one_symbol():
    inputs = (("x", F, ["batch", "seq", 4]), ("m", I64, ["batch", "seq"]), ("z", F, ["rows", "seq", 4]))
    nodes = [helper.make_node("Relu", ["z"], ["zr"]), helper.make_node("Cast", ["m"], ["mf"], to=F),
             helper.make_node("Relu", ["x"], ["y"])]
    table = _table(nodes, inputs=inputs)
    batch, seq, _ = table.dims_of("x")
    assert table.dims_of("m") == (batch, seq)
    assert table.dims_of("z")[0] not in (batch, seq) and table.dims_of("z")[1] == seq
