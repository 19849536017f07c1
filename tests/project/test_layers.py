"""The layers import one way: ``proto <- ir <- kernels <- executor``, ``ir <- passes``, ``ir <- frontends``,
the library services (``halfway``, ``halfway.api``) on top of them all, and the command line
(``halfway.cli``, ``python -m halfway``) on top of the services: nothing else imports it.

(a) every import statement of every module, function-level ones included, against the table;
(b) no import loops: no strongly connected component in the graph of those imports;
(c) what a fresh interpreter loads for ``import halfway.ir``, ``import halfway`` and a service.
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

ROOT = Path(__file__).resolve().parent.parent.parent

LAYERS = {
    "halfway.proto": "proto",
    "halfway.ir": "ir",
    "halfway.kernels": "kernels",
    "halfway.executor": "executor",
    "halfway.passes": "passes",
    "halfway.frontends": "frontends",
    "halfway.api": "api",
    "halfway.cli": "cli",
    "halfway.__main__": "cli",
    "halfway": "api",
}
"""Package or module -> layer, the longest name that holds a module deciding: the root facade
``halfway`` is a library service; ``python -m halfway`` is the command line."""

ALLOWED = {
    "proto": {"proto"},
    "ir": {"proto", "ir"},
    "kernels": {"proto", "ir", "kernels"},
    "executor": {"proto", "ir", "kernels", "executor"},
    "passes": {"proto", "ir", "passes"},
    "frontends": {"proto", "ir", "frontends"},
    "api": {"proto", "ir", "kernels", "executor", "passes", "frontends", "api"},
    "cli": {"proto", "ir", "kernels", "executor", "passes", "frontends", "api", "cli"},
}
"""Layer -> the layers its modules may import."""

EXTRA: dict[str, set[str]] = {}
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
    holders = [package for package in LAYERS if module == package or module.startswith(package + ".")]
    return LAYERS[max(holders, key=len)]


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
    assert layer_of("halfway.kernels.numpy.conv") == "kernels" and layer_of("halfway.cli.commands.transpile") == "cli"
    assert layer_of("halfway") == layer_of("halfway.api.batch.predictor") == "api" and layer_of("halfway.__main__") == "cli"
    assert _module_name(ROOT / "cli" / "commands" / "transpile.py") == "halfway.cli.commands.transpile"


def test_a_forbidden_import_is_reported_with_its_line(tmp_path, monkeypatch):
    """The scan itself: a passes module importing the executor inside a function is caught; its
    import of the IR below it is not."""
    fake = tmp_path / "bad.py"
    fake.write_text("def f():\n    from halfway.executor import Executor\n    from halfway.ir import evaluate\n")
    monkeypatch.setitem(MODULES, "halfway.passes.bad", fake)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = [v for v in _violations() if "halfway.passes.bad" in v]
    assert len(found) == 1 and found[0].startswith("bad.py:2: halfway.passes.bad (passes) imports "
                                                   "halfway.executor (executor)")


def test_imports_point_one_way():
    violations = _violations()
    assert not violations, "imports against the layer table:\n" + "\n".join(violations)


def test_a_library_service_importing_the_command_line_is_reported(tmp_path, monkeypatch):
    """``api`` may not use ``cli`` (a relative import found as well), ``cli`` may use ``api``."""
    (tmp_path / "bad.py").write_text("from ..cli.commands import base\n")
    (tmp_path / "fine.py").write_text("from ..api import models\n")
    monkeypatch.setitem(MODULES, "halfway.api.bad", tmp_path / "bad.py")
    monkeypatch.setitem(MODULES, "halfway.cli.fine", tmp_path / "fine.py")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = [v for v in _violations() if "bad.py" in v or "fine.py" in v]
    assert found == ["bad.py:1: halfway.api.bad (api) imports halfway.cli.commands.base (cli): api may use api, "
                     "executor, frontends, ir, kernels, passes, proto"]


LOOPS_TO_BREAK = {
    frozenset({"halfway.ir.block", "halfway.ir.operator", "halfway.ir.program", "halfway.ir.prune",
               "halfway.ir.serde", "halfway.ir.text", "halfway.ir.variable"}):
        "Program's to_bytes/from_bytes/prune/to_text import serde, prune and text, which import program; "
        "block, operator and variable name each other's classes for the type checker",
    frozenset({"halfway.kernels.numpy.jit", "halfway.kernels.numpy.threads"}):
        "threads imports jit's spin_loops inside a function; jit imports threads",
}
"""The import loops there are today, each to be broken by its package's owners, and why it is one.
An entry leaves when its loop is gone (the test says so); no loop may join."""


def _graph() -> dict[str, set[str]]:
    """Module -> the halfway modules its import statements name, at any depth."""
    return {module: {t for _, t in _imports(module, path) if t in MODULES and t != module}
            for module, path in MODULES.items()}


def import_loops(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of ``graph`` of more than one module (Tarjan's
    algorithm): the sets of modules each of which imports, through the others, all of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = {stack.pop()}
            while module not in component:
                component.add(stack.pop())
            if len(component) > 1:
                loops.append(frozenset(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return loops


def test_import_loops_are_found(tmp_path, monkeypatch):
    """A loop closed by a function-level import is found, with only its members; an import chain
    into it that nothing closes is not one."""
    (tmp_path / "a.py").write_text("from . import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from .a import name\n")
    (tmp_path / "c.py").write_text("import halfway.api.a\n")
    for name in "abc":
        monkeypatch.setitem(MODULES, f"halfway.api.{name}", tmp_path / f"{name}.py")
    assert import_loops({"x": {"y"}, "y": {"z"}, "z": set()}) == []
    found = [loop for loop in import_loops(_graph()) if loop & {"halfway.api.a", "halfway.api.c"}]
    assert found == [frozenset({"halfway.api.a", "halfway.api.b"})]


def test_no_import_loops():
    loops = import_loops(_graph())
    new = [sorted(loop) for loop in loops if loop not in LOOPS_TO_BREAK]
    assert not new, "import loops (each module imports the others, through them):\n" + "\n".join(map(str, new))
    gone = [sorted(loop) for loop in LOOPS_TO_BREAK if loop not in loops]
    assert not gone, f"these loops are broken: take them out of LOOPS_TO_BREAK: {gone}"


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


@pytest.mark.parametrize("service", ["halfway.api.batch", "halfway.api.models", "halfway.api.places"])
def test_a_library_service_loads_no_command_line(service):
    loaded = _loaded_after(f"import {service}")
    assert service in loaded and not [m for m in loaded if layer_of(m) == "cli"]


def test_import_halfway_loads_only_the_ir():
    loaded = _loaded_after("import halfway")
    outside = [m for m in loaded if layer_of(m) not in ("ir", "proto") and m not in ("halfway", "halfway.api.openblas")]
    assert not outside


def test_the_lazy_facade_keeps_its_names():
    loaded = _loaded_after("import halfway; names = dir(halfway); from halfway import *; "
                           "assert all(n in names for n in halfway.__all__); "
                           "assert halfway.PassManager is halfway.passes.PassManager; Executor, load, OpenCLPlace")
    assert "halfway.executor" in loaded and "halfway.passes" in loaded and "halfway.frontends.load" in loaded
