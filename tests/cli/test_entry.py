"""The ``halfway`` command's entry point: Ctrl-C while the command is still importing numpy, the
IR or the commands ends it with one line and exit code 130, from the console script and from
``python -m halfway``.

The interrupt is a real SIGINT, sent by the process to itself the moment it starts importing a
given module (a ``sitecustomize`` on PYTHONPATH adds an import hook): the same point every run.
numpy's C extension imports ``datetime``, turning an exception raised in that import into an
ImportError. Before the entry point's first line only the package's ``__init__`` runs, and it
imports nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.clirun import BIN

HOOK = '''\
import importlib.abc, os, signal, sys

class _InterruptAt(importlib.abc.MetaPathFinder):
    """SIGINT to this process when the module named by HALFWAY_TEST_INTERRUPT_AT starts importing."""

    def find_spec(self, name, path=None, target=None):
        if name == os.environ["HALFWAY_TEST_INTERRUPT_AT"]:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _InterruptAt())
'''


def _interrupted(tmp_path: Path, command: list[str], module: str) -> subprocess.CompletedProcess:
    (tmp_path / "sitecustomize.py").write_text(HOOK)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
                        "HALFWAY_TEST_INTERRUPT_AT": module}
    return subprocess.run([*command, "ops"], capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.mark.parametrize("module", ["numpy", "datetime", "halfway.ir", "halfway.cli.main",
                                    "halfway.cli.commands.registry", "rich.console"])
@pytest.mark.parametrize("how", ["console script", "python -m halfway"])
def test_ctrl_c_while_starting_is_one_line_and_exit_130(tmp_path, how, module):
    command = [str(BIN)] if how == "console script" else [sys.executable, "-m", "halfway"]
    done = _interrupted(tmp_path, command, module)
    assert done.returncode == 130, done.stderr
    assert done.stderr == "halfway: error: interrupted\n" and done.stdout == ""


def test_the_package_imports_nothing_before_the_entry_point():
    code = "import sys; before = set(sys.modules); import halfway.cli.entry; print(sorted(set(sys.modules) - before))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(["halfway", "halfway.cli", "halfway.cli.entry", "halfway.cli.exits",
                                       "halfway.cli.interrupts", "signal"])


def test_the_hook_interrupts_where_it_is_told(tmp_path):
    """Without the entry point's handling the same interrupt is a traceback from the import."""
    code = "import halfway.cli.commands.registry"
    done = _interrupted(tmp_path, [sys.executable, "-c", code], "halfway.ir")
    assert done.returncode != 0 and "Traceback" in done.stderr and "KeyboardInterrupt" in done.stderr
