"""Op counts of the modern fixtures (``tests/fixtures/modern``): the ONNX model's nodes, the nodes
ONNX Runtime's transformers optimizer leaves, and the ops halfway's default pipeline leaves.

    .venv/bin/python benchmarks/bench_op_counts.py [--only gpt2,bert] [--no-ort | --ort-python PYTHON]
                                                   [--histogram] [--json OUT]

ONNX Runtime's count is ``onnxruntime.transformers.optimizer.optimize_model(path, model_type=...,
num_heads=0, hidden_size=0)`` with the model type of the fixture's family (``MODEL_TYPES``,
"bert" for the others). The optimizer imports torch: ``--ort-python`` names an interpreter that
has onnxruntime and torch (``/work/torchvenv/bin/python``, say) to run it in; without one it runs
here, and an ONNX Runtime without torch or without the transformers optimizer (or ``--no-ort``)
leaves the column saying why. halfway's count is the ops of block 0 after ``halfway.PassManager()``, feed and
fetch ops not counted. The ratio is halfway's over ONNX Runtime's: below 1 where halfway leaves
fewer. ``--histogram`` prints the op types halfway leaves, most frequent first, and those of one layer.

A layer's ops are ``tests.support.modern.layer_ops``: those between the last two attentions.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from collections import Counter
from pathlib import Path

import onnx

import halfway

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import Results, add_json_option  # noqa: E402
from tests.support.modern import FIXTURE_DIR, fixtures, layer_ops  # noqa: E402

MODEL_TYPES = {"bert": "bert", "distilbert": "bert", "roberta": "bert", "gpt2": "gpt2", "t5_encoder": "t5",
               "vit": "vit", "swin": "swin"}
"""ONNX Runtime's model type per fixture family; "bert" for the families not listed."""


def onnx_nodes(path: Path) -> int:
    return len(onnx.load(str(path), load_external_data=False).graph.node)


_ORT_COUNT = """
import logging, sys
logging.disable(logging.WARNING)
from onnxruntime.transformers.optimizer import optimize_model
model = optimize_model(sys.argv[1], model_type=sys.argv[2], num_heads=0, hidden_size=0)
print(len(model.model.graph.node))
"""
"""Prints the nodes ONNX Runtime's transformers optimizer leaves of model argv[1], of type argv[2]."""


def ort_nodes(path: Path, family: str, python: str | None = None) -> int | str:
    """The nodes ONNX Runtime's transformers optimizer leaves, run here or by ``python``, or why
    there is no count."""
    model_type = MODEL_TYPES.get(family, "bert")
    if python is not None:
        done = subprocess.run([python, "-c", _ORT_COUNT, str(path), model_type], capture_output=True, text=True)
        lines = done.stdout.split()
        return int(lines[-1]) if done.returncode == 0 and lines else f"error {done.stderr.split(':')[0][-24:]}"
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as e:
        return f"no optimizer ({e.name})"
    logging.disable(logging.WARNING)
    try:
        model = optimize_model(str(path), model_type=model_type, num_heads=0, hidden_size=0)
    except Exception as e:  # the optimizer fails in many ways (and needs torch)
        return f"error {type(e).__name__}"
    finally:
        logging.disable(logging.NOTSET)
    return len(model.model.graph.node)


def halfway_ops(path: Path) -> tuple[Counter[str], Counter[str] | None]:
    """The op types (and how many of each) halfway's default pipeline leaves, feed/fetch not
    counted, and those of one layer (None with fewer than two attentions)."""
    program, _, fetches, scope = halfway.load(str(path))
    block = halfway.PassManager().run(program, scope, fetch=fetches).program.global_block()
    ops = [op for op in block.ops if op.type not in ("feed", "fetch")]
    layer = layer_ops(block)
    return Counter(op.type for op in ops), None if layer is None else Counter(op.type for op in layer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma-separated families or fixture names")
    parser.add_argument("--no-ort", action="store_true", help="skip ONNX Runtime's optimizer")
    parser.add_argument("--ort-python", help="run ONNX Runtime's optimizer with this Python (it needs torch)")
    parser.add_argument("--histogram", action="store_true", help="print the op types halfway leaves")
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_op_counts", args.json)
    wanted = {w for w in args.only.split(",") if w}
    entries = [e for e in fixtures() if not wanted or e["family"] in wanted or e["name"] in wanted]
    print(f"{'fixture':36} {'onnx':>6} {'ort':>6} {'halfway':>8} {'ratio':>6} {'layer':>6}")
    fewer = measured = 0
    for entry in entries:
        path = FIXTURE_DIR / f"{entry['name']}.onnx"
        ops, layer = halfway_ops(path)
        ours, per_layer = sum(ops.values()), None if layer is None else sum(layer.values())
        theirs = "-" if args.no_ort else ort_nodes(path, entry["family"], args.ort_python)
        ratio = f"{ours / theirs:6.2f}" if isinstance(theirs, int) else ""
        if isinstance(theirs, int):
            measured += 1
            fewer += ours < theirs
        print(f"{entry['name']:36} {onnx_nodes(path):6d} {str(theirs):>6} {ours:8d} {ratio:>6} "
              f"{'-' if per_layer is None else per_layer:>6}", flush=True)
        results.add("ops", fixture=entry["name"], onnx=onnx_nodes(path), onnxruntime_optimizer=theirs, halfway=ours,
                    ratio=ours / theirs if isinstance(theirs, int) else None, halfway_per_layer=per_layer)
        if args.histogram:
            print("    " + ", ".join(f"{t} {n}" for t, n in ops.most_common()))
            if layer is not None:
                print("    layer: " + ", ".join(f"{t} {n}" for t, n in layer.most_common()))
    if measured:
        print(f"halfway leaves fewer ops than ONNX Runtime's optimizer on {fewer} of {measured} fixtures")
        results.summary(fewer=fewer, measured=measured)
    results.write()



if __name__ == "__main__":
    main()
