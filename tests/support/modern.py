"""Today's architectures as tiny ONNX exports (``tests/fixtures/modern/``, written by
``scripts/make_modern_fixtures.py``), the check of halfway on them, and the ops one layer of a
transformer holds after the passes (``layer_ops``).

A fixture passes when ``halfway.load`` imports it without ``input_shapes`` (its batch and
sequence or image dims stay symbolic) and that one program, run on numpy at every saved case,
matches ONNX Runtime's saved outputs; ``stage="passes"`` checks the same after the default pass
pipeline. ``EXPECTED_FAILURES`` lists the fixtures that do not pass yet with their first failure;
it shrinks as halfway learns ops and dynamic shapes.

``python -m tests.support.modern`` prints each fixture's exporter, attention, size and first failure.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import halfway
from halfway.ir.block import Block
from halfway.ir.operator import Operator

__all__ = ["FIXTURE_DIR", "STAGES", "EXPECTED_FAILURES", "ATTENTION_OPS", "manifest", "fixtures", "cases",
           "check_fixture", "compare", "expected_failure", "first_failure", "summary", "layer_ops"]

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "modern"
STAGES = ("imported", "passes")
"""What is run: the program as imported, and after ``halfway.PassManager()``'s default pipeline."""
RTOL = 1e-4
"""Largest error over the largest reference magnitude; also allclose's rtol."""
ATOL = 1e-5
"""allclose's atol, in units of the reference's largest magnitude (at least 1)."""

ATTENTION_OPS = ("scaled_dot_product_attention", "cached_attention")
"""The op each layer of a transformer holds once, after the passes (``layer_ops``)."""

EXPECTED_FAILURES: dict[str, tuple[str, ...]] = {}
"""First failure -> the fixtures that hit it today, as imported and after the passes. A reason
starting "numeric mismatch" is an AssertionError, any other a HalfwayError: a fixture that starts
passing, or fails the other way, fails its test. ``python -m tests.support.modern`` prints the failures."""


@functools.cache
def manifest() -> dict[str, Any]:
    return json.loads((FIXTURE_DIR / "MANIFEST.json").read_text())


def expected_failure(name: str) -> tuple[str, type[BaseException]] | None:
    """The fixture's row of ``EXPECTED_FAILURES``: the reason and the error it raises."""
    for reason, names in EXPECTED_FAILURES.items():
        if name in names:
            return reason, AssertionError if reason.startswith("numeric mismatch") else halfway.HalfwayError
    return None


def fixtures() -> list[dict[str, Any]]:
    """The manifest's fixtures: name, family, exporter, attention, opset, inputs, outputs, cases, files."""
    return list(manifest()["fixtures"])


def cases(name: str) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """Every saved case of a fixture: (inputs, ONNX Runtime's outputs), by graph name."""
    entry = next(e for e in fixtures() if e["name"] == name)
    inputs = [v["name"] for v in entry["inputs"]]
    with np.load(FIXTURE_DIR / f"{name}_io.npz") as io:
        arrays = {key: io[key] for key in io.files}
    out = []
    for i in range(len(entry["cases"])):
        case = {key.split("/", 1)[1]: value for key, value in arrays.items() if key.startswith(f"case{i}/")}
        out.append(({n: case.pop(n) for n in inputs}, case))
    return out


def check_fixture(name: str, stage: str) -> None:
    """Import the fixture once, run it (after the default passes for ``stage="passes"``) at every
    case and compare with ONNX Runtime. Raises halfway's error or an AssertionError naming the
    case and output."""
    program, feed_names, fetch_names, scope = halfway.load(str(FIXTURE_DIR / f"{name}.onnx"))
    if stage == "passes":
        result = halfway.PassManager().run(program, scope, fetch=fetch_names)
        program, scope = result.program, result.scope
    for index, (inputs, want) in enumerate(cases(name)):
        got = _run(program, scope, feed_names, fetch_names, inputs)
        for fetch, value in zip(fetch_names, got):
            compare(value, want[fetch], f"{name} case {index} {_shapes(inputs)}: output {fetch}")


def _run(program: halfway.Program, scope: halfway.Scope, feed_names: list[str], fetch_names: list[str],
         inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    missing = set(feed_names) - set(inputs)
    assert not missing, f"the program feeds {sorted(missing)}, the fixture has {sorted(inputs)}"
    return halfway.Executor().run(program, {n: inputs[n] for n in feed_names}, fetch_names, scope)


def compare(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert got.shape == want.shape, f"{where}: shape {got.shape}, onnxruntime {want.shape}"
    scale = max(float(np.abs(want).max()), 1.0)
    error = float(np.abs(got.astype(np.float64) - want).max()) / float(np.abs(want).max() or 1.0)
    assert error <= RTOL, f"{where}: relative error {error:.2e} (max |ref| {np.abs(want).max():.3g})"
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale, err_msg=where)


def _shapes(inputs: dict[str, np.ndarray]) -> str:
    return ", ".join(f"{n}{list(v.shape)}" for n, v in inputs.items())


def first_failure(name: str, stage: str) -> str | None:
    """The first thing that goes wrong for a fixture at a stage, in one line; None: it passes."""
    try:
        check_fixture(name, stage)
    except (halfway.HalfwayError, AssertionError) as e:
        return summary(e)
    return None


def summary(error: BaseException) -> str:
    """An error in one line without the fixture's path; an import's unsupported ops as the
    sorted set of their types."""
    from halfway.frontends.onnx import UnsupportedOpError

    text = " ".join(str(error).split()).replace(f"{FIXTURE_DIR}/", "")
    if isinstance(error, UnsupportedOpError):
        listed = text.split("cannot import:", 1)[-1]
        return "unsupported ONNX ops: " + ", ".join(sorted(set(re.findall(r"\((\w+)\)", listed))))
    return f"{type(error).__name__}: {text}"


def layer_ops(block: Block) -> list[Operator] | None:
    """The ops of the program's last layer, or None with fewer than two attentions: the layers of a
    transformer each hold one attention, and the last layer's ops are those that depend on the
    second-to-last attention but not on the last, the last one itself, and the ops whose outputs
    only those read (what a layer recomputes from values shared by all layers, a mask or a shape,
    say). The ops that compute the shared values once, and those before the first attention and
    after the last, are no layer's. Feed and fetch ops are not counted."""
    ops = [op for op in block.ops if op.type not in ("feed", "fetch")]
    anchors = [op for op in ops if op.type in ATTENTION_OPS]
    if len(anchors) < 2:
        return None
    before, last = anchors[-2:]
    earlier = {id(op) for op in _reached(before, _writers(block))}
    layer = {id(op): op for op in _reached(before, _readers(block)) if id(op) != id(before)}
    for op in _reached(last, _readers(block)):
        layer.pop(id(op), None)
    layer[id(last)] = last
    while _add_recomputed(block, ops, layer, earlier):
        pass
    return [op for op in ops if id(op) in layer]


def _add_recomputed(block: Block, ops: list[Operator], layer: dict[int, Operator], earlier: set[int]) -> bool:
    """Add to ``layer`` the ops (not among ``earlier``) whose every reader is in it; whether any was."""
    added = False
    for op in ops:
        readers = _readers(block)(op)
        if id(op) not in layer and id(op) not in earlier and readers and all(id(r) in layer for r in readers):
            layer[id(op)] = op
            added = True
    return added


Edges = Callable[[Operator], list[Operator]]


def _readers(block: Block) -> Edges:
    return lambda op: [use[0] for name in op.output_names() for use in block.uses(name)]


def _writers(block: Block) -> Edges:
    return lambda op: [place[0] for name in op.input_names() for place in block.producers(name)]


def _reached(start: Operator, edges: Edges) -> list[Operator]:
    """``start`` and every op ``edges`` lead to from it, directly or not."""
    found, todo = {id(start): start}, [start]
    while todo:
        for op in edges(todo.pop()):
            if id(op) not in found:
                found[id(op)] = op
                todo.append(op)
    return list(found.values())


def _report() -> None:
    """One line per fixture and stage: exporter, attention, size and the first failure."""
    for entry in fixtures():
        size = sum(f["bytes"] for f in entry["files"] if f["file"].endswith(".onnx"))
        for stage in STAGES:
            failure = first_failure(entry["name"], stage) or "passes"
            print(f"| {entry['name']} | {stage} | {entry['exporter']} | {entry['attention'] or '-'} | "
                  f"{size / 1024:.0f} KiB | {failure[:300]} |", flush=True)
    for failed in manifest()["failures"]:
        print(f"| {failed['name']} | export | {failed['exporter']} | {failed['attention'] or '-'} | - | "
              f"not exported: {failed['error'][:200]} |")


if __name__ == "__main__":
    sys.exit(_report())
