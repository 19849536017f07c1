"""The feeds of a model run from the command line (``--input``, ``--random``, ``--seed``)."""

from __future__ import annotations

import argparse

import numpy as np

from ...api.feeds import parse_inputs, random_inputs
from ...api.models import Model

__all__ = ["feeds_for"]


def feeds_for(args: argparse.Namespace, model: Model) -> dict[str, np.ndarray]:
    """The feeds ``--input``/``--random``/``--seed`` ask for (random when no --input is given)."""
    if args.inputs:
        return parse_inputs(args.inputs, model.program, model.feed_names)
    return random_inputs(model.program, model.feed_names, args.seed)
