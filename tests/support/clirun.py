"""Run the installed ``halfway`` command as a subprocess, for CLI tests; read models back from
their protobuf bytes, independently of the IR.

    done = halfway("inspect", MODEL, "--json")
    assert done.returncode == 0, done.stderr
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from halfway.proto import framework_pb2

__all__ = ["halfway", "halfway_without", "halfway_json", "one_line_error", "proto_of", "proto_op_types", "ROOT", "RESNET_TINY", "FIXTURES",
           "PLUGIN", "DEMO_ONNX", "DEMO_BERT", "BIN"]

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "paddle"
RESNET_TINY = FIXTURES / "resnet_tiny.pdmodel"
PLUGIN = ROOT / "tests" / "plugins" / "halfway_test_plugin.py"
DEMO_ONNX = ROOT / "api" / "data" / "demo_resnet18.onnx"
DEMO_BERT = ROOT / "api" / "data" / "demo_bert.onnx"
BIN = Path(sys.executable).with_name("halfway")


def halfway(*args: Any, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m halfway ARGS`` (this interpreter's halfway) with stdout and stderr captured (not
    a terminal: no colours)."""
    environ = os.environ | {"COLUMNS": "200"} | (env or {})
    return subprocess.run([sys.executable, "-m", "halfway", *map(str, args)], capture_output=True, text=True, env=environ, cwd=cwd,
                          timeout=600, check=False)


def halfway_without(modules: tuple[str, ...], *args: Any) -> subprocess.CompletedProcess:
    """``halfway ARGS`` in a process where ``modules`` cannot be imported, as if not installed."""
    code = (f"import sys; sys.modules.update(dict.fromkeys({list(modules)!r})); "
            "from halfway.cli.main import main; sys.exit(main())")
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          env=os.environ | {"COLUMNS": "200"}, timeout=600, check=False)


def halfway_json(*args: Any) -> Any:
    done = halfway(*args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def one_line_error(done: subprocess.CompletedProcess, *fragments: str) -> str:
    """Check ``done`` failed with one ``halfway: error:`` line holding ``fragments``; return it."""
    assert done.returncode not in (0, None), done.stdout
    lines = [line for line in done.stderr.splitlines() if not line.startswith("✓")]
    assert len(lines) == 1 and lines[0].startswith("halfway: error: "), done.stderr
    assert "Traceback" not in done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def proto_of(model: Path) -> Any:
    """The ProgramDesc of a .pdmodel file, parsed by protobuf alone."""
    desc = framework_pb2.ProgramDesc()
    desc.ParseFromString(Path(model).read_bytes())
    return desc


def proto_op_types(model: Path) -> Counter[str]:
    """Op types of the global block of a .pdmodel file, feed and fetch left out."""
    return Counter(op.type for op in proto_of(model).blocks[0].ops if op.type not in ("feed", "fetch"))
