"""Networks on halfway's OpenCL backend, float32 and float16, side by side with a peer in the
same run:

* ``--torch``: ResNet-50 and VGG-19 at batch 1 and 32 against PyTorch on the same GPU, eager
  (NCHW) and at its best: channels_last, ``cudnn.benchmark`` and a CUDA graph;
* ``--tuning``: ResNet-50 and VGG-19 in float16 on the device, our heuristic's tiles against tuned
  ones, PyTorch's CUDA graph beside them;
* ``--onnx``: the nine models of ONNX's light zoo (shipped with the onnx package; batch 1, as
  their graphs fix it) against ONNX Runtime (its CUDA provider where it has one).

Each network is built with ``halfway.api.layers`` in torchvision's module order and given the
torchvision model's own (randomly initialised) weights, so both compute the same function; our
float32 output is checked against PyTorch's strict float32 one. Our program goes through the
default pass pipeline (conv+bn folding, fused_conv2d epilogues, fc) and, for float16, through
``halfway.float16_transpile`` (float32 feeds and fetches, float16 inside). Latency is the median
of ``runs`` calls: ours is ``PreparedProgram.run`` from a host array to a host array (upload, all
ops, read-back), and again with the input already on the device and the output left there
(``to_device``, ``run(on_device=True)``; the float16 program then fed and fetching float16, as
PyTorch's float16 graph takes and gives float16 tensors); PyTorch's is ``model(x)`` on a GPU tensor,
synchronised, or the replay of its CUDA graph, and that replay again from host array to host
array (the input copied in, the output copied back).

Our tensor-core GEMMs and convolutions take tiles timed on the device as the program is prepared
(``OpenCLPlace(tune=True)``; ``--no-tune`` for the heuristic's), as PyTorch's take cuDNN's
autotuner's (``cudnn.benchmark``).

For the ONNX models ours is loaded with ``halfway.load`` and goes through the same passes and
transpile; their weights are the models' constant fills, which does not change the work.

    python benchmarks/bench_opencl_zoo.py --torch [--models resnet50,vgg19] [--batches 1,32] [--runs 20]
    python benchmarks/bench_opencl_zoo.py --onnx [--models squeezenet,resnet50] [--float32-only]
    python benchmarks/bench_opencl_zoo.py --tuning [--models resnet50,vgg19] [--batches 1,32]

``--json OUT`` also writes the figures as JSON for the documentation's benchmark pages.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
from results import Results, add_json_option
from torch_peers import eager_and_graph_ms, graph_host_to_host_ms, median_ms

import halfway
from halfway import layers
from halfway.executor import Executor, OpenCLPlace
from halfway.kernels.opencl import tuning
from halfway.passes import DEFAULT_PIPELINE, PassManager

Var = halfway.Variable
FUSIONS = ",".join(name for name in DEFAULT_PIPELINE.split(",") if name != "dce")
"""The default pipeline but its dce, which needs fetch ops."""


# -- the networks, in torchvision's module order ----------------------------------------------------
def _conv_bn(x: Var, filters: int, size: int, stride: int = 1, act: str | None = "relu") -> Var:
    y = layers.conv2d(x, num_filters=filters, filter_size=size, stride=stride, padding=size // 2, bias_attr=False)
    return layers.batch_norm(y, act=act)


def _bottleneck(x: Var, width: int, stride: int, downsample: bool) -> Var:
    y = _conv_bn(x, width, 1)
    y = _conv_bn(y, width, 3, stride)
    y = _conv_bn(y, width * 4, 1, act=None)
    shortcut = _conv_bn(x, width * 4, 1, stride, act=None) if downsample else x
    return layers.relu(layers.elementwise_add(y, shortcut))


def resnet50(x: Var) -> Var:
    y = _conv_bn(x, 64, 7, 2)
    y = layers.pool2d(y, pool_size=3, pool_type="max", pool_stride=2, pool_padding=1)
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            y = _bottleneck(y, width, stride if i == 0 else 1, downsample=i == 0)
    y = layers.pool2d(y, pool_type="avg", global_pooling=True)
    return layers.fc(layers.flatten(y, 1, 3), size=1000)


def vgg19(x: Var) -> Var:
    y = x
    for filters, count in ((64, 2), (128, 2), (256, 4), (512, 4), (512, 4)):
        for _ in range(count):
            y = layers.conv2d(y, num_filters=filters, filter_size=3, padding=1, act="relu")
        y = layers.pool2d(y, pool_size=2, pool_type="max", pool_stride=2)
    y = layers.adaptive_pool2d(y, 7, pool_type="avg")
    y = layers.flatten(y, 1, 3)
    y = layers.fc(y, size=4096, act="relu")
    y = layers.fc(y, size=4096, act="relu")
    return layers.fc(y, size=1000)


# -- torchvision's weights ----------------------------------------------------------------------------
def _torch_tensors(model) -> Iterator[np.ndarray]:
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            yield from [module.weight] + ([module.bias] if module.bias is not None else [])
        elif isinstance(module, torch.nn.BatchNorm2d):
            yield from (module.weight, module.bias, module.running_mean, module.running_var)
        elif isinstance(module, torch.nn.Linear):
            yield from (module.weight.T, module.bias)


def torch_scope(program: halfway.Program, model) -> halfway.Scope:
    """The program's parameters from ``model``, matched in op order and checked by shape."""
    tensors = (t.detach().cpu().numpy().astype(np.float32) for t in _torch_tensors(model))
    scope = halfway.Scope()
    block = program.global_block()
    for op in block.ops:
        for name in op.input_names():
            var = block.find_var(name)
            if var is not None and var.persistable and name not in scope:
                value = np.ascontiguousarray(next(tensors))
                assert tuple(value.shape) == tuple(var.shape), (op.type, name, value.shape, var.shape)
                scope[name] = value
    return scope


# -- timing -------------------------------------------------------------------------------------------
def device_resident_ms(program: halfway.Program, scope: halfway.Scope, fetch: str, x: np.ndarray,
                       place: OpenCLPlace, runs: int) -> float:
    """Our median ms with the input already on the device and the output left there
    (``PreparedProgram.to_device``, ``run(on_device=True)``), as PyTorch's graph runs on a GPU
    tensor; without the host-side float16 range checks, which need host values."""
    prepared = Executor(place).prepare(program, ["x"], [fetch], scope, check_float16_range=False)
    feed = prepared.to_device({"x": _as_fed(program, x)})
    return median_ms(lambda: prepared.run(feed, on_device=True), runs)


def _as_fed(program: halfway.Program, x: np.ndarray) -> np.ndarray:
    """``x`` in the dtype of the program's feed ``x`` (float16 where the program is fed float16)."""
    return x.astype(program.global_block().var("x").dtype.numpy)


def torch_latency(model, x: np.ndarray, half: bool, runs: int) -> tuple[float, float, float, np.ndarray]:
    """PyTorch's seconds eager (NCHW) and at its best (channels_last, cuDNN's autotuner, a CUDA
    graph) on a GPU tensor, at its best from the host array ``x`` to a host array (the float16
    cast and channels_last copy of the input in the graph), and its eager output; TF32 off, so
    float32 is float32 on both sides."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    m = model.half() if half else model.float()
    t = torch.from_numpy(x).cuda()
    t = t.half() if half else t
    eager, _ = eager_and_graph_ms(lambda: m(t), runs)
    with torch.inference_mode():
        out = m(t).float().cpu().numpy()
    m = m.to(memory_format=torch.channels_last)
    t = t.contiguous(memory_format=torch.channels_last)
    _, graph = eager_and_graph_ms(lambda: m(t), runs)
    dtype = torch.half if half else torch.float
    host = graph_host_to_host_ms(lambda s: m(s.to(dtype).contiguous(memory_format=torch.channels_last)), x, runs)
    m.to(memory_format=torch.contiguous_format)
    return eager / 1e3, graph / 1e3, host / 1e3, out


def print_profile(prepared, feed: dict[str, np.ndarray], top: int = 6) -> None:
    """Seconds per op type (``PreparedProgram.profile``: on OpenCL the device's own), the slowest first."""
    totals: dict[str, float] = {}
    for where, seconds in prepared.profile(feed):
        kind = where.split("[")[-1].rstrip("]")
        totals[kind] = totals.get(kind, 0.0) + seconds
    ranked = sorted(totals.items(), key=lambda item: -item[1])[:top]
    print("    profile: " + ", ".join(f"{kind} {s * 1e3:.2f} ms" for kind, s in ranked), flush=True)


class Networks(NamedTuple):
    """torchvision's model on the GPU and our programs of it on its weights: float32; float16 fed
    and fetching float32 (run from host arrays); float16 fed and fetching float16 (run on the
    device, as PyTorch's CUDA graph of the float16 model takes and gives float16 tensors)."""

    model: Any
    float32: halfway.Program
    float16: halfway.Program
    float16_io: halfway.Program
    scope: halfway.Scope
    out: Var
    x: np.ndarray


LAYOUT_PASSES = "channels_last,fuse_conv_pool"
"""What ``--channels-last`` runs after the default passes: NHWC, then pools in the epilogues."""


def _networks(name: str, build: Callable[[Var], Var], batch: int, channels_last: bool = False) -> Networks:
    """``Networks`` of torchvision's model ``name`` (seeded random weights; the float16 programs in
    NHWC with ``channels_last``: ``LAYOUT_PASSES``) and a seeded input of ``batch`` images."""
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval().cuda()
    prog = halfway.Program()
    with halfway.program_guard(prog):
        out = build(layers.data("x", [batch, 3, 224, 224]))
    prog32, scope = _transpiled(prog, torch_scope(prog, model))
    nhwc = prog32
    if channels_last:
        moved = PassManager(LAYOUT_PASSES).run(prog32, scope, fetch=[out.name])
        nhwc, scope = moved.program, moved.scope  # with the classifier's reordered weights
    prog16, _ = halfway.float16_transpile(nhwc, scope)
    io16, _ = halfway.float16_transpile(nhwc, scope, keep_io_types=False)
    x = np.random.default_rng(0).standard_normal((batch, 3, 224, 224)).astype(np.float32)
    return Networks(model, prog32, prog16, io16, scope, out, x)


def bench(name: str, build: Callable[[Var], Var], batch: int, runs: int, place: OpenCLPlace, results: Results,
          profile: bool = False, channels_last: bool = False) -> None:
    nets = _networks(name, build, batch, channels_last)
    model, scope, out, x = nets.model, nets.scope, nets.out, nets.x
    row = []
    for label, program, on_device in (("fp32", nets.float32, nets.float32), ("fp16", nets.float16, nets.float16_io)):
        prepared = Executor(place).prepare(program, ["x"], [out.name], scope)
        got = prepared.run({"x": x})[0]
        ours = median_ms(lambda: prepared.run({"x": x}), runs) / 1e3
        falls = len(prepared.report.fallbacks)
        if profile:
            print_profile(prepared, {"x": x})
        resident = device_resident_ms(on_device, scope, out.name, x, place, runs) / 1e3
        eager, graph, host, want = torch_latency(model, x, label == "fp16", runs)
        error = float(np.abs(got.astype(np.float32) - want).max() / max(np.abs(want).max(), 1e-6))
        row.append(f"{label}: ours {ours * 1e3:7.2f} ms  torch eager {eager * 1e3:7.2f} ms ({eager / ours:4.2f}x)  "
                   f"torch graph {graph * 1e3:7.2f} ms ({graph / ours:4.2f}x)  "
                   f"host to host {host * 1e3:7.2f} ms ({host / ours:4.2f}x)  "
                   f"ours on the device {resident * 1e3:7.2f} ms (graph {graph / resident:4.2f}x) max rel err {error:.1e}"
                   f"{f'  {falls} fallbacks' if falls else ''}")
        results.add("torch", model=name, batch=batch, dtype="float16" if label == "fp16" else "float32",
                    halfway_ms=ours * 1e3, halfway_on_device_ms=resident * 1e3, torch_eager_ms=eager * 1e3,
                    torch_graph_ms=graph * 1e3, torch_graph_host_ms=host * 1e3, rel_error=error, fallbacks=falls,
                    channels_last=channels_last)
        model.float()
    print(f"{name:9} batch {batch:3}  " + "  |  ".join(row), flush=True)


def bench_tuning(name: str, build: Callable[[Var], Var], batch: int, runs: int, device: str | None,
                 results: Results, channels_last: bool = False) -> None:
    """float16 on the device with the heuristic's tiles against tuned ones (prepared in that order,
    the tuner's cache in a fresh folder, so the first takes no measured choice; timed in alternating
    rounds), with the seconds the tuning took and PyTorch's CUDA graph beside them."""
    import tempfile

    os.environ["HALFWAY_CACHE_DIR"] = tempfile.mkdtemp(prefix="halfway-tuning-")
    tuning.tuner.cache_clear()  # a tuner on the fresh folder
    nets = _networks(name, build, batch, channels_last)
    model, scope, out, x = nets.model, nets.scope, nets.out, nets.x
    prepared, seconds = {}, {}
    for label, tune in (("heuristic", False), ("tuned", True)):
        start = time.perf_counter()
        program = Executor(OpenCLPlace(device, tune=tune)).prepare(nets.float16_io, ["x"], [out.name], scope,
                                                                   check_float16_range=False)
        seconds[label] = time.perf_counter() - start
        prepared[label] = (program, program.to_device({"x": _as_fed(nets.float16_io, x)}))
    outputs = {label: p.run(feed, on_device=True)[0].numpy().astype(np.float32) for label, (p, feed) in prepared.items()}
    times: dict[str, list[float]] = {label: [] for label in prepared}
    for _ in range(5):
        for label, (p, feed) in prepared.items():
            times[label].append(median_ms(lambda p=p, feed=feed: p.run(feed, on_device=True), runs))
    _, graph, _, _ = torch_latency(model, x, True, runs)
    ms = {label: statistics.median(t) for label, t in times.items()}
    spread = float(np.abs(outputs["tuned"] - outputs["heuristic"]).max() / np.abs(outputs["heuristic"]).max())
    print(f"{name:9} batch {batch:3} float16 on the device: heuristic {ms['heuristic']:6.3f} ms  "
          f"tuned {ms['tuned']:6.3f} ms ({ms['heuristic'] / ms['tuned']:4.2f}x; tuning took "
          f"{seconds['tuned'] - seconds['heuristic']:5.1f} s)  torch graph {graph * 1e3:6.3f} ms "
          f"(graph / tuned {graph * 1e3 / ms['tuned']:4.2f}x)  outputs differ by {spread:.1e} of their largest",
          flush=True)
    results.add("tuning", model=name, batch=batch, heuristic_ms=ms["heuristic"], tuned_ms=ms["tuned"],
                tuning_s=seconds["tuned"] - seconds["heuristic"], torch_graph_ms=graph * 1e3,
                channels_last=channels_last)


LIGHT_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
                "squeezenet", "vgg19", "zfnet512"]


def _transpiled(program: halfway.Program, scope: halfway.Scope) -> tuple[halfway.Program, halfway.Scope]:
    fused = PassManager(FUSIONS).run(program, scope)
    return fused.program, fused.scope if fused.scope is not None else scope


def bench_onnx(name: str, runs: int, place: OpenCLPlace, float16: bool, results: Results) -> None:
    import onnx
    import onnxruntime

    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")
    program, feeds, fetches, scope = halfway.load(path)
    prog32, scope = _transpiled(program, scope)
    variants = [("fp32", prog32)]
    if float16:
        variants.append(("fp16", halfway.float16_transpile(prog32, scope)[0]))
    providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider")
                 if p in onnxruntime.get_available_providers()]
    session = onnxruntime.InferenceSession(path, providers=providers)
    feed_name = session.get_inputs()[0].name
    shape = [d if isinstance(d, int) else 1 for d in session.get_inputs()[0].shape]
    x = np.random.default_rng(0).random(shape, np.float32)
    theirs = median_ms(lambda: session.run(None, {feed_name: x}), runs) / 1e3
    row = []
    for label, prog in variants:
        prepared = Executor(place).prepare(prog, feeds, fetches, scope)
        ours = median_ms(lambda: prepared.run({feeds[0]: x}), runs) / 1e3
        row.append(f"{label}: ours {ours * 1e3:8.2f} ms ({theirs / ours:5.2f}x)")
        results.add("onnx", model=name, dtype="float16" if label == "fp16" else "float32", halfway_ms=ours * 1e3,
                    onnxruntime_ms=theirs * 1e3, onnxruntime_provider=providers[0])
    print(f"{name:13} onnxruntime ({providers[0]}) {theirs * 1e3:8.2f} ms  |  " + "  |  ".join(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--torch", action="store_true", help="builder networks against PyTorch eager")
    which.add_argument("--onnx", action="store_true", help="ONNX's light zoo against ONNX Runtime")
    which.add_argument("--tuning", action="store_true", help="builder networks, heuristic tiles against tuned")
    parser.add_argument("--models", default=None, help="comma-separated (default: all of the section)")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--float32-only", action="store_true")
    parser.add_argument("--profile", action="store_true", help="also print the slowest op types (--torch)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--channels-last", action="store_true",
                        help="--torch, --tuning: the float16 programs in NHWC, pools fused into convolutions "
                             "(the channels_last and fuse_conv_pool passes)")
    parser.add_argument("--no-tune", action="store_true",
                        help="take the kernels' heuristic tiles, not tiles timed on the device as PyTorch's cuDNN does")
    add_json_option(parser)
    args = parser.parse_args()
    place = OpenCLPlace(args.device, tune=not args.no_tune)
    print(f"device {place.runtime.caps.name}, float16 mode {place.runtime.mode.value}")
    results = Results("bench_opencl_zoo", args.json)
    results.opencl_device = place.runtime.caps.name
    if args.onnx:
        for name in (args.models.split(",") if args.models else LIGHT_MODELS):
            bench_onnx(name, args.runs, place, not args.float32_only, results)
        results.write()
        return
    builders = {"resnet50": resnet50, "vgg19": vgg19}
    for name in (args.models.split(",") if args.models else builders):
        for batch in (int(b) for b in args.batches.split(",")):
            if args.tuning:
                bench_tuning(name, builders[name], batch, args.runs, args.device, results, args.channels_last)
            else:
                bench(name, builders[name], batch, args.runs, place, results, args.profile, args.channels_last)
    results.write()


if __name__ == "__main__":
    main()
