"""``halfway inspect MODEL``: what a model holds."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from ...api.model_facts import io_specs, op_counts, op_label
from ...api.models import Model, load_model
from ...frontends.onnx_names import onnx_names
from ..report.console import Output
from ..report.tables import human_bytes, table
from .base import Command, add_json, add_model

__all__ = ["COMMAND", "summary"]


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser)
    parser.add_argument("--text", action="store_true", help="print the whole program as text instead")
    add_json(parser)


def summary(model: Model) -> dict[str, Any]:
    """The facts ``inspect`` prints, as plain data."""
    program = model.program
    params: Counter[str] = Counter()
    elements: Counter[str] = Counter()
    for var in program.persistable_vars():
        value = model.scope.find(var.name)
        if value is not None:
            params[str(value.dtype)] += value.nbytes
            elements[str(value.dtype)] += value.size
    return {
        "model": model.path,
        "format": model.format,
        "blocks": len(program.blocks),
        "ops": sum(1 for op in program.all_ops() if op.type not in ("feed", "fetch")),
        "ops_by_type": [{"type": t, "onnx": list(onnx_names(t)), "dtype": d, "count": n}
                        for (t, d), n in sorted(op_counts(program).items())],
        "parameters": {"count": len(program.persistable_vars()), "elements": sum(elements.values()),
                       "bytes": sum(params.values()), "bytes_by_dtype": dict(sorted(params.items()))},
        "inputs": io_specs(program, model.feed_names),
        "outputs": io_specs(program, model.fetch_names),
    }


def _run(args: argparse.Namespace, output: Output) -> int:
    model = load_model(args.model)
    if args.text and not args.json:
        output.raw(model.program.to_text())
        return 0
    facts = summary(model)
    if args.json:
        output.json(facts | ({"text": model.program.to_text()} if args.text else {}))
        return 0
    params = facts["parameters"]
    by_dtype = ", ".join(f"{d} {human_bytes(b)}" for d, b in params["bytes_by_dtype"].items())
    output.print(f"[bold]{model.path}[/] ({model.format}): {facts['ops']} ops in {facts['blocks']} block(s); "
                 f"{params['count']} parameters, {params['elements']:,} values, {human_bytes(params['bytes'])}"
                 + (f" ({by_dtype})" if by_dtype else ""))
    io_rows = [(kind, s["name"], s["dtype"], s["shape"]) for kind, specs in
               (("input", facts["inputs"]), ("output", facts["outputs"])) for s in specs]
    output.print(table("inputs and outputs", ["", "name", "dtype", "shape"], io_rows))
    op_rows = [(op_label(o["type"]), o["dtype"], o["count"]) for o in facts["ops_by_type"]]
    output.print(table("ops by type and precision", ["op (ONNX)", "dtype", "count"], op_rows, numeric=["count"]))
    return 0


COMMAND = Command(
    "Summarize a model: its ops counted by type and precision, each type with the ONNX ops it\n"
    "stands for (matmul_v2 (MatMul/Gemm)), its parameters (count, values, bytes by dtype), and\n"
    "its inputs and outputs with dtypes and shapes (-1: known at run time).\n"
    "--text prints the whole program in halfway's text form instead.",
    _configure, _run)
