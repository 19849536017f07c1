"""The demo: import a CNN, fuse it, transpile it to float16, and run the float32 and float16
programs on every place, in one table.

The default model ships with halfway (``halfway/data/demo_resnet18.onnx``, written by
``scripts/make_demo_model.py``): a ResNet-18 at quarter width with seeded weights. Each program
runs once to warm up, then once on each of K seeded random images: the latency is the median of
those K timed runs, and the outputs are compared with the model as imported, run in float32 on
numpy on the same images: max absolute error, max error relative to the largest reference
magnitude, and how often the top-1 class agrees.
"""

from __future__ import annotations

import importlib.resources
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from attrs import frozen

from halfway.commands.execution import prepare
from halfway.commands.feeds import random_inputs
from halfway.commands.measure import Comparison, Timing, compare, time_runs
from halfway.commands.modelfile import Model, param_bytes, save_model
from halfway.commands.transpile import ops_fused, run_float16, run_passes
from halfway.commands.places import place_label
from halfway.executor import PreparedProgram
from halfway.executor.place import CPUPlace, OpenCLPlace, Place
from halfway.ir.errors import HalfwayError
from halfway.report.console import Output
from halfway.report.tables import error_text, human_bytes, milliseconds, percent, table

__all__ = ["DEMO_MODEL", "demo_model_path", "run_demo", "DemoRow"]

DEMO_MODEL = "demo_resnet18.onnx"


def demo_model_path() -> Path:
    """The model shipped as package data."""
    return Path(str(importlib.resources.files("halfway").joinpath("data", DEMO_MODEL)))


@frozen
class DemoRow:
    place: str
    precision: str
    latency: Timing
    parameter_bytes: int
    activation_peak_bytes: int
    errors: Comparison
    ops_fused: int
    casts_inserted: int

    def as_dict(self) -> dict[str, Any]:
        return {"place": self.place, "precision": self.precision, "latency_median_s": self.latency.median,
                "timed_runs": self.latency.runs, "parameter_bytes": self.parameter_bytes,
                "activation_peak_bytes": self.activation_peak_bytes, **self.errors.as_dict(),
                "ops_fused": self.ops_fused, "casts_inserted": self.casts_inserted}


@frozen
class _Variant:
    precision: str
    model: Model
    casts: int


Feeds = list[dict[str, np.ndarray]]


def run_demo(output: Output, model: Model, places: Sequence[Place], *, samples: int = 8, warmup: int = 1,
             seed: int = 0, out_dir: str | None = None) -> int:
    """Run the demo of ``model`` (as imported) on ``places``; returns the exit code (1 if some
    place failed)."""
    with output.task("fusing (default pass pipeline)"):
        fused, pipeline = run_passes(model, None)
    with output.task("transpiling to float16"):
        half, report = run_float16(fused)
    if out_dir is not None:
        _save_pair(out_dir, fused, half)
    feeds = [random_inputs(model.program, model.feed_names, seed + i) for i in range(samples)]
    imported = _Variant("float32", model, 0)
    *_, reference = _timed_runs(output, "float32 reference (as imported)", imported, CPUPlace(), feeds, warmup)
    variants = [_Variant("float32", fused, 0), _Variant("float16", half, len(report.casts))]
    rows, failures = [], []
    for place in places:
        for variant in variants:
            try:
                rows.append(_row(output, place, variant, feeds, reference, ops_fused(pipeline), warmup))
            except HalfwayError as e:
                failures.append(f"{place_label(place)} {variant.precision}: {e}")
    _print(output, model, fused, half, places, rows, failures, samples)
    return 1 if failures else 0


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


def _row(output: Output, place: Place, variant: _Variant, feeds: Feeds, reference: list[list[np.ndarray]],
         fused: int, warmup: int) -> DemoRow:
    prepared, timing, results = _timed_runs(output, variant.precision, variant, place, feeds, warmup)
    model = variant.model
    errors = _worst([compare([r[i] for r in reference], [o[i] for o in results], name)
                     for i, name in enumerate(model.fetch_names)])
    return DemoRow(place_label(place), variant.precision, timing, param_bytes(model.program, model.scope),
                   prepared.report.peak_activation_bytes, errors, fused, variant.casts)


def _worst(comparisons: list[Comparison]) -> Comparison:
    """The largest errors over all outputs, and the top-1 agreement of the first classifier output."""
    top1 = next((c.top1 for c in comparisons if c.top1 is not None), None)
    return Comparison(max(c.max_abs for c in comparisons), max(c.max_rel for c in comparisons), top1,
                      max(c.scale for c in comparisons))


def _print(output: Output, model: Model, fused: Model, half: Model, places: Sequence[Place], rows: list[DemoRow],
           failures: list[str], samples: int) -> None:
    if output.json_mode:
        output.json({"model": model.path, "samples": samples, "rows": [r.as_dict() for r in rows],
                     "failures": failures})
        return
    counts = [sum(1 for op in m.program.all_ops() if op.type not in ("feed", "fetch")) for m in (model, fused, half)]
    output.print(f"[bold]{Path(model.path).name}[/] ({model.format}): {counts[0]} ops imported, {counts[1]} after "
                 f"fusion, {counts[2]} in the float16 program")
    for place in places:
        if isinstance(place, OpenCLPlace):
            runtime = place.runtime
            output.print(f"{place_label(place)}: {runtime.caps.name} ({runtime.caps.vendor}), float16 mode "
                         f"{runtime.mode.value}")
    output.print(table(
        None, ["place", "precision", "latency", "params", "act. peak", "max abs err", "max rel err", "top-1",
               "fused", "casts"],
        [(r.place, r.precision, milliseconds(r.latency.median), human_bytes(r.parameter_bytes),
          human_bytes(r.activation_peak_bytes), error_text(r.errors.max_abs), error_text(r.errors.max_rel),
          percent(r.errors.top1), r.ops_fused, r.casts_inserted) for r in rows],
        caption=f"over {samples} seeded random inputs — latency: median of {samples} timed runs; params: parameter "
                f"bytes; act. peak: planned activation peak; errors and top-1 agreement: against the imported "
                f"float32 model on numpy (rel err = max abs err / max |reference|); fused: ops the pass "
                f"pipeline removed (fused into others, folded or dead); casts: casts inserted by the float16 "
                f"transpile",
        numeric=["latency", "params", "act. peak", "max abs err", "max rel err", "top-1", "fused", "casts"]))
    for failure in failures:
        output.error(failure)
