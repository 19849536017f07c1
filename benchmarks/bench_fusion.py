"""Transformer fusion: op counts before and after the default pipeline, against ONNX Runtime's
transformers optimizer, and fused vs unfused latency on numpy.

    python -m benchmarks.bench_fusion [--latency] [--rounds N] [--json OUT] [names...]

Counts: every op of block 0 but feed and fetch, shape arithmetic included (``shape``, ``slice``,
``concat``, ``reshape2`` with a Shape input all count, though prepare computes them on the host);
ONNX Runtime's count is every node of ``optimize_model``'s graph (``model_type`` from the
fixture's family, ``num_heads=0, hidden_size=0``: read from the model). Latency (BERT, GPT-2, ViT):
paired rounds on the fixture's last case, the median of unfused / fused per round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import halfway

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.results import Results, add_json_option  # noqa: E402
from tests.support.modern import FIXTURE_DIR, cases, fixtures  # noqa: E402

MODEL_TYPES = {"bert": "bert", "distilbert": "bert", "roberta": "bert", "gpt2": "gpt2", "vit": "vit", "swin": "swin",
               "t5_encoder": "t5", "llama": "gpt2", "whisper_encoder": "bert", "segformer": "vit"}
LATENCY = ("bert", "gpt2", "vit")


def _ops(program: halfway.Program) -> int:
    return sum(op.type not in ("feed", "fetch") for op in program.global_block().ops)


def _ort_nodes(path: Path, family: str) -> int | str:
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        return len(optimize_model(str(path), model_type=MODEL_TYPES.get(family, "bert"), num_heads=0,
                                  hidden_size=0).model.graph.node)
    except Exception as e:  # the optimizer's own failures are reported, not raised
        return f"{type(e).__name__}: {e}"


def _latency(name: str, rounds: int) -> float:
    program, feeds, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"))
    fused = halfway.PassManager().run(program, scope, fetch=fetches)
    inputs = cases(name)[-1][0]
    shapes = {n: inputs[n].shape for n in feeds}
    runs = [halfway.Executor().prepare(p, feeds, fetches, s, feed_shapes=shapes)
            for p, s in ((program, scope), (fused.program, fused.scope))]
    ratios = []
    for _ in range(rounds):
        times = []
        for prepared in runs:
            start = time.perf_counter()
            prepared.run(inputs)
            times.append(time.perf_counter() - start)
        ratios.append(times[0] / times[1])
    return statistics.median(ratios)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="fixture names (default: every transformer fixture)")
    parser.add_argument("--latency", action="store_true", help="also time fused vs unfused (BERT, GPT-2, ViT)")
    parser.add_argument("--rounds", type=int, default=20)
    add_json_option(parser)
    args = parser.parse_args(argv)
    results = Results("bench_fusion", args.json)
    print("| fixture | imported | fused | onnxruntime optimizer | unfused / fused time |")
    print("| --- | --- | --- | --- | --- |")
    for entry in fixtures():
        name, family = entry["name"], entry["family"]
        if (args.names and name not in args.names) or (not args.names and family not in MODEL_TYPES):
            continue
        path = FIXTURE_DIR / f"{name}.onnx"
        try:
            program, _, fetches, scope = halfway.load(str(path))
        except halfway.HalfwayError as e:
            print(f"| {name} | {type(e).__name__} | - | {_ort_nodes(path, family)} | - |", flush=True)
            continue
        fused = halfway.PassManager().run(program, scope, fetch=fetches).program
        speedup = _latency(name, args.rounds) if args.latency and family in LATENCY else None
        timing = f"{speedup:.2f}x" if speedup is not None else "-"
        theirs = _ort_nodes(path, family)
        print(f"| {name} | {_ops(program)} | {_ops(fused)} | {theirs} | {timing} |", flush=True)
        results.add("ops", fixture=name, imported=_ops(program), fused=_ops(fused), onnxruntime_optimizer=theirs,
                    unfused_over_fused=speedup)
    results.write()


if __name__ == "__main__":
    main()
