"""What a subcommand is, and the arguments several of them share."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from attrs import frozen

from ..exits import EXIT_BROKEN_PIPE, EXIT_DIFFERENT, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from ..report.console import Output

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_DIFFERENT", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "Command", "UsageError",
           "add_model", "add_json", "add_places", "add_inputs", "add_input_shapes", "add_repeat", "positive", "non_negative",
           "tolerance"]

Run = Callable[[argparse.Namespace, Output], int]


@frozen
class Command:
    """A subcommand: ``description`` is its --help text, ``configure`` adds its arguments and
    ``run`` runs it. Its name and its line in ``halfway --help`` are its row of
    ``halfway.cli.command_table``, which the help reads without importing the command."""

    description: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Run


class UsageError(Exception):
    """A command line that makes no sense (options that do not go together): exit code 2, as for a
    bad --input or --place spec (``halfway.api.errors.SpecError``)."""


def add_model(parser: argparse.ArgumentParser, dest: str = "model", help: str | None = None) -> None:
    parser.add_argument(dest, metavar=dest.upper(), help=help or
                        "an .onnx file, a .pdmodel file (or its path prefix), or a folder holding a Paddle/halfway "
                        "inference model")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of tables")


def add_places(parser: argparse.ArgumentParser, *, several: bool) -> None:
    if several:
        parser.add_argument("--place", action="append", dest="places", metavar="PLACE",
                            help="where to run: cpu, opencl or opencl:N (device N of `halfway devices`); repeat "
                                 "it to compare places (default: cpu, and opencl when a device is present)")
    else:
        parser.add_argument("--place", default="cpu", metavar="PLACE",
                            help="where to run: cpu, opencl or opencl:N (device N of `halfway devices`); "
                                 "default: cpu")
    parser.add_argument("--tune", action="store_true",
                        help="on OpenCL, time each tensor-core GEMM's and convolution's tiles on the device as the "
                             "model is prepared and keep the fastest (remembered per device and shape)")


def add_inputs(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--input", action="append", dest="inputs", default=[], metavar="NAME=FILE.npy",
                       help="the value of input NAME from a .npy file, or FILE.npz holding arrays named after "
                            "the inputs (repeatable)")
    group.add_argument("--random", action="store_true",
                       help="feed seeded values the model can take, shaped like the inputs (the default without "
                            "--input): ids within the embedding's vocabulary, masks of ones, token type ids 0, "
                            "floats in [0, 1)")
    parser.add_argument("--seed", type=non_negative, default=0, help="seed of the random inputs (default: 0)")
    add_input_shapes(parser)
    parser.add_argument("--cast-inputs", action="store_true",
                        help="convert --input arrays of another float (int) dtype than the model's, such as "
                             "float64 for float32, and say so (default: such an array is an error, as in ONNX "
                             "Runtime)")


def add_input_shapes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input-shapes", action="append", default=[], metavar="NAME:1x128,...",
                        help="the shapes of generated inputs, sizing the dims the model leaves free (inputs that "
                             "share a dim name follow; unsized free dims are 1); repeatable")


def add_repeat(parser: argparse.ArgumentParser, default: int) -> None:
    parser.add_argument("--repeat", type=positive, default=default, metavar="N",
                        help=f"timed runs per measurement; the median is reported (default: {default})")
    parser.add_argument("--warmup", type=non_negative, default=2, metavar="N",
                        help="untimed runs before timing (default: 2)")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive count, got {text}")
    return value


def non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text}")
    return value


def tolerance(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text}")
    return value
