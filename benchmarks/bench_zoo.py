"""The ONNX light zoo: per-model latency of halfway's prepared numpy run against ONNX Runtime
(CPU, 2 intra-op threads), fp32, batch 1, same inputs, in the same run, with the default pass
pipeline applied to halfway's program; the geomean ratio; and where halfway is slower, the time
per op type of its prepared run.

    .venv/bin/python benchmarks/bench_zoo.py [--models resnet50,vgg19] [--repeats 10] [--no-passes]

Weights are seeded random values in place of the models' constant fills (the same model goes to
both runtimes). Each runtime runs in blocks of ``--block`` runs of its own, the blocks of the two
alternating, so machine noise hits both alike; the figure is the median. Runs never interleave
one by one, and each block starts after a pause: OpenBLAS's and ONNX Runtime's worker threads
spin for a while after each call, and would take the cores from the other runtime's threads. Outputs are checked to agree before
timing.

numpy's BLAS uses OPENBLAS_NUM_THREADS threads (default 2, as ONNX Runtime's intra-op threads).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import halfway  # noqa: E402
from halfway.executor import Executor  # noqa: E402
from halfway.executor.prepared import PreparedProgram  # noqa: E402
from tests.onnx_zoo import LIGHT_MODELS, dummy_inputs, light_model, ort_session, with_random_weights  # noqa: E402

THREADS = 2
SETTLE_S = 0.3
"""Pause before each block: the other runtime's worker threads stop spinning and sleep."""


def prepare_halfway(model, feeds: dict[str, np.ndarray], passes: bool) -> PreparedProgram:
    program, feed_names, fetch_names, scope = halfway.load(model)
    if passes:
        result = halfway.PassManager().run(program, scope)
        program, scope = result.program, result.scope
    return Executor().prepare(program, feed_names, fetch_names, scope,
                              feed_shapes={n: feeds[n].shape for n in feed_names})


def alternate(fns: list[Callable[[], object]], repeats: int, block: int) -> list[float]:
    """Median seconds of each of ``fns``, run in turn in blocks of ``block`` calls (each block
    after a pause and one untimed call) until each has run ``repeats`` timed calls."""
    times: list[list[float]] = [[] for _ in fns]
    while len(times[-1]) < repeats:
        for fn, sink in zip(fns, times):
            time.sleep(SETTLE_S)
            fn()
            for _ in range(min(block, repeats - len(sink))):
                start = time.perf_counter()
                fn()
                sink.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def profile_by_op_type(prepared: PreparedProgram, feeds: dict[str, np.ndarray], repeats: int) -> dict[str, float]:
    """Median milliseconds per run spent in each op type's kernels (each step's kernel timed)."""
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0] * repeats)
    steps = prepared._steps  # the benchmark times each step in place; nothing else reads them
    originals = [step.kernel for step in steps]
    run_index = [0]

    def timed(step, kernel):
        def call(*args):
            start = time.perf_counter()
            out = kernel(*args)
            spent[step.op.type][run_index[0]] += time.perf_counter() - start
            return out
        return call

    try:
        for step, kernel in zip(steps, originals):
            step.kernel = timed(step, kernel)
        for i in range(repeats):
            run_index[0] = i
            prepared.run(feeds)
    finally:
        for step, kernel in zip(steps, originals):
            step.kernel = kernel
    return {op: statistics.median(t) * 1e3 for op, t in sorted(spent.items(), key=lambda kv: -sum(kv[1]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(LIGHT_MODELS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--block", type=int, default=5, help="runs of one runtime before the other's")
    parser.add_argument("--no-passes", action="store_true", help="skip the default pass pipeline")
    args = parser.parse_args()
    ratios, slow = [], {}
    print(f"numpy BLAS threads: {os.environ['OPENBLAS_NUM_THREADS']}, ONNX Runtime threads: {THREADS}, "
          f"passes: {'none' if args.no_passes else 'default pipeline'}")
    print(f"{'model':14} {'halfway ms':>11} {'onnxruntime ms':>15} {'ratio':>7}")
    for name in args.models.split(","):
        model = with_random_weights(light_model(name), seed=1)
        feeds = dummy_inputs(model, seed=2)
        prepared = prepare_halfway(model, feeds, passes=not args.no_passes)
        session = ort_session(model, THREADS)
        ours, theirs = prepared.run(feeds)[0], session.run(None, feeds)[0]
        np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-4 * float(np.abs(theirs).max()))
        t_ours, t_ort = alternate([lambda: prepared.run(feeds), lambda: session.run(None, feeds)], args.repeats,
                                   args.block)
        ratios.append(t_ours / t_ort)
        print(f"{name:14} {t_ours * 1e3:11.1f} {t_ort * 1e3:15.1f} {t_ours / t_ort:7.2f}", flush=True)
        if t_ours > t_ort:
            slow[name] = profile_by_op_type(prepared, feeds, max(3, args.repeats // 2))
    geomean = float(np.exp(np.mean(np.log(ratios))))
    print(f"geomean ratio (halfway / onnxruntime): {geomean:.2f}")
    for name, by_type in slow.items():
        total = sum(by_type.values())
        top = ", ".join(f"{op} {ms:.1f} ms ({ms / total:.0%})" for op, ms in list(by_type.items())[:5])
        print(f"{name}: {top}")


if __name__ == "__main__":
    main()
