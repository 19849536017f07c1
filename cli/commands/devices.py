"""``halfway devices``: the OpenCL platforms and devices, and how each runs float16 programs."""

from __future__ import annotations

import argparse
from typing import Any

from ..report.console import Output
from ..report.tables import human_bytes, table
from .base import Command, add_json

__all__ = ["COMMAND", "opencl_devices"]


def opencl_devices() -> list[dict[str, Any]]:
    """Every OpenCL device of every platform, numbered as ``--place opencl:N`` numbers them.
    A HalfwayError says how to install OpenCL support when pyopencl is missing."""
    from ...kernels.opencl.runtime import PRECISIONS, DeviceCaps, build_error, cl, float16_mode

    try:
        platforms = cl.get_platforms()
    except cl.Error:
        platforms = []
    devices = [d for p in platforms for d in p.get_devices()]
    rows = []
    for index, device in enumerate(devices):
        caps = DeviceCaps.of(device)
        rows.append({"index": index, "place": f"opencl:{index}", "platform": device.platform.name.strip(),
                     "device": caps.name, "type": "GPU" if caps.is_gpu else "CPU/other",
                     "version": device.version.strip(), "compute_units": device.max_compute_units,
                     "global_memory_bytes": device.global_mem_size, "cl_khr_fp16": caps.fp16,
                     "float16_mode": {p: float16_mode(caps, p).value for p in PRECISIONS},
                     "build_error": build_error(device)})
    return rows


def _run(args: argparse.Namespace, output: Output) -> int:
    rows = opencl_devices()
    if args.json:
        output.json(rows)
        return 0
    if not rows:
        output.print("no OpenCL platform or device found: install your GPU's OpenCL driver, or "
                     "pip install 'halfway[opencl]' for the PoCL CPU device")
        return 0
    output.print(table(
        "OpenCL devices", ["place", "platform", "device", "type", "version", "units", "memory", "cl_khr_fp16",
                           "float16 mode (low / normal / high precision)", "builds programs"],
        [(r["place"], r["platform"], r["device"], r["type"], r["version"], r["compute_units"],
          human_bytes(r["global_memory_bytes"]), "yes" if r["cl_khr_fp16"] else "no",
          " / ".join(r["float16_mode"].values()), r["build_error"] or "yes") for r in rows],
        caption="float16 modes: native = half arithmetic; storage = float16 buffers, float32 arithmetic; "
                "high = float32 buffers and kernels. `--place opencl:N` picks a device; the default is "
                "the first GPU that builds programs, else the first device that does.",
        numeric=["units", "memory"]))
    return 0


COMMAND = Command(
    "List every OpenCL device of every platform, numbered as --place opencl:N takes them, with\n"
    "its type, OpenCL version, compute units and memory, whether it has cl_khr_fp16, and how it\n"
    "runs float16 programs at each precision (native half arithmetic, float16 storage with\n"
    "float32 arithmetic, or float32 throughout), and whether its compiler builds programs (a\n"
    "driver may list a device its compiler cannot target; the build log's error says why).",
    lambda parser: add_json(parser), _run)
