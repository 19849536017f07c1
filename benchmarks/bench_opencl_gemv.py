"""The decode GEMV's bandwidth: float16 matmul_v2 of 1 to 8 rows by a Llama layer's weights, as
bytes of weights over device time, beside the device's copy bandwidth and torch.matmul on CUDA.

Shapes are the projections of a 1B and a 7B Llama (hidden 2048 / 4096, intermediate 5632 / 11008,
vocabulary 32000): attention (hidden -> hidden), gate/up (hidden -> intermediate), down
(intermediate -> hidden) and the output head (hidden -> vocabulary), with the weights [K, N]
("n-major", as halfway's checkpoint decoders hold them) and [N, K] ("k-major", trans_y, as
exports hold them). Each product is bound through the registry as the executor binds it, and
its device time is the median of OpenCL profiling events over passes through enough copies of the
weights to outgrow the L2 cache (``--min-bytes``), so each pass reads them from memory. The copy
bandwidth is the driver's device-to-device copy of a ``--copy-mib`` buffer, bytes read and
written counted. torch.matmul (CUDA, float16) runs the same passes, replayed from a CUDA graph.

    python benchmarks/bench_opencl_gemv.py [--device N] [--rows 1 2 4 8] [--models 1b 7b] [--json OUT]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import pyopencl as cl
from bench_opencl_kernels import bound_launches, device_seconds, profiling_runtime
from results import Results, add_json_option

from halfway.kernels.opencl.base import Launch
from halfway.kernels.opencl.runtime import Runtime, get_runtime

MODELS = {"1b": (2048, 5632, 32000), "7b": (4096, 11008, 32000)}
"""hidden, intermediate and vocabulary sizes."""
LAYOUTS = ("n-major", "k-major")


def layers(hidden: int, intermediate: int, vocab: int) -> dict[str, tuple[int, int]]:
    """(K, N) of each projection."""
    return {"attention": (hidden, hidden), "gate/up": (hidden, intermediate), "down": (intermediate, hidden),
            "head": (hidden, vocab)}


def copy_bandwidth(rt: Runtime, mib: int) -> float:
    """Bytes per second (read and written) of the driver's device-to-device copy of ``mib`` MiB."""
    src, dst = rt.alloc(mib << 20), rt.alloc(mib << 20)
    times = []
    for _ in range(11):
        event = cl.enqueue_copy(rt.queue, dst, src)
        event.wait()
        times.append((event.profile.end - event.profile.start) * 1e-9)
    return 2 * (mib << 20) / statistics.median(times[1:])


def operands(rows: int, k: int, n: int, layout: str) -> tuple[dict[str, np.ndarray], dict[str, bool]]:
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, k)).astype(np.float16)
    w = (rng.standard_normal((k, n) if layout == "n-major" else (n, k)) * 0.02).astype(np.float16)
    return {"X": x, "Y": w}, {"trans_y": layout == "k-major"}


def halfway_seconds(rt: Runtime, arrays: dict[str, np.ndarray], attrs: dict[str, bool], copies: int) -> float:
    """Device seconds of one product, over passes through ``copies`` copies of its operands."""
    launches: list[Launch] = []
    for _ in range(copies):
        launches += bound_launches(rt, "matmul_v2", arrays, attrs)
    return device_seconds(launches, rt, runs=10) / copies


def torch_seconds(arrays: dict[str, np.ndarray], attrs: dict[str, bool], copies: int) -> float | None:
    """Seconds of one torch.matmul on CUDA (a CUDA graph of ``copies`` products on their own
    weights, replayed), or None without torch/CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    x = torch.from_numpy(arrays["X"]).cuda()
    weights = [torch.from_numpy(arrays["Y"]).cuda() for _ in range(copies)]
    if attrs["trans_y"]:
        weights = [w.t() for w in weights]

    def calls() -> None:
        for w in weights:
            torch.matmul(x, w)

    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        calls()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        calls()
    return median_event_seconds(graph.replay, torch) / copies


def median_event_seconds(fn: Callable[[], object], torch: Any, runs: int = 10) -> float:
    fn()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times)


def kernel_names(rt: Runtime) -> list[str]:
    """The names of the kernels ``rt`` makes from now on."""
    names: list[str] = []
    make = rt.kernel

    def kernel(text: str, name: str, options: tuple[str, ...] = ()) -> Any:
        names.append(name)
        return make(text, name, options)

    rt.kernel = kernel  # type: ignore[method-assign]
    return names


def measure(rt: Runtime, copy_rate: float, args: argparse.Namespace, results: Results) -> None:
    names = kernel_names(rt)
    for model in args.models:
        for layer, (k, n) in layers(*MODELS[model]).items():
            weight_bytes = 2 * k * n
            copies = -(-args.min_bytes // weight_bytes)
            for layout in LAYOUTS:
                for rows in args.rows:
                    arrays, attrs = operands(rows, k, n, layout)
                    names.clear()
                    ours = halfway_seconds(rt, arrays, attrs, copies)
                    peer = torch_seconds(arrays, attrs, copies)
                    report(results, copy_rate, dict(model=model, layer=layer, k=k, n=n, layout=layout, rows=rows,
                                                    kernel=names[0] if names else "?"), weight_bytes, ours, peer)


def report(results: Results, copy_rate: float, row: dict[str, Any], weight_bytes: int, ours: float,
           peer: float | None) -> None:
    rate = weight_bytes / ours
    line = (f"  {row['model']} {row['layer']:9} [{row['k']:5}, {row['n']:5}] {row['layout']} rows {row['rows']}: "
            f"{row['kernel']:7} {ours * 1e6:8.1f} us {rate / 1e9:7.1f} GB/s {rate / copy_rate:6.1%} of copy")
    figures = dict(row, halfway_us=ours * 1e6, halfway_gb_per_s=rate / 1e9, of_copy=rate / copy_rate)
    if peer is not None:
        line += f"   torch {peer * 1e6:8.1f} us {weight_bytes / peer / 1e9:7.1f} GB/s (ours {peer / ours:5.2f}x)"
        figures.update(torch_us=peer * 1e6, torch_gb_per_s=weight_bytes / peer / 1e9, speedup=peer / ours)
    print(line, flush=True)
    results.add("gemv", **figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="OpenCL device index or name (default: the first GPU)")
    parser.add_argument("--rows", nargs="*", type=int, default=[1, 2, 4, 8])
    parser.add_argument("--models", nargs="*", choices=tuple(MODELS), default=list(MODELS))
    parser.add_argument("--min-bytes", type=int, default=256 << 20,
                        help="the fewest weight bytes one timed pass reads (copies of small weights)")
    parser.add_argument("--copy-mib", type=int, default=1024)
    add_json_option(parser)
    args = parser.parse_args()
    rt = profiling_runtime(get_runtime(args.device))
    results = Results("bench_opencl_gemv", args.json)
    results.opencl_device = rt.caps.name
    copy_rate = copy_bandwidth(rt, args.copy_mib)
    print(f"float16 GEMV on {rt.caps.name}: device copy {copy_rate / 1e9:.1f} GB/s (read + written)")
    measure(rt, copy_rate, args, results)
    gemv = [row for row in results.tables.get("gemv", []) if row["kernel"].startswith("gemv")]
    results.summary(copy_gb_per_s=copy_rate / 1e9,
                    least_of_copy=min((row["of_copy"] for row in gemv), default=None),
                    median_of_copy=statistics.median(row["of_copy"] for row in gemv) if gemv else None)
    results.write()


if __name__ == "__main__":
    main()
