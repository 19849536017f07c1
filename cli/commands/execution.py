"""Running a model from the command line: its feeds, and a program prepared for a place."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

import numpy as np

from ...executor import Executor, PreparedProgram
from ...executor.place import Place
from ...ir.program import Program
from ...ir.scope import Scope
from .feeds import parse_inputs, random_inputs
from .modelfile import Model

__all__ = ["feeds_for", "prepare"]


def feeds_for(args: argparse.Namespace, model: Model) -> dict[str, np.ndarray]:
    """The feeds ``--input``/``--random``/``--seed`` ask for (random when no --input is given)."""
    if args.inputs:
        return parse_inputs(args.inputs, model.program, model.feed_names)
    return random_inputs(model.program, model.feed_names, args.seed)


def prepare(program: Program, scope: Scope, feed_names: Sequence[str], fetch_names: Sequence[str],
            feeds: Mapping[str, np.ndarray], place: Place, *, check_float16_range: bool = False) -> PreparedProgram:
    """``program`` prepared on ``place`` for the shapes of ``feeds``. The commands that compare
    or time programs (demo, diff, bench) show a float16 overflow in their numbers, so only
    ``run`` asks for the float16 range check (``halfway.executor.float16_range``)."""
    shapes = {name: feeds[name].shape for name in feed_names}
    prepared = Executor(place).prepare(program, list(feed_names), list(fetch_names), scope, feed_shapes=shapes,
                                       check_float16_range=check_float16_range)
    assert isinstance(prepared, PreparedProgram)  # every feed's shape is given
    return prepared
