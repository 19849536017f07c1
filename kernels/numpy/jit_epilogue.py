"""The compiled conv/fc epilogues that ``halfway.kernels.numpy.jit`` imports (with numba) at
first use: ``out = act(source + bias[c] + residual)`` in one pass over memory, numpy's results
bit for bit where the activation is arithmetic (the same float32 operations in the same order):
the activation follows the sum a row at a time, while the row is in cache (``jit_act.finish``,
here and in ``jit_windows`` and ``jit_direct``). numpy's error model, so that divisions
vectorise, and FMA contraction (``jit_math.CONTRACT``).

``act`` is an activation's marker and ``a0``..``a2`` its attrs (``jit.CompiledActivation``).
``source`` None means ``out`` itself: given ``out`` twice, LLVM's run-time overlap check would
send the loops down their scalar paths.

Every loop is a module-level function, so numba's on-disk cache finds it again in the next
process (a loop defined in a function and calling another compiled function gets a new cache
key in every process, as the callee's identity is part of its closure).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .jit_act import finish
from .jit_math import CONTRACT

__all__ = ["channels_mid", "channels_last"]

zero = np.float32(0)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def channels_mid(out, source, bias, residual, act, a0, a1, a2):  # pragma: no cover - compiled
    """4-D ``[N, C, H, W]``: ``out = act(source + bias[c] + residual)``; ``source`` None: ``out``'s."""
    images, channels, rows, cols = out.shape
    source = out if source is None else source
    for n in range(images):
        for c in range(channels):
            b = bias[c] if bias is not None else zero
            for y in range(rows):
                for x in range(cols):
                    v = source[n, c, y, x]
                    if bias is not None:
                        v = v + b
                    if residual is not None:
                        v = v + residual[n, c, y, x]
                    out[n, c, y, x] = v
                finish(out[n, c, y], act, a0, a1, a2)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def channels_last(out, source, bias, residual, act, a0, a1, a2):  # pragma: no cover - compiled
    """2-D ``[M, C]``: ``out = act(source + bias[c] + residual)``; ``source`` None: ``out``'s."""
    rows, channels = out.shape
    source = out if source is None else source
    for m in range(rows):
        for c in range(channels):
            v = source[m, c]
            if bias is not None:
                v = v + bias[c]
            if residual is not None:
                v = v + residual[m, c]
            out[m, c] = v
        finish(out[m], act, a0, a1, a2)
