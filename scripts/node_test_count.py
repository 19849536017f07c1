"""Count ONNX's shipped backend node tests that halfway passes, two ways:

* **plain**: ``halfway.load(model, input_shapes=<the test data's shapes>)`` and
  ``Executor().run``, every graph input fed at run time;
* **harness**: the suite's backend (``tests/support/onnx_backend.py``), which binds the inputs
  that feed only shape-like argument positions as constants.

Each test runs in a worker process with a time limit. Outputs are compared with rtol 1e-3 and
atol 1e-5; a NaN matches a NaN. Prints both counts and the failures grouped by op; ``--json``
writes every test's result.

    nice python scripts/node_test_count.py --json /tmp/node_tests.json [-k PATTERN]
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[1]
NODE_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "node"
RTOL, ATOL = 1e-3, 1e-5
TIME_LIMIT_S = 120.0


def _read_tensors(folder: Path, prefix: str) -> list[np.ndarray]:
    """The ``<prefix>_<i>.pb`` tensors of a data set, in order (a non-tensor proto raises)."""
    files = sorted(folder.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    tensors = []
    for file in files:
        proto = onnx.TensorProto()
        proto.ParseFromString(file.read_bytes())
        if not proto.HasField("data_type") or proto.data_type == 0:
            raise ValueError(f"{file.name} is not a tensor (a sequence, map or optional)")
        tensors.append(numpy_helper.to_array(proto))
    return tensors


def _same(got: Any, want: np.ndarray) -> bool:
    got = np.asarray(got)
    if got.shape != want.shape:
        return False
    if want.dtype.kind in "fc":
        return bool(np.allclose(got.astype(want.dtype), want, rtol=RTOL, atol=ATOL, equal_nan=True))
    return bool(np.array_equal(got, want))


def _run_plain(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> list[Any]:
    import halfway
    from halfway.executor import Executor

    program, feeds, fetches, scope = halfway.load(model, input_shapes={n: v.shape for n, v in values.items()})
    return Executor().run(program, {n: values[n] for n in feeds}, fetches, scope)


def _run_harness(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> list[Any]:
    from tests.support.onnx_backend import HalfwayBackend

    return list(HalfwayBackend.prepare(model).run(values))


def _check(name: str, path: str) -> dict[str, str]:
    """``{"plain": "pass" | error, "harness": ...}`` for one node test's every data set."""
    sys.path.insert(0, str(ROOT))
    folder = Path(path)
    model = onnx.load(folder / "model.onnx")
    inits = {t.name for t in model.graph.initializer}
    names = [v.name for v in model.graph.input if v.name not in inits]
    result = {}
    for way, run in (("plain", _run_plain), ("harness", _run_harness)):
        try:
            for data in sorted(folder.glob("test_data_set_*")):
                values = dict(zip(names, _read_tensors(data, "input")))
                wanted = _read_tensors(data, "output")
                got = run(model, values)
                if len(got) != len(wanted) or not all(_same(g, w) for g, w in zip(got, wanted)):
                    raise AssertionError("outputs differ")
            result[way] = "pass"
        except Exception as e:  # every failure is counted, by its first line
            result[way] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    return result


def _ops(folder: Path) -> str:
    graph = onnx.load(folder / "model.onnx", load_external_data=False).graph
    return ",".join(sorted({n.op_type for n in graph.node}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="a regex: only node tests whose name it finds")
    parser.add_argument("--json", help="write every test's result here")
    args = parser.parse_args()
    folders = [d for d in sorted(NODE_DIR.iterdir()) if re.search(args.k, d.name)]
    results: dict[str, dict[str, str]] = {}
    context = multiprocessing.get_context("spawn")
    pool = context.Pool(1, maxtasksperchild=50)
    for folder in folders:
        job = pool.apply_async(_check, (folder.name, str(folder)))
        try:
            results[folder.name] = job.get(TIME_LIMIT_S)
        except multiprocessing.TimeoutError:
            pool.terminate()
            pool = context.Pool(1, maxtasksperchild=50)
            results[folder.name] = {"plain": "timeout", "harness": "timeout"}
        results[folder.name]["ops"] = _ops(folder)
    pool.close()
    _report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, sort_keys=True))


def _report(results: dict[str, dict[str, str]]) -> None:
    for way in ("plain", "harness"):
        passed = sum(r[way] == "pass" for r in results.values())
        print(f"{way}: {passed} of {len(results)} pass")
    failures = collections.Counter(r["ops"] for r in results.values() if r["plain"] != "pass")
    for ops, count in failures.most_common(60):
        print(f"{count:4d}  {ops}")


if __name__ == "__main__":
    main()
