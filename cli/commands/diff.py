"""``halfway diff MODEL_A MODEL_B``: run two models on the same inputs and compare outputs."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...api.feeds import convert_feed
from ...api.measure import compare
from ...api.models import Model, load_model
from ...api.places import parse_place, place_label
from ...api.prepare import prepare
from ...ir.errors import FeedError
from ..report.console import Output
from ..report.tables import error_text, percent, table
from .base import EXIT_DIFFERENT, Command, add_inputs, add_json, add_model, add_places, tolerance
from .execution import feeds_for, warn_nonfinite

__all__ = ["COMMAND", "PRESETS"]

PRESETS = {"float32": (1e-5, 1e-3), "float16": (1e-3, 1e-2)}
"""Preset name -> (atol, rtol): ``float32`` for a model against itself after passes; ``float16``
for halfway's float16 program against the float32 one (float16 keeps 11 bits: each value is off
by up to 5e-4 of itself, and a deep network adds such errors up)."""


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser, "model_a", "the reference model (any format inspect takes)")
    add_model(parser, "model_b", "the model compared with it, e.g. MODEL_A after `halfway transpile`")
    add_inputs(parser)
    add_places(parser, several=False)
    parser.add_argument("--preset", choices=PRESETS, default="float32",
                        help="tolerances: float32 (atol 1e-5, rtol 1e-3; the default) or float16 (atol 1e-3, rtol "
                             "1e-2: MODEL_B is a float16 program, e.g. from `halfway transpile --fp16`)")
    parser.add_argument("--atol", type=tolerance, default=None, help="absolute tolerance (default: the preset's)")
    parser.add_argument("--rtol", type=tolerance, default=None,
                        help="tolerance relative to the largest reference magnitude (default: the preset's)")
    add_json(parser)


def _check_pair(a: Model, b: Model) -> None:
    if sorted(a.feed_names) != sorted(b.feed_names):
        raise FeedError(f"the models take different inputs: {a.feed_names} ({a.path}) vs {b.feed_names} ({b.path})")
    if len(a.fetch_names) != len(b.fetch_names):
        raise FeedError(f"the models have {len(a.fetch_names)} and {len(b.fetch_names)} outputs; "
                        f"diff pairs outputs by position")


def _tolerances(args: argparse.Namespace) -> tuple[float, float]:
    """(atol, rtol): the preset's, where --atol and --rtol do not override them."""
    atol, rtol = PRESETS[args.preset]
    return (atol if args.atol is None else args.atol), (rtol if args.rtol is None else args.rtol)


def _run(args: argparse.Namespace, output: Output) -> int:
    a, b = load_model(args.model_a), load_model(args.model_b)
    _check_pair(a, b)
    place = parse_place(args.place, args.tune)
    atol, rtol = _tolerances(args)
    feeds = feeds_for(args, a, output)
    results = []
    for model in (a, b):
        mine = {name: convert_feed(name, feeds[name], model.program) for name in model.feed_names}
        prepared = prepare(model.program, model.scope, model.feed_names, model.fetch_names, mine, place)
        results.append(prepared.run(mine))
        warn_nonfinite(output, dict(zip(model.fetch_names, results[-1])), model.path)
    rows, same = [], True
    for name_a, name_b, ref, out in zip(a.fetch_names, b.fetch_names, *results):
        c = compare([ref], [out], f"output {name_a} vs {name_b}")
        ok = c.within(atol, rtol)
        same &= ok
        rows.append({"output_a": name_a, "output_b": name_b, "shape": list(ref.shape),
                     "dtype_a": str(ref.dtype), "dtype_b": str(out.dtype), **c.as_dict(), "within_tolerance": ok})
    if args.json:
        output.json({"model_a": a.path, "model_b": b.path, "place": place_label(place),
                     "preset": args.preset, "atol": atol, "rtol": rtol, "outputs": rows, "same": same})
    else:
        output.print(table(
            f"{Path(a.path).name} vs {Path(b.path).name} on {place_label(place)}",
            ["output A", "output B", "shape", "dtypes", "max abs err", "max rel err", "top-1 agree", "verdict"],
            [(r["output_a"], r["output_b"], r["shape"], f"{r['dtype_a']}/{r['dtype_b']}",
              error_text(r["max_abs_error"]), error_text(r["max_rel_error"]), percent(r["top1_agreement"]),
              "same" if r["within_tolerance"] else "[red]DIFFERENT[/]") for r in rows],
            caption=f"same: max abs err <= atol {atol:g} + rtol {rtol:g} x max|A| ({args.preset} preset)",
            numeric=["max abs err", "max rel err", "top-1 agree"]))
    return 0 if same else EXIT_DIFFERENT


COMMAND = Command(
    "Run MODEL_A and MODEL_B on the same inputs (--input, or seeded random values) and print, per\n"
    "output (paired by position), the max absolute error, the max error relative to the largest\n"
    "reference magnitude, and top-1 agreement. Float inputs are converted to each model's input\n"
    "dtype, so a float16 model whose inputs are float16 compares too. --preset float16 takes\n"
    "tolerances that halfway's own float16 programs meet (`halfway transpile --fp16`).\n\n"
    "exit code: 0 every output within --atol + --rtol x max|A|; 3 some output differs more.",
    _configure, _run)
