"""What the ``halfway`` command imports to start: ``halfway --help`` lists every command without
importing one (nor numpy or the IR); a command imports its own module and none of the others'.
Timings are benchmarks/bench_startup.py's."""

from __future__ import annotations

import json
import subprocess
import sys

from halfway.cli.command_table import COMMANDS

REPORT = ("import atexit, json, sys; "
          "atexit.register(lambda: sys.stderr.write('\\n' + json.dumps(sorted(sys.modules)))); "
          "from halfway.cli.entry import main; sys.argv[0] = 'halfway'; sys.exit(main())")
"""The command run with its loaded modules written to stderr as it exits (after --help too)."""


def _loaded(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", REPORT, *args], capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stderr.splitlines()[-1]))


def _commands(loaded: set[str]) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name in loaded if name.startswith("halfway.cli.commands.")}


def test_help_imports_no_command_nor_numpy_nor_the_ir():
    loaded = _loaded("--help")
    assert not {"numpy", "halfway.ir", "rich"} & loaded
    assert _commands(loaded) == set()


def test_a_command_imports_its_own_module_only():
    entry = next(entry for entry in COMMANDS if entry.name == "ops")
    assert _commands(_loaded("ops")) == {"base", entry.module}
