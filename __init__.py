"""halfway: a graph transpiler for inference programs.

The facade is lazy: ``import halfway`` (and so the import of any subpackage) loads nothing and
changes no environment variable, so the ``halfway`` command can handle Ctrl-C before numpy and the
rest load (``halfway.cli.entry``). The IR (``halfway.ir``: ``halfway.Program``, ...) loads on first use
of one of its names; the passes, the float16 transpiler, the importers and the executor on first
use of one of theirs (``halfway.PassManager``, ``halfway.load``, ``halfway.Executor``, ...); the
library services of ``halfway.api`` on first use of their module's name (``halfway.batch``,
``halfway.layers``, ``halfway.llm``, ``halfway.ray``, ``halfway.float16``, ``halfway.openblas``);
``halfway.__version__`` (``halfway.api.version``) and ``halfway.InferenceSession`` on first use.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
"""True for type checkers only: typing is not imported here, so that the package's first line
starts nothing that an interrupt could break (``halfway.cli.entry``)."""

if TYPE_CHECKING:
    from typing import Any

    from .ir import *  # noqa: F401,F403

_EXPORTS = {
    "halfway.passes": ("PassManager",), "halfway.api.float16": ("float16_transpile",), "halfway.frontends.load": ("load",),
    "halfway.frontends.onnx_export": ("save_onnx",),
    "halfway.executor": ("Executor", "CPUPlace", "OpenCLPlace", "Float16RangeError", "DeviceTensor"),
    "halfway.kernels.opencl.custom": ("opencl_kernel",),
    "halfway.api.session": ("InferenceSession",),
}
"""Module -> the public names of ``halfway`` it defines, imported on first access."""

_MODULES = ("batch", "float16", "layers", "llm", "openblas", "ray")
"""The public modules of ``halfway.api``, reached as ``halfway.NAME``."""

_LAZY: dict[str, tuple[str, str | None]] = {"passes": ("halfway.passes", None)}
_LAZY.update((name, (f"halfway.api.{name}", None)) for name in _MODULES)
_LAZY.update((name, (module, name)) for module, names in _EXPORTS.items() for name in names)
"""Public name -> (module, attribute; None: the module itself)."""


def _ir() -> Any:
    return importlib.import_module("halfway.ir")


def __getattr__(name: str) -> Any:
    """The lazy names: ``__all__`` and the IR's names load the IR; ``_LAZY``'s their module."""
    if name == "__all__":
        value: Any = list(_ir().__all__) + list(_LAZY)
    elif name == "__version__":
        value = importlib.import_module("halfway.api.version").version()
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
