"""``halfway demo``: the main job on the shipped demo models (or any one model) in one table."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...api.input_shapes import parse_input_shapes
from ...api.models import load_model
from ...api.tokens import SEQUENCE
from ..demo import DEMO_MODELS, DemoModel, demo_model_path, run_demo
from ..report.console import Output
from .base import Command, UsageError, add_input_shapes, add_json, add_places, non_negative, positive
from .outputs import check_folder
from .places import parse_places

__all__ = ["COMMAND"]


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="PATH",
                        help=f"run on this model instead of the shipped {' and '.join(DEMO_MODELS)}")
    add_input_shapes(parser)
    add_places(parser, several=True)
    parser.add_argument("--samples", type=positive, default=8, metavar="K",
                        help="seeded inputs per model: each program runs once on each, timed (default: 8)")
    parser.add_argument("--warmup", type=non_negative, default=1, metavar="N",
                        help="untimed runs before them (default: 1)")
    parser.add_argument("--seed", type=non_negative, default=0, help="seed of the first input (default: 0)")
    parser.add_argument("--out", metavar="DIR",
                        help="also save the fused float32 and the float16 models in DIR (the shipped models: "
                             "in DIR/demo_resnet18/ and DIR/demo_bert/)")
    add_json(parser)


def _run(args: argparse.Namespace, output: Output) -> int:
    if args.out:
        check_folder(str(Path(args.out).absolute().parent), "--out", args.out)
    if args.input_shapes and not args.model:
        raise UsageError("--input-shapes sizes the inputs of a --model; the shipped models take their own")
    shapes = parse_input_shapes(args.input_shapes)
    shipped = {str(demo_model_path(name)): sequence for name, sequence in DEMO_MODELS.items()}
    models = []
    for path, sequence in ({args.model: SEQUENCE} if args.model else shipped).items():
        with output.task(f"importing {Path(path).name}"):
            models.append(DemoModel(load_model(path), sequence, shapes))
    places = parse_places(args.places, output, args.tune)
    return run_demo(output, models, places, samples=args.samples, warmup=args.warmup, seed=args.seed,
                    out_dir=args.out)


COMMAND = Command(
    "Import a CNN and a transformer (the shipped demo_resnet18.onnx: ResNet-18 at quarter width,\n"
    "and demo_bert.onnx: a 4-layer BERT-style encoder and classifier with an attention mask, both\n"
    "with seeded weights; or --model PATH alone), run the default fusion pipeline and the float16\n"
    "transpile, then run the float32 and float16 programs on numpy and on an OpenCL device when one\n"
    "is present, each once per seeded input (--samples: random images, padded token batches).\n"
    "A line per model gives its ops as imported, after fusion (with the fused attention,\n"
    "layer_norm, gelu, conv and fc ops) and in float16; one table shows, per model, place and\n"
    "precision: latency (median of the timed runs), parameter bytes, the planned activation peak,\n"
    "max abs/relative error and top-1 agreement against the imported float32 model, ops fused and\n"
    "casts inserted.",
    _configure, _run)
