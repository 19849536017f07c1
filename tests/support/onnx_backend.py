"""A small ONNX backend (``onnx.backend.base.Backend``) running models through halfway's
importer and the numpy executor, for ONNX's backend test suite.

halfway programs have static shapes and take shape-like arguments (a Reshape's shape, a
Slice's bounds, axes, pads, split sizes) as constants, so the model is imported when it is
run, for the shapes of the inputs given, with the graph inputs that feed only such argument
positions (``STATIC_ARGUMENTS``) bound as constants. Every other input is fed at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

from halfway.executor import Executor
from halfway.frontends.onnx import load
from halfway.frontends.onnx_export import to_onnx
from halfway.ir.program import Program
from halfway.ir.scope import Scope

__all__ = ["HalfwayBackend", "ExportingBackend", "HalfwayRep", "STATIC_ARGUMENTS", "static_inputs", "bind_inputs"]


STATIC_ARGUMENTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,),
    "ConstantOfShape": (0,), "Dropout": (1, 2), "Expand": (1,), "Tile": (1,),
}
"""ONNX op -> the input positions halfway needs to be constants."""


def static_inputs(model: onnx.ModelProto) -> set[str]:
    """Graph inputs whose values flow only into ``STATIC_ARGUMENTS`` positions, directly or
    through computations (a shape subgraph) whose results do."""
    graph = model.graph
    uses: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, i))
    outputs = {o.name for o in graph.output}
    memo: dict[str, bool] = {}

    def static(name: str) -> bool:
        if name not in memo:
            memo[name] = False  # a cycle (none in a valid graph) counts as dynamic
            memo[name] = name not in outputs and all(
                i in STATIC_ARGUMENTS.get(node.op_type, ()) or all(static(o) for o in node.output if o)
                for node, i in uses.get(name, []))
        return memo[name]

    return {v.name for v in graph.input if uses.get(v.name) and static(v.name)}


def bind_inputs(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of ``model`` where the graph inputs named in ``values`` are initializers."""
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    for name, value in values.items():
        bound.graph.initializer.append(numpy_helper.from_array(value, name))
    return bound


class HalfwayRep(BackendRep):
    """A node test's model as halfway runs it; ``exported``: written back out as ONNX by halfway's
    exporter and run by ONNX Runtime instead (at the model's own opset, 17 at least)."""

    def __init__(self, model: onnx.ModelProto, exported: bool = False) -> None:
        self.model = model
        self.exported = exported
        inits = {t.name for t in model.graph.initializer}
        self.input_names = [v.name for v in model.graph.input if v.name not in inits]
        self.static = static_inputs(model)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        values = dict(inputs) if isinstance(inputs, dict) else dict(zip(self.input_names, _listed(inputs)))
        values = {name: np.asarray(value) for name, value in values.items()}
        model = bind_inputs(self.model, {n: v for n, v in values.items() if n in self.static})
        fed = {name: value for name, value in values.items() if name not in self.static}
        program, feeds, fetches, scope = load(model, input_shapes={n: v.shape for n, v in fed.items()})
        if self.exported:
            return tuple(_run_exported(model, program, scope, feeds, fetches, fed))
        return tuple(Executor().run(program, {n: fed[n] for n in feeds}, fetches, scope))


def _run_exported(model: onnx.ModelProto, program: Program, scope: Scope, feeds: Sequence[str],
                  fetches: Sequence[str], fed: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    opset = max([o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] + [17])
    exported = to_onnx(program, scope, feeds, fetches, opset=opset)
    onnx.checker.check_model(exported, full_check=True)
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(exported.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(list(fetches), {n: fed[n] for n in feeds})


def _listed(inputs: Any) -> Sequence[Any]:
    return [inputs] if isinstance(inputs, np.ndarray) else list(inputs)


class HalfwayBackend(Backend):
    exported = False

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> HalfwayRep:
        return HalfwayRep(model, cls.exported)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


class ExportingBackend(HalfwayBackend):
    """halfway's import, then its ONNX export run by ONNX Runtime."""

    exported = True
