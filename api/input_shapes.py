"""The shapes of a model's inputs when the model leaves dims free: ``--input-shapes
name:1x128,...`` (polygraphy's ``--input-shapes``, trtexec's ``--shapes``) read, and each
input's shape resolved from it.

A free dim (-1) of an input takes, in this order: the size given for that input; the size
given for a dim of the same name (an ONNX model's dim_param: ``batch``, ``sequence``) of any
input; the size at the same position of a given input of the same rank; else ``DYNAMIC_DIM``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..ir.errors import FeedError
from ..ir.program import Program
from .errors import SpecError

__all__ = ["DYNAMIC_DIM", "parse_input_shapes", "feed_shapes", "unsized_feeds"]

DYNAMIC_DIM = 1
"""What a free dim becomes when nothing gives its size."""
_ITEM = re.compile(r"([^,\[]+):\s*(\[[^\]]*\]|[^,]*?)\s*(?:,|$)")
_SIZES = re.compile(r"\d+")

Shapes = Mapping[str, Sequence[int]]


def parse_input_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``name:1x128,other:2x3`` (``[1,128]`` is also taken; a name may hold ``:``), from each
    of ``specs``, as input name -> dims.

    Raises:
        SpecError: a spec that is not of this form, or a dim that is not a positive count.
    """
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        position = 0
        while position < len(spec):
            match = _ITEM.match(spec, position)
            if match is None or match.end() == position:
                raise SpecError(f"--input-shapes {spec!r}: expected name:1x128[,name:...]")
            shapes[match[1].strip()] = _dims(match[2], spec)
            position = match.end()
    return shapes


def _dims(text: str, spec: str) -> tuple[int, ...]:
    parts = text.strip("[]").replace(",", "x").split("x")
    if not all(_SIZES.fullmatch(p.strip()) and int(p) > 0 for p in parts):
        raise SpecError(f"--input-shapes {spec!r}: {text!r} is not a shape like 1x128 (positive dims)")
    return tuple(int(p) for p in parts)


def feed_shapes(program: Program, feed_names: Sequence[str], given: Shapes | None = None,
                default: int = DYNAMIC_DIM) -> dict[str, tuple[int, ...]]:
    """The shape of every feed, its free dims resolved as the module docstring says.

    Raises:
        FeedError: ``given`` names a var that is not an input, or gives a shape of another rank
            or with another size for a dim the model fixes.
    """
    resolved = _resolved(program, feed_names, given or {})
    return {name: tuple(default if d < 0 else d for d in shape) for name, shape in resolved.items()}


def unsized_feeds(program: Program, feed_names: Sequence[str], given: Shapes | None = None) -> list[str]:
    """The feeds with a free dim that nothing in ``given`` sizes (``feed_shapes`` defaults it)."""
    resolved = _resolved(program, feed_names, given or {})
    return [name for name, shape in resolved.items() if any(d < 0 for d in shape)]


def _resolved(program: Program, feed_names: Sequence[str], given: Shapes) -> dict[str, tuple[int, ...]]:
    """Every feed's shape, the free dims ``given`` sizes resolved, the others -1."""
    _check_given(program, feed_names, given)
    block = program.global_block()
    named: dict[str, int] = {}
    for name, dims in given.items():
        for dim_name, size in zip(block.var(name).dim_names(), dims):
            if dim_name:
                named.setdefault(dim_name, size)
    shapes = {}
    for name in feed_names:
        var = block.var(name)
        shape = tuple(var.shape or ())
        if name in given:
            shapes[name] = tuple(given[name])
            continue
        ranked = [dims for dims in given.values() if len(dims) == len(shape)]
        shapes[name] = tuple(d if d >= 0 else named.get(dim_name, ranked[0][i] if ranked else -1)
                             for i, (d, dim_name) in enumerate(zip(shape, var.dim_names())))
    return shapes


def _check_given(program: Program, feed_names: Sequence[str], given: Shapes) -> None:
    block = program.global_block()
    for name, dims in given.items():
        if name not in feed_names:
            raise FeedError(f"--input-shapes names {name!r}, which is not an input of the model; its inputs are "
                            f"{list(feed_names)}")
        shape = tuple(block.var(name).shape or ())
        if len(dims) != len(shape) or any(d >= 0 and d != g for d, g in zip(shape, dims)):
            raise FeedError(f"--input-shapes {name}:{'x'.join(map(str, dims))}: the model's input {name!r} has "
                            f"shape {list(shape)} (-1 = free)")
