"""halfway against ONNX Runtime on a video network: an R3D-18-shaped 3-D ResNet (Conv3D, 3-D batch
norm, 3-D max pool, global average pool) built with onnx.helper, random weights, on the CPU.

Each layer shape of R3D-18 once (a Conv3D with its bias) and the whole network (the stem and
the first block of each stage, at a clip of 8 frames of 112x112), run by ONNX Runtime (all its
graph optimizations) and by halfway's numpy backend (the default pipeline, which folds the batch
norms into the convolutions), timed alternately, so that a busy machine slows both alike; each
figure is the median of the runs, the ratio ONNX Runtime's time over halfway's (> 1: halfway is
faster).

    .venv/bin/python benchmarks/bench_video.py [--runs 7] [--json OUT]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper

import halfway

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.results import Results, add_json_option  # noqa: E402

RNG = np.random.default_rng(0)
CLIP = (1, 3, 8, 112, 112)
STAGES = [(64, 1), (128, 2), (256, 2), (512, 2)]  # (channels, stride) of R3D-18's four stages


class _Net:
    """An ONNX graph under construction: nodes and random initializers."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def param(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, c_in: int, c_out: int, kernel: tuple[int, int, int], stride: tuple[int, int, int],
                relu: bool = True) -> str:
        i = len(self.nodes)
        w = self.param(f"w{i}", RNG.standard_normal((c_out, c_in, *kernel)) * np.sqrt(2 / (c_in * np.prod(kernel))))
        self.nodes.append(helper.make_node("Conv", [x, w], [f"c{i}"], strides=list(stride),
                                           pads=[k // 2 for k in kernel] * 2))
        stats = [self.param(f"{s}{i}", v) for s, v in (("s", RNG.uniform(0.5, 1.5, c_out)), ("b", RNG.normal(0, 0.1, c_out)),
                                                        ("m", RNG.normal(0, 0.1, c_out)), ("v", RNG.uniform(0.5, 1.5, c_out)))]
        self.nodes.append(helper.make_node("BatchNormalization", [f"c{i}", *stats], [f"n{i}"]))
        if not relu:
            return f"n{i}"
        self.nodes.append(helper.make_node("Relu", [f"n{i}"], [f"r{i}"]))
        return f"r{i}"

    def model(self, x_shape: tuple[int, ...], out: str) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "video", [helper.make_tensor_value_info("x", 1, x_shape)],
                                  [helper.make_tensor_value_info(out, 1, None)], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def r3d_18() -> onnx.ModelProto:
    """The stem and the first basic block of each stage (a strided one with its projection)."""
    net = _Net()
    x = net.conv_bn("x", 3, 64, (3, 7, 7), (1, 2, 2))
    c = 64
    for channels, stride in STAGES:
        s = (stride,) * 3
        h = net.conv_bn(x, c, channels, (3, 3, 3), s)
        h = net.conv_bn(h, channels, channels, (3, 3, 3), (1, 1, 1), relu=False)
        skip = x if (c, stride) == (channels, 1) else net.conv_bn(x, c, channels, (1, 1, 1), s, relu=False)
        i = len(net.nodes)
        net.nodes += [helper.make_node("Add", [h, skip], [f"a{i}"]), helper.make_node("Relu", [f"a{i}"], [f"o{i}"])]
        x, c = f"o{i}", channels
    fc = net.param("fc", RNG.standard_normal((c, 400)) * 0.05)
    net.nodes += [helper.make_node("GlobalAveragePool", [x], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
                  helper.make_node("MatMul", ["f", fc], ["logits"])]
    return net.model(CLIP, "logits")


def layers() -> list[tuple[str, onnx.ModelProto, tuple[int, ...]]]:
    """R3D-18's distinct 3x3x3 convolutions, each alone on the map it reads."""
    cases = []
    size = (8, 56, 56)
    for channels, stride in STAGES:
        c_in = channels // stride if stride > 1 else channels
        shape = (1, c_in, *size)
        net = _Net()
        w = net.param("w", RNG.standard_normal((channels, c_in, 3, 3, 3)) * 0.05)
        b = net.param("b", RNG.standard_normal(channels) * 0.1)
        net.nodes.append(helper.make_node("Conv", ["x", w, b], ["y"], strides=[stride] * 3, pads=[1] * 6))
        cases.append((f"3x3x3 {c_in}>{channels} /{stride} at {'x'.join(map(str, size))}", net.model(shape, "y"), shape))
        size = tuple(-(-d // stride) for d in size)
    return cases


def runners(model: onnx.ModelProto, x: np.ndarray) -> tuple[Callable[[], object], Callable[[], object], float]:
    """(ONNX Runtime's run, halfway's run, the larger relative difference of their outputs)."""
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    program, feeds, fetches, scope = halfway.load(model)
    fused = halfway.PassManager().run(program, scope, fetch=fetches)
    prepared = halfway.Executor().prepare(fused.program, feeds, fetches, fused.scope)
    want, got = session.run(None, {"x": x})[0], prepared.run({"x": x})[0]
    error = float(np.abs(got - want).max() / np.abs(want).max())
    return (lambda: session.run(None, {"x": x})), (lambda: prepared.run({"x": x})), error


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
    parser.add_argument("--runs", type=int, default=7)
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_video", args.json)
    print(f"{'case':<40} {'ORT ms':>8} {'halfway ms':>10} {'ratio':>6} {'rel. error':>10}")
    for name, model, shape in [*layers(), ("R3D-18 (a block per stage), 8x112x112", r3d_18(), CLIP)]:
        ort, ours, error = runners(model, RNG.standard_normal(shape).astype(np.float32))
        t_ort, t_ours = median_times(args.runs, ort, ours)
        print(f"{name:<40} {t_ort * 1e3:>8.1f} {t_ours * 1e3:>10.1f} {t_ort / t_ours:>6.2f} {error:>10.1e}")
        results.add("cases", case=name, onnxruntime_ms=t_ort * 1e3, halfway_ms=t_ours * 1e3, ratio=t_ort / t_ours,
                    relative_error=error)
    results.write()


if __name__ == "__main__":
    main()
