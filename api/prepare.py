"""A program prepared on a place for the shapes of given feeds: what the commands that run,
compare or time a model (run, diff, bench, warmup, the demo) share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..executor import Executor, PreparedProgram
from ..executor.place import Place
from ..ir.program import Program
from ..ir.scope import Scope

__all__ = ["prepare"]


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
