"""halfway's OpenCL kernels against the device's own limits and a peer, in one run:

1. **bandwidth**: elementwise_add (two reads, one write) and relu (one read, one write) over
   64M elements, float32 and float16 (storage mode), in GB/s and as a fraction of the rate of the
   driver's device-to-device buffer copy (one read, one write) measured alongside;
2. **GEMM**: a 4096^3 matmul_v2 in float16 (tensor cores through mma.sync where the device has
   them) and float32, in TFLOP/s, next to PyTorch's torch.matmul on the same GPU when torch with
   CUDA is installed (float32 both as strict float32 and as TF32).

Kernels are bound through the registry exactly as the executor binds them; each figure is the
median over runs of a loop of launches ended by one queue finish.

With ``--tiles``, the float16 GEMM is timed again with each given tensor-core tile (warps along
m and n, 16 x 8 fragments per warp along m and n, stages of local memory) in place of the table's.

    python benchmarks/bench_opencl_kernels.py [--device N] [--elements 67108864] [--size 4096]
                                              [--tiles 2,2,4,8,3 2,4,4,4,3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import pyopencl as cl

from halfway.ir.dtypes import DType
from halfway.ir.schema import InferContext, TensorInfo, get_schema
from halfway.kernels import opencl as _opencl  # noqa: F401  (registers the kernels)
from halfway.kernels.opencl import gemm as _gemm
from halfway.kernels.opencl.base import DeviceArray
from halfway.kernels.opencl.runtime import Runtime, get_runtime
from halfway.kernels.registry import KernelSpec, find_kernel


def seconds(fn: Callable[[], object], sync: Callable[[], object], loops: int, runs: int = 5) -> float:
    """Median seconds of one ``fn`` call (``loops`` calls per run, then ``sync``)."""
    fn()
    sync()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        sync()
        times.append((time.perf_counter() - start) / loops)
    return statistics.median(times)


def bound_op(rt: Runtime, op_type: str, arrays: dict[str, np.ndarray], attrs: dict | None = None) -> Callable[[], None]:
    """``op_type`` on device copies of ``arrays``, bound as the executor binds it."""
    schema = get_schema(op_type)
    inputs = {slot: [TensorInfo(a.shape, DType.from_any(a.dtype))] for slot, a in arrays.items()}
    ctx = InferContext(schema, inputs, attrs or {})
    schema.infer(ctx)
    dtype = DType.from_any(next(iter(arrays.values())).dtype)
    spec = KernelSpec(op_type, dtype, ctx._attrs, {k: tuple(v) for k, v in inputs.items()},
                      {k: tuple(v) for k, v in ctx.outputs.items()})
    ins = [DeviceArray(rt.upload(a), a.shape, a.dtype) for a in arrays.values()]
    outs = [DeviceArray(rt.alloc(np.prod(i.shape) * i.dtype.itemsize), i.shape, i.dtype.numpy)
            for infos in ctx.outputs.values() for i in infos]
    launches = find_kernel(op_type, "opencl", dtype)(spec)(rt, ins, outs)

    def run() -> None:
        for enqueue in launches:
            enqueue()

    return run


def bandwidth(rt: Runtime, n: int) -> None:
    rng = np.random.default_rng(0)
    print(f"bandwidth over {n} elements on {rt.caps.name} (float16 mode {rt.mode.value})")
    for dtype in (np.float32, np.float16):
        x, y = (rng.standard_normal(n).astype(dtype) for _ in range(2))
        src, dst = rt.upload(x), rt.alloc(x.nbytes)
        copy = seconds(lambda: cl.enqueue_copy(rt.queue, dst, src), rt.finish, 20)
        copy_rate = 2 * x.nbytes / copy / 1e9
        print(f"  {np.dtype(dtype).name:8} device copy          {copy_rate:8.1f} GB/s")
        for op_type, arrays, moved in (("elementwise_add", {"X": x, "Y": y}, 3), ("relu", {"X": x}, 2)):
            t = seconds(bound_op(rt, op_type, arrays), rt.finish, 20)
            rate = moved * x.nbytes / t / 1e9
            print(f"  {np.dtype(dtype).name:8} {op_type:20} {rate:8.1f} GB/s  {rate / copy_rate:6.1%} of copy")


def torch_matmul(size: int) -> dict[str, float]:
    """torch.matmul seconds per dtype on CUDA, or {} without torch/CUDA."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    out = {}
    for name, dtype, tf32 in (("float16", torch.float16, False), ("float32", torch.float32, False),
                              ("float32 (TF32)", torch.float32, True)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a, b = (torch.randn(size, size, device="cuda", dtype=dtype) for _ in range(2))
        out[name] = seconds(lambda: torch.matmul(a, b), torch.cuda.synchronize, 10)
    return out


def gemm(rt: Runtime, size: int, tiles: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(1)
    flops = 2 * size ** 3
    peers = torch_matmul(size)
    print(f"GEMM {size}^3 on {rt.caps.name} (tensor cores: {rt.caps.tensor_cores})")
    for dtype in (np.float16, np.float32):
        a, b = (rng.standard_normal((size, size)).astype(dtype) for _ in range(2))
        t = seconds(bound_op(rt, "matmul_v2", {"X": a, "Y": b}), rt.finish, 5)
        line = f"  {np.dtype(dtype).name:8} halfway {flops / t / 1e12:7.1f} TFLOP/s"
        for name, peer in peers.items():
            if name.startswith(np.dtype(dtype).name):
                line += f"   torch {name} {flops / peer / 1e12:7.1f} TFLOP/s (ours {peer / t:5.2f}x)"
        print(line)
    if tiles and rt.caps.tensor_cores:
        a, b = (rng.standard_normal((size, size)).astype(np.float16) for _ in range(2))
        table = list(_gemm._MMA_TILES)
        try:
            for sizes in tiles:
                _gemm._MMA_TILES[:] = [sizes]
                t = seconds(bound_op(rt, "matmul_v2", {"X": a, "Y": b}), rt.finish, 5)
                print(f"  float16  tile {sizes} {flops / t / 1e12:7.1f} TFLOP/s")
        finally:
            _gemm._MMA_TILES[:] = table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="OpenCL device index or name (default: the first GPU)")
    parser.add_argument("--elements", type=int, default=64 << 20)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--tiles", nargs="*", default=[], metavar="WM,WN,MI,NI,STAGES",
                        help="also time the float16 GEMM with each of these tensor-core tiles")
    args = parser.parse_args()
    rt = get_runtime(args.device)
    bandwidth(rt, args.elements)
    gemm(rt, args.size, [tuple(int(v) for v in tile.split(",")) for tile in args.tiles])


if __name__ == "__main__":
    main()
