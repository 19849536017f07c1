"""``halfway batch MODEL --input DATA --output OUT``: run a model over every row of a dataset, in
this process or on a Ray cluster, and write the outputs beside the rows' ids."""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

import numpy as np

from ...api.batch.columns import Columns, concat_columns, row_count, slice_rows
from ...api.batch.predictor import Predictor
from ...api.batch.tables import FORMATS, check_output, read_rows, write_rows
from ...api.models import load_model
from ...ir.errors import HalfwayError
from ..report.console import Output
from ..report.tables import table
from .base import Command, UsageError, add_json, add_model, positive
from .outputs import check_target

__all__ = ["COMMAND", "INDEX"]

INDEX = "index"
"""The column added to the rows (unless DATA has one): each row's place in DATA, naming it in
errors and in the output."""

LOCAL = ""
"""``--ray`` without an address: a Ray runtime started for the run."""


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    parser.add_argument("--input", required=True, metavar="DATA", help=f"the rows: {FORMATS}")
    parser.add_argument("--output", required=True, metavar="OUT", help="where to write: OUT.parquet or OUT.npz")
    parser.add_argument("--passes", default=None, metavar="LIST",
                        help="comma-separated pass names, or 'none' (default: the default pipeline)")
    parser.add_argument("--fp16", action="store_true", help="transpile to float16 after the passes")
    parser.add_argument("--calibrate", metavar="INPUTS.npz",
                        help="with --fp16: inputs that keep ops overflowing float16 in float32")
    parser.add_argument("--place", default="cpu", metavar="PLACE", help="cpu, opencl or opencl:N (default: cpu)")
    parser.add_argument("--batch-size", type=positive, default=32, metavar="B", help="rows per run (default: 32)")
    parser.add_argument("--ray", nargs="?", const=LOCAL, default=None, metavar="ADDRESS",
                        help="run on Ray: a runtime started for the run, or the cluster at ADDRESS (ray start --head)")
    parser.add_argument("--workers", type=positive, default=None, metavar="N",
                        help="with --ray: N actors, each holding the model (default: one to one per CPU)")
    parser.add_argument("--gpus", type=float, default=0, metavar="G",
                        help="with --ray: GPUs per actor (--place opencl on a GPU node: 1)")
    add_json(parser)


def _options(args: argparse.Namespace) -> dict[str, Any]:
    return {"passes": args.passes, "fp16": args.fp16, "calibration": args.calibrate, "place": args.place}


def _run(args: argparse.Namespace, output: Output) -> int:
    if args.ray is None and (args.workers is not None or args.gpus):
        raise UsageError("--workers and --gpus choose Ray actors: give --ray too")
    check_target(args.output, (".parquet", ".npz"), option="--output")
    check_output(args.output, args.input)
    model = load_model(args.model)
    columns = read_rows(args.input, model.feed_names)
    rows = row_count(columns)
    if INDEX not in columns:
        columns = {INDEX: np.arange(rows), **columns}
    start = time.perf_counter()
    if args.ray is None:
        results = _run_here(args, columns, output)
    else:
        results = _run_on_ray(args, columns, output)
    seconds = time.perf_counter() - start
    write_rows(args.output, results)
    facts = {"model": args.model, "input": args.input, "output": args.output, "rows": rows,
             "where": "this process" if args.ray is None else f"ray {args.ray or '(local)'}",
             "seconds": seconds, "rows_per_s": rows / seconds if seconds else None}
    if args.json:
        output.json(facts)
        return 0
    output.print(table("batch", ["rows", "where", "seconds", "rows/s", "output"],
                       [(rows, facts["where"], f"{seconds:.2f}", f"{facts['rows_per_s']:.1f}", args.output)],
                       numeric=["rows", "seconds", "rows/s"]))
    return 0


def _run_here(args: argparse.Namespace, columns: Columns, output: Output) -> Columns:
    with output.task("preparing the model"):
        predictor = Predictor(args.model, **_options(args))
    rows, size = row_count(columns), args.batch_size
    starts = range(0, rows, size)
    parts = []
    with output.task(f"running {rows} rows in batches of {size}", total=len(starts)) as advance:
        for first in starts:
            parts.append(predictor(slice_rows(columns, first, first + size)))
            advance()
    return concat_columns(parts)


def _run_on_ray(args: argparse.Namespace, columns: Columns, output: Output) -> Columns:
    import ray

    from ...api.ray import cause, predict

    started = not ray.is_initialized()
    if started:
        ray.init(address=args.ray or None, include_dashboard=False, logging_level=logging.WARNING)
    try:
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        dataset = ray.data.from_items(_items(columns))
        predicted = predict(dataset, args.model, **_options(args), batch_size=args.batch_size,
                            concurrency=args.workers, num_gpus=args.gpus)
        return concat_columns(list(predicted.iter_batches(batch_format="numpy", batch_size=None)))
    except ray.exceptions.RayError as e:
        found = cause(e)
        raise (found or HalfwayError(f"the Ray run failed: {e}")) from None
    finally:
        if started:
            ray.shutdown()


def _items(columns: Columns) -> list[dict[str, Any]]:
    names = list(columns)
    return [dict(zip(names, values)) for values in zip(*(columns[n] for n in names))]


COMMAND = Command(
    "Run MODEL over every row of DATA and write its outputs, one row each, with the rows' other\n"
    "columns (ids, file names, and `index`, the row's place in DATA) to OUT (Parquet or .npz),\n"
    "atomically. The model is loaded, passed, transpiled and prepared once, then runs batches\n"
    "of --batch-size rows. A row of the wrong shape or dtype is an error naming the row and\n"
    "column, and nothing is written. OUT is never DATA nor inside DATA's folder; an OUT that\n"
    "exists keeps its permissions.\n\n"
    f"DATA: {FORMATS}.\n"
    "Without --ray it runs in this process; with --ray it starts a local Ray runtime for the run,\n"
    "or joins the cluster at ADDRESS (`ray start --head` prints it), with --workers actors.\n\n"
    "examples:\n"
    "  halfway batch model.onnx --input images/ --output logits.parquet --fp16\n"
    "  halfway batch model.onnx --input tokens.parquet --output out.parquet --ray 10.0.0.1:6379 --workers 8",
    _configure, _run)
