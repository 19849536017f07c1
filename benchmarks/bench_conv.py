"""How close halfway's numpy conv2d comes to a bare BLAS GEMM on ResNet-50's convolutions.

For each distinct conv shape of ResNet-50 (torchvision v1.5: stride on the 3x3) at batch 1 and a
224x224 input, time the conv2d kernel prepared through the kernel factory, and ``np.matmul`` of
an [M, K] x [K, N] float32 product of the same FLOPs (M = out channels, K = C * kh * kw,
N = OH * OW). Both are warmed up and timed alternately, so a busy machine slows both alike;
each figure is the median of the runs.

    .venv/bin/python benchmarks/bench_conv.py [--runs 15] [--json OUT]

The total ratio weights every shape by its FLOPs times the number of times it occurs in the
network: it is the GEMMs' total time over ours.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

import halfway  # noqa: F401 (before numpy, so that halfway.api.openblas can pick OpenBLAS's kernels)
from halfway.ir.dtypes import DType
from halfway.ir.schema import InferContext, TensorInfo, get_schema
from halfway.kernels.registry import KernelSpec, find_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.results import Results, add_json_option  # noqa: E402


class Conv(NamedTuple):
    name: str
    count: int  # occurrences in ResNet-50
    c: int
    o: int
    size: int  # input height = width
    k: int
    stride: int

    @property
    def pad(self) -> int:
        return self.k // 2

    @property
    def out(self) -> int:
        return (self.size + 2 * self.pad - self.k) // self.stride + 1

    @property
    def gemm(self) -> tuple[int, int, int]:
        return self.o, self.c * self.k * self.k, self.out * self.out

    @property
    def flops(self) -> int:
        m, k, n = self.gemm
        return 2 * m * k * n


RESNET50 = [
    Conv("stem 7x7/2", 1, 3, 64, 224, 7, 2),
    Conv("l1 1x1 64>64", 1, 64, 64, 56, 1, 1),
    Conv("l1 3x3 64", 3, 64, 64, 56, 3, 1),
    Conv("l1 1x1 64>256", 4, 64, 256, 56, 1, 1),
    Conv("l1 1x1 256>64", 2, 256, 64, 56, 1, 1),
    Conv("l2 1x1 256>128", 1, 256, 128, 56, 1, 1),
    Conv("l2 3x3/2 128", 1, 128, 128, 56, 3, 2),
    Conv("l2 ds 1x1/2 256>512", 1, 256, 512, 56, 1, 2),
    Conv("l2 1x1 128>512", 4, 128, 512, 28, 1, 1),
    Conv("l2 1x1 512>128", 3, 512, 128, 28, 1, 1),
    Conv("l2 3x3 128", 3, 128, 128, 28, 3, 1),
    Conv("l3 1x1 512>256", 1, 512, 256, 28, 1, 1),
    Conv("l3 3x3/2 256", 1, 256, 256, 28, 3, 2),
    Conv("l3 ds 1x1/2 512>1024", 1, 512, 1024, 28, 1, 2),
    Conv("l3 1x1 256>1024", 6, 256, 1024, 14, 1, 1),
    Conv("l3 1x1 1024>256", 5, 1024, 256, 14, 1, 1),
    Conv("l3 3x3 256", 5, 256, 256, 14, 3, 1),
    Conv("l4 1x1 1024>512", 1, 1024, 512, 14, 1, 1),
    Conv("l4 3x3/2 512", 1, 512, 512, 14, 3, 2),
    Conv("l4 ds 1x1/2 1024>2048", 1, 1024, 2048, 14, 1, 2),
    Conv("l4 1x1 512>2048", 3, 512, 2048, 7, 1, 1),
    Conv("l4 1x1 2048>512", 2, 2048, 512, 7, 1, 1),
    Conv("l4 3x3 512", 2, 512, 512, 7, 3, 1),
]


def prepared_conv(conv: Conv) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """The float32 conv2d kernel for ``conv``, made by its factory as the executor would."""
    schema = get_schema("conv2d")
    inputs = {"Input": [TensorInfo((1, conv.c, conv.size, conv.size), DType.float32)],
              "Filter": [TensorInfo((conv.o, conv.c, conv.k, conv.k), DType.float32)]}
    attrs = {"strides": [conv.stride] * 2, "paddings": [conv.pad] * 2}
    ctx = InferContext(schema, inputs, attrs)
    schema.infer(ctx)
    spec = KernelSpec("conv2d", DType.float32, schema.resolve_attrs(attrs), {k: tuple(v) for k, v in inputs.items()},
                      {k: tuple(v) for k, v in ctx.outputs.items()})
    return find_kernel("conv2d", "numpy", DType.float32)(spec)


def median_times(runs: int, *fns: Callable[[], object]) -> list[float]:
    """Median wall time of each of ``fns`` over ``runs`` rounds that call them in turn."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, spent in zip(fns, times):
            start = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_conv", args.json)
    rng = np.random.default_rng(0)
    print(f"{'shape':<22} {'n':>2} {'C>O':>10} {'HxW':>7} {'k/s':>5} {'MFLOP':>7} {'ours ms':>8} "
          f"{'ours GF/s':>9} {'GEMM GF/s':>9} {'ratio':>6}")
    total_ours = total_gemm = distinct_ours = distinct_gemm = 0.0
    for conv in RESNET50:
        x = rng.standard_normal((1, conv.c, conv.size, conv.size), dtype=np.float32)
        w = rng.standard_normal((conv.o, conv.c, conv.k, conv.k), dtype=np.float32)
        m, k, n = conv.gemm
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        kernel = prepared_conv(conv)
        ours, gemm = median_times(args.runs, lambda: kernel(x, w), lambda: np.matmul(a, b))
        total_ours += conv.count * ours
        total_gemm += conv.count * gemm
        distinct_ours += ours
        distinct_gemm += gemm
        print(f"{conv.name:<22} {conv.count:>2} {f'{conv.c}>{conv.o}':>10} {f'{conv.size}x{conv.size}':>7} "
              f"{f'{conv.k}/{conv.stride}':>5} {conv.flops / 1e6:>7.1f} {ours * 1e3:>8.3f} "
              f"{conv.flops / ours / 1e9:>9.1f} {conv.flops / gemm / 1e9:>9.1f} {gemm / ours:>6.2f}")
        results.add("convolutions", shape=conv.name, count=conv.count, mflop=conv.flops / 1e6, halfway_ms=ours * 1e3,
                    halfway_gflops=conv.flops / ours / 1e9, gemm_gflops=conv.flops / gemm / 1e9, ratio=gemm / ours)
    flops = sum(c.count * c.flops for c in RESNET50)
    print(f"\nResNet-50 convs (each shape times its count, {flops / 1e9:.2f} GFLOP): ours {total_ours * 1e3:.1f} ms "
          f"({flops / total_ours / 1e9:.1f} GF/s), GEMM {total_gemm * 1e3:.1f} ms "
          f"({flops / total_gemm / 1e9:.1f} GF/s); FLOP-weighted ratio {total_gemm / total_ours:.2f}")
    print(f"distinct shapes once each: FLOP-weighted ratio {distinct_gemm / distinct_ours:.2f}")
    results.summary(resnet50_gflop=flops / 1e9, halfway_ms=total_ours * 1e3, gemm_ms=total_gemm * 1e3,
                    weighted_ratio=total_gemm / total_ours, distinct_ratio=distinct_gemm / distinct_ours)
    results.write()


if __name__ == "__main__":
    main()
