"""The ``halfway`` command's start-up: the wall time of ``halfway --help``, ``halfway inspect``
on a small Paddle model and ``halfway ops`` against ``python -c pass`` (the interpreter's own
start-up), each command run in a fresh process, the commands taking turns round by round so
that a busy machine's slow spells fall on all of them; per command, the median and the best,
and the median less the interpreter's.

    .venv/bin/python benchmarks/bench_startup.py [--rounds 15] [--json OUT]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import ROOT, Results, add_json_option  # noqa: E402

MODEL = ROOT / "tests" / "fixtures" / "paddle" / "mlp_tiny.pdmodel"
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "halfway --help": [sys.executable, "-m", "halfway", "--help"],
    "halfway inspect": [sys.executable, "-m", "halfway", "inspect", str(MODEL)],
    "halfway ops": [sys.executable, "-m", "halfway", "ops"],
}


def seconds(command: list[str]) -> float:
    """The wall time of one run of ``command`` (which must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="runs of each command")
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_startup", args.json)
    for command in COMMANDS.values():  # warm the file cache (and numba's, pyc files)
        seconds(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.rounds):
        for name, command in COMMANDS.items():
            times[name].append(seconds(command))
    interpreter = statistics.median(times["python -c pass"])
    print(f"{'command':18} {'median s':>9} {'best s':>8} {'over python s':>14}")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:18} {median:9.3f} {min(runs):8.3f} {median - interpreter:14.3f}")
        results.add("startup", command=name, median_s=median, best_s=min(runs), over_python_s=median - interpreter)
    results.write()


if __name__ == "__main__":
    main()
