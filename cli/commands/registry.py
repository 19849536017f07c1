"""``halfway passes`` and ``halfway ops``: what the registries hold, built-in and from plugins."""

from __future__ import annotations

import argparse
from collections import defaultdict

from ...ir.schema import registered_ops
from ...kernels import registered_kernels
from ...passes import registered_passes
from ..plugins import Plugin
from ..report.console import Output
from ..report.tables import table
from .base import Command, add_json

__all__ = ["PASSES", "OPS"]

BUILT_IN = "built-in"


def _origin(plugins: list[Plugin], kind: str) -> dict[str, str]:
    """Registry name -> the plugin that added it."""
    return {name: plugin.name for plugin in plugins for name in getattr(plugin, kind)}


def _run_passes(args: argparse.Namespace, output: Output) -> int:
    origin = _origin(args.loaded_plugins, "passes")
    rows = [{"name": p.name, "summary": p.summary, "options": list(p.options), "needs_scope": p.needs_scope,
             "from": origin.get(p.name, BUILT_IN)} for p in registered_passes()]
    if args.json:
        output.json(rows)
        return 0
    output.print(table(f"registered passes: {len(rows)}", ["pass", "what it does", "options", "scope", "from"],
                       [(r["name"], r["summary"], ", ".join(r["options"]) or "-", "yes" if r["needs_scope"] else "-",
                         r["from"]) for r in rows]))
    return 0


def _run_ops(args: argparse.Namespace, output: Output) -> int:
    origin = _origin(args.loaded_plugins, "ops")
    kernels: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for key in registered_kernels():
        kernels[key.op_type][key.backend].append(key.dtype.name)
    backends = sorted({b for by_backend in kernels.values() for b in by_backend})
    names = sorted(set(registered_ops()) | set(kernels))
    rows = [{"op": name, "schema": name in registered_ops(), "kernels": {b: kernels[name][b] for b in backends},
             "from": origin.get(name, BUILT_IN)} for name in names]
    if args.json:
        output.json(rows)
        return 0
    output.print(table(f"registered ops: {len(rows)}", ["op", "schema", *(f"{b} kernels" for b in backends), "from"],
                       [(r["op"], "yes" if r["schema"] else "[red]none[/]",
                         *(" ".join(r["kernels"][b]) or "-" for b in backends), r["from"]) for r in rows]))
    return 0


def _configure(parser: argparse.ArgumentParser) -> None:
    add_json(parser)


PASSES = Command(
    "List the registered passes: name, what each does, its options, whether it needs the\n"
    "parameters (scope), and whether it is built in or which plugin registered it.",
    _configure, _run_passes)

OPS = Command(
    "List the registered op types: whether a schema describes each, its kernels per backend and\n"
    "dtype, and whether it is built in or which plugin registered it.",
    _configure, _run_ops)
