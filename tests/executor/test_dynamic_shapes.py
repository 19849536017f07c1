"""Models with symbolic dims import without input shapes and run at any batch and length from one
import: shape arithmetic stays in the program, is computed on the host when the program is
prepared for the fed shapes (once per signature), and matches ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway

F, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(11)
SIGNATURES = [(2, 5), (1, 9), (3, 1), (2, 5)]
"""(batch, length) pairs the tests feed, one of them twice."""


def _model(nodes, inputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    # IR 8 (opsets up to 18): ONNX Runtime refuses IR versions newer than its own, which a newer
    # onnx package writes by default
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _ort(model, feed):
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feed)[0]


def _x(batch, length, width=4):
    return RNG.standard_normal((batch, length, width)).astype(np.float32)


def _check(model, make_feed, signatures=SIGNATURES):
    """One import (no input shapes), one prepared program, every signature against ONNX Runtime;
    returns the prepared program."""
    program, feeds, fetches, scope = halfway.load(model)
    prepared = halfway.Executor().prepare(program, feeds, fetches, scope)
    for batch, length in signatures:
        feed = make_feed(batch, length)
        got = prepared.run(feed)[0]
        want = _ort(model, feed)
        assert got.shape == want.shape, (batch, length)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=f"batch {batch}, length {length}")
    assert len(prepared.signatures) == len(set(signatures))
    return prepared


def _split_heads_model():
    """GPT-2's view: [B, S, 4] -> [B, S, 2, 2] by a shape built from Shape, Gather and Concat."""
    ints = lambda *v: np.array(v, np.int64)  # noqa: E731
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Gather", ["s", "one"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["b1", "n1", "heads"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["h"]),
             helper.make_node("Transpose", ["h"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Relu", ["t"], ["y"])]
    inits = [("zero", np.array(0, np.int64)), ("one", np.array(1, np.int64)), ("axes", ints(0)),
             ("heads", ints(2, 2))]
    return _model(nodes, [("x", F, ["batch", "seq", 4])], inits)


def test_a_shape_built_from_the_input_reshapes_at_every_signature():
    prepared = _check(_split_heads_model(), lambda b, s: {"x": _x(b, s)})
    ran = {op_type for _, op_type, _ in prepared.report.kernels}
    assert ran == {"reshape2", "transpose2", "relu"}, "the shape arithmetic ran with the program"


def test_fixed_input_shapes_fold_the_shape_arithmetic_at_import():
    program, *_ = halfway.load(_split_heads_model(), input_shapes={"x": [2, 5, 4]})
    assert [op.type for op in program.global_block().ops] == ["feed", "reshape2", "transpose2", "relu", "fetch"]


def test_position_ids_mask_and_embedding_of_a_bert_style_input():
    """Slice ends from the sequence length (position ids), an Expand to the input's shape (the
    mask), an embedding Gather of [B, S] ids, and a LayerNormalization over a static hidden dim."""
    nodes = [helper.make_node("Shape", ["ids"], ["s"]),
             helper.make_node("Slice", ["s", "one", "two"], ["len"]),
             helper.make_node("Slice", ["positions", "zero", "len", "one"], ["pos"]),
             helper.make_node("Gather", ["table", "ids"], ["words"]),
             helper.make_node("Gather", ["table", "pos"], ["places"]),
             helper.make_node("Add", ["words", "places"], ["summed"]),
             helper.make_node("Expand", ["mask_value", "s"], ["mask"]),
             helper.make_node("Unsqueeze", ["mask", "minus_one"], ["mask3"]),
             helper.make_node("Mul", ["summed", "mask3"], ["masked"]),
             helper.make_node("LayerNormalization", ["masked", "gamma", "beta"], ["y"], axis=-1)]
    inits = [("zero", np.array([0], np.int64)), ("one", np.array([1], np.int64)), ("two", np.array([2], np.int64)),
             ("minus_one", np.array([-1], np.int64)), ("positions", np.arange(16, dtype=np.int64)[None]),
             ("table", RNG.standard_normal((16, 4)).astype(np.float32)), ("mask_value", np.array(0.5, np.float32)),
             ("gamma", RNG.standard_normal(4).astype(np.float32)), ("beta", RNG.standard_normal(4).astype(np.float32))]
    model = _model(nodes, [("ids", I64, ["batch", "seq"])], inits)
    _check(model, lambda b, s: {"ids": RNG.integers(0, 16, (b, s)).astype(np.int64)})


def test_run_time_tile_pad_range_constant_of_shape_and_split():
    """Swin's window padding (Pad of pads computed from the shape), a Tile and a Range by the
    sequence length, ConstantOfShape of the input's shape, and Split into two of a dim only known
    at run time."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "one", "two"], ["len"]),
             helper.make_node("Mod", ["len", "two"], ["odd"]),
             helper.make_node("Concat", ["zeros5", "odd", "zeros1"], ["pads"], axis=0),
             helper.make_node("Pad", ["x", "pads"], ["padded"]),
             helper.make_node("Concat", ["one", "len", "one"], ["reps"], axis=0),
             helper.make_node("Tile", ["row", "reps"], ["tiled"]),
             helper.make_node("Squeeze", ["len", "zero"], ["len0"]),
             helper.make_node("Range", ["start", "len0", "step"], ["steps"]),
             helper.make_node("Cast", ["steps"], ["stepsf"], to=F),
             helper.make_node("Unsqueeze", ["stepsf", "minus_one"], ["column"]),
             helper.make_node("ConstantOfShape", ["s"], ["ones"], value=numpy_helper.from_array(np.ones(1, np.float32))),
             helper.make_node("Add", ["x", "tiled"], ["a"]),
             helper.make_node("Mul", ["a", "column"], ["b"]),
             helper.make_node("Sub", ["b", "ones"], ["c"]),
             helper.make_node("Split", ["c"], ["c0", "c1"], axis=1, num_outputs=2),
             helper.make_node("Concat", ["c1", "c0"], ["swapped"], axis=1),
             helper.make_node("ReduceSum", ["padded"], ["total"], keepdims=0),
             helper.make_node("Add", ["swapped", "total"], ["y"])]
    inits = [("zero", np.array([0], np.int64)), ("one", np.array([1], np.int64)), ("two", np.array([2], np.int64)),
             ("zeros5", np.zeros(4, np.int64)), ("zeros1", np.zeros(1, np.int64)),
             ("minus_one", np.array([-1], np.int64)), ("row", RNG.standard_normal((1, 1, 4)).astype(np.float32)),
             ("start", np.array(0, np.int64)), ("step", np.array(1, np.int64))]
    model = _model(nodes, [("x", F, ["batch", "seq", 4])], inits, opset=18)
    _check(model, lambda b, s: {"x": _x(b, s)}, signatures=[(2, 4), (1, 6), (3, 2), (2, 4)])


def test_default_passes_keep_a_dynamic_program_exact():
    model = _split_heads_model()
    program, feeds, fetches, scope = halfway.load(model)
    result = halfway.PassManager().run(program, scope, fetch=fetches)
    prepared = halfway.Executor().prepare(result.program, feeds, fetches, result.scope)
    for batch, length in SIGNATURES:
        feed = {"x": _x(batch, length)}
        np.testing.assert_allclose(prepared.run(feed)[0], _ort(model, feed), rtol=1e-6)


def test_signatures_are_kept_up_to_the_capacity_least_recent_out():
    program, feeds, fetches, scope = halfway.load(_split_heads_model())
    prepared = halfway.Executor().prepare(program, feeds, fetches, scope)
    prepared._capacity = 2
    for length in (1, 2, 1, 3):
        prepared.run({"x": _x(1, length)})
    assert prepared.signatures == [((1, 1, 4),), ((1, 3, 4),)]


def test_runs_from_several_threads_at_several_signatures():
    from concurrent.futures import ThreadPoolExecutor

    model = _split_heads_model()
    program, feeds, fetches, scope = halfway.load(model)
    prepared = halfway.Executor().prepare(program, feeds, fetches, scope)
    feeds_ = [{"x": _x(1 + i % 3, 2 + i % 4)} for i in range(24)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda f: prepared.run(f)[0], feeds_))
    for feed, got in zip(feeds_, results):
        np.testing.assert_allclose(got, _ort(model, feed), rtol=1e-6)


@pytest.mark.opencl
def test_opencl_runs_a_dynamic_program_per_signature():
    model = _split_heads_model()
    program, feeds, fetches, scope = halfway.load(model)
    prepared = halfway.Executor(halfway.OpenCLPlace()).prepare(program, feeds, fetches, scope)
    for batch, length in SIGNATURES:
        feed = {"x": _x(batch, length)}
        np.testing.assert_allclose(prepared.run(feed)[0], _ort(model, feed), rtol=1e-6)
