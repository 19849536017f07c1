"""The layers import one way: ``proto <- ir <- kernels <- executor``, ``ir <- passes``, ``ir <- frontends``,
and the api (``halfway``, the CLI, its commands and reports) on top of them all.

(a) every import statement of every module, function-level ones included, against the table;
(b) what a fresh interpreter loads for ``import halfway.ir`` and ``import halfway``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS = {
    "halfway.proto": "proto",
    "halfway.ir": "ir",
    "halfway.kernels": "kernels",
    "halfway.executor": "executor",
    "halfway.passes": "passes",
    "halfway.frontends": "frontends",
}
"""Package -> layer; every other module of halfway belongs to the api."""

ALLOWED = {
    "proto": {"proto"},
    "ir": {"proto", "ir"},
    "kernels": {"proto", "ir", "kernels"},
    "executor": {"proto", "ir", "kernels", "executor"},
    "passes": {"proto", "ir", "passes"},
    "frontends": {"proto", "ir", "frontends"},
    "api": {"proto", "ir", "kernels", "executor", "passes", "frontends", "api"},
}
"""Layer -> the layers its modules may import."""

EXTRA = {"passes": {"halfway.kernels.registry", "halfway.kernels.evaluate"}}
"""Single modules of another layer that a layer may import besides."""


def _packages() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]


def _module_name(path: Path) -> str:
    """The import name of ``path``: the root is the package ``halfway``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["halfway", *parts])


def _modules() -> dict[str, Path]:
    found = {}
    for package in _packages():
        for path in ROOT.joinpath(*package.split(".")[1:]).glob("*.py"):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def layer_of(module: str) -> str:
    for package, layer in LAYERS.items():
        if module == package or module.startswith(package + "."):
            return layer
    return "api"


def _imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported halfway module) for every import in ``path``, at any depth."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "halfway")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "halfway":
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                yield node.lineno, target if target in MODULES else base


def _violations() -> list[str]:
    found = []
    for module, path in sorted(MODULES.items()):
        layer = layer_of(module)
        for line, target in _imports(module, path):
            allowed = layer_of(target) in ALLOWED[layer] or target in EXTRA.get(layer, set())
            if not allowed:
                where = path.relative_to(ROOT)
                found.append(f"{where}:{line}: {module} ({layer}) imports {target} ({layer_of(target)}): "
                             f"{layer} may use {', '.join(sorted(ALLOWED[layer] | EXTRA.get(layer, set())))}")
    return found


def test_the_scan_sees_every_layer():
    layers = {layer_of(m) for m in MODULES}
    assert layers == set(ALLOWED)
    assert layer_of("halfway.kernels.numpy.conv") == "kernels" and layer_of("halfway.cli.commands.transpile") == "api"
    assert _module_name(ROOT / "cli" / "commands" / "transpile.py") == "halfway.cli.commands.transpile"


def test_a_forbidden_import_is_reported_with_its_line(tmp_path, monkeypatch):
    """The scan itself: a passes module importing the executor inside a function is caught."""
    fake = tmp_path / "bad.py"
    fake.write_text("def f():\n    from halfway.executor import Executor\n    from halfway.kernels import registry\n")
    monkeypatch.setitem(MODULES, "halfway.passes.bad", fake)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = [v for v in _violations() if "halfway.passes.bad" in v]
    assert len(found) == 1 and found[0].startswith("bad.py:2: halfway.passes.bad (passes) imports "
                                                   "halfway.executor (executor)")


def test_imports_point_one_way():
    violations = _violations()
    assert not violations, "imports against the layer table:\n" + "\n".join(violations)


def _loaded_after(statement: str) -> list[str]:
    code = f"import sys; {statement}; import json; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return [m for m in json.loads(done.stdout) if m == "halfway" or m.startswith("halfway.")]


@pytest.mark.parametrize("package", ["halfway.executor", "halfway.kernels", "halfway.passes", "halfway.frontends",
                                     "halfway.cli.main", "halfway.cli.commands"])
def test_import_ir_loads_nothing_above_it(package):
    loaded = _loaded_after("import halfway.ir")
    assert "halfway.ir" in loaded
    assert not [m for m in loaded if m == package or m.startswith(package + ".")]


def test_import_halfway_loads_only_the_ir():
    loaded = _loaded_after("import halfway")
    outside = [m for m in loaded if layer_of(m) not in ("ir", "proto") and m not in ("halfway", "halfway.api.openblas")]
    assert not outside


def test_the_lazy_facade_keeps_its_names():
    loaded = _loaded_after("import halfway; names = dir(halfway); from halfway import *; "
                           "assert all(n in names for n in halfway.__all__); "
                           "assert halfway.PassManager is halfway.passes.PassManager; Executor, load, OpenCLPlace")
    assert "halfway.executor" in loaded and "halfway.passes" in loaded and "halfway.frontends.load" in loaded
