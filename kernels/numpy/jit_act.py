"""The family rows' activations in the compiled loops (numba), imported with them at first use:
``activate(x, act, a0, a1, a2)`` is activation ``act`` of one float32, ``finish(values, act, a0,
a1, a2)`` applies it to a row of values in place (the epilogues of ``jit_epilogue``,
``jit_windows`` and ``jit_direct``), ``elementwise(out, x, act, a0, a1, a2)`` to a flat array
(``jit.compiled_unary``).

The functions are ``jit_source``'s, made from the rows' expressions; no activation is written
here. ``act`` is a marker (``jit_source.marker``): a numpy dtype of one field named for the activation's key,
a type numba's dispatcher reads in C. Each loop is therefore compiled, and cached on disk, once
per activation it meets, with that activation alone inlined into its rows' loop, as if written
there: a loop branching among every row's math would compile them all into every loop.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, types
from numba.core import errors
from numba.extending import overload

from . import jit_math
from .jit_math import CONTRACT
from .jit_source import NO_ACTIVATION, activation_source

__all__ = ["FUNCTIONS", "activate", "finish", "elementwise"]


def _functions() -> dict[str, Any]:
    namespace: dict[str, Any] = {"np": np, "one": np.float32(1), "half": np.float32(0.5),
                                 **{name: getattr(jit_math, name) for name in jit_math.__all__}}
    exec(compile(activation_source(), "<halfway activations>", "exec"), namespace)
    functions: dict[str, Any] = namespace["FUNCTIONS"]
    return functions


FUNCTIONS = _functions()
"""Key -> the row's function of ``(x, act, a0, a1, a2)`` (``jit_source``)."""


def _key(act: types.Type) -> str:
    if not (isinstance(act, types.DType) and isinstance(act.dtype, types.Record) and len(act.dtype.fields) == 1):
        raise errors.TypingError(f"an activation is a marker (jit_source.marker), not {act}")
    (key,) = act.dtype.fields
    return str(key)


def activate(x, act, a0, a1, a2):  # pragma: no cover - replaced in compiled code
    raise NotImplementedError("activate runs in compiled loops only")


@overload(activate, inline="always")
def _activate(x, act, a0, a1, a2):  # type: ignore[no-untyped-def]
    return FUNCTIONS[_key(act)]


def finish(values, act, a0, a1, a2):  # pragma: no cover - replaced in compiled code
    raise NotImplementedError("finish runs in compiled loops only")


def _unchanged(values, act, a0, a1, a2):  # pragma: no cover - compiled
    pass


def _each(values, act, a0, a1, a2):  # pragma: no cover - compiled
    for i in range(values.size):
        values[i] = activate(values[i], act, a0, a1, a2)


@overload(finish, inline="always")
def _finish(values, act, a0, a1, a2):  # type: ignore[no-untyped-def]
    return _unchanged if _key(act) == NO_ACTIVATION else _each


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def elementwise(out, x, act, a0, a1, a2):  # pragma: no cover - compiled
    """``out = act(x)`` over flat arrays; ``x`` None: ``out``'s own values (given ``out`` twice,
    LLVM's run-time overlap check would send the loop down its scalar path)."""
    source = out if x is None else x
    for i in range(out.size):
        out[i] = activate(source[i], act, a0, a1, a2)
