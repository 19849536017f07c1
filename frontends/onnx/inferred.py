"""The dims ONNX's shape inference finds for a model's values, with data propagation through
shape arithmetic, bounded in time and memory.

Propagating data, onnx materialises the tensors a shape computation makes (``Range(0, 1e11,
1)``, an ``Expand`` to a shape a ``Mul`` made huge) inside one C++ call that no signal stops.
So it runs in a forked child, given ``INFER_SECONDS`` and ``MEMORY_HEADROOM`` more address space
than the child starts with; when the child fails, runs out of either, or the platform cannot
fork, the dims are those of the inference without data propagation (which computes no tensor).
The import does not depend on these dims: they only refine those halfway leaves unknown.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time

import onnx
from onnx import ModelProto

__all__ = ["inferred_dims", "INFER_SECONDS", "MEMORY_HEADROOM"]

INFER_SECONDS = 10.0
MEMORY_HEADROOM = 2 << 30

Dims = dict[str, tuple[int, ...]]


def inferred_dims(proto: ModelProto) -> Dims:
    """Value name -> its dims as inferred (-1 where unknown); nothing when inference fails."""
    found = _in_child(proto) if hasattr(os, "fork") else None
    if found is None:
        found = _dims(proto, data_prop=False)
    return found or {}


def _dims(proto: ModelProto, *, data_prop: bool) -> Dims | None:
    """The inferred dims; None when onnx's inference fails on the model."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, data_prop=data_prop).graph
    except Exception:  # onnx's inference raises many kinds of errors on models it cannot follow
        return None
    dims = {}
    for value in [*inferred.value_info, *inferred.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            dims[value.name] = tuple(d.dim_value if d.HasField("dim_value") else -1
                                     for d in value.type.tensor_type.shape.dim)
    return dims


def _in_child(proto: ModelProto) -> Dims | None:
    """``_dims`` with data propagation, in a forked child within the bounds; None past them."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            os.close(read)
            _limit_memory()
            with os.fdopen(write, "wb") as f:
                f.write(json.dumps(_dims(proto, data_prop=True)).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        text = _read_within(read, time.monotonic() + INFER_SECONDS)
    finally:
        os.close(read)
        _reap(pid)
    found = json.loads(text) if text else None
    return None if found is None else {name: tuple(dims) for name, dims in found.items()}


def _read_within(fd: int, deadline: float) -> bytes | None:
    """All the bytes the child writes to ``fd``, or None when it is not done by ``deadline``."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _reap(pid: int) -> None:
    """End the child if it still runs, and wait for it."""
    if os.waitpid(pid, os.WNOHANG)[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _limit_memory() -> None:
    """Cap the child's address space at what it has plus ``MEMORY_HEADROOM`` (where the platform can)."""
    try:
        import resource

        with open("/proc/self/status") as f:
            size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (size + MEMORY_HEADROOM, size + MEMORY_HEADROOM))
    except (ImportError, OSError, StopIteration, ValueError):
        pass
