"""A model run through a pass pipeline and the float16 transpile (``halfway transpile``, the
demo, batch inference), and how many ops the passes took away."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..passes import Pass, PassManager, PipelineResult, get_pass
from ..passes.float16 import DEFAULT_BLACK_LIST, Float16Report
from .float16 import float16_transpile
from .models import Model

__all__ = ["NO_PASSES", "run_passes", "float16_pass", "run_float16", "ops_fused"]

NO_PASSES = "none"
"""The pipeline of no pass."""


def run_passes(model: Model, passes: str | None, dump_dir: str | None = None,
               after: Sequence[Pass] = ()) -> tuple[Model, PipelineResult]:
    """``model`` after the pipeline ``passes`` (None: the default; 'none': no pass), then ``after``."""
    pipeline: str | list[str] | None = [] if passes == NO_PASSES else passes
    manager = PassManager(pipeline, after=after, timing=True, count_ops=True, dump_dir=dump_dir)
    result = manager.run(model.program, model.scope, fetch=model.fetch_names)
    scope = result.scope if result.scope is not None else model.scope
    return Model(model.path, model.format, result.program, model.feed_names, model.fetch_names, scope), result


def float16_pass(*, keep_io_types: bool = True, black_list: tuple[str, ...] = (),
                 calibration: dict[str, np.ndarray] | None = None, tolerance: float | None = None) -> Pass:
    """The ``float16`` pass with these options: ``black_list`` extends the default list."""
    return get_pass("float16", keep_io_types=keep_io_types, black_list=tuple(DEFAULT_BLACK_LIST) + black_list,
                    calibration_feeds=calibration, tolerance=tolerance)


def run_float16(model: Model) -> tuple[Model, Float16Report]:
    """``model`` transpiled to float16 with the default options, and the transpiler's report."""
    program, report = float16_transpile(model.program, model.scope)
    feeds, fetches = program.feed_names() or model.feed_names, program.fetch_names() or model.fetch_names
    return Model(model.path, model.format, program, feeds, fetches, model.scope), report


def ops_fused(result: PipelineResult, passes: int | None = None) -> int:
    """How many ops fewer the first ``passes`` passes (default: all) left (ops folded into
    others, or found dead)."""
    return sum(sum(r.ops_before.values()) - sum(r.ops_after.values()) for r in result.records[:passes]
               if r.ops_before is not None and r.ops_after is not None)
