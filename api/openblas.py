"""OpenBLAS's kernels on AMD CPUs its runtime dispatch does not recognise.

numpy's wheels bundle an OpenBLAS built for every x86-64 core, which picks its kernels by CPUID
when it loads. Releases up to at least 0.3.31 do not recognise AMD's Zen 5 (family 1Ah) and fall
back to their Haswell (AVX2) kernels there, at half the float32 GEMM speed of their AVX-512
(SkylakeX) kernels on the same CPU (2048x2048 sgemm, 2 cores: 260 against 490 GF/s). On Zen 4
OpenBLAS itself already picks SkylakeX.

So, when ``tune()`` runs before numpy is imported (the ``halfway`` command does so first; a
program of the user's may call ``halfway.openblas.tune()`` before its first ``import numpy``), an AMD CPU with the AVX-512 subsets those kernels use
gets ``OPENBLAS_CORETYPE=SkylakeX``. A value the user set is kept, and once numpy is imported
OpenBLAS has made its choice, so nothing is changed then.

Likewise ``OPENBLAS_THREAD_TIMEOUT``: OpenBLAS's idle threads spin for 2^28 cycles (tens of
milliseconds) after each GEMM before they sleep, holding the cores that the numpy backend's own
threads (``halfway.kernels.numpy.threads``) need for the activations and epilogues between GEMMs
(two threads ran no faster than one). halfway sets 2^``THREAD_TIMEOUT`` cycles, a few
microseconds; waking the threads for the next GEMM costs it nothing measurable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

__all__ = ["SKYLAKEX_FLAGS", "THREAD_TIMEOUT", "core_for", "choose_core", "choose_thread_timeout", "tune"]

SKYLAKEX_FLAGS = frozenset({"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})
"""The AVX-512 subsets OpenBLAS's SkylakeX kernels use (its own test before choosing them)."""

THREAD_TIMEOUT = "14"
"""OpenBLAS's idle spin, as log2 of cycles (it takes 4 to 30)."""


def core_for(cpuinfo: str) -> str | None:
    """The OpenBLAS core type to force for the CPU described by ``cpuinfo`` (the text of Linux's
    ``/proc/cpuinfo``), or None to leave OpenBLAS's own choice."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if fields.get("vendor_id") != "AuthenticAMD":
        return None
    return "SkylakeX" if SKYLAKEX_FLAGS <= set(fields.get("flags", "").split()) else None


def choose_core(environ: MutableMapping[str, str] = os.environ, cpuinfo_path: str = "/proc/cpuinfo") -> str | None:
    """Set ``OPENBLAS_CORETYPE`` in ``environ`` where ``core_for`` says so, unless it is set
    already or numpy (and with it OpenBLAS) is loaded; returns the value set, or None."""
    if "OPENBLAS_CORETYPE" in environ or "numpy" in sys.modules:
        return None
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as f:
            core = core_for(f.read())
    except OSError:  # not Linux
        return None
    if core is not None:
        environ["OPENBLAS_CORETYPE"] = core
    return core


def choose_thread_timeout(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Set ``OPENBLAS_THREAD_TIMEOUT`` in ``environ`` to ``THREAD_TIMEOUT`` unless it is set
    already or numpy is loaded; returns the value set, or None."""
    if "OPENBLAS_THREAD_TIMEOUT" in environ or "numpy" in sys.modules:
        return None
    environ["OPENBLAS_THREAD_TIMEOUT"] = THREAD_TIMEOUT
    return THREAD_TIMEOUT


def tune(environ: MutableMapping[str, str] = os.environ) -> None:
    """``choose_core`` and ``choose_thread_timeout``: a no-op once numpy is loaded."""
    choose_core(environ)
    choose_thread_timeout(environ)
