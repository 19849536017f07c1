"""What a benchmark's ``--json OUT`` writes: its figures, dated, with the machine and the command.

    results = Results("bench_zoo", args.json)          # args.json: the path, or None
    results.add("latency", model="resnet50", halfway_ms=21.3, onnxruntime_ms=19.8, ratio=1.08)
    results.summary(geomean=1.12)
    results.write()                                    # nothing without a path

The file is one JSON object::

    {"benchmark": "bench_zoo", "date": "2026-11-28T03:51:37+00:00",
     "machine": {"cpu": "AMD EPYC", "cores": 2, "isa": ["avx2", "avx512f"], "gpu": "NVIDIA H100 ...",
                 "kernels": {"openblas": "SkylakeX", "numba": "znver4", "numpy": "AVX512_SPR"}, "load_average": 0.2},
     "command": "benchmarks/bench_zoo.py --repeats 30", "source": "measured",
     "versions": {"halfway": "<commit>", "python": "3.11.7", "numpy": "2.3.5", ...},
     "tables": {"latency": [{"model": "resnet50", "halfway_ms": 21.3, ...}, ...]},
     "summary": {"geomean": 1.12}}

``scripts/bench_pages.py`` turns the files in ``docs/benchmarks/data/`` into the documentation's
benchmark pages: a table per ``tables`` entry, in the columns' order of its first row, and plots.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ISA_FLAGS = ("avx2", "avx512f", "fma", "neon", "asimd")
"""The CPU flags recorded: those that decide which kernels numpy's BLAS and the compiled loops run."""

ROOT = Path(__file__).resolve().parents[1]


def cpu() -> dict[str, Any]:
    """The CPU's model name, the cores this process may use and its vector ISA flags."""
    name, flags = "", set[str]()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not name:
                name = value.strip()
            elif key.strip() in ("flags", "Features") and not flags:
                flags = set(value.split())
    except OSError:
        pass
    name = name or platform.processor() or platform.machine()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": name, "cores": cores, "isa": [f for f in ISA_FLAGS if f in flags]}


def kernel_targets() -> dict[str, str]:
    """The ISA each library's kernels were chosen for at run time: OpenBLAS's core type
    (threadpoolctl), the CPU numba compiles the loops for (``NUMBA_CPU_NAME``, else the host's)
    and numpy's best dispatch target; those not found are left out."""
    found: dict[str, str] = {}
    try:
        from threadpoolctl import threadpool_info

        cores = [i["architecture"] for i in threadpool_info() if i.get("internal_api") == "openblas"]
        if cores:
            found["openblas"] = str(cores[0])
    except ImportError:
        pass
    try:
        import llvmlite.binding

        found["numba"] = os.environ.get("NUMBA_CPU_NAME") or str(llvmlite.binding.get_host_cpu_name())
    except ImportError:
        pass
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__  # type: ignore[import-not-found]

        targets = [t for t in __cpu_dispatch__ if __cpu_features__.get(t)]
        if targets:
            found["numpy"] = targets[-1]
    except ImportError:
        pass
    return found


def gpus() -> list[str]:
    """The NVIDIA GPUs' names as ``nvidia-smi`` gives them; empty without it."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def machine(opencl_device: str | None = None) -> dict[str, Any]:
    """CPU, cores, ISA flags and the kernels' targets (``kernel_targets``), GPU names, where the
    benchmark used one its OpenCL device, and the load average (one minute's) when the figures
    are written: a shared machine's other work."""
    found: dict[str, Any] = cpu()
    found["kernels"] = kernel_targets()
    names = gpus()
    if names:
        found["gpu"] = names[0] if len(set(names)) == 1 else ", ".join(names)
        found["gpus"] = len(names)
    if opencl_device:
        found["opencl_device"] = opencl_device
    found["os"] = f"{platform.system()} {platform.release()}"
    if hasattr(os, "getloadavg"):
        found["load_average"] = round(os.getloadavg()[0], 2)
    return found


def versions() -> dict[str, str]:
    """The commit of this checkout and the versions of the libraries loaded by now."""
    found = {"python": platform.python_version()}
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
        if commit:
            found["halfway"] = commit
    except (OSError, subprocess.SubprocessError):
        pass
    for module in ("numpy", "onnxruntime", "torch", "pyopencl", "numba", "ray"):
        if module in sys.modules:
            found[module] = str(getattr(sys.modules[module], "__version__", "?"))
    return found


class Results:
    """A benchmark's figures, collected as it prints them and written by ``write`` as JSON."""

    def __init__(self, benchmark: str, path: str | Path | None, argv: list[str] | None = None) -> None:
        self.benchmark = benchmark
        self.path = Path(path) if path else None
        self.argv = list(sys.argv if argv is None else argv)
        self.started = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        self.tables: dict[str, list[dict[str, Any]]] = {}
        self.totals: dict[str, Any] = {}
        self.opencl_device: str | None = None

    def add(self, table: str, **row: Any) -> None:
        """One row of ``table``; the first row's keys give the columns' order."""
        self.tables.setdefault(table, []).append({k: _plain(v) for k, v in row.items()})

    def summary(self, **figures: Any) -> None:
        """Figures of the whole run (a geomean, a count)."""
        self.totals.update({k: _plain(v) for k, v in figures.items()})

    def document(self) -> dict[str, Any]:
        script = Path(self.argv[0]) if self.argv else Path(self.benchmark)
        try:
            script = script.resolve().relative_to(ROOT)
        except ValueError:
            pass
        return {"benchmark": self.benchmark, "date": self.started.isoformat(),
                "machine": machine(self.opencl_device), "command": shlex.join([str(script), *self.argv[1:]]),
                "source": "measured", "versions": versions(), "tables": self.tables, "summary": self.totals}

    def write(self) -> None:
        """Writes the file where ``--json`` asked; nothing without a path."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.document(), indent=1) + "\n")
        print(f"results written to {self.path}", file=sys.stderr)


def add_json_option(parser: Any) -> None:
    """``--json OUT`` on a benchmark's argument parser."""
    parser.add_argument("--json", metavar="OUT", default=None,
                        help="also write the results as JSON (date, machine, command, figures) to OUT")


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers, floats rounded to 6 significant digits."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
