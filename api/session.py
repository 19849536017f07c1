"""``halfway.InferenceSession``: a model run as ONNX Runtime's ``InferenceSession`` runs one, so
that code written for ONNX Runtime runs on halfway by changing the import.

    session = halfway.InferenceSession("model.onnx", place="opencl")
    names = [i.name for i in session.get_inputs()]
    logits, = session.run(["logits"], {"image": image})

The model is loaded, run through the default pass pipeline (as ONNX Runtime optimizes its
graph by default; ``optimize=False`` runs it as imported) and prepared on the place once.
``get_inputs()`` and ``get_outputs()`` describe the model's inputs and outputs as ONNX Runtime's
``NodeArg``s do: a name, a shape whose free dims are their names (the ONNX model's dim_params)
or None, and a type such as ``tensor(float)``. ``run`` takes feeds as ONNX Runtime does: numpy
arrays of the inputs' dtypes (another dtype is an error, not a conversion), every input given,
no other name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
from attrs import frozen

from ..executor import Executor
from ..executor.place import Place
from ..executor.prepared import check_feeds
from ..ir.dtypes import DType
from ..ir.errors import FeedError
from .feed_roles import check_ids, feed_roles
from .models import Model, load_model
from .pipelines import run_passes
from .places import parse_place

__all__ = ["InferenceSession", "NodeArg", "onnx_type"]

_ONNX_TYPES = {DType.float32: "float", DType.float64: "double", DType.float8_e4m3fn: "float8e4m3fn",
               DType.float8_e5m2: "float8e5m2"}
"""DTypes whose ONNX type name is not their own."""

Dim = int | str | None


@frozen
class NodeArg:
    """An input or output as ONNX Runtime's ``NodeArg`` describes it."""

    name: str
    shape: list[Dim]
    type: str


def onnx_type(dtype: DType | None) -> str:
    """``tensor(float)`` for float32, as ONNX Runtime names a tensor type."""
    if dtype is None:
        return "tensor(undefined)"
    return f"tensor({_ONNX_TYPES.get(dtype, dtype.name)})"


class InferenceSession:
    """A model prepared on a place, run as ONNX Runtime runs one (see the module docstring).

    Args:
        path: any model ``halfway.load`` reads (an .onnx file, a Paddle model, ...).
        place: ``"cpu"``, ``"opencl"``, ``"opencl:N"`` or a ``halfway`` place.
        optimize: run the default pass pipeline (fusion) before preparing.

    Raises:
        HalfwayError: the model cannot be loaded or prepared, or the place opened.
    """

    def __init__(self, path: str | os.PathLike[str], place: str | Place = "cpu", *, optimize: bool = True) -> None:
        model = load_model(os.fspath(path))
        self._model = run_passes(model, None)[0] if optimize else model
        self._place = parse_place(place) if isinstance(place, str) else place
        self._roles = feed_roles(model.program, model.feed_names)
        self._prepared = Executor(self._place).prepare(self._model.program, self._model.feed_names,
                                                       self._model.fetch_names, self._model.scope)

    @property
    def place(self) -> Place:
        return self._place

    @property
    def model(self) -> Model:
        """The model as it runs (after the passes, with ``optimize``)."""
        return self._model

    def get_inputs(self) -> list[NodeArg]:
        return [self._node_arg(name) for name in self._model.feed_names]

    def get_outputs(self) -> list[NodeArg]:
        return [self._node_arg(name) for name in self._model.fetch_names]

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """The outputs ``output_names`` (None or empty: all, in the model's order) for
        ``input_feed`` (input name -> numpy array).

        Raises:
            FeedError: an unknown output name; a missing or unknown input, an array of another
                dtype or shape than the input's, or ids outside the embedding table they index
                (naming the input).
        """
        fetch_names = self._model.fetch_names
        wanted = list(output_names or fetch_names)
        unknown = [name for name in wanted if name not in fetch_names]
        if unknown:
            raise FeedError(f"unknown output name(s) {unknown}; the model's outputs are {fetch_names}")
        check_ids(self._roles, check_feeds(input_feed))
        results = dict(zip(fetch_names, self._prepared.run(input_feed)))
        return [results[name] for name in wanted]

    def _node_arg(self, name: str) -> NodeArg:
        var = self._model.program.global_block().var(name)
        shape: list[Dim] = [d if d >= 0 else (label or None) for d, label in zip(var.shape or (), var.dim_names())]
        return NodeArg(name, shape, onnx_type(var.dtype))
