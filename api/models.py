"""Models as files hold them: loaded from any supported file, run through a pass pipeline (and
the float16 transpile), prepared for a place, saved atomically, and described (op counts by type
and precision, parameter bytes, inputs and outputs). The command line, ``halfway.api.batch``,
``halfway.api.ray`` and the demo all take a model this way."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from attrs import define

from ..executor import Executor, PreparedProgram
from ..executor.place import Place
from ..frontends.load import load, model_format
from ..frontends.onnx.registry import onnx_names
from ..ir.dtypes import DType
from ..ir.fileset import manifest_path
from ..ir.io import save_inference_model
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope
from ..passes import Pass, PassManager, PipelineResult, get_pass
from ..passes.float16 import DEFAULT_BLACK_LIST, Float16Report
from .float16 import float16_transpile

__all__ = ["Model", "load_model", "save_model", "NO_PASSES", "run_passes", "float16_pass", "run_float16", "ops_fused",
           "prepare", "param_bytes", "op_precision", "op_counts", "io_specs", "op_label"]

IO_OPS = ("feed", "fetch")
NO_PASSES = "none"
"""The pipeline of no pass."""


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


def run_passes(model: Model, passes: str | None, dump_dir: str | None = None,
               after: Sequence[Pass] = ()) -> tuple[Model, PipelineResult]:
    """``model`` after the pipeline ``passes`` (None: the default; 'none': no pass), then ``after``."""
    pipeline: str | list[str] | None = [] if passes == NO_PASSES else passes
    manager = PassManager(pipeline, after=after, timing=True, count_ops=True, dump_dir=dump_dir)
    result = manager.run(model.program, model.scope, fetch=model.fetch_names)
    scope = result.scope if result.scope is not None else model.scope
    return Model(model.path, model.format, result.program, model.feed_names, model.fetch_names, scope), result


def float16_pass(*, keep_io_types: bool = True, black_list: tuple[str, ...] = (),
                 calibration: dict[str, np.ndarray] | None = None, tolerance: float | None = None) -> Pass:
    """The ``float16`` pass with these options: ``black_list`` extends the default list."""
    return get_pass("float16", keep_io_types=keep_io_types, black_list=tuple(DEFAULT_BLACK_LIST) + black_list,
                    calibration_feeds=calibration, tolerance=tolerance)


def run_float16(model: Model) -> tuple[Model, Float16Report]:
    """``model`` transpiled to float16 with the default options, and the transpiler's report."""
    program, report = float16_transpile(model.program, model.scope)
    feeds, fetches = program.feed_names() or model.feed_names, program.fetch_names() or model.fetch_names
    return Model(model.path, model.format, program, feeds, fetches, model.scope), report


def ops_fused(result: PipelineResult, passes: int | None = None) -> int:
    """How many ops fewer the first ``passes`` passes (default: all) left (ops folded into
    others, or found dead)."""
    return sum(sum(r.ops_before.values()) - sum(r.ops_after.values()) for r in result.records[:passes]
               if r.ops_before is not None and r.ops_after is not None)


def prepare(program: Program, scope: Scope, feed_names: Sequence[str], fetch_names: Sequence[str],
            feeds: Mapping[str, np.ndarray], place: Place, *, check_float16_range: bool = False) -> PreparedProgram:
    """``program`` prepared on ``place`` for the shapes of ``feeds``. The commands that compare
    or time programs (demo, diff, bench) show a float16 overflow in their numbers, so only
    ``run`` asks for the float16 range check (``halfway.executor.float16_range``)."""
    shapes = {name: feeds[name].shape for name in feed_names}
    prepared = Executor(place).prepare(program, list(feed_names), list(fetch_names), scope, feed_shapes=shapes,
                                       check_float16_range=check_float16_range)
    assert isinstance(prepared, PreparedProgram)  # every feed's shape is given
    return prepared


def param_bytes(program: Program, scope: Scope) -> int:
    """Bytes of the parameter values ``program`` reads from ``scope``."""
    values = (scope.find(v.name) for v in program.persistable_vars())
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


def op_precision(op: Operator) -> str:
    """The element type an op computes in: that of its first floating output (else its first
    output), as a name; ``-`` when unknown."""
    dtypes = [op.block.find_var(n).dtype for n in op.output_names()] if op.block is not None else []
    known = [d for d in dtypes if d is not None]
    chosen = [d for d in known if d.is_floating] or known
    return chosen[0].name if chosen else "-"


def op_counts(program: Program) -> Counter[tuple[str, str]]:
    """(op type, precision) -> count over all blocks, feed and fetch left out."""
    return Counter((op.type, op_precision(op)) for op in program.all_ops() if op.type not in IO_OPS)


def op_label(op_type: str) -> str:
    """``op_type`` with the ONNX ops it stands for (``halfway.frontends.onnx.registry``), the
    first two: ``matmul_v2 (MatMul/Gemm/…)``; the op type alone when none does."""
    names = onnx_names(op_type)
    if not names:
        return op_type
    return f"{op_type} ({'/'.join(names[:2])}{'/…' if len(names) > 2 else ''})"


def io_specs(program: Program, names: list[str]) -> list[dict[str, object]]:
    """Name, dtype and shape (-1 for a dim known only at run time) of each of ``names``."""
    block = program.global_block()
    specs: list[dict[str, object]] = []
    for name in names:
        var = block.var(name)
        dtype = var.dtype.name if isinstance(var.dtype, DType) else "-"
        specs.append({"name": name, "dtype": dtype, "shape": list(var.shape or ())})
    return specs
