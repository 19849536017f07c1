"""frontends.onnx.genai: MatMulNBits' weights dequantized as ONNX Runtime computes them (2-, 4- and
8-bit blocks, packed zero points, zero points of the scales' dtype, none), the contrib ops it
does not rewrite named, and GroupQueryAttention's sliding windows read."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from halfway.frontends.onnx.context import ConversionError
from halfway.frontends.onnx.genai import attention_windows, dequantize, has_contrib_ops, lower_contrib_ops

K, N = 48, 8


def _model(node, initializers):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, N])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])


def _matmul_nbits(bits, block, zeros):
    rng = np.random.default_rng(bits * block)
    blocks = -(-K // block)
    packed = rng.integers(0, 256, (N, blocks, block * bits // 8), dtype=np.uint8)
    scales = rng.uniform(0.01, 0.1, N * blocks).astype(np.float32)
    if zeros == "packed":
        zero = rng.integers(0, 256, N * -(-blocks * bits // 8), dtype=np.uint8)
    else:
        zero = rng.uniform(0, 2 ** bits - 1, N * blocks).astype(np.float32) if zeros == "float" else None
    inits = [numpy_helper.from_array(packed, "b"), numpy_helper.from_array(scales, "scales")]
    inputs = ["a", "b", "scales"]
    if zero is not None:
        inits.append(numpy_helper.from_array(zero, "zeros"))
        inputs.append("zeros")
    node = helper.make_node("MatMulNBits", inputs, ["y"], domain="com.microsoft", K=K, N=N, bits=bits,
                            block_size=block)
    return _model(node, inits), (packed, scales, zero)


@pytest.mark.parametrize("bits, block, zeros", [(4, 16, "packed"), (4, 32, None), (4, 16, "float"),
                                                (8, 16, "packed"), (8, 32, None), (2, 16, "packed")])
def test_dequantized_weights_give_onnxruntimes_product(bits, block, zeros):
    onnxruntime = pytest.importorskip("onnxruntime")
    model, (packed, scales, zero) = _matmul_nbits(bits, block, zeros)
    a = np.random.default_rng(0).standard_normal((2, K)).astype(np.float32)
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # an ONNX Runtime without this bit width
        pytest.skip(f"ONNX Runtime does not run it: {e}")
    want = session.run(None, {"a": a})[0]
    got = a @ dequantize(packed, scales, zero, N, K, bits, block)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_matmul_nbits_becomes_a_matmul_by_its_weight():
    model, _ = _matmul_nbits(4, 16, "packed")
    lowered = lower_contrib_ops(model)
    assert has_contrib_ops(model) and not has_contrib_ops(lowered)
    assert [n.op_type for n in lowered.graph.node] == ["MatMul"]
    assert [t.name for t in lowered.graph.initializer] == ["b.dequantized"]
    assert lowered.opset_import[0].version == 23


def test_contrib_ops_it_does_not_rewrite_are_named():
    node = helper.make_node("FastGelu", ["a"], ["y"], domain="com.microsoft", name="gelu_1")
    with pytest.raises(ConversionError, match=r"gelu_1 \(com.microsoft.FastGelu\): no rewrite of this com.microsoft "
                                              r"op \(rewritten: .*GroupQueryAttention"):
        lower_contrib_ops(_model(node, []))


def test_sliding_windows_are_read_in_graph_order():
    nodes = [helper.make_node("GroupQueryAttention", ["a"] * 7, [f"y{i}", f"k{i}", f"v{i}"], domain="com.microsoft",
                              num_heads=2, kv_num_heads=1, **({"local_window_size": w} if w is not None else {}))
             for i, w in enumerate([4, -1, None, 16])]
    graph = helper.make_graph(nodes, "g", [], [])
    assert attention_windows(helper.make_model(graph)) == (4, 0, 0, 16)
