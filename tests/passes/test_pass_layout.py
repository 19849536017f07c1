"""simplify_layout: chains of unsqueeze2/transpose2/reshape2 become one op or none, expands a
binary op does itself go; each rewrite matches ONNX Runtime at several input shapes, and the
near misses stay as they were."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)
SIZES = [(2, 3), (1, 5), (3, 1)]
"""(batch, seq) of the runs compared with ONNX Runtime."""


def _simplified(nodes, inits=(), inputs=(("x", ["batch", 2, "seq", 4]),)):
    """The model imported, run through simplify_layout and dce, checked against ONNX Runtime at
    ``SIZES`` (each input's named dims set by name); returns the op types left."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info(nodes[-1].output[0], F, None)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    program, feeds, fetches, scope = halfway.load(model)
    result = halfway.PassManager("simplify_layout,dce").run(program, scope)
    prepared = halfway.Executor().prepare(result.program, feeds, fetches, result.scope)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch, seq in SIZES:
        sizes = {"batch": batch, "seq": seq}
        feed = {n: RNG.standard_normal([sizes.get(d, d) for d in dims]).astype(np.float32) for n, dims in inputs}
        np.testing.assert_allclose(prepared.run(feed)[0], session.run(None, feed)[0], rtol=1e-6)
    return [op.type for op in result.program.global_block().ops if op.type not in ("feed", "fetch")]


def _consts(**values):
    return [(name, np.array(value, np.int64)) for name, value in values.items()]


def test_unsqueeze_chains_become_one_unsqueeze():
    nodes = [helper.make_node("Unsqueeze", ["x", "a"], ["u"]), helper.make_node("Unsqueeze", ["u", "b"], ["v"]),
             helper.make_node("Unsqueeze", ["u", "c"], ["w"]), helper.make_node("Add", ["v", "w"], ["y"])]
    types = _simplified(nodes, _consts(a=[0], b=[3], c=[3]))
    assert types.count("unsqueeze2") == 2  # u went with its last reader


@pytest.mark.parametrize("second, left", [([0, 2, 1, 3], []), ([0, 3, 1, 2], ["transpose2"])])
def test_transpose_chains_become_one_transpose_or_none(second, left):
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["t"], ["u"], perm=second), helper.make_node("Relu", ["u"], ["y"])]
    assert _simplified(nodes) == [*left, "relu"]


def _k_transposed(perm, back):
    """x [B, 2, S, 4] viewed as [B*2, S, 4], transposed by ``perm``, viewed as [B, 2] + x's dims
    ``back`` (a shape vector: slices of x's shape)."""
    pieces = [f"d{axis}" for axis in back]
    return [helper.make_node("Shape", ["x"], ["shape"]),
            *[helper.make_node("Slice", ["shape", f"at{axis}", f"at{axis + 1}"], [f"d{axis}"]) for axis in range(4)],
            helper.make_node("Concat", ["minus", "d2", "d3"], ["merged"], axis=0),
            helper.make_node("Reshape", ["x", "merged"], ["m"]),
            helper.make_node("Transpose", ["m"], ["t"], perm=perm),
            helper.make_node("Concat", ["d0", "d1", *pieces], ["split"], axis=0),
            helper.make_node("Reshape", ["t", "split"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]


_K_CONSTS = _consts(minus=[-1], **{f"at{axis}": [axis] for axis in range(5)})


def test_a_view_transposed_and_viewed_back_is_one_transpose():
    types = _simplified(_k_transposed([0, 2, 1], back=[3, 2]), _K_CONSTS)
    assert types == ["transpose2", "relu"]


def test_a_transpose_that_moves_the_merged_dim_stays():
    types = _simplified(_k_transposed([1, 0, 2], back=[2, 3]), _K_CONSTS)
    assert types.count("reshape2") == 2 and "transpose2" in types


@pytest.mark.parametrize("back, sunk", [([0, 3, 1, 2], True), ([0, 3, 2, 1], False)])
def test_a_transpose_undoing_both_inputs_of_a_binary_op_goes(back, sunk):
    inputs = (("x", ["batch", 2, "seq", 4]), ("z", ["batch", 2, "seq", 4]))
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["z"], ["b"], perm=[0, 2, 3, 1]),
             helper.make_node("Relu", ["a"], ["a2"]),  # a's transpose has another reader: it stays
             helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Transpose", ["s"], ["t"], perm=back),
             helper.make_node("Relu", ["t"], ["r"]), helper.make_node("Transpose", ["a2"], ["a3"], perm=back),
             helper.make_node("Add", ["r", "a3"], ["y"])]
    types = _simplified(nodes, inputs=inputs)
    assert types.count("transpose2") == (2 if sunk else 4)


@pytest.mark.parametrize("target, kept", [("own", False), ("wider", True)])
def test_an_expand_that_a_binary_op_broadcasts_itself_goes(target, kept):
    nodes = [helper.make_node("Shape", ["x"], ["own"]), helper.make_node("Concat", ["three", "own"], ["wider"], axis=0),
             helper.make_node("Expand", ["c", target], ["e"]), helper.make_node("Min", ["x", "e"], ["y"])]
    inits = [("c", np.full((1, 1, 1, 4), 0.25, np.float32)), *_consts(three=[3])]
    types = _simplified(nodes, inits)
    assert ("expand_v2" in types) == kept
