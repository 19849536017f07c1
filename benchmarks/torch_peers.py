"""PyTorch as the GPU peer of the OpenCL benchmarks: a call timed eager and replayed from a CUDA
graph (captured once on a side stream after warm-up, as PyTorch's documentation does it), each
the median of ``runs`` synchronised calls in milliseconds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["median_ms", "eager_and_graph_ms", "graph_host_to_host_ms"]


def median_ms(fn: Callable[[], Any], runs: int, sync: Callable[[], None] = lambda: None) -> float:
    """The median of ``runs`` calls of ``fn`` (each followed by ``sync``), after 3 warm-up calls."""
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _captured(call: Callable[[], Any]) -> tuple[Any, Any]:
    """``call`` captured in a CUDA graph after warm-up on a side stream: the graph and the output
    tensor its replays write. Inside ``torch.inference_mode()``."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    return graph, out


def eager_and_graph_ms(call: Callable[[], Any], runs: int) -> tuple[float, float]:
    """``call`` (work on GPU tensors) timed eager, then captured in a CUDA graph and replayed."""
    import torch

    sync = torch.cuda.synchronize
    with torch.inference_mode():
        eager = median_ms(call, runs, sync)
        graph, _ = _captured(call)
        replay = median_ms(graph.replay, runs, sync)
    return eager, replay


def graph_host_to_host_ms(call: Callable[[Any], Any], x: Any, runs: int) -> float:
    """``call(t)`` on a GPU copy ``t`` of the host array ``x``, captured in a CUDA graph and timed
    from host array to host array as halfway's runs are: each run copies ``x`` in, replays the
    graph and copies its output back."""
    import torch

    host = torch.from_numpy(x)
    static = host.cuda()
    with torch.inference_mode():
        graph, out = _captured(lambda: call(static))

        def run() -> None:
            static.copy_(host)
            graph.replay()
            out.cpu()

        return median_ms(run, runs)
