"""Dispatch overhead: a chain of tiny elementwise ops, microseconds per op, side by side with
ONNX Runtime and onnx.reference on the same chain in the same run.

    .venv/bin/python benchmarks/bench_dispatch.py [--ops 1000] [--repeats 20] [--json OUT]
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
from onnx import TensorProto, helper

import halfway  # before numpy, so that halfway.api.openblas can pick OpenBLAS's kernels
from halfway import layers
from halfway.executor import Executor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.results import Results, add_json_option  # noqa: E402

SHAPE = [1, 4]


def build_halfway(n_ops: int) -> tuple[halfway.Program, str]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        y = layers.data("x", SHAPE)
        for i in range(n_ops):
            y = layers.relu(y) if i % 2 else layers.scale(y, scale=1.0, bias=0.5)
    return prog, y.name


def build_onnx(n_ops: int) -> onnx.ModelProto:
    nodes, prev = [], "x"
    for i in range(n_ops):
        out = f"t{i}"
        nodes.append(helper.make_node("Relu", [prev], [out]) if i % 2 else helper.make_node("Add", [prev, "half"], [out]))
        prev = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor("half", TensorProto.FLOAT, [1], [0.5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_dispatch", args.json)
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)

    prog, out = build_halfway(args.ops)
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope())
    rows = [("halfway (prepared run)", median_seconds(lambda: prepared.run({"x": x}), args.repeats))]
    model = build_onnx(args.ops)
    try:
        import onnxruntime as ort

        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        rows.append(("onnxruntime", median_seconds(lambda: session.run(None, {"x": x}), args.repeats)))
    except ImportError:
        pass
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(model)
    rows.append(("onnx.reference", median_seconds(lambda: ref.run(None, {"x": x}), max(3, args.repeats // 5))))

    expected = ref.run(None, {"x": x})[0]
    np.testing.assert_allclose(prepared.run({"x": x})[0], expected, rtol=1e-6)
    ours = rows[0][1]
    print(f"{args.ops}-op chain of tiny elementwise ops ({SHAPE}), median of {args.repeats} runs")
    print(f"{'runtime':<24}{'us/op':>10}{'vs halfway':>12}")
    for name, seconds in rows:
        print(f"{name:<24}{seconds / args.ops * 1e6:>10.2f}{seconds / ours:>11.2f}x")
        results.add("dispatch", runtime=name, ops=args.ops, us_per_op=seconds / args.ops * 1e6,
                    vs_halfway=seconds / ours)
    results.write()


if __name__ == "__main__":
    main()
