"""The ONNX "light" model zoo shipped inside the onnx package, for tests and benchmarks.

Each model comes with the output ONNX's backend tests expect for their dummy input (``arange(n)
/ n`` reshaped to the input's shape). The models hold their weights as ``ConstantOfShape``
nodes (constant fills); ``with_random_weights`` replaces them by seeded random initializers
(He-scaled, positive where a batch norm or a scale needs it) so outputs depend on every weight.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

__all__ = ["LIGHT_DIR", "LIGHT_MODELS", "light_model", "dummy_inputs", "expected_output", "with_random_weights",
           "ort_session"]

LIGHT_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"
LIGHT_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
                "squeezenet", "vgg19", "zfnet512"]


def light_model(name: str) -> onnx.ModelProto:
    return onnx.load(LIGHT_DIR / f"light_{name}.onnx")


def model_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers."""
    inits = {t.name for t in model.graph.initializer}
    return [v for v in model.graph.input if v.name not in inits]


def dummy_inputs(model: onnx.ModelProto, seed: int | None = None) -> dict[str, np.ndarray]:
    """ONNX's backend-test input (``arange(n) / n``), or seeded uniform [0, 1) values."""
    feeds = {}
    for value in model_inputs(model):
        shape = tuple(d.dim_value or 1 for d in value.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        if seed is None:
            feeds[value.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
        else:
            feeds[value.name] = np.random.default_rng(seed).random(shape, np.float32)
    return feeds


def expected_output(name: str) -> np.ndarray:
    return numpy_helper.to_array(onnx.load_tensor(str(LIGHT_DIR / f"light_{name}_output_0.pb")))


_POSITIVE_INPUTS = {("BatchNormalization", 1), ("BatchNormalization", 4), ("Mul", 1), ("Mul", 0)}


def with_random_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy whose ConstantOfShape nodes of constant shape are initializers of random values."""
    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inits = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    consumers = {name: (node.op_type, i) for node in graph.node for i, name in enumerate(node.input)}
    kept = []
    for node in graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            kept.append(node)
            continue
        shape = tuple(int(d) for d in inits[node.input[0]])
        value = _random(rng, shape, consumers.get(node.output[0]))
        graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
        if model.ir_version < 4:
            graph.input.append(helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, shape))
    del graph.node[:]
    graph.node.extend(kept)
    return out


def _random(rng: np.random.Generator, shape: tuple[int, ...], consumer: tuple[str, int] | None) -> np.ndarray:
    if len(shape) >= 2:
        fan_in = int(np.prod(shape[1:]))
        return rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / fan_in))
    if consumer in _POSITIVE_INPUTS:
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)


def ort_session(model: onnx.ModelProto, threads: int = 2):
    """An ONNX Runtime CPU session with ``threads`` intra-op threads; the calling test skips
    without onnxruntime."""
    onnxruntime = pytest.importorskip("onnxruntime")

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # no warnings about the light models' unused shape initializers
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
