"""GELU as PyTorch's TorchScript exporter writes it becomes one gelu op in the default pipeline
(``fuse_activations``), checked against ONNX Runtime."""

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.executor import Executor
from tests.support.passcheck import op_types

ERF_GELU = [("Div", ["x", "root2"], "d"), ("Erf", ["d"], "e"), ("Add", ["e", "one"], "a"), ("Mul", ["x", "a"], "m"),
            ("Mul", ["m", "half"], "y")]
TANH_GELU = [("Mul", ["x", "half"], "h"), ("Pow", ["x", "three"], "p"), ("Mul", ["p", "k"], "c"),
             ("Add", ["x", "c"], "i"), ("Mul", ["i", "s"], "u"), ("Tanh", ["u"], "t"), ("Add", ["t", "one"], "a"),
             ("Mul", ["h", "a"], "y")]
CONSTANTS = {"root2": math.sqrt(2), "one": 1.0, "half": 0.5, "three": 3.0, "k": 0.044715, "s": math.sqrt(2 / math.pi)}


def _model(nodes: list[tuple[str, list[str], str]], constants: dict[str, float],
           shapes: dict[str, tuple[int, ...]] | None = None) -> onnx.ModelProto:
    """x [16, 24] -> a matmul (so x is computed, as in a model) -> the nodes -> y; the constants
    0-d unless ``shapes`` says otherwise."""
    shapes = shapes or {}
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input", "w"], ["x"])] + [helper.make_node(t, i, [o]) for t, i, o in nodes],
        "gelu", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [16, 24])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.random.default_rng(1).normal(0, 0.8, (24, 24)).astype(np.float32), "w")]
        + [numpy_helper.from_array(np.full(shapes.get(n, ()), v, np.float32), n) for n, v in constants.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fused_and_compared(model: onnx.ModelProto) -> halfway.Program:
    """The model after the default pipeline, whose output must match ONNX Runtime's."""
    x = np.random.default_rng(2).normal(0, 1.5, (16, 24)).astype(np.float32)
    x[0, :6] = [-40.0, -9.0, -3.0, 0.0, 3.0, 40.0]
    program, feeds, fetches, scope = halfway.load(model)
    result = halfway.PassManager().run(program, scope)
    (ours,) = Executor().run(result.program, feed={"input": x}, fetch_list=fetches, scope=result.scope)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {"input": x})
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=1e-6)
    return result.program


@pytest.mark.parametrize("nodes, approximate", [(ERF_GELU, False), (TANH_GELU, True)])
def test_gelu_written_out_becomes_one_gelu_op(nodes, approximate):
    program = _fused_and_compared(_model(nodes, CONSTANTS))
    gelu = [op for op in program.global_block().ops if op.type == "gelu"]
    assert len(gelu) == 1 and gelu[0].attr("approximate") is approximate
    assert not {"erf", "tanh", "pow", "elementwise_mul", "elementwise_add", "elementwise_div"} & set(op_types(program))


@pytest.mark.parametrize("nodes, constant", [(ERF_GELU, "half"), (ERF_GELU, "root2"), (TANH_GELU, "k"),
                                             (TANH_GELU, "three")])
def test_other_constants_are_not_gelu(nodes, constant):
    program = _fused_and_compared(_model(nodes, CONSTANTS | {constant: CONSTANTS[constant] * 1.01}))
    assert "gelu" not in op_types(program)


def test_a_constant_that_broadcasts_x_is_not_gelu():
    program = _fused_and_compared(_model(ERF_GELU, CONSTANTS, {"half": (1, 1, 1)}))
    assert "gelu" not in op_types(program)
