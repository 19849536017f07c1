"""The demo: import models, fuse them, transpile them to float16, and run the float32 and float16
programs on every place, in one table.

Two models ship with halfway as package data (``halfway/api/data/``): ``demo_resnet18.onnx``, a
ResNet-18 at quarter width with seeded weights (``scripts/make_demo_model.py``), and
``demo_bert.onnx``, a 4-layer BERT-style encoder and classifier with seeded weights
(``scripts/make_demo_bert.py``). Each program runs once to warm up, then once on each of K seeded
inputs (random images; for a text model, padded token batches: ``halfway.api.tokens``): the
latency is the median of those K timed runs, and the outputs are compared with the model as
imported, run in float32 on numpy on the same inputs: max absolute error, max error relative to
the largest reference magnitude, and how often the top-1 class agrees.
"""

from __future__ import annotations

import collections
import importlib.resources
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from attrs import frozen

from ..api.feeds import random_inputs
from ..api.input_shapes import feed_shapes
from ..api.measure import Comparison, Timing, compare, time_runs
from ..api.model_facts import param_bytes
from ..api.models import Model, save_model
from ..api.pipelines import ops_fused, run_float16, run_passes
from ..api.places import place_label
from ..api.prepare import prepare
from ..api.tokens import SEQUENCE, is_text_model, token_inputs
from ..executor import PreparedProgram
from ..executor.place import CPUPlace, OpenCLPlace, Place
from ..ir.errors import HalfwayError
from ..ir.operator import Operator
from .report.console import Output
from .report.tables import error_text, human_bytes, milliseconds, percent, table

__all__ = ["DEMO_MODEL", "DEMO_MODELS", "DemoModel", "demo_model_path", "demo_inputs", "run_demo", "DemoRow",
           "ModelSummary"]

DEMO_MODEL = "demo_resnet18.onnx"
DEMO_MODELS = {DEMO_MODEL: SEQUENCE, "demo_bert.onnx": 128}
"""The models shipped as package data, in the table's order: the tokens per row of their inputs
(for a text model)."""

FUSED_OPS = {"scaled_dot_product_attention": "attention", "skip_layer_norm": "skip_layer_norm",
             "layer_norm": "layer_norm", "rms_norm": "rms_norm", "gelu": "gelu", "fused_conv2d": "conv", "fc": "fc"}
"""The fused ops a summary counts, by op type: its label."""


def demo_model_path(name: str = DEMO_MODEL) -> Path:
    """A model shipped as package data."""
    return Path(str(importlib.resources.files("halfway.api").joinpath("data", name)))


@frozen
class DemoModel:
    """A model as imported, the tokens per row of its inputs if it is a text model, and the
    shapes of its inputs where given (``--input-shapes``)."""

    model: Model
    sequence: int = SEQUENCE
    shapes: Mapping[str, Sequence[int]] | None = None


def demo_inputs(model: Model, seed: int, sequence: int = SEQUENCE,
                shapes: Mapping[str, Sequence[int]] | None = None) -> dict[str, np.ndarray]:
    """The demo's seeded input ``seed`` for ``model``: a padded token batch for a text model,
    values the model can take otherwise; ``shapes`` (``--input-shapes``) sizes free dims."""
    if is_text_model(model.program, model.feed_names):
        return token_inputs(model.program, model.feed_names, seed, sequence=sequence, shapes=shapes)
    return random_inputs(model.program, model.feed_names, seed, feed_shapes(model.program, model.feed_names, shapes))


@frozen
class DemoRow:
    model: str
    place: str
    precision: str
    latency: Timing
    parameter_bytes: int
    activation_peak_bytes: int
    errors: Comparison
    ops_fused: int
    casts_inserted: int

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "place": self.place, "precision": self.precision,
                "latency_median_s": self.latency.median, "timed_runs": self.latency.runs,
                "parameter_bytes": self.parameter_bytes, "activation_peak_bytes": self.activation_peak_bytes,
                **self.errors.as_dict(), "ops_fused": self.ops_fused, "casts_inserted": self.casts_inserted}


@frozen
class ModelSummary:
    """One model through the passes: its ops (feeds and fetches aside) as imported, after fusion
    and in the float16 program, and the fused program's ``FUSED_OPS`` by label."""

    model: str
    path: str
    format: str
    ops_imported: int
    ops_after_fusion: int
    ops_float16: int
    fused_ops: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "path": self.path, "format": self.format, "ops_imported": self.ops_imported,
                "ops_after_fusion": self.ops_after_fusion, "ops_float16": self.ops_float16,
                "fused_ops": dict(self.fused_ops)}

    def line(self) -> str:
        fused = ", ".join(f"{n} {label}" for label, n in self.fused_ops.items())
        return (f"[bold]{self.model}[/] ({self.format}): {self.ops_imported} ops imported, {self.ops_after_fusion} "
                f"after fusion{f' ({fused})' if fused else ''}, {self.ops_float16} in the float16 program")


@frozen
class _Variant:
    precision: str
    model: Model
    casts: int


Feeds = list[dict[str, np.ndarray]]


def run_demo(output: Output, models: Sequence[DemoModel], places: Sequence[Place], *, samples: int = 8,
             warmup: int = 1, seed: int = 0, out_dir: str | None = None) -> int:
    """Run the demo of each of ``models`` (as imported) on ``places``, in one table; returns the
    exit code (1 if some place failed). ``out_dir`` gets the fused and float16 programs of one
    model, or of each in a folder named after it."""
    summaries, rows, failures = [], [], []
    for demo in models:
        save_to = out_dir if out_dir is None or len(models) == 1 else str(Path(out_dir) / Path(demo.model.path).stem)
        summary, model_rows, model_failures = _demo_model(output, demo, places, samples, warmup, seed, save_to)
        summaries.append(summary)
        rows += model_rows
        failures += model_failures
    _print(output, summaries, places, rows, failures, samples)
    return 1 if failures else 0


def _demo_model(output: Output, demo: DemoModel, places: Sequence[Place], samples: int, warmup: int, seed: int,
                out_dir: str | None) -> tuple[ModelSummary, list[DemoRow], list[str]]:
    """The summary, rows and failures of one model."""
    model, name = demo.model, Path(demo.model.path).name
    with output.task(f"fusing {name} (default pass pipeline)"):
        fused, pipeline = run_passes(model, None)
    with output.task(f"transpiling {name} to float16"):
        half, report = run_float16(fused)
    if out_dir is not None:
        _save_pair(out_dir, fused, half)
    feeds = [demo_inputs(model, seed + i, demo.sequence, demo.shapes) for i in range(samples)]
    imported = _Variant("float32", model, 0)
    *_, reference = _timed_runs(output, f"{name} float32 reference (as imported)", imported, CPUPlace(), feeds,
                                warmup)
    variants = [_Variant("float32", fused, 0), _Variant("float16", half, len(report.casts))]
    rows, failures = [], []
    for place in places:
        for variant in variants:
            try:
                rows.append(_row(output, name, place, variant, feeds, reference, ops_fused(pipeline), warmup))
            except HalfwayError as e:
                failures.append(f"{name} {place_label(place)} {variant.precision}: {e}")
    return _summary(model, fused, half), rows, failures


def _summary(model: Model, fused: Model, half: Model) -> ModelSummary:
    counts = [collections.Counter(op.type for op in m.program.all_ops() if op.type not in ("feed", "fetch"))
              for m in (model, fused, half)]
    imported, after, float16 = (sum(c.values()) for c in counts)
    labels = collections.Counter(label for op in fused.program.all_ops() for label in _fused_labels(op))
    found = {label: labels[label] for label in FUSED_OPS.values() if labels[label]}
    return ModelSummary(Path(model.path).name, model.path, model.format, imported, after, float16, found)


def _fused_labels(op: Operator) -> list[str]:
    """The ``FUSED_OPS`` labels ``op`` counts under: its own, and that of a fused op it took as its
    epilogue's activation (an fc's gelu)."""
    activation = op.attr("activation_type") if op.type == "fc" else (
        op.attr("fuse_activation") if op.type == "fused_conv2d" else "")
    return [label for label in (FUSED_OPS.get(op.type), FUSED_OPS.get(activation or "")) if label]


def _save_pair(out_dir: str, fused: Model, half: Model) -> None:
    """Save the fused float32 and the float16 model in ``out_dir``; an error saving the second
    says that the first was saved."""
    written = save_model(str(Path(out_dir) / "model_fp32"), fused)
    try:
        save_model(str(Path(out_dir) / "model_fp16"), half)
    except HalfwayError as e:
        raise type(e)(f"{e} (the float32 model was saved: {', '.join(map(str, written))})") from e


def _timed_runs(output: Output, what: str, variant: _Variant, place: Place, feeds: Feeds,
                warmup: int) -> tuple[PreparedProgram, Timing, list[list[np.ndarray]]]:
    """Prepare ``variant`` on ``place``, run it ``warmup`` times, then once per feed, timed."""
    model = variant.model
    with output.task(f"{place_label(place)} {what}: prepare, {len(feeds)} timed runs",
                     total=warmup + len(feeds)) as tick:
        prepared = prepare(model.program, model.scope, model.feed_names, model.fetch_names, feeds[0], place)
        inputs = itertools.chain(itertools.repeat(feeds[0], warmup), feeds)
        results: list[list[np.ndarray]] = []
        timing = time_runs(lambda: results.append(prepared.run(next(inputs))), len(feeds), warmup, tick)
    return prepared, timing, results[warmup:]


def _row(output: Output, name: str, place: Place, variant: _Variant, feeds: Feeds,
         reference: list[list[np.ndarray]], fused: int, warmup: int) -> DemoRow:
    prepared, timing, results = _timed_runs(output, f"{name} {variant.precision}", variant, place, feeds, warmup)
    model = variant.model
    errors = _worst([compare([r[i] for r in reference], [o[i] for o in results], fetch)
                     for i, fetch in enumerate(model.fetch_names)])
    return DemoRow(name, place_label(place), variant.precision, timing, param_bytes(model.program, model.scope),
                   prepared.report.peak_activation_bytes, errors, fused, variant.casts)


def _worst(comparisons: list[Comparison]) -> Comparison:
    """The largest errors over all outputs, and the top-1 agreement of the first classifier output."""
    top1 = next((c.top1 for c in comparisons if c.top1 is not None), None)
    return Comparison(max(c.max_abs for c in comparisons), max(c.max_rel for c in comparisons), top1,
                      max(c.scale for c in comparisons))


def _print(output: Output, summaries: list[ModelSummary], places: Sequence[Place], rows: list[DemoRow],
           failures: list[str], samples: int) -> None:
    if output.json_mode:
        output.json({"models": [s.as_dict() for s in summaries], "samples": samples,
                     "rows": [r.as_dict() for r in rows], "failures": failures})
        return
    for summary in summaries:
        output.print(summary.line())
    for place in places:
        if isinstance(place, OpenCLPlace):
            runtime = place.runtime
            output.print(f"{place_label(place)}: {runtime.caps.name} ({runtime.caps.vendor}), float16 mode "
                         f"{runtime.mode.value}")
    output.print(table(
        None, ["model", "place", "precision", "latency", "params", "act. peak", "max abs err", "max rel err",
               "top-1", "fused", "casts"],
        [(Path(r.model).stem, r.place, r.precision, milliseconds(r.latency.median), human_bytes(r.parameter_bytes),
          human_bytes(r.activation_peak_bytes), error_text(r.errors.max_abs), error_text(r.errors.max_rel),
          percent(r.errors.top1), r.ops_fused, r.casts_inserted) for r in rows],
        caption=f"over {samples} seeded inputs per model (random images, padded token batches) — latency: median "
                f"of {samples} timed runs; params: parameter bytes; act. peak: planned activation peak; errors and "
                f"top-1 agreement: against the imported float32 model on numpy (rel err = max abs err / max "
                f"|reference|, over all outputs); fused: ops the pass pipeline removed (fused into others, folded "
                f"or dead); casts: casts inserted by the float16 transpile",
        numeric=["latency", "params", "act. peak", "max abs err", "max rel err", "top-1", "fused", "casts"]))
    for failure in failures:
        output.error(failure)
