"""Plugins: Python modules that register passes, op schemas and kernels for the command line.

A plugin is found two ways:

1. an entry point of the ``halfway.plugins`` group in an installed package's metadata, e.g. in
   its pyproject.toml::

       [project.entry-points."halfway.plugins"]
       my_passes = "my_package.halfway_plugin"          # a module, or
       my_kernels = "my_package.plugin:register"        # a function called with no arguments

2. ``--plugin NAME`` on the command line: a module name (``my_package.halfway_plugin``) or the
   path of a .py file.

Loading a plugin imports it (and calls it when the entry point names a function); the module
registers what it brings with ``register_pass``, ``register_op`` and ``register_kernel`` at import
time, exactly as the built-ins do. What each plugin added is recorded so listings can say where
a pass or op comes from.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from attrs import frozen

from ..ir.errors import HalfwayError

__all__ = ["ENTRY_POINT_GROUP", "Plugin", "load_plugins", "registry_names"]

ENTRY_POINT_GROUP = "halfway.plugins"


@frozen
class Plugin:
    """A loaded plugin and the registry entries it added."""

    name: str
    source: str
    passes: tuple[str, ...]
    ops: tuple[str, ...]
    kernels: tuple[str, ...]


def registry_names() -> dict[str, set[str]]:
    """The names now in the pass, op schema and kernel registries (built-ins imported first)."""
    from ..ir.schema import registered_ops
    from ..kernels import registered_kernels
    from ..passes import registered_passes

    return {"passes": {p.name for p in registered_passes()}, "ops": set(registered_ops()),
            "kernels": {str(k) for k in registered_kernels()}}


def load_plugins(extra: Sequence[str] = ()) -> list[Plugin]:
    """Load every ``halfway.plugins`` entry point, then each of ``extra`` (--plugin values)."""
    loaders: list[tuple[str, str, Callable[[], Any]]] = [
        (ep.name, f"entry point {ep.value}", ep.load) for ep in entry_points(group=ENTRY_POINT_GROUP)]
    loaders += [(name, "--plugin", lambda name=name: _import(name)) for name in extra]
    return [_load(name, source, loader) for name, source, loader in loaders]


def _load(name: str, source: str, loader: Callable[[], Any]) -> Plugin:
    before = registry_names()
    try:
        target = loader()
        if callable(target) and not inspect.ismodule(target):
            target()
    except HalfwayError as e:
        raise HalfwayError(f"plugin {name!r} ({source}): {e}") from e
    except SystemExit as e:  # a plugin does not decide the exit code of halfway
        raise HalfwayError(f"plugin {name!r} ({source}) called sys.exit({e.code!r}) while loading") from e
    except Exception as e:  # a plugin's own failure, reported as one line naming it
        raise HalfwayError(f"plugin {name!r} ({source}) failed to load: {type(e).__name__}: {e}") from e
    after = registry_names()
    added = {kind: tuple(sorted(after[kind] - before[kind])) for kind in after}
    return Plugin(name, source, added["passes"], added["ops"], added["kernels"])


def _import(name: str) -> Any:
    """A module by dotted name, or by the path of its .py file."""
    if not name.endswith(".py"):
        return importlib.import_module(name)
    path = Path(name)
    if not path.is_file():
        raise HalfwayError(f"{name}: no such file")
    module_name = f"halfway_plugin_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
