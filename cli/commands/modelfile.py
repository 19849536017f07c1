"""Models as the command line sees them: loaded from any supported file, saved atomically, and
described (op counts by type and precision, parameter bytes, inputs and outputs)."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
from attrs import define

from ...frontends.load import load, model_format
from ...ir.dtypes import DType
from ...ir.io import save_inference_model
from ...ir.operator import Operator
from ...ir.program import Program
from ...ir.scope import Scope

__all__ = ["Model", "load_model", "save_model", "param_bytes", "op_precision", "op_counts", "io_specs"]

IO_OPS = ("feed", "fetch")


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


def save_model(out: str, model: Model, *, onnx_opset: int | None = None, onnx_contrib: bool = False) -> list[Path]:
    """Save ``model`` at ``out``: an ONNX model where ``out`` ends in ``.onnx`` (at ``onnx_opset``,
    ONNX Runtime's contrib ops with ``onnx_contrib``), else a halfway (Paddle-format) inference
    model — a .pdmodel file, a path prefix or an existing folder. All files or none. Returns the
    files written."""
    if out.endswith(".onnx"):
        from ...frontends.onnx_export import DEFAULT_OPSET, save_onnx

        save_onnx(out, model.feed_names, model.fetch_names, model.program, model.scope,
                  opset=onnx_opset or DEFAULT_OPSET, contrib=onnx_contrib)
        return [Path(out)]
    save_inference_model(out, model.feed_names, model.fetch_names, model.program, model.scope)
    stem = out[:-len(".pdmodel")] if out.endswith(".pdmodel") else out
    if os.path.isdir(out):
        stem = os.path.join(out, "model")
    return [p for p in (Path(stem + ".pdmodel"), Path(stem + ".pdiparams")) if p.exists()]


def param_bytes(program: Program, scope: Scope) -> int:
    """Bytes of the parameter values ``program`` reads from ``scope``."""
    values = (scope.find(v.name) for v in program.persistable_vars())
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


def op_precision(op: Operator) -> str:
    """The element type an op computes in: that of its first floating output (else its first
    output), as a name; ``-`` when unknown."""
    dtypes = [op.block.find_var(n).dtype for n in op.output_names()]
    known = [d for d in dtypes if d is not None]
    chosen = [d for d in known if d.is_floating] or known
    return chosen[0].name if chosen else "-"


def op_counts(program: Program) -> Counter[tuple[str, str]]:
    """(op type, precision) -> count over all blocks, feed and fetch left out."""
    return Counter((op.type, op_precision(op)) for op in program.all_ops() if op.type not in IO_OPS)


def io_specs(program: Program, names: list[str]) -> list[dict[str, object]]:
    """Name, dtype and shape (-1 for a dim known only at run time) of each of ``names``."""
    block = program.global_block()
    specs = []
    for name in names:
        var = block.var(name)
        dtype = var.dtype.name if isinstance(var.dtype, DType) else "-"
        specs.append({"name": name, "dtype": dtype, "shape": list(var.shape or ())})
    return specs
