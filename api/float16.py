"""``halfway.float16_transpile``: the float16 pass, run by a PassManager, with the caller's program
and parameters left as they were."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..executor.place import Place
from ..ir.dtypes import DType
from ..ir.program import Program
from ..ir.scope import Scope
from ..kernels.registry import registered_kernels
from ..passes.base import get_pass
from ..passes.float16 import DEFAULT_BLACK_LIST, DEFAULT_WHITE_LIST, Float16Report, Float16Target
from ..passes.manager import PassManager

__all__ = ["float16_transpile", "float16_target"]


def float16_target(target: str | Place) -> Float16Target:
    """The ``Float16Target`` of a backend (``"numpy"``, ``"opencl"``) or a place: the op types
    with a float16 kernel registered for it."""
    backend = target if isinstance(target, str) else target.backend
    ops = {key.op_type for key in registered_kernels(backend) if key.dtype is DType.float16}
    return Float16Target(backend, frozenset(ops))


def float16_transpile(program: Program, scope: Scope, *, keep_io_types: bool = True,
                      black_list: Iterable[str] = tuple(DEFAULT_BLACK_LIST),
                      white_list: Iterable[str] = tuple(DEFAULT_WHITE_LIST),
                      calibration_feeds: Mapping[str, np.ndarray] | Sequence[Mapping[str, np.ndarray]] | None = None,
                      tolerance: float | None = None, target: str | Place | None = None, in_place: bool = False,
                      **options: object) -> tuple[Program, Float16Report]:
    """Transpile ``program`` to float16 (see ``halfway.passes.float16``).

    The pass runs in a ``PassManager``, which verifies the program before and after it, on a
    clone of the program unless ``in_place``. No entry of ``scope`` is replaced or removed: the
    float16 parameters (``<name>.fp16``) are added to it under new names, so the float32 and the
    float16 program run side by side on it (``drop_unused_params`` drops nothing from it).
    ``black_list`` / ``white_list`` replace the defaults (extend them from
    ``halfway.passes.float16``); ``calibration_feeds`` is one feed dict or several.
    ``tolerance`` (with calibration feeds): keep float32 the fewest ops for the fetched outputs
    to stay within this relative error (max abs error over max abs float32 value) of float32 on
    them; the report gives each such op's reason (``halfway.passes.float16.tolerance``).
    ``target``: the backend or place the program will run on; ops without a float16 kernel
    there stay float32 (None: no kernel check; every op the numpy backend runs has a float16
    kernel, and an op another backend lacks falls back to numpy). ``options`` are further
    ``Float16Options`` (``max_abs_value``, ``fetch_names``, ``float32_ops``, ...).

    Returns:
        The float16 program and the report of what changed.

    Raises:
        PassError: a program with sub-blocks, one that does not verify, bad options, a
            calibration run that fails, or a tolerance that even float32 everywhere misses; the
            program and the scope are then left as they were.
    """
    pass_ = get_pass("float16", keep_io_types=keep_io_types, black_list=black_list, white_list=white_list,
                     calibration_feeds=calibration_feeds, tolerance=tolerance,
                     target=float16_target(target) if target is not None else None, **options)
    result = PassManager([pass_], in_place=in_place).run(program, scope)
    added = result.scope if result.scope is not None else Scope()
    for name in added:  # new names only: the manager refuses a pass that shadows a parameter
        scope.set(name, added.get(name))
    return result.program, result.records[0].report
