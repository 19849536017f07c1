"""halfway: a graph transpiler for inference programs.

The facade is lazy: ``import halfway`` loads the IR (``halfway.ir``) and nothing above it; the
passes, the float16 transpiler, the importers and the executor load on first use of one of
their names (``halfway.PassManager``, ``halfway.load``, ``halfway.Executor``, ...).
"""

from __future__ import annotations

import importlib
from typing import Any

from halfway import openblas as _openblas

_openblas.choose_core()  # before anything loads numpy, and with it OpenBLAS

from halfway.ir import *  # noqa: E402,F401,F403
from halfway.ir import __all__ as _ir_all  # noqa: E402

_EXPORTS = {
    "halfway.passes": ("PassManager",), "halfway.float16": ("float16_transpile",), "halfway.frontends.load": ("load",),
    "halfway.executor": ("Executor", "CPUPlace", "OpenCLPlace"),
}
"""Module -> the public names of ``halfway`` it defines, imported on first access."""

_LAZY: dict[str, tuple[str, str | None]] = {"passes": ("halfway.passes", None)}
_LAZY.update((name, (module, name)) for module, names in _EXPORTS.items() for name in names)
"""Public name -> (module, attribute; None: the module itself)."""

__all__ = list(_ir_all) + list(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'halfway' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
