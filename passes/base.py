"""The pass contract and the pass registry.

A pass rewrites a Program *in place* and says what it changed::

    @register_pass("dce")
    def dce(program: Program, scope: Scope | None, options: None) -> PassResult:
        ...
        return PassResult(program, modified=removed > 0, stats={"ops_removed": removed})

or, when it keeps state or wants methods, as a class::

    @register_pass("fuse_conv_act", options=FuseConvActOptions)
    class FuseConvAct(Pass):
        def apply(self, program, scope):
            ...

Options are an attrs class; ``get_pass("fuse_conv_act", activations=("relu",))`` builds and
validates them, and a bad option is a PassError naming the pass and its valid options. A pass that
reads or writes parameters declares ``needs_scope=True`` and is refused without a scope.

Passes edit the program they are given; cloning (so the caller's program survives a failing pass)
is the PassManager's job. Returning anything but a PassResult is an error naming the pass.

Lookup is exact by name; registering a taken name is an error unless ``override=True``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs

from ..ir.errors import PassError
from ..ir.program import Program
from ..ir.scope import Scope

__all__ = ["Pass", "PassResult", "PassInfo", "register_pass", "get_pass", "registered_passes"]


@attrs.frozen
class PassResult:
    """What a pass did: the program it leaves (usually the one it was given), whether it changed
    anything, counts worth reporting (``{"fused": 3}``), and, for passes that explain their
    decisions at length, a report object of the pass's own type (float16's ``Float16Report``),
    which the PassManager keeps in the pass's record."""

    program: Program
    modified: bool
    stats: Mapping[str, int] = attrs.field(factory=dict)
    report: Any = None


class Pass:
    """Base class of passes. Subclasses set nothing by hand: ``register_pass`` fills ``name``,
    ``options_type`` and ``needs_scope``; they implement ``apply``."""

    name: ClassVar[str] = ""
    options_type: ClassVar[type | None] = None
    needs_scope: ClassVar[bool] = False

    def __init__(self, options: Any = None, **kwargs: Any) -> None:
        self.options = _make_options(self.name, self.options_type, options, kwargs)

    def apply(self, program: Program, scope: Scope | None) -> PassResult:
        raise NotImplementedError

    def __call__(self, program: Program, scope: Scope | None = None) -> PassResult:
        if self.needs_scope and scope is None:
            raise PassError(f"pass {self.name!r} reads or writes parameters: pass the Scope too")
        result = self.apply(program, scope)
        if not isinstance(result, PassResult):
            raise PassError(f"pass {self.name!r} returned {type(result).__name__}, expected a PassResult")
        return result

    def __repr__(self) -> str:
        return f"<pass {self.name} {self.options!r}>" if self.options is not None else f"<pass {self.name}>"


PassFunction = Callable[[Program, Scope | None, Any], PassResult]


class _FunctionPass(Pass):
    function: ClassVar[PassFunction]

    def apply(self, program: Program, scope: Scope | None) -> PassResult:
        return type(self).function(program, scope, self.options)


@attrs.frozen
class PassInfo:
    """One registry entry, for listings (``halfway passes``)."""

    name: str
    summary: str
    options: tuple[str, ...]
    needs_scope: bool


_PASSES: dict[str, type[Pass]] = {}


def register_pass(name: str, *, options: type | None = None, needs_scope: bool = False,
                  override: bool = False) -> Callable[[Any], Any]:
    """Register a Pass subclass or a function ``(program, scope, options) -> PassResult`` under ``name``."""
    if options is not None and not attrs.has(options):
        raise PassError(f"pass {name!r}: options must be an attrs class, got {options!r}")

    def decorate(target: Any) -> Any:
        if name in _PASSES and not override:
            raise PassError(f"pass {name!r} is already registered ({_PASSES[name].__qualname__}); "
                            "pass override=True to replace it")
        namespace = {"name": name, "options_type": options, "needs_scope": needs_scope,
                     "__doc__": target.__doc__, "__module__": target.__module__}
        if inspect.isclass(target) and issubclass(target, Pass):
            for key, value in namespace.items():
                setattr(target, key, value)
            cls = target
        elif callable(target):
            cls = type(f"{target.__name__}_pass", (_FunctionPass,),
                       namespace | {"function": staticmethod(target)})
        else:
            raise PassError(f"pass {name!r}: register a Pass subclass or a function, got {target!r}")
        _PASSES[name] = cls
        return target

    return decorate


def get_pass(name: str, options: Any = None, **kwargs: Any) -> Pass:
    """An instance of the pass registered as ``name``, with validated options."""
    try:
        cls = _PASSES[name]
    except KeyError:
        raise PassError(f"no pass named {name!r}; registered: {', '.join(sorted(_PASSES)) or 'none'}") from None
    return cls(options, **kwargs)


def registered_passes() -> list[PassInfo]:
    """Every registered pass, sorted by name."""
    return [PassInfo(name, _summary(cls), _option_names(cls.options_type), cls.needs_scope)
            for name, cls in sorted(_PASSES.items())]


def _make_options(name: str, options_type: type | None, options: Any, kwargs: dict[str, Any]) -> Any:
    if options_type is None:
        if options is not None or kwargs:
            raise PassError(f"pass {name!r} takes no options, got {options if options is not None else kwargs!r}")
        return None
    if options is not None:
        if kwargs or not isinstance(options, options_type):
            raise PassError(f"pass {name!r}: give options as one {options_type.__name__} or as keywords, not both")
        return options
    try:
        return options_type(**kwargs)
    except (TypeError, ValueError) as e:
        valid = ", ".join(_option_names(options_type))
        raise PassError(f"pass {name!r}: bad options {kwargs!r}: {e}; valid options: {valid}") from e


def _option_names(options_type: type | None) -> tuple[str, ...]:
    return tuple(f.name for f in attrs.fields(options_type)) if options_type is not None else ()


def _summary(cls: type[Pass]) -> str:
    doc = inspect.getdoc(cls) or ""
    return doc.splitlines()[0] if doc else ""
