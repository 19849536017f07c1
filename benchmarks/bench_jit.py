"""The compiled loops (``halfway.kernels.numpy.jit``, numba: conv epilogues, depthwise convs,
3x3 pools) against the numpy passes they replace: each light-zoo model prepared twice in one
process, with and without them, and run in alternating blocks as ``bench_zoo`` runs its two
runtimes; per model, the median over rounds of the paired ratio (compiled / numpy passes) and
each side's median time.

    .venv/bin/python benchmarks/bench_jit.py [--models resnet50,squeezenet] [--repeats 36] [--block 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402

import halfway  # noqa: E402,F401 (before numpy, so that halfway.api.openblas can pick OpenBLAS's kernels)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_zoo import alternate, paired_ratio, prepare_halfway  # noqa: E402
from benchmarks.results import Results, add_json_option  # noqa: E402
from halfway.kernels.numpy import jit  # noqa: E402
from tests.support.onnx_zoo import LIGHT_MODELS, dummy_inputs, light_model, with_random_weights  # noqa: E402


def prepared_pair(name: str):
    """The model prepared with the numpy passes, then with the compiled loops; its feeds."""
    model = with_random_weights(light_model(name), seed=1)
    feeds = dummy_inputs(model, seed=2)
    sides = []
    for compiled in (False, True):
        jit.JIT = compiled  # read when the kernels are made, at prepare
        sides.append(prepare_halfway(model, feeds, passes=True))
    jit.JIT = True
    return sides, feeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(LIGHT_MODELS))
    parser.add_argument("--repeats", type=int, default=36, help="timed runs of each side")
    parser.add_argument("--block", type=int, default=3)
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_jit", args.json)
    if not jit.JIT:
        sys.exit("numba is not installed, or HALFWAY_JIT=0: nothing to compare")
    print(f"{'model':14} {'numpy passes ms':>16} {'compiled ms':>12} {'ratio':>7}")
    for name in args.models.split(","):
        (plain, compiled), feeds = prepared_pair(name)
        want = plain.run(feeds)[0]  # the depthwise and pool loops add in another order: not bit for bit
        np.testing.assert_allclose(compiled.run(feeds)[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        times = alternate([lambda: plain.run(feeds), lambda: compiled.run(feeds)], -(-args.repeats // args.block),
                          args.block)
        medians = [statistics.median(t for block in side for t in block) * 1e3 for side in times]
        print(f"{name:14} {medians[0]:16.1f} {medians[1]:12.1f} {paired_ratio(times[1], times[0]):7.2f}", flush=True)
        results.add("latency", model=name, numpy_passes_ms=medians[0], compiled_ms=medians[1],
                    ratio=paired_ratio(times[1], times[0]))
    results.write()


if __name__ == "__main__":
    main()
