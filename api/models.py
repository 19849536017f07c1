"""Models as files hold them: loaded from any supported file and saved atomically. The command
line, ``halfway.api.batch``, ``halfway.api.ray`` and the demo all take a model this way; they run
it through passes with ``halfway.api.pipelines``, prepare it with ``halfway.api.prepare`` and
describe it with ``halfway.api.model_facts``, each importing only the layers it needs (loading
a model imports neither the passes nor the executor)."""

from __future__ import annotations

import os
from pathlib import Path

from attrs import define

from ..frontends.load import load, model_format
from ..ir.fileset import manifest_path
from ..ir.io import save_inference_model
from ..ir.program import Program
from ..ir.scope import Scope

__all__ = ["Model", "load_model", "save_model"]


@define
class Model:
    """A loaded model: its program, feed and fetch names, parameter values, and where it came from."""

    path: str
    format: str
    program: Program
    feed_names: list[str]
    fetch_names: list[str]
    scope: Scope


def load_model(path: str) -> Model:
    """Load an .onnx file or a Paddle/halfway inference model (file, prefix or folder)."""
    fmt = model_format(path)
    program, feeds, fetches, scope = load(path)
    return Model(path, fmt, program, feeds, fetches, scope)


def save_model(out: str, model: Model, *, onnx_opset: int | None = None, onnx_contrib: bool = False,
               onnx_manifest: bool = False) -> list[Path]:
    """Save ``model`` at ``out``: an ONNX model where ``out`` ends in ``.onnx`` (at ``onnx_opset``,
    ONNX Runtime's contrib ops with ``onnx_contrib``, its ``.sha256`` manifest with
    ``onnx_manifest``), else a halfway (Paddle-format) inference model — a .pdmodel file, a path
    prefix or an existing folder. All files or none. Returns the files written."""
    if out.endswith(".onnx"):
        from ..frontends.onnx_export import DEFAULT_OPSET, save_onnx

        save_onnx(out, model.feed_names, model.fetch_names, model.program, model.scope,
                  opset=onnx_opset or DEFAULT_OPSET, contrib=onnx_contrib, manifest=onnx_manifest)
        return [Path(out)] + ([manifest_path(Path(out))] if onnx_manifest else [])
    save_inference_model(out, model.feed_names, model.fetch_names, model.program, model.scope)
    stem = out[:-len(".pdmodel")] if out.endswith(".pdmodel") else out
    if os.path.isdir(out):
        stem = os.path.join(out, "model")
    return [p for p in (Path(stem + ".pdmodel"), Path(stem + ".pdiparams")) if p.exists()]
