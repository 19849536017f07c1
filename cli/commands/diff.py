"""``halfway diff MODEL_A MODEL_B``: run two models on the same inputs and compare outputs."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...api.feeds import convert_feed
from ...api.measure import compare
from ...api.models import Model, load_model, prepare
from ...api.places import parse_place, place_label
from ...ir.errors import FeedError
from ..report.console import Output
from ..report.tables import error_text, percent, table
from .base import EXIT_DIFFERENT, Command, add_inputs, add_json, add_model, add_places, tolerance
from .execution import feeds_for

__all__ = ["COMMAND"]


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser, "model_a", "the reference model (any format inspect takes)")
    add_model(parser, "model_b", "the model compared with it, e.g. MODEL_A after `halfway transpile`")
    add_inputs(parser)
    add_places(parser, several=False)
    parser.add_argument("--atol", type=tolerance, default=1e-5, help="absolute tolerance (default: 1e-5)")
    parser.add_argument("--rtol", type=tolerance, default=1e-3,
                        help="tolerance relative to the largest reference magnitude (default: 1e-3)")
    add_json(parser)


def _check_pair(a: Model, b: Model) -> None:
    if sorted(a.feed_names) != sorted(b.feed_names):
        raise FeedError(f"the models take different inputs: {a.feed_names} ({a.path}) vs {b.feed_names} ({b.path})")
    if len(a.fetch_names) != len(b.fetch_names):
        raise FeedError(f"the models have {len(a.fetch_names)} and {len(b.fetch_names)} outputs; "
                        f"diff pairs outputs by position")


def _run(args: argparse.Namespace, output: Output) -> int:
    a, b = load_model(args.model_a), load_model(args.model_b)
    _check_pair(a, b)
    place = parse_place(args.place, args.tune)
    feeds = feeds_for(args, a)
    results = []
    for model in (a, b):
        mine = {name: convert_feed(name, feeds[name], model.program) for name in model.feed_names}
        prepared = prepare(model.program, model.scope, model.feed_names, model.fetch_names, mine, place)
        results.append(prepared.run(mine))
    rows, same = [], True
    for name_a, name_b, ref, out in zip(a.fetch_names, b.fetch_names, *results):
        c = compare([ref], [out], f"output {name_a} vs {name_b}")
        ok = c.within(args.atol, args.rtol)
        same &= ok
        rows.append({"output_a": name_a, "output_b": name_b, "shape": list(ref.shape),
                     "dtype_a": str(ref.dtype), "dtype_b": str(out.dtype), **c.as_dict(), "within_tolerance": ok})
    if args.json:
        output.json({"model_a": a.path, "model_b": b.path, "place": place_label(place), "atol": args.atol,
                     "rtol": args.rtol, "outputs": rows, "same": same})
    else:
        output.print(table(
            f"{Path(a.path).name} vs {Path(b.path).name} on {place_label(place)}",
            ["output A", "output B", "shape", "dtypes", "max abs err", "max rel err", "top-1 agree", "verdict"],
            [(r["output_a"], r["output_b"], r["shape"], f"{r['dtype_a']}/{r['dtype_b']}",
              error_text(r["max_abs_error"]), error_text(r["max_rel_error"]), percent(r["top1_agreement"]),
              "same" if r["within_tolerance"] else "[red]DIFFERENT[/]") for r in rows],
            caption=f"same: max abs err <= atol {args.atol:g} + rtol {args.rtol:g} x max|A|",
            numeric=["max abs err", "max rel err", "top-1 agree"]))
    return 0 if same else EXIT_DIFFERENT


COMMAND = Command(
    "diff", "run two models on the same inputs and compare their outputs",
    "Run MODEL_A and MODEL_B on the same inputs (--input, or seeded random values) and print, per\n"
    "output (paired by position), the max absolute error, the max error relative to the largest\n"
    "reference magnitude, and top-1 agreement. Float inputs are converted to each model's input\n"
    "dtype, so a float16 model whose inputs are float16 compares too.\n\n"
    "exit code: 0 every output within --atol + --rtol x max|A|; 3 some output differs more.",
    _configure, _run)
