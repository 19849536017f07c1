"""The ONNX light zoo: per-model latency of halfway's prepared numpy run against ONNX Runtime
(CPU, as many intra-op threads as numpy's BLAS), fp32, batch 1, same inputs, in the same run, with the default pass
pipeline applied to halfway's program; the geomean ratio; and where halfway is slower, the time
per op type of its prepared run.

    .venv/bin/python benchmarks/bench_zoo.py [--models resnet50,vgg19] [--repeats 30] [--block 3] [--no-passes]
                                             [--under-load N] [--json OUT]

Weights are seeded random values in place of the models' constant fills (the same model goes to
both runtimes). Each runtime runs in blocks of ``--block`` runs of its own, the blocks of the two
alternating round by round. Runs never interleave one by one, and each block starts after a
pause: OpenBLAS's and ONNX Runtime's worker threads spin for a while after each call, and would
take the cores from the other runtime's threads. The times shown are medians over all runs; the
ratio is the median over rounds of the two blocks' medians' ratio, as a shared machine's slow
spells (seconds long, up to 1.5x) then slow both sides of each ratio alike; the best ratio is
that of each runtime's fastest run, the least touched by the machine's other work. Outputs are checked
to agree before timing. ``--under-load N`` times both beside N busy processes
(``competing_load``).

numpy's BLAS uses OPENBLAS_NUM_THREADS threads (default 2; ONNX Runtime's intra-op threads as many), with
the kernels ``halfway.api.openblas`` picks (AVX-512 ones on AMD CPUs OpenBLAS does not recognise).
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

import halfway  # noqa: E402 (before numpy, so that halfway.api.openblas can pick OpenBLAS's kernels)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.competing_load import add_load_option, competing_load  # noqa: E402
from benchmarks.results import Results, add_json_option  # noqa: E402
from halfway.executor import Executor  # noqa: E402
from halfway.executor.prepared import PreparedProgram  # noqa: E402
from tests.support.onnx_zoo import LIGHT_MODELS, dummy_inputs, light_model, ort_session, with_random_weights  # noqa: E402

THREADS = int(os.environ["OPENBLAS_NUM_THREADS"])
"""ONNX Runtime's intra-op threads: numpy's BLAS threads (on a busy machine, 1 each gives steadier ratios)."""
SETTLE_S = 0.3
"""Pause before each block: the other runtime's worker threads stop spinning and sleep."""


def prepare_halfway(model, feeds: dict[str, np.ndarray], passes: bool) -> PreparedProgram:
    program, feed_names, fetch_names, scope = halfway.load(model)
    if passes:
        result = halfway.PassManager().run(program, scope)
        program, scope = result.program, result.scope
    return Executor().prepare(program, feed_names, fetch_names, scope,
                              feed_shapes={n: feeds[n].shape for n in feed_names})


def alternate(fns: list[Callable[[], object]], rounds: int, block: int, load: int = 0) -> list[list[list[float]]]:
    """Seconds of each of ``fns``, run in turn for ``rounds`` rounds of ``block`` timed calls
    each (each block after a pause and one untimed call), beside ``load`` busy processes
    (``competing_load``): ``times[fn][round][call]``."""
    times: list[list[list[float]]] = [[] for _ in fns]
    with competing_load(load):
        _alternate(fns, rounds, block, times)
    return times


def _alternate(fns: list[Callable[[], object]], rounds: int, block: int, times: list[list[list[float]]]) -> None:
    for _ in range(rounds):
        for fn, sink in zip(fns, times):
            time.sleep(SETTLE_S)
            fn()
            calls = []
            for _ in range(block):
                start = time.perf_counter()
                fn()
                calls.append(time.perf_counter() - start)
            sink.append(calls)


def paired_ratio(ours: list[list[float]], theirs: list[list[float]]) -> float:
    """The median over rounds of (our block's median / their block's median): each round's
    blocks run seconds apart, so a slow spell of the machine hits both sides of a ratio alike."""
    return statistics.median(statistics.median(a) / statistics.median(b) for a, b in zip(ours, theirs))


def profile_by_op_type(prepared: PreparedProgram, feeds: dict[str, np.ndarray], repeats: int) -> dict[str, float]:
    """Median milliseconds per run spent in each op type's kernels (``PreparedProgram.profile``:
    each op timed to its end)."""
    spent: dict[str, list[float]] = defaultdict(lambda: [0.0] * repeats)
    op_types = [step.op.type for step in prepared._steps]  # profile times every step, in this order
    for i in range(repeats):
        for op_type, (_, seconds) in zip(op_types, prepared.profile(feeds), strict=True):
            spent[op_type][i] += seconds
    return {op: statistics.median(t) * 1e3 for op, t in sorted(spent.items(), key=lambda kv: -sum(kv[1]))}


def geomean(ratios: list[float]) -> float:
    return float(np.exp(np.mean(np.log(ratios))))


def print_profiles(slow: dict[str, dict[str, float]], top: int) -> None:
    """Per model, its ``top`` op types by time (``profile_by_op_type``) and their shares."""
    for name, by_type in slow.items():
        total = sum(by_type.values())
        print(f"{name}: " + ", ".join(f"{op} {ms:.1f} ms ({ms / total:.0%})" for op, ms in list(by_type.items())[:top]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(LIGHT_MODELS))
    parser.add_argument("--repeats", type=int, default=30, help="timed runs of each runtime")
    parser.add_argument("--block", type=int, default=3, help="runs of one runtime before the other's")
    parser.add_argument("--no-passes", action="store_true", help="skip the default pass pipeline")
    add_load_option(parser)
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_zoo", args.json)
    ratios, best_ratios, slow = [], [], {}
    print(f"numpy BLAS threads: {os.environ['OPENBLAS_NUM_THREADS']}, "
          f"OpenBLAS core type: {os.environ.get('OPENBLAS_CORETYPE', 'its own choice')}, ONNX Runtime threads: {THREADS}, "
          f"passes: {'none' if args.no_passes else 'default pipeline'}, competing busy processes: {args.under_load}")
    print(f"{'model':14} {'halfway ms':>11} {'onnxruntime ms':>15} {'ratio':>7} {'best of each':>13}")
    for name in args.models.split(","):
        model = with_random_weights(light_model(name), seed=1)
        feeds = dummy_inputs(model, seed=2)
        prepared = prepare_halfway(model, feeds, passes=not args.no_passes)
        session = ort_session(model, THREADS)
        ours, theirs = prepared.run(feeds)[0], session.run(None, feeds)[0]
        np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-4 * float(np.abs(theirs).max()))
        ours, theirs = alternate([lambda: prepared.run(feeds), lambda: session.run(None, feeds)],
                                 -(-args.repeats // args.block), args.block, args.under_load)
        t_ours, t_ort = (statistics.median(t for block in side for t in block) for side in (ours, theirs))
        b_ours, b_ort = (min(t for block in side for t in block) for side in (ours, theirs))
        ratio = paired_ratio(ours, theirs)
        ratios.append(ratio)
        print(f"{name:14} {t_ours * 1e3:11.1f} {t_ort * 1e3:15.1f} {ratio:7.2f} {b_ours / b_ort:13.2f}", flush=True)
        results.add("latency", model=name, halfway_ms=t_ours * 1e3, onnxruntime_ms=t_ort * 1e3, ratio=ratio,
                    halfway_best_ms=b_ours * 1e3, onnxruntime_best_ms=b_ort * 1e3, best_ratio=b_ours / b_ort)
        best_ratios.append(b_ours / b_ort)
        if t_ours > t_ort:
            slow[name] = profile_by_op_type(prepared, feeds, max(3, args.repeats // 2))
    print(f"geomean ratio (halfway / onnxruntime): {geomean(ratios):.2f}, of the best runs {geomean(best_ratios):.2f}")
    print_profiles(slow, 5)
    results.summary(geomean_ratio=geomean(ratios), geomean_best_ratio=geomean(best_ratios), threads=THREADS, passes=not args.no_passes,
                    competing_processes=args.under_load)
    results.write()


if __name__ == "__main__":
    main()
