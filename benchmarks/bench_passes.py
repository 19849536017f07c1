"""Pass pipeline cost against program size: the default inference pipeline on synthetic CNNs of
about 10,000 and 50,000 ops (growth ratio ~5 means near-linear), side by side with ONNX
Runtime's graph optimisation (Conv+BatchNorm and Conv+activation fusion among others) of the
same network in the same run.

    .venv/bin/python benchmarks/bench_passes.py [--ops 10000 50000] [--zoo densenet121] [--repeats 3] [--no-ort]
                                                [--fold-ops 10000] [--json OUT]

``--zoo`` also times the pipeline on light ONNX zoo models shipped with the onnx package
(``onnx/backend/test/data/light``), loaded with ``halfway.load``.

The network repeats a block of conv2d(+bias), batch_norm, relu, conv2d(+bias), batch_norm,
elementwise_add (residual), relu: 9 ops in halfway's Paddle vocabulary (the builder adds each bias
with an elementwise_add), 7 ONNX nodes.
``--fold-ops`` times ``fold_constants`` alone on the synthetic CNN where every block also adds a
constant computed from a fill (fill_constant -> scale -> elementwise_add): one folded op per block.
Times are medians of CPU time of this process (``time.process_time``: on a shared machine wall
time mostly measures the neighbours); "passes" sums the passes' own times, "pipeline" adds the
clone and the verifier run after every pass. The ONNX Runtime figure is session creation with
all graph optimisations minus session creation with none (its fusion work), one thread.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import halfway
from halfway import layers
from halfway.passes import DEFAULT_PIPELINE, PassManager, get_pass

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.results import Results, add_json_option  # noqa: E402

CHANNELS = 4
OPS_PER_BLOCK = 9


def build_halfway(blocks: int, fold: bool = False) -> tuple[halfway.Program, halfway.Scope, str]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        y = layers.data("x", [1, CHANNELS, 4, 4])
        for _ in range(blocks):
            z = layers.batch_norm(layers.conv2d(y, CHANNELS, 3, padding=1), act="relu")
            z = layers.batch_norm(layers.conv2d(z, CHANNELS, 3, padding=1))
            if fold:
                z = layers.elementwise_add(z, layers.scale(layers.fill_constant([CHANNELS, 4, 4], "float32", 0.1), 2.0))
            y = layers.relu(layers.elementwise_add(z, y))
    scope = halfway.init_scope(prog, seed=0)
    return prog, scope, y.name


def build_onnx(blocks: int) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"

    def param(name: str, shape: tuple[int, ...], low: float = -0.5) -> str:
        inits.append(numpy_helper.from_array(rng.uniform(low, 1.0, shape).astype(np.float32), name))
        return name

    for b in range(blocks):
        z = prev
        for k in range(2):
            p = f"b{b}_{k}"
            nodes.append(helper.make_node("Conv", [z, param(p + "w", (CHANNELS, CHANNELS, 3, 3)),
                                                   param(p + "b", (CHANNELS,))], [p + "c"], pads=[1, 1, 1, 1]))
            bn = [param(p + s, (CHANNELS,), 0.5) for s in ("s", "o", "m", "v")]
            nodes.append(helper.make_node("BatchNormalization", [p + "c", *bn], [p + "n"]))
            z = p + "n"
            if k == 0:
                nodes.append(helper.make_node("Relu", [z], [p + "r"]))
                z = p + "r"
        nodes.append(helper.make_node("Add", [z, prev], [f"b{b}a"]))
        nodes.append(helper.make_node("Relu", [f"b{b}a"], [f"b{b}y"]))
        prev = f"b{b}y"
    shape = [1, CHANNELS, 4, 4]
    graph = helper.make_graph(nodes, "resnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def zoo_model(name: str) -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"


def time_halfway(prog: halfway.Program, scope: halfway.Scope, fetch: list[str],
                 repeats: int) -> tuple[int, float, float, dict[str, float]]:
    ops = len(prog.global_block().ops)
    manager = PassManager(DEFAULT_PIPELINE, timing=True)
    totals, pass_sums, per_pass = [], [], []
    for _ in range(repeats):
        start = time.process_time()
        result = manager.run(prog, scope, fetch=fetch)
        totals.append(time.process_time() - start)
        pass_sums.append(sum(r.cpu_seconds or 0.0 for r in result.records))
        per_pass.append({r.name: r.cpu_seconds or 0.0 for r in result.records})
    median_pass = {name: statistics.median(p[name] for p in per_pass) for name in per_pass[0]}
    return ops, statistics.median(totals), statistics.median(pass_sums), median_pass


def time_folding(prog: halfway.Program, scope: halfway.Scope, fetch: str, repeats: int) -> tuple[int, int, float]:
    """(ops, ops folded, median CPU seconds) of fold_constants alone on a fresh copy each time."""
    seconds, folded = [], 0
    for _ in range(repeats):
        work = prog.clone()
        fold = get_pass("fold_constants", fetch_names=[fetch])
        start = time.process_time()
        result = fold(work, scope.new_scope())
        seconds.append(time.process_time() - start)
        folded = result.stats["folded"]
    return len(prog.global_block().ops), folded, statistics.median(seconds)


def time_onnxruntime(model: bytes, repeats: int) -> float:
    import onnxruntime as ort

    def session_seconds(level: ort.GraphOptimizationLevel) -> float:
        options = ort.SessionOptions()
        options.graph_optimization_level = level
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.log_severity_level = 3
        start = time.process_time()
        ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        return time.process_time() - start

    full = statistics.median(session_seconds(ort.GraphOptimizationLevel.ORT_ENABLE_ALL) for _ in range(repeats))
    none = statistics.median(session_seconds(ort.GraphOptimizationLevel.ORT_DISABLE_ALL) for _ in range(repeats))
    return full - none


def report(label: str, timing: tuple[int, float, float, dict[str, float]], ort_s: float | None,
           results: Results) -> None:
    ops, wall, passes, per_pass = timing
    results.add("pipeline", program=label, ops=ops, pipeline_ms=wall * 1e3, passes_ms=passes * 1e3,
                onnxruntime_ms=ort_s * 1e3 if ort_s is not None else None)
    detail = ", ".join(f"{name} {s * 1e3:.0f}" for name, s in per_pass.items())
    ort_text = f"  onnxruntime optimisation {ort_s * 1e3:8.1f} ms" if ort_s is not None else ""
    print(f"{label} {ops:6d} ops: pipeline {wall * 1e3:8.1f} ms, passes {passes * 1e3:8.1f} ms ({detail}){ort_text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ops", type=int, nargs="*", default=[10000, 50000])
    parser.add_argument("--zoo", nargs="*", default=[])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-ort", action="store_true", help="skip the ONNX Runtime comparison")
    parser.add_argument("--fold-ops", type=int, nargs="*", default=[], help="time fold_constants on this many ops")
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_passes", args.json)
    for target in args.fold_ops:
        prog, scope, out = build_halfway(max(1, target // (OPS_PER_BLOCK + 3)), fold=True)
        ops, folded, seconds = time_folding(prog, scope, out, args.repeats)
        print(f"fold_constants {ops:6d} ops: {folded} folded in {seconds * 1e3:8.1f} ms "
              f"({seconds / max(folded, 1) * 1e6:.0f} us per folded op)")
        results.add("fold_constants", ops=ops, folded=folded, ms=seconds * 1e3, us_per_folded_op=seconds / max(folded, 1) * 1e6)
    rows = []
    for target in args.ops:
        blocks = max(1, target // OPS_PER_BLOCK)
        prog, scope, out = build_halfway(blocks)
        timing = time_halfway(prog, scope, [out], args.repeats)
        ort_s = None if args.no_ort else time_onnxruntime(build_onnx(blocks), args.repeats)
        rows.append((timing[0], timing[1], timing[2], ort_s))
        report("synthetic CNN", timing, ort_s, results)
    if len(rows) > 1:
        (ops0, wall0, pass0, ort0), (ops1, wall1, pass1, ort1) = rows[0], rows[-1]
        growth = f"size x{ops1 / ops0:.2f}: pipeline x{wall1 / wall0:.2f}, passes x{pass1 / pass0:.2f}"
        if ort0 and ort1:
            growth += f", onnxruntime x{ort1 / ort0:.2f}"
        print(growth)
        results.summary(size_growth=ops1 / ops0, pipeline_growth=wall1 / wall0, passes_growth=pass1 / pass0)
    for name in args.zoo:
        path = zoo_model(name)
        prog, _, fetches, scope = halfway.load(str(path))
        ort_s = None if args.no_ort else time_onnxruntime(path.read_bytes(), args.repeats)
        report(name, time_halfway(prog, scope, fetches, args.repeats), ort_s, results)
    results.write()


if __name__ == "__main__":
    main()
