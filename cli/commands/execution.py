"""The feeds of a model run from the command line (``--input``, ``--random``, ``--seed``,
``--input-shapes``, ``--cast-inputs``), and the warning for outputs that are not finite."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

import numpy as np

from ...api.feed_roles import check_ids, feed_roles
from ...api.feeds import dtype_changes, random_inputs, read_inputs, typed_feeds
from ...api.input_shapes import feed_shapes, parse_input_shapes, unsized_feeds
from ...api.measure import nonfinite
from ...api.models import Model
from ..report.console import Output
from .base import UsageError

__all__ = ["feeds_for", "generated_shapes", "warn_nonfinite"]


def feeds_for(args: argparse.Namespace, model: Model, output: Output) -> dict[str, np.ndarray]:
    """The feeds the options ask for (generated when no --input is given), their ids checked
    against the embedding tables they index (``halfway.api.feed_roles.check_ids``)."""
    if args.inputs:
        if args.input_shapes:
            raise UsageError("--input-shapes sizes generated inputs; --input arrays keep their own shapes")
        arrays = read_inputs(args.inputs, model.feed_names)
        feeds = typed_feeds(arrays, model.program, cast=args.cast_inputs)
        for name, have, want in dtype_changes(arrays, model.program):
            output.note(f"input {name!r}: {have} converted to {want} (--cast-inputs)")
    else:
        shapes = generated_shapes(args, model, output)
        feeds = random_inputs(model.program, model.feed_names, args.seed, shapes)
    check_ids(feed_roles(model.program, model.feed_names), feeds)
    return feeds


def generated_shapes(args: argparse.Namespace, model: Model, output: Output) -> dict[str, tuple[int, ...]]:
    """The shapes of generated feeds, ``--input-shapes`` sizing the model's free dims; a note
    names the feeds whose free dims nothing sized."""
    given = parse_input_shapes(args.input_shapes)
    shapes = feed_shapes(model.program, model.feed_names, given)
    unsized = unsized_feeds(model.program, model.feed_names, given)
    if unsized:
        ran = ", ".join(f"{name}:{'x'.join(map(str, shapes[name]))}" for name in unsized)
        output.note(f"free dims set to 1: {ran}; --input-shapes NAME:1x128,... sizes them")
    return shapes


def warn_nonfinite(output: Output, results: Mapping[str, np.ndarray], where: str) -> None:
    """A warning line for each output holding NaN or infinities."""
    for found in nonfinite(results):
        output.warning(f"output {found} ({where})")
