"""The compiled conv/fc epilogues that ``halfway.kernels.numpy.jit`` imports (with numba) at
first use: ``out = act(source + bias[c] + residual)`` in one pass over memory, numpy's results
bit for bit (sigmoid, swish and GELU computed as ``jit_math``'s loops): the activation follows
the sum a row at a time, while the row is in cache (``finish``, here and in ``jit_windows``).
numpy's error model, as ``jit_math``'s, so that their divisions vectorise, and its FMA
contraction (``jit_math.CONTRACT``), which only sigmoid, swish and GELU have multiply-adds for.

``source`` None means ``out`` itself: given ``out`` twice, LLVM's run-time overlap check would
send the loops down their scalar paths.

Every loop is a module-level function, so numba's on-disk cache finds it again in the next
process (a loop defined in a function and calling another compiled function gets a new cache
key in every process, as the callee's identity is part of its closure).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .jit_math import CONTRACT, gelu_erf_of, gelu_tanh_of, logistic, logistic_wide

__all__ = ["finish", "channels_mid", "channels_last"]

zero, one = np.float32(0), np.float32(1)


@njit(cache=True, nogil=True, inline="always")
def finish(values, code, alpha, top):  # pragma: no cover - compiled
    """The activation ``code`` (``jit._CODES``; 0 none) of ``values`` in place, one loop per
    activation, so that each vectorises (one loop branching on the code computed every branch for
    every value): relu (1) and relu6 (2, ``top``) as numpy's maximum and clip (+0 for -0, NaN
    kept), leaky_relu (3, slope ``alpha``), hard_swish (4, offset ``alpha``, threshold ``top``),
    sigmoid (5), swish (6, beta ``alpha``), GELU (7; its tanh form with ``alpha`` 1)."""
    if code == 1:
        for i in range(values.size):
            v = values[i]
            values[i] = zero if v <= zero else v
    elif code == 2:
        for i in range(values.size):
            v = values[i]
            values[i] = zero if v < zero else (top if v > top else v)
    elif code == 3:
        for i in range(values.size):
            v = values[i]
            values[i] = v * alpha if v < zero else v
    elif code == 4:  # as numpy_math's: v * clip(v + offset, 0, threshold) / threshold
        for i in range(values.size):
            v = values[i]
            gate = v + alpha
            gate = zero if gate < zero else (top if gate > top else gate)
            values[i] = gate * v / top
    elif code == 5:
        for i in range(values.size):
            values[i] = logistic(values[i])
    elif code == 6 and alpha == one:
        for i in range(values.size):
            values[i] = values[i] * logistic(values[i])
    elif code == 6:
        for i in range(values.size):
            v = values[i]
            values[i] = v * logistic_wide(float(alpha) * float(v))
    elif code == 7 and alpha == zero:
        for i in range(values.size):
            values[i] = gelu_erf_of(values[i])
    elif code == 7:
        for i in range(values.size):
            values[i] = gelu_tanh_of(values[i])


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def channels_mid(out, source, bias, residual, code, alpha, top):  # pragma: no cover - compiled
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
                finish(out[n, c, y], code, alpha, top)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=CONTRACT)
def channels_last(out, source, bias, residual, code, alpha, top):  # pragma: no cover - compiled
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
        finish(out[m], code, alpha, top)
