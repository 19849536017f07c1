"""Dispatch overhead: chains of tiny elementwise ops (16 floats), microseconds per op, side by
side with ONNX Runtime (as many intra-op threads as halfway's) and onnx.reference on the same
chain in the same run. Three chains (``CHAINS``): pointwise ops, and pointwise ops with a second
input of their shape, which halfway's numpy backend runs as one compiled call, and ops with a
broadcast input, which it calls one by one.

    .venv/bin/python benchmarks/bench_dispatch.py [--ops 1000] [--repeats 20] [--chains pointwise,binary,broadcast]
                                                  [--json OUT]
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
from halfway.kernels.numpy.threads import thread_count

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.results import Results, add_json_option  # noqa: E402

SHAPE = [1, 16]
CHAINS = {
    "pointwise": "scale (x 1, + 0.5) and relu in turn: halfway runs the chain as one compiled call",
    "binary": "an add of the input and a relu in turn: one compiled call too (the input its side input)",
    "broadcast": "an add of a [16] vector (broadcast) and a relu in turn: a call an op",
}


def build_halfway(n_ops: int, chain: str = "pointwise") -> tuple[halfway.Program, str]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = y = layers.data("x", SHAPE)
        other = layers.fill_constant(SHAPE[-1:], "float32", value=0.5) if chain == "broadcast" else x
        for i in range(n_ops):
            if i % 2:
                y = layers.relu(y)
            else:
                y = layers.scale(y, scale=1.0, bias=0.5) if chain == "pointwise" else layers.elementwise_add(y, other)
    return prog, y.name


def build_onnx(n_ops: int, chain: str = "pointwise") -> onnx.ModelProto:
    nodes, prev = [], "x"
    other = {"pointwise": "half", "binary": "x", "broadcast": "halves"}[chain]
    for i in range(n_ops):
        out = f"t{i}"
        nodes.append(helper.make_node("Relu", [prev], [out]) if i % 2 else helper.make_node("Add", [prev, other], [out]))
        prev = out
    constants = {"half": [1], "halves": SHAPE[-1:]}
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor(other, TensorProto.FLOAT, constants[other], [0.5] * SHAPE[-1]
                                                  if other == "halves" else [0.5])] if other in constants else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_chain(chain: str, x: np.ndarray, args: argparse.Namespace) -> list[tuple[str, float]]:
    """(runtime, seconds a run) of the ``chain`` of ``args.ops`` ops, outputs checked to agree."""
    prog, out = build_halfway(args.ops, chain)
    prepared = Executor().prepare(prog, ["x"], [out], halfway.Scope())
    rows = [("halfway (prepared run)", median_seconds(lambda: prepared.run({"x": x}), args.repeats))]
    model = build_onnx(args.ops, chain)
    try:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = thread_count(), 1
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        rows.append(("onnxruntime", median_seconds(lambda: session.run(None, {"x": x}), args.repeats)))
    except ImportError:
        pass
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(model)
    rows.append(("onnx.reference", median_seconds(lambda: ref.run(None, {"x": x}), max(3, args.repeats // 5))))
    np.testing.assert_allclose(prepared.run({"x": x})[0], ref.run(None, {"x": x})[0], rtol=1e-6)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--chains", default=",".join(CHAINS), help=f"of {', '.join(CHAINS)}")
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_dispatch", args.json)
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    print(f"{args.ops}-op chains of tiny elementwise ops ({SHAPE}), median of {args.repeats} runs, "
          f"{thread_count()} threads")
    for chain in args.chains.split(","):
        rows = bench_chain(chain, x, args)
        ours = rows[0][1]
        print(f"\n{chain}: {CHAINS[chain]}")
        print(f"{'runtime':<24}{'us/op':>10}{'vs halfway':>12}")
        for name, seconds in rows:
            print(f"{name:<24}{seconds / args.ops * 1e6:>10.2f}{seconds / ours:>11.2f}x")
            results.add("dispatch", chain=chain, runtime=name, ops=args.ops, us_per_op=seconds / args.ops * 1e6,
                        vs_halfway=seconds / ours)
    results.write()


if __name__ == "__main__":
    main()
