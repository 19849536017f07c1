"""glibc's heap kept from handing freed memory back to the kernel once the numpy backend runs.

Every run of a prepared program allocates its values anew (each kernel returns new arrays) and
frees each after its last reader. glibc serves blocks above its mmap threshold (128 KiB at
first, rising with the blocks freed) from new mappings, and gives the free top of its heaps back
above its trim threshold, so a run after a pause touches new pages, which the kernel zeroes one
by one; on a virtual machine the hypervisor has reclaimed the pages the guest freed and faults
them in again. After 0.3 s idle, MobileNetV3's next five runs took 10, 8.5, 8.9, 7.8 and 7.7 ms
where runs back to back take 4.9 (ONNX Runtime, whose arena keeps its memory: 3.0, 2.3, 2.1,
2.0, 2.0 and 1.9). With both thresholds raised the heap keeps what a run freed for the next:
5.9, 5.0, 4.9. The process holds on to its largest run's memory, as an arena does.

Linux with glibc only (``mallopt``); ``HALFWAY_KEEP_HEAP=0`` leaves glibc's defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]

MMAP_THRESHOLD = 32 << 20
"""Blocks up to this size come from the heap (glibc's largest: 32 MiB on 64-bit)."""
TRIM_THRESHOLD = 1 << 30
"""Free memory a heap keeps at its top before giving it back."""
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@functools.cache
def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds, once per process; whether they were set."""
    if os.environ.get("HALFWAY_KEEP_HEAP", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and other C libraries have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
