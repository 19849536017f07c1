"""What the ``halfway`` command imports to start: ``halfway --help`` lists every command without
importing one (nor numpy or the IR); a command imports its own module and none of the others';
``inspect`` loads the model and describes it without the passes, the kernels or the executor, and
imports onnx only for an ONNX model. Timings are benchmarks/bench_startup.py's."""

from __future__ import annotations

import json
import subprocess
import sys

from halfway.cli.command_table import COMMANDS
from tests.support.clirun import DEMO_ONNX, RESNET_TINY

REPORT = ("import atexit, json, sys; "
          "atexit.register(lambda: sys.stderr.write('\\n' + json.dumps(sorted(sys.modules)))); "
          "from halfway.cli.entry import main; sys.argv[0] = 'halfway'; sys.exit(main())")
"""The command run with its loaded modules written to stderr as it exits (after --help too)."""


def _loaded(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", REPORT, *args], capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stderr.splitlines()[-1]))


RUNNING = ("halfway.executor", "halfway.kernels", "halfway.passes")
"""What runs or rewrites a program, which describing one does not need."""


def _under(loaded: set[str], *packages: str) -> set[str]:
    """The modules of ``loaded`` that are one of ``packages`` or inside one."""
    return {name for name in loaded if any(name == p or name.startswith(p + ".") for p in packages)}


def _commands(loaded: set[str]) -> set[str]:
    return {name.rsplit(".", 1)[-1] for name in loaded if name.startswith("halfway.cli.commands.")}


def test_help_imports_no_command_nor_numpy_nor_the_ir():
    loaded = _loaded("--help")
    assert not {"numpy", "halfway.ir", "rich", "onnx"} & loaded
    assert _commands(loaded) == set()


def test_a_command_imports_its_own_module_only():
    entry = next(entry for entry in COMMANDS if entry.name == "ops")
    assert _commands(_loaded("ops")) == {"base", entry.module}


def test_inspect_imports_nothing_that_runs_a_program_nor_onnx_for_a_paddle_model():
    loaded = _loaded("inspect", str(RESNET_TINY))
    assert _under(loaded, *RUNNING, "onnx", "halfway.frontends.onnx") == set()


def test_inspect_of_an_onnx_model_imports_the_importer_but_nothing_that_runs_a_program():
    loaded = _loaded("inspect", str(DEMO_ONNX))
    assert "halfway.frontends.onnx.importer" in loaded
    assert _under(loaded, *RUNNING) == set()
