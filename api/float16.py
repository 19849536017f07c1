"""``halfway.float16_transpile``: the float16 pass with the caller's program left as it was."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..ir.program import Program
from ..ir.scope import Scope
from ..passes.base import get_pass
from ..passes.float16 import DEFAULT_BLACK_LIST, DEFAULT_WHITE_LIST, Float16Report

__all__ = ["float16_transpile"]


def float16_transpile(program: Program, scope: Scope, *, keep_io_types: bool = True,
                      black_list: Iterable[str] = tuple(DEFAULT_BLACK_LIST),
                      white_list: Iterable[str] = tuple(DEFAULT_WHITE_LIST),
                      calibration_feeds: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]] | None = None,
                      tolerance: float | None = None, in_place: bool = False,
                      **options: object) -> tuple[Program, Float16Report]:
    """Transpile ``program`` to float16 (see ``halfway.passes.float16``).

    The program is cloned unless ``in_place``. The scope gains the float16 parameters
    (``<name>.fp16``) and keeps every existing entry, so the float32 and the float16 program
    run side by side on it. ``black_list`` / ``white_list`` replace the defaults (extend them
    from ``halfway.passes.float16``); ``calibration_feeds`` is one feed dict or several.
    ``tolerance`` (with calibration feeds): keep float32 the fewest ops for the fetched outputs
    to stay within this relative error (max abs error over max abs float32 value) of float32 on
    them; the report gives each such op's reason (``halfway.passes.float16.tolerance``).
    ``options`` are further ``Float16Options`` (``backend``, ``max_abs_value``, ``fetch_names``,
    ``drop_unused_params``, ...).

    Returns:
        The float16 program and the report of what changed.

    Raises:
        PassError: a program with sub-blocks, one that does not verify, bad options, a
            calibration run that fails, or a tolerance that even float32 everywhere misses; the program and the scope are then left as they were.
    """
    pass_ = get_pass("float16", keep_io_types=keep_io_types, black_list=black_list, white_list=white_list,
                     calibration_feeds=calibration_feeds, tolerance=tolerance, **options)
    target = program if in_place else program.clone()
    result = pass_(target, scope)
    return result.program, result.report
