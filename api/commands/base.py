"""What a subcommand is, and the arguments several of them share."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from attrs import frozen

from halfway.report.console import Output

__all__ = ["Command", "UsageError", "add_model", "add_json", "add_places", "add_repeat"]

Run = Callable[[argparse.Namespace, Output], int]


@frozen
class Command:
    """A subcommand: ``summary`` is its line in ``halfway --help``; ``description`` its --help text."""

    name: str
    summary: str
    description: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Run


class UsageError(Exception):
    """A command line that makes no sense (a bad --input or --place spec): exit code 2."""


def add_model(parser: argparse.ArgumentParser, dest: str = "model", help: str | None = None) -> None:
    parser.add_argument(dest, metavar=dest.upper(), help=help or
                        "an .onnx file, a .pdmodel file (or its path prefix), or a folder holding a Paddle/halfway "
                        "inference model")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of tables")


def add_places(parser: argparse.ArgumentParser, default: str | None = "cpu") -> None:
    parser.add_argument("--place", action="append", dest="places", metavar="PLACE",
                        help=f"where to run: cpu, opencl or opencl:N (device N of `halfway devices`); repeat it "
                             f"to compare places{f' (default: {default})' if default else ''}")


def add_repeat(parser: argparse.ArgumentParser, default: int) -> None:
    parser.add_argument("--repeat", type=_positive, default=default, metavar="N",
                        help=f"timed runs per measurement; the median is reported (default: {default})")
    parser.add_argument("--warmup", type=_non_negative, default=2, metavar="N",
                        help="untimed runs before timing (default: 2)")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive count, got {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, got {text}")
    return value
