"""``halfway bench MODEL``: latency on each place, side by side with ONNX Runtime."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from ...api.measure import Timing, time_runs
from ...api.model_facts import param_bytes
from ...api.models import Model, load_model
from ...api.places import place_label
from ...api.prepare import prepare
from ...ir.errors import HalfwayError
from ..report.console import Output
from ..report.tables import human_bytes, milliseconds, table
from .base import Command, add_inputs, add_json, add_model, add_places, add_repeat
from .execution import feeds_for, warn_nonfinite
from .places import parse_places

__all__ = ["COMMAND"]

PEERS = ("onnxruntime",)


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    add_places(parser, several=True)
    parser.add_argument("--compare", action="append", default=[], choices=PEERS,
                        help="also time the same .onnx file on this peer (its CPU provider)")
    add_repeat(parser, default=20)
    add_inputs(parser)
    add_json(parser)


def onnxruntime_runner(model: Model, feeds: Mapping[str, np.ndarray]) -> Callable[[], object]:
    """A call running ``model``'s .onnx file once on ONNX Runtime's CPU provider with ``feeds``."""
    if model.format != "onnx":
        raise HalfwayError(f"{model.path}: --compare onnxruntime needs an .onnx model, this one is {model.format}")
    try:
        import onnxruntime as ort
    except ImportError:
        raise HalfwayError("--compare onnxruntime needs onnxruntime: pip install 'halfway[onnx]'") from None
    session = ort.InferenceSession(model.path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    ort_feeds = dict(zip(names, (feeds[n] for n in model.feed_names)))
    return lambda: session.run(None, ort_feeds)


def _run(args: argparse.Namespace, output: Output) -> int:
    model = load_model(args.model)
    places = parse_places(args.places, output, args.tune)
    feeds = feeds_for(args, model, output)
    runners: list[tuple[str, Callable[[], object], int | None]] = []
    last: dict[str, list[np.ndarray]] = {}
    for place in places:
        prepared = prepare(model.program, model.scope, model.feed_names, model.fetch_names, feeds, place)
        peak = prepared.report.peak_activation_bytes
        label = place_label(place)
        runners.append((f"halfway {label}", lambda p=prepared, at=label: last.__setitem__(at, p.run(feeds)), peak))
    if "onnxruntime" in args.compare:
        runners.append(("onnxruntime cpu", onnxruntime_runner(model, feeds), None))
    timings: list[tuple[str, Timing, int | None]] = []
    for name, runner, peak in runners:
        with output.task(f"timing {name}", total=args.warmup + args.repeat) as tick:
            timings.append((name, time_runs(runner, args.repeat, args.warmup, tick), peak))
    for label, results in last.items():
        warn_nonfinite(output, dict(zip(model.fetch_names, results)), label)
    baseline = timings[0][1].median
    params = param_bytes(model.program, model.scope)
    rows = [{"runtime": name, **t.as_dict(), "vs_first": t.median / baseline, "activation_peak_bytes": peak}
            for name, t, peak in timings]
    if args.json:
        output.json({"model": model.path, "parameter_bytes": params, "results": rows})
        return 0
    output.print(table(
        f"{Path(model.path).name}: latency, {args.repeat} runs after {args.warmup} warm-up",
        ["runtime", "median", "min", f"x {timings[0][0]}", "activation peak"],
        [(r["runtime"], milliseconds(r["median_s"]), milliseconds(r["min_s"]), f"{r['vs_first']:.2f}",
          human_bytes(r["activation_peak_bytes"])) for r in rows],
        caption=f"parameters: {human_bytes(params)}", numeric=["median", "min", f"x {timings[0][0]}"]))
    return 0


COMMAND = Command(
    "Time a model: the median and best of --repeat runs after --warmup untimed runs, on each\n"
    "--place (default: cpu, and opencl when a device is present), with the planned activation\n"
    "peak. --compare onnxruntime times the same .onnx file on ONNX Runtime's CPU provider in the\n"
    "same process, so the ratios compare like with like.\n\n"
    "example: halfway bench model.onnx --place cpu --place opencl --compare onnxruntime",
    _configure, _run)
