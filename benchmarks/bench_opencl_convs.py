"""ResNet-50's convolution shapes on halfway's OpenCL backend beside PyTorch + cuDNN, launch by
launch: each ``fused_conv2d`` (bias, relu, a residual where the block adds one) bound through the
registry as the executor binds it, and the device time of each of its launches (OpenCL profiling
events: a channels-last copy of the input where the convolution reads one, then the GEMM, then
split-K's sum where it has one), next to ``relu(conv(x))`` in PyTorch on the same GPU (channels_last,
``cudnn.benchmark``; CUDA events over a loop of calls). With ``--tiles``, each shape is timed
again with only the given tensor-core tile (warps along m and n, fragments along m and n,
stages) in the table.

    python benchmarks/bench_opencl_convs.py [--batch 32] [--dtype float16] [--tiles 2,2,4,8,3 2,2,2,8,3]
                                            [--json OUT]
"""

from __future__ import annotations

import argparse
import statistics
from unittest import mock

import numpy as np
from bench_opencl_kernels import bound_launches, profiling_runtime
from results import Results, add_json_option

from halfway.kernels.opencl import gemm as _gemm
from halfway.kernels.opencl.base import Launch
from halfway.kernels.opencl.runtime import Runtime, get_runtime

SHAPES = [  # input channels, side, output channels, kernel, stride, residual
    (3, 224, 64, 7, 2, False), (64, 56, 64, 3, 1, False), (64, 56, 256, 1, 1, True), (256, 56, 64, 1, 1, False),
    (256, 56, 128, 1, 1, False), (128, 56, 128, 3, 2, False), (256, 56, 512, 1, 2, True),
    (128, 28, 128, 3, 1, False), (128, 28, 512, 1, 1, True), (512, 28, 128, 1, 1, False),
    (256, 14, 256, 3, 1, False), (256, 14, 1024, 1, 1, True), (1024, 14, 256, 1, 1, False),
    (512, 7, 512, 3, 1, False), (512, 7, 2048, 1, 1, True),
]


def conv_case(batch: int, dtype: type, c: int, side: int, o: int, k: int, stride: int,
              residual: bool) -> tuple[dict[str, np.ndarray], dict, int]:
    """The op's arrays and attributes, and its floating-point operations."""
    rng = np.random.default_rng(0)
    out = (side + 2 * (k // 2) - k) // stride + 1
    arrays = {"Input": rng.standard_normal((batch, c, side, side)).astype(dtype),
              "Filter": (rng.standard_normal((o, c, k, k)) * 0.05).astype(dtype),
              "Bias": rng.standard_normal(o).astype(dtype)}
    if residual:
        arrays["ResidualData"] = rng.standard_normal((batch, o, out, out)).astype(dtype)
    attrs = {"strides": [stride, stride], "paddings": [k // 2] * 2, "fuse_activation": "relu"}
    return arrays, attrs, 2 * batch * o * c * k * k * out * out


def launch_seconds(launches: list[Launch], rt: Runtime, runs: int = 20) -> list[float]:
    """Median device seconds of each launch over ``runs`` passes."""
    times = []
    for _ in range(runs + 1):
        events = [enqueue() for enqueue in launches]
        rt.finish()
        times.append([(e.profile.end - e.profile.start) * 1e-9 for e in events])
    return [statistics.median(column) for column in zip(*times[1:])]


def torch_seconds(batch: int, half: bool, c: int, side: int, o: int, k: int, stride: int) -> float | None:
    """Seconds of ``relu(conv(x))`` in PyTorch on CUDA, channels_last; None without torch/CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cudnn.benchmark = True
    dtype = torch.half if half else torch.float
    x = torch.randn(batch, c, side, side, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    conv = torch.nn.Conv2d(c, o, k, stride, k // 2).cuda().to(dtype).to(memory_format=torch.channels_last)
    with torch.inference_mode():
        for _ in range(10):
            torch.relu(conv(x))
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(50):
            torch.relu(conv(x))
        end.record()
        torch.cuda.synchronize()
    return start.elapsed_time(end) / 50 * 1e-3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    parser.add_argument("--tiles", nargs="*", default=[], help="tensor-core tiles to time each shape with")
    add_json_option(parser)
    args = parser.parse_args()
    rt = profiling_runtime(get_runtime())
    results = Results("bench_opencl_convs", args.json)
    results.opencl_device = rt.caps.name
    dtype = np.float16 if args.dtype == "float16" else np.float32
    variants = [("table", None)] + [(t, [tuple(int(v) for v in t.split(","))]) for t in args.tiles]
    print(f"{args.dtype} batch {args.batch} on {rt.caps.name}: us per launch (copy + GEMM [+ split-K sum])")
    for shape in SHAPES:
        arrays, attrs, flops = conv_case(args.batch, dtype, *shape)
        theirs = torch_seconds(args.batch, dtype == np.float16, *shape[:5])
        c, side, o, k, stride, residual = shape
        row = [f"{c:4}->{o:<4} {k}x{k}/{stride} on {side:3}{' +res' if residual else '     '}"
               + (f"  torch {theirs * 1e6:6.0f}" if theirs else "")]
        for name, table in variants:
            with mock.patch.object(_gemm, "_MMA_TILES", table or _gemm._MMA_TILES):
                times = launch_seconds(bound_launches(rt, "fused_conv2d", arrays, attrs, fetch=("Output",)), rt)
            row.append(f"[{name}] {'+'.join(f'{t * 1e6:.0f}' for t in times)} = {sum(times) * 1e6:.0f} "
                       f"({flops / sum(times) / 1e12:.0f} TFLOP/s)")
            results.add("convolutions", shape=row[0].split("  torch")[0].strip(), batch=args.batch, dtype=args.dtype,
                        tiles=name, launches_us=[t * 1e6 for t in times], halfway_us=sum(times) * 1e6,
                        tflops=flops / sum(times) / 1e12, torch_us=theirs * 1e6 if theirs else None)
        print("  |  ".join(row), flush=True)
    results.write()


if __name__ == "__main__":
    main()
