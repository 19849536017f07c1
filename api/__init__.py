"""halfway: a graph transpiler for inference programs.

The facade is lazy: ``import halfway`` loads nothing but ``halfway.openblas`` (so that the
``halfway`` command can handle Ctrl-C before numpy and the rest load, ``halfway.entry``). The IR
(``halfway.ir``: ``halfway.Program``, ``halfway.layers``' vars, ...) loads on first use of one of
its names; the passes, the float16 transpiler, the importers and the executor on first use of one
of theirs (``halfway.PassManager``, ``halfway.load``, ``halfway.Executor``, ...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from halfway import openblas as _openblas

_openblas.choose_core()  # before anything loads numpy, and with it OpenBLAS
_openblas.choose_thread_timeout()

if TYPE_CHECKING:
    from halfway.ir import *  # noqa: F401,F403

_EXPORTS = {
    "halfway.passes": ("PassManager",), "halfway.float16": ("float16_transpile",), "halfway.frontends.load": ("load",),
    "halfway.frontends.onnx_export": ("save_onnx",),
    "halfway.executor": ("Executor", "CPUPlace", "OpenCLPlace", "Float16RangeError", "DeviceTensor"),
    "halfway.kernels.opencl.custom": ("opencl_kernel",),
}
"""Module -> the public names of ``halfway`` it defines, imported on first access."""

_LAZY: dict[str, tuple[str, str | None]] = {"passes": ("halfway.passes", None)}
_LAZY.update((name, (module, name)) for module, names in _EXPORTS.items() for name in names)
"""Public name -> (module, attribute; None: the module itself)."""


def _ir() -> Any:
    return importlib.import_module("halfway.ir")


def __getattr__(name: str) -> Any:
    """The lazy names: ``__all__`` and the IR's names load the IR; ``_LAZY``'s their module."""
    if name == "__all__":
        value: Any = list(_ir().__all__) + list(_LAZY)
    elif name in _LAZY:
        module, attribute = _LAZY[name]
        value = importlib.import_module(module)
        if attribute is not None:
            value = getattr(value, attribute)
    elif name == "ir":
        value = _ir()
    elif name in _ir().__all__:
        value = getattr(_ir(), name)
    else:
        raise AttributeError(f"module 'halfway' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ir().__all__) | set(_LAZY))
