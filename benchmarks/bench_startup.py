"""The ``halfway`` command's start-up: the wall time of ``halfway --help``, ``halfway inspect`` on
a small Paddle model and on the demo's ONNX model, and ``halfway ops``, beside ``python -c pass``
(the interpreter's own start-up) and ``python -c "import onnx"`` (what any command reading an ONNX
model pays before its own work). Each command runs in a fresh process, the commands taking turns
round by round so that a busy machine's slow spells fall on all of them, with their bytecode
cached as an installed package's is (written under a temporary ``PYTHONPYCACHEPREFIX`` by a first,
untimed round). Per command: the median and the best round, and the best less and over the
interpreter's best (the best is the round the machine disturbed least).

    .venv/bin/python benchmarks/bench_startup.py [--rounds 15] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import ROOT, Results, add_json_option  # noqa: E402

PADDLE_MODEL = ROOT / "tests" / "fixtures" / "paddle" / "mlp_tiny.pdmodel"
ONNX_MODEL = ROOT / "api" / "data" / "demo_resnet18.onnx"
INTERPRETER = "python -c pass"
COMMANDS = {
    INTERPRETER: [sys.executable, "-c", "pass"],
    "python -c 'import onnx'": [sys.executable, "-c", "import onnx"],
    "halfway --help": [sys.executable, "-m", "halfway", "--help"],
    "halfway inspect MODEL.pdmodel": [sys.executable, "-m", "halfway", "inspect", str(PADDLE_MODEL)],
    "halfway inspect MODEL.onnx": [sys.executable, "-m", "halfway", "inspect", str(ONNX_MODEL)],
    "halfway ops": [sys.executable, "-m", "halfway", "ops"],
}


def seconds(command: list[str], env: Mapping[str, str]) -> float:
    """The wall time of one run of ``command`` (which must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def cached_bytecode(prefix: str) -> dict[str, str]:
    """This environment with bytecode written to and read from ``prefix``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | {"PYTHONPYCACHEPREFIX": prefix}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="runs of each command")
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_startup", args.json)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    with tempfile.TemporaryDirectory() as prefix:
        env = cached_bytecode(prefix)
        for command in COMMANDS.values():  # writes the bytecode; warms the file cache
            seconds(command, env)
        for _ in range(args.rounds):
            for name, command in COMMANDS.items():
                times[name].append(seconds(command, env))
    interpreter = min(times[INTERPRETER])
    print(f"{'command':30} {'median s':>9} {'best s':>8} {'over python s':>14} {'x python':>9}")
    for name, runs in times.items():
        median, best = statistics.median(runs), min(runs)
        print(f"{name:30} {median:9.3f} {best:8.3f} {best - interpreter:14.3f} {best / interpreter:9.1f}")
        results.add("startup", command=name, median_s=median, best_s=best, over_python_s=best - interpreter,
                    x_python=best / interpreter)
    results.write()


if __name__ == "__main__":
    main()
