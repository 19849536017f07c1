"""halfway's OpenCL kernels against the device's own limits and a peer, in one run:

1. **bandwidth**: elementwise_add (two reads, one write) and relu (one read, one write) over
   64M elements, float32 and float16 (storage mode), in GB/s and as a fraction of the rate of the
   driver's device-to-device buffer copy (one read, one write) measured alongside;
2. **GEMM**: a 4096^3 matmul_v2 in float16 (tensor cores through mma.sync where the device has
   them) and float32, in TFLOP/s, next to PyTorch's torch.matmul on the same GPU when torch with
   CUDA is installed (float32 both as strict float32 and as TF32);
3. **attention**: BERT-base's scaled_dot_product_attention in float16 (batch 32, 12 heads,
   sequence 128, head size 64), head-major without a mask and sequence-major ([B, S, H * D], as
   halfway's BERT runs it) with a padding mask, by the portable kernel and by the tensor-core
   kernel (where the device has tensor cores), next to PyTorch's
   torch.nn.functional.scaled_dot_product_attention on the same GPU: ms per call in a loop of
   calls (host launch costs included) and ms of device time (OpenCL profiling events; PyTorch:
   a CUDA graph of the calls), with TFLOP/s of device time. ``--attention`` takes other shapes.

Kernels are bound through the registry exactly as the executor binds them; each figure is the
median over runs of a loop of launches ended by one queue finish.

With ``--tiles``, the float16 GEMM is timed again with each given tensor-core tile (warps along
m and n, 16 x 8 fragments per warp along m and n, stages of local memory) in place of the table's.

    python benchmarks/bench_opencl_kernels.py [--device N] [--elements 67108864] [--size 4096]
                                              [--tiles 2,2,4,8,3 2,4,4,4,3] [--attention 32,12,128,64 ...]
                                              [--only bandwidth gemm attention] [--json OUT]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from unittest import mock

import numpy as np
import pyopencl as cl
from results import Results, add_json_option

from halfway.ir.dtypes import DType
from halfway.ir.schema import InferContext, TensorInfo, get_schema
from halfway.kernels import opencl as _opencl  # noqa: F401  (registers the kernels)
from halfway.kernels.opencl import attention as _attention
from halfway.kernels.opencl import gemm as _gemm
from halfway.kernels.opencl.base import DeviceArray, Launch
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


def bound_launches(rt: Runtime, op_type: str, arrays: dict[str, np.ndarray], attrs: dict | None = None,
                   fetch: tuple[str, ...] = ("Out",)) -> list[Launch]:
    """The launches of ``op_type`` on device copies of ``arrays``, bound as the executor binds them,
    computing the output slots in ``fetch``."""
    schema = get_schema(op_type)
    inputs = {slot: [TensorInfo(a.shape, DType.from_any(a.dtype))] for slot, a in arrays.items()}
    ctx = InferContext(schema, inputs, attrs or {})
    schema.infer(ctx)
    dtype = DType.from_any(next(iter(arrays.values())).dtype)
    outputs = {slot: tuple(infos) for slot, infos in ctx.outputs.items() if slot in fetch}
    spec = KernelSpec(op_type, dtype, ctx._attrs, {k: tuple(v) for k, v in inputs.items()}, outputs)
    ins = [DeviceArray(rt.upload(a), a.shape, a.dtype) for a in arrays.values()]
    outs = [DeviceArray(rt.alloc(np.prod(i.shape) * i.dtype.itemsize), i.shape, i.dtype.numpy)
            for infos in outputs.values() for i in infos]
    return find_kernel(op_type, "opencl", dtype)(spec)(rt, ins, outs)


def bound_op(rt: Runtime, op_type: str, arrays: dict[str, np.ndarray], attrs: dict | None = None) -> Callable[[], None]:
    """One call of ``op_type``'s launches (see ``bound_launches``)."""
    launches = bound_launches(rt, op_type, arrays, attrs)

    def run() -> None:
        for enqueue in launches:
            enqueue()

    return run


def bandwidth(rt: Runtime, n: int, results: Results) -> None:
    rng = np.random.default_rng(0)
    print(f"bandwidth over {n} elements on {rt.caps.name} (float16 mode {rt.mode.value})")
    for dtype in (np.float32, np.float16):
        x, y = (rng.standard_normal(n).astype(dtype) for _ in range(2))
        src, dst = rt.upload(x), rt.alloc(x.nbytes)
        copy = seconds(lambda: cl.enqueue_copy(rt.queue, dst, src), rt.finish, 20)
        copy_rate = 2 * x.nbytes / copy / 1e9
        print(f"  {np.dtype(dtype).name:8} device copy          {copy_rate:8.1f} GB/s")
        results.add("bandwidth", dtype=np.dtype(dtype).name, kernel="device copy", gb_per_s=copy_rate, of_copy=1.0)
        for op_type, arrays, moved in (("elementwise_add", {"X": x, "Y": y}, 3), ("relu", {"X": x}, 2)):
            t = seconds(bound_op(rt, op_type, arrays), rt.finish, 20)
            rate = moved * x.nbytes / t / 1e9
            print(f"  {np.dtype(dtype).name:8} {op_type:20} {rate:8.1f} GB/s  {rate / copy_rate:6.1%} of copy")
            results.add("bandwidth", dtype=np.dtype(dtype).name, kernel=op_type, gb_per_s=rate, of_copy=rate / copy_rate)


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


def gemm(rt: Runtime, size: int, tiles: list[tuple[int, ...]], results: Results) -> None:
    rng = np.random.default_rng(1)
    flops = 2 * size ** 3
    peers = torch_matmul(size)
    print(f"GEMM {size}^3 on {rt.caps.name} (tensor cores: {rt.caps.tensor_cores})")
    for dtype in (np.float16, np.float32):
        a, b = (rng.standard_normal((size, size)).astype(dtype) for _ in range(2))
        t = seconds(bound_op(rt, "matmul_v2", {"X": a, "Y": b}), rt.finish, 5)
        line = f"  {np.dtype(dtype).name:8} halfway {flops / t / 1e12:7.1f} TFLOP/s"
        results.add("gemm", size=size, dtype=np.dtype(dtype).name, system="halfway", tflops=flops / t / 1e12)
        for name, peer in peers.items():
            if name.startswith(np.dtype(dtype).name):
                line += f"   torch {name} {flops / peer / 1e12:7.1f} TFLOP/s (ours {peer / t:5.2f}x)"
                results.add("gemm", size=size, dtype=name, system="torch.matmul", tflops=flops / peer / 1e12)
        print(line)
    if tiles and rt.caps.tensor_cores:
        a, b = (rng.standard_normal((size, size)).astype(np.float16) for _ in range(2))
        table = list(_gemm._MMA_TILES)
        try:
            for sizes in tiles:
                _gemm._MMA_TILES[:] = [sizes]
                t = seconds(bound_op(rt, "matmul_v2", {"X": a, "Y": b}), rt.finish, 5)
                print(f"  float16  tile {sizes} {flops / t / 1e12:7.1f} TFLOP/s")
                results.add("gemm", size=size, dtype="float16", system=f"halfway, tile {sizes}", tflops=flops / t / 1e12)
        finally:
            _gemm._MMA_TILES[:] = table


@contextlib.contextmanager
def portable_attention() -> Iterator[None]:
    """Attention bound inside this block takes the portable kernel, tensor cores or not."""
    with mock.patch.object(_attention, "tensor_core_refusal", lambda *_: "the portable kernel, for comparison"):
        yield


def profiling_runtime(rt: Runtime) -> Runtime:
    """A runtime of ``rt``'s device whose queue records each launch's device time."""
    profiled = Runtime(rt.device, rt.precision)
    profiled.queue = cl.CommandQueue(profiled.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
    return profiled


def device_seconds(launches: list[Launch], rt: Runtime, runs: int = 20) -> float:
    """Median device seconds of one pass over ``launches`` (enqueued on a profiling queue)."""
    times = []
    for _ in range(runs + 1):
        events = [enqueue() for enqueue in launches]
        rt.finish()
        times.append(sum(e.profile.end - e.profile.start for e in events) * 1e-9)
    return statistics.median(times[1:])


AttentionCase = tuple[dict[str, np.ndarray], dict]


def torch_attention(case: AttentionCase, heads: int) -> tuple[float, float] | None:
    """torch.nn.functional.scaled_dot_product_attention on CUDA ([B, H, S, D] views of sequence-major
    operands, as transformers' BERT passes them): seconds per call in a loop of calls, and per call
    replayed from a CUDA graph of 20 calls (the device's time); None without torch/CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    arrays, attrs = case
    q, k, v = (torch.from_numpy(arrays[slot]).cuda() for slot in "QKV")
    if attrs.get("q_num_heads"):
        q, k, v = (x.view(*x.shape[:2], heads, -1).transpose(1, 2) for x in (q, k, v))
    mask = torch.from_numpy(arrays["Mask"]).cuda() if "Mask" in arrays else None

    def call() -> object:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    loop = seconds(call, torch.cuda.synchronize, 20)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            call()
    return loop, seconds(graph.replay, torch.cuda.synchronize, 1) / 20


def attention_cases(batch: int, heads: int, length: int, depth: int) -> dict[str, AttentionCase]:
    """Head-major Q, K, V without a mask; the same as sequence-major [B, S, H * D] with a padding mask
    (each row of the batch keeps a seeded number of keys, at least half), as halfway's BERT runs it."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((batch, heads, length, depth)).astype(np.float16) for _ in range(3))
    kept = rng.integers(length // 2, length + 1, batch)[:, None, None, None]
    padding = np.where(np.arange(length) < kept, 0.0, -np.inf).astype(np.float16)
    sequence_major = {name: x.transpose(0, 2, 1, 3).reshape(batch, length, -1) for name, x in zip("QKV", (q, k, v))}
    return {"head-major": ({"Q": q, "K": k, "V": v}, {}),
            "sequence-major, mask": ({**sequence_major, "Mask": padding}, {"q_num_heads": heads, "kv_num_heads": heads})}


def attention(rt: Runtime, shapes: list[tuple[int, int, int, int]], results: Results) -> None:
    refusal = _attention.tensor_core_refusal(rt, DType.float16, 64, 64)
    profiled = profiling_runtime(rt)
    print(f"attention float16 on {rt.caps.name} (tensor cores: {refusal or 'yes'}); per call: ms in a loop of calls, "
          f"ms of device time (OpenCL profiling events; PyTorch: a CUDA graph), TFLOP/s of device time")
    for batch, heads, length, depth in shapes:
        flops = 4 * batch * heads * length * length * depth
        for name, case in attention_cases(batch, heads, length, depth).items():
            print(f"  batch {batch}, {heads} heads, sequence {length}, head size {depth}, {name}")
            timings: dict[str, tuple[float, float]] = {}
            kernels = [("portable", portable_attention())]
            if _attention.tensor_core_refusal(rt, DType.float16, depth, depth) is None:
                kernels.append(("tensor cores", contextlib.nullcontext()))
            for kernel, choice in kernels:
                with choice:
                    loop = seconds(bound_op(rt, "scaled_dot_product_attention", *case), rt.finish, 20)
                    device = device_seconds(bound_launches(profiled, "scaled_dot_product_attention", *case), profiled)
                timings[kernel] = loop, device
            peer = torch_attention(case, heads)
            if peer is not None:
                timings["torch sdpa"] = peer
            for kernel, (loop, device) in timings.items():
                print(f"    {kernel:13} {loop * 1e3:8.3f} ms {device * 1e3:8.3f} ms {flops / device / 1e12:7.1f} TFLOP/s")
                results.add("attention", shape=f"{batch}x{heads}x{length}x{depth}", layout=name, kernel=kernel,
                            loop_us=loop * 1e6, device_us=device * 1e6, tflops=flops / device / 1e12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="OpenCL device index or name (default: the first GPU)")
    parser.add_argument("--elements", type=int, default=64 << 20)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--tiles", nargs="*", default=[], metavar="WM,WN,MI,NI,STAGES",
                        help="also time the float16 GEMM with each of these tensor-core tiles")
    parser.add_argument("--attention", nargs="*", default=["32,12,128,64"], metavar="B,H,S,D",
                        help="attention shapes: batch, heads, sequence, head size (default: BERT-base's)")
    parser.add_argument("--only", nargs="*", choices=("bandwidth", "gemm", "attention"),
                        default=["bandwidth", "gemm", "attention"], help="run these parts only")
    add_json_option(parser)
    args = parser.parse_args()
    rt = get_runtime(args.device)
    results = Results("bench_opencl_kernels", args.json)
    results.opencl_device = rt.caps.name
    if "bandwidth" in args.only:
        bandwidth(rt, args.elements, results)
    if "gemm" in args.only:
        gemm(rt, args.size, [tuple(int(v) for v in tile.split(",")) for tile in args.tiles], results)
    if "attention" in args.only:
        attention(rt, [tuple(int(v) for v in shape.split(",")) for shape in args.attention], results)
    results.write()


if __name__ == "__main__":
    main()
