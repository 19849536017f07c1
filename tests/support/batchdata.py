"""A small model with a symbolic batch dim for the batch-inference tests, rows to feed it, and
the single-process reference: halfway's Executor run on one row at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from halfway import Executor, PassManager, float16_transpile, load

__all__ = ["mlp_model", "mlp_numpy", "mlp_rows", "reference_rows", "FEATURES"]

FEATURES = 8


def _weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.standard_normal((FEATURES, 16)).astype(np.float32) / 3,
            rng.standard_normal(16).astype(np.float32) / 3, rng.standard_normal((16, 4)).astype(np.float32) / 3)


def mlp_model(path: Path, batch: int | str = "N") -> Path:
    """``y = relu(x @ w1 + b1) @ w2`` as ONNX at ``path``, x [batch, FEATURES] (``"N"``: symbolic)."""
    w1, b1, w2 = _weights()
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, FEATURES])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
                              [numpy_helper.from_array(w, n) for n, w in zip(("w1", "b1", "w2"), (w1, b1, w2))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def mlp_rows(count: int, seed: int) -> np.ndarray:
    """``count`` seeded rows for the model, [count, FEATURES]."""
    return np.random.default_rng(seed).standard_normal((count, FEATURES)).astype(np.float32)


def mlp_numpy(x: np.ndarray) -> np.ndarray:
    w1, b1, w2 = _weights()
    return np.maximum(x @ w1 + b1, 0) @ w2


def reference_rows(path: Path, rows: np.ndarray, *, fp16: bool = False) -> np.ndarray:
    """The model's output for each row, run alone (batch of one) by halfway's Executor after the
    default pipeline (and the float16 transpile)."""
    program, feeds, fetches, scope = load(str(path))
    result = PassManager().run(program, scope, fetch=fetches)
    program, scope = result.program, result.scope if result.scope is not None else scope
    if fp16:
        program, _ = float16_transpile(program, scope)
    executor = Executor()
    return np.concatenate([executor.run(program, {feeds[0]: row[None]}, fetches, scope)[0] for row in rows])
