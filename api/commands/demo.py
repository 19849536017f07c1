"""``halfway demo``: the main job on the shipped demo model (or any model) in one table."""

from __future__ import annotations

import argparse
from pathlib import Path

from halfway.commands.base import Command, add_json, add_places, non_negative, positive
from halfway.commands.places import parse_places
from halfway.commands.modelfile import load_model
from halfway.demo import DEMO_MODEL, demo_model_path, run_demo
from halfway.report.console import Output

__all__ = ["COMMAND"]


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="PATH", help=f"run on this model instead of the shipped {DEMO_MODEL}")
    add_places(parser, several=True)
    parser.add_argument("--samples", type=positive, default=8, metavar="K",
                        help="seeded random inputs: each program runs once on each, timed (default: 8)")
    parser.add_argument("--warmup", type=non_negative, default=1, metavar="N",
                        help="untimed runs before them (default: 1)")
    parser.add_argument("--seed", type=non_negative, default=0, help="seed of the first input (default: 0)")
    parser.add_argument("--out", metavar="DIR", help="also save the fused float32 and the float16 models in DIR")
    add_json(parser)


def _run(args: argparse.Namespace, output: Output) -> int:
    path = args.model or str(demo_model_path())
    with output.task(f"importing {Path(path).name}"):
        model = load_model(path)
    places = parse_places(args.places, output)
    return run_demo(output, model, places, samples=args.samples, warmup=args.warmup, seed=args.seed,
                    out_dir=args.out)


COMMAND = Command(
    "demo", "the main job: import, fuse, transpile to float16, run and compare, in one table",
    f"Import a CNN (the shipped {DEMO_MODEL}: ResNet-18 at quarter width with seeded weights,\n"
    "or --model PATH), run the default fusion pipeline and the float16 transpile, then run the\n"
    "float32 and float16 programs on numpy and on an OpenCL device when one is present, each\n"
    "once per seeded random input (--samples). One table shows, per place and precision:\n"
    "latency (median of the timed runs), parameter bytes,\n"
    "the planned activation peak, max abs/relative error and top-1 agreement against the\n"
    "imported float32 model, ops fused and casts inserted.",
    _configure, _run)
