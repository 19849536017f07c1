"""``halfway run MODEL``: run a model once and show (or save) its outputs."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ...api.files import write_npz
from ...api.models import load_model
from ...api.places import parse_place, place_label
from ...api.prepare import prepare
from ..report.console import Output
from ..report.tables import table
from .base import Command, add_inputs, add_json, add_model, add_places
from .execution import feeds_for, warn_nonfinite
from .outputs import check_target

__all__ = ["COMMAND", "array_stats"]


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    add_inputs(parser)
    add_places(parser, several=False)
    parser.add_argument("-o", "--output", metavar="OUT.npz", help="save the outputs by name in an .npz archive")
    parser.add_argument("--no-float16-check", dest="check_float16_range", action="store_false",
                        help="a float16 model: skip the check that makes a feed beyond float16's range, or an output "
                             "gone inf/NaN where float32 stays finite, an error (a little faster)")
    add_json(parser)


def array_stats(value: np.ndarray) -> dict[str, Any]:
    """dtype, shape, min, max, mean (and argmax over the last axis for [batch, classes] outputs)."""
    stats: dict[str, Any] = {"dtype": str(value.dtype), "shape": list(value.shape)}
    if value.size and value.dtype.kind in "fiub":
        wide = value.astype(np.float64)
        stats |= {"min": float(wide.min()), "max": float(wide.max()), "mean": float(wide.mean())}
    if value.ndim in (1, 2) and value.shape[-1] > 1 and value.dtype.kind in "fiu":
        stats["argmax"] = np.atleast_2d(value).argmax(axis=-1).tolist()
    return stats


def _run(args: argparse.Namespace, output: Output) -> int:
    if args.output:
        check_target(args.output, (".npz",))
    model = load_model(args.model)
    place = parse_place(args.place, args.tune)
    feeds = feeds_for(args, model, output)
    prepared = prepare(model.program, model.scope, model.feed_names, model.fetch_names, feeds, place,
                       check_float16_range=args.check_float16_range)
    results = dict(zip(model.fetch_names, prepared.run(feeds)))
    warn_nonfinite(output, results, place_label(place))
    if args.output:
        write_npz(args.output, results)
    facts = {"model": model.path, "place": place_label(place),
             "inputs": {name: array_stats(value) for name, value in feeds.items()},
             "outputs": {name: array_stats(value) for name, value in results.items()},
             "saved": args.output}
    if args.json:
        output.json(facts)
        return 0
    rows = [(name, s["dtype"], s["shape"], *(f"{s[k]:.4g}" if k in s else "-" for k in ("min", "max", "mean")),
             s.get("argmax", "-")) for name, s in facts["outputs"].items()]
    output.print(table(f"outputs on {place_label(place)}", ["output", "dtype", "shape", "min", "max", "mean", "argmax"],
                       rows, numeric=["min", "max", "mean"]))
    if args.output:
        output.print(f"saved {len(results)} output(s) to {args.output}")
    return 0


COMMAND = Command(
    "Run a model once and show each output's dtype, shape, min, max, mean and argmax.\n"
    "Inputs come from --input NAME=FILE.npy (or FILE.npz) or are seeded values the model can\n"
    "take (--random, the default: ids within the embedding's vocabulary, masks of ones, floats\n"
    "in [0, 1)), --input-shapes NAME:1x128 sizing the dims it leaves free. An output holding\n"
    "NaN or inf is a warning on stderr. -o OUT.npz saves the outputs by name.\n\n"
    "example: halfway run model.onnx --input image=cat.npy --place opencl -o out.npz",
    _configure, _run)
