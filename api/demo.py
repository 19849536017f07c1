"""The demo: import a CNN, fuse it, transpile it to float16, and run the float32 and float16
programs on every place, in one table.

The default model ships with halfway (``halfway/data/demo_resnet18.onnx``, written by
``scripts/make_demo_model.py``): a ResNet-18 at quarter width with seeded weights. Every row is
measured against the model as imported, run in float32 on numpy, over the same seeded random
images: max absolute error, max error relative to the largest reference magnitude, and how often
the top-1 class agrees.
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from attrs import frozen

from halfway.commands.execution import prepare
from halfway.commands.feeds import random_inputs
from halfway.commands.measure import Comparison, Timing, compare, time_runs
from halfway.commands.modelfile import Model, load_model, param_bytes, save_model
from halfway.commands.transpile import ops_fused, run_float16, run_passes
from halfway.executor import PreparedProgram
from halfway.executor.place import CPUPlace, Place
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
        return {"place": self.place, "precision": self.precision, "latency_median_s": self.latency.median, "timed_runs": self.latency.runs,
                "parameter_bytes": self.parameter_bytes, "activation_peak_bytes": self.activation_peak_bytes,
                **self.errors.as_dict(), "ops_fused": self.ops_fused, "casts_inserted": self.casts_inserted}


@frozen
class _Variant:
    precision: str
    model: Model
    casts: int


def run_demo(output: Output, places: Sequence[Place], *, model_path: str | None = None, repeat: int = 10,
             warmup: int = 2, budget_s: float | None = 3.0, samples: int = 8, seed: int = 0,
             out_dir: str | None = None) -> int:
    """Run the demo on ``places``; returns the exit code (1 if some place failed). Each latency is
    the median of ``repeat`` runs, or of fewer (at least 3) once they took ``budget_s`` seconds."""
    path = model_path or str(demo_model_path())
    with output.task(f"importing {Path(path).name}"):
        model = load_model(path)
    with output.task("fusing (default pass pipeline)"):
        fused, pipeline = run_passes(model, None)
    with output.task("transpiling to float16"):
        half, report = run_float16(fused)
    feeds = [random_inputs(model.program, model.feed_names, seed + i) for i in range(samples)]
    with output.task(f"float32 reference: the imported model on numpy, {samples} inputs", total=samples) as tick:
        reference = _run_all(_prepare(model, CPUPlace(), feeds[0]), feeds, tick)
    if out_dir is not None:
        for variant, name in ((fused, "model_fp32"), (half, "model_fp16")):
            save_model(str(Path(out_dir) / name), variant)
    variants = [_Variant("float32", fused, 0), _Variant("float16", half, len(report.casts))]
    timer = functools.partial(time_runs, repeat=repeat, warmup=warmup, budget_s=budget_s)
    rows, failures = [], []
    fused_count = ops_fused(pipeline)
    for place in places:
        for variant in variants:
            try:
                rows.append(_measure(output, place, variant, feeds, reference, fused_count, timer))
            except HalfwayError as e:
                failures.append(f"{place} {variant.precision}: {e}")
    _print(output, model, fused, half, rows, failures, samples, repeat)
    return 1 if failures else 0


def _run_all(prepared: PreparedProgram, feeds: list[dict[str, np.ndarray]],
             tick: Callable[[], None]) -> list[list[np.ndarray]]:
    results = []
    for feed in feeds:
        results.append(prepared.run(feed))
        tick()
    return results


def _prepare(model: Model, place: Place, feed: dict[str, np.ndarray]) -> PreparedProgram:
    return prepare(model.program, model.scope, model.feed_names, model.fetch_names, feed, place)


def _measure(output: Output, place: Place, variant: _Variant, feeds: list[dict[str, np.ndarray]],
             reference: list[list[np.ndarray]], fused: int,
             timer: Callable[..., Timing]) -> DemoRow:
    model = variant.model
    with output.task(f"{place} {variant.precision}: prepare, {len(feeds)} inputs, timed runs") as tick:
        prepared = _prepare(model, place, feeds[0])
        results = _run_all(prepared, feeds, tick)
        timing = timer(lambda: prepared.run(feeds[0]), tick=tick)
    errors = _worst([compare([r[i] for r in reference], [o[i] for o in results], name)
                     for i, name in enumerate(model.fetch_names)])
    return DemoRow(str(place), variant.precision, timing, param_bytes(model.program, model.scope),
                   prepared.report.peak_activation_bytes, errors, fused, variant.casts)


def _worst(comparisons: list[Comparison]) -> Comparison:
    """The largest errors over all outputs, and the top-1 agreement of the first classifier output."""
    top1 = next((c.top1 for c in comparisons if c.top1 is not None), None)
    return Comparison(max(c.max_abs for c in comparisons), max(c.max_rel for c in comparisons), top1,
                      max(c.scale for c in comparisons))


def _latency(timing: Timing, repeat: int) -> str:
    return milliseconds(timing.median) + (f" ({timing.runs} runs)" if timing.runs < repeat else "")


def _print(output: Output, model: Model, fused: Model, half: Model, rows: list[DemoRow], failures: list[str],
           samples: int, repeat: int) -> None:
    if output.json_mode:
        output.json({"model": model.path, "samples": samples, "repeat": repeat, "rows": [r.as_dict() for r in rows],
                     "failures": failures})
        return
    counts = [sum(1 for op in m.program.all_ops() if op.type not in ("feed", "fetch")) for m in (model, fused, half)]
    output.print(f"[bold]{Path(model.path).name}[/] ({model.format}): {counts[0]} ops imported, {counts[1]} after "
                 f"fusion, {counts[2]} in the float16 program")
    output.print(table(
        None, ["place", "precision", "latency", "params", "act. peak", "max abs err", "max rel err", "top-1",
               "fused", "casts"],
        [(r.place, r.precision, _latency(r.latency, repeat), human_bytes(r.parameter_bytes),
          human_bytes(r.activation_peak_bytes), error_text(r.errors.max_abs), error_text(r.errors.max_rel),
          percent(r.errors.top1), r.ops_fused, r.casts_inserted) for r in rows],
        caption=f"latency: median of {repeat} runs (fewer where marked); params: parameter bytes; act. peak: "
                f"planned activation peak; errors and top-1 agreement: against the imported float32 model on "
                f"numpy over {samples} seeded random inputs (rel err = max abs err / max |reference|); fused: "
                f"ops removed by fusion; casts: casts inserted by the float16 transpile",
        numeric=["latency", "params", "act. peak", "max abs err", "max rel err", "top-1", "fused", "casts"]))
    for failure in failures:
        output.error(failure)
