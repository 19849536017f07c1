"""``halfway warmup``: compile the numpy backend's loops (numba, the ``jit`` extra) ahead of the
first run, by running the shipped demo models (and any --model) once on numpy."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ...api.input_shapes import parse_input_shapes
from ...api.models import Model, load_model
from ...api.pipelines import run_float16, run_passes
from ...api.prepare import prepare
from ...api.tokens import SEQUENCE
from ...executor.place import CPUPlace
from ...kernels.numpy.jit import JIT, cache_is_warm, cache_location
from ..demo import DEMO_MODELS, demo_inputs, demo_model_path
from ..report.console import Output
from .base import Command, add_input_shapes, add_json

__all__ = ["COMMAND"]


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", action="append", default=[], metavar="PATH",
                        help="also run this model (repeatable), so that the loops it needs are compiled too")
    add_input_shapes(parser)
    add_json(parser)


def _warm(output: Output, path: str, sequence: int, shapes: dict[str, tuple[int, ...]]) -> None:
    """Run ``path`` once on numpy as imported, fused and in float16 (each compiles its own loops)."""
    model = load_model(path)
    fused, _ = run_passes(model, None)
    variants: list[Model] = [model, fused, run_float16(fused)[0]]
    with output.task(f"compiling the loops {Path(path).name} runs", total=len(variants)) as tick:
        for variant in variants:
            feeds = demo_inputs(variant, 0, sequence, shapes)
            prepare(variant.program, variant.scope, variant.feed_names, variant.fetch_names, feeds, CPUPlace()).run(feeds)
            tick()


def _run(args: argparse.Namespace, output: Output) -> int:
    cache = cache_location()
    if not JIT:
        output.note("nothing to compile: numba is not installed (pip install 'halfway[jit]') or HALFWAY_JIT=0")
        facts: dict[str, Any] = {"jit": False, "cache": None, "models": [], "seconds": 0.0}
        return _report(args, output, facts)
    shapes = parse_input_shapes(args.input_shapes)
    models = {str(demo_model_path(name)): sequence for name, sequence in DEMO_MODELS.items()}
    models |= dict.fromkeys(args.model, SEQUENCE)
    start = time.perf_counter()
    for path, sequence in models.items():
        _warm(output, path, sequence, shapes if path in args.model else {})
    facts = {"jit": True, "cache": str(cache), "warm": cache_is_warm(cache), "models": list(models),
             "seconds": time.perf_counter() - start}
    return _report(args, output, facts)


def _report(args: argparse.Namespace, output: Output, facts: dict[str, Any]) -> int:
    if args.json:
        output.json(facts)
    elif facts["jit"]:
        output.print(f"the CPU loops of {len(facts['models'])} model(s) are compiled, cached in {facts['cache']} "
                     f"({facts['seconds']:.1f} s)")
    return 0


COMMAND = Command(
    "With the jit extra (numba), the numpy backend's loops are compiled the first time they run\n"
    "and cached (a first run takes minutes on a small machine). warmup compiles them now, by\n"
    "running the shipped demo models, and each --model, once on numpy: as imported, fused and\n"
    "in float16. It prints where the cache is ($XDG_CACHE_HOME/halfway/numba, or NUMBA_CACHE_DIR);\n"
    "later runs load the loops from there in a moment.\n\n"
    "example: halfway warmup --model model.onnx --input-shapes input_ids:1x128",
    _configure, _run)
