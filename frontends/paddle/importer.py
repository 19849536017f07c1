"""Paddle 3 PIR import: ``model.json`` + ``model.pdiparams`` in, ``(program, feed_names,
fetch_names, scope)`` out, the program in halfway's (Paddle's legacy ``ProgramDesc``) vocabulary.

    program, feeds, fetches, scope = halfway.frontends.paddle.load("exported/")

Steps: find the files (a folder holding one ``*.json``, a ``<prefix>``, or the ``.json`` path);
read the program (``pir``); check every op has a converter (all unsupported ops reported at
once); declare parameters, their values read from the ``.pdiparams`` (legacy layout, sorted by
name); declare ``pd_op.data`` feeds; convert the ops in order (``ops.CONVERTERS``); name the
fetched values after their fetch ops; add Paddle's feed and fetch ops and verify.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...ir.errors import HalfwayError, SerdeError
from ...ir.fileset import read_file
from ...ir.io import set_feed_fetch
from ...ir.params import read_params
from ...ir.program import Program
from ...ir.scope import Scope
from ...ir.verifier import verify
from . import ops as _ops
from .context import PirContext, UnsupportedPirOpError
from .pir import PirOp, read_program

__all__ = ["load", "pir_files", "PIR_SUFFIX"]

PIR_SUFFIX = ".json"
PARAMS_SUFFIX = ".pdiparams"
_BOOKKEEPING = {"parameter", "pd_op.data", "pd_op.fetch"}


def pir_files(path: str | os.PathLike[str]) -> tuple[Path, Path] | None:
    """``(program.json, params.pdiparams)`` when ``path`` names a PIR model — the ``.json`` file,
    its prefix, or a folder holding one ``.json`` and no ``.pdmodel`` — else None."""
    text = os.fspath(path)
    p = Path(text)
    if p.is_dir():
        found = sorted(p.glob(f"*{PIR_SUFFIX}"))
        if len(found) != 1 or any(p.glob("*.pdmodel")) or (p / "__model__").exists():
            return None
        p = found[0]
    elif not text.endswith(PIR_SUFFIX):
        if not Path(text + PIR_SUFFIX).is_file():
            return None
        p = Path(text + PIR_SUFFIX)
    return p, p.with_name(p.name[:-len(PIR_SUFFIX)] + PARAMS_SUFFIX)


def load(path: str | os.PathLike[str]) -> tuple[Program, list[str], list[str], Scope]:
    """Import a Paddle 3 PIR model (see ``pir_files`` for the paths accepted).

    Raises:
        SerdeError: a missing or unreadable file, a file that is not PIR JSON, a parameter file
            that disagrees with the program.
        UnsupportedPirOpError: listing every op halfway has no converter for.
        PirConversionError: an op that cannot be converted; the message names the file and op.
    """
    files = pir_files(path)
    if files is None:
        raise SerdeError(f"{os.fspath(path)}: no Paddle PIR model (a model.json file, its prefix, or a folder "
                         f"holding one .json file)")
    program_file, params_file = files
    source = os.fspath(program_file)
    pir_ops = read_program(read_file(program_file).decode("utf-8", errors="replace"), source)
    _check_supported(pir_ops, source)
    types = {value: var_type for op in pir_ops for value, var_type in zip(op.outputs, op.types)}
    ctx = PirContext(source, types, _fetch_names(pir_ops))
    _declare_parameters(ctx, pir_ops, params_file)
    feeds: list[str] = []
    fetches: dict[int, str] = {}
    for index, op in enumerate(pir_ops):
        ctx.op, ctx.index = op, index
        if op.name == "pd_op.data":
            feeds.append(ctx.declare(op.outputs[0], op.attrs["name"], op.types[0], need_check_feed=True))
        elif op.name == "pd_op.fetch":
            fetches[op.attrs["col"]] = _fetch(ctx, op)
        elif op.name != "parameter":
            _convert(ctx, op)
    ctx.op = None
    fetch_names = [fetches[col] for col in sorted(fetches)]
    set_feed_fetch(ctx.block, feeds, fetch_names)
    verify(ctx.program)
    return ctx.program, feeds, fetch_names, ctx.scope


def _check_supported(pir_ops: list[PirOp], source: str) -> None:
    unknown = [f"#{i} {op.name}" for i, op in enumerate(pir_ops)
               if op.name not in _BOOKKEEPING and op.short not in _ops.CONVERTERS]
    if unknown:
        names = sorted({entry.split(" ", 1)[1] for entry in unknown})
        raise UnsupportedPirOpError(f"{source}: {len(unknown)} op(s) of {len(names)} type(s) halfway cannot "
                                    f"convert ({', '.join(names)}): {', '.join(unknown)}")


def _fetch_names(pir_ops: list[PirOp]) -> dict[int, str]:
    """Value id -> fetch name, for the fetch ops' results and (first come) their operands."""
    names: dict[int, str] = {}
    for op in pir_ops:
        if op.name == "pd_op.fetch":
            names[op.outputs[0]] = op.attrs["name"]
            names.setdefault(op.inputs[0], op.attrs["name"])
    return names


def _declare_parameters(ctx: PirContext, pir_ops: list[PirOp], params_file: Path) -> None:
    params = [op for op in pir_ops if op.name == "parameter"]
    for op in params:
        ctx.declare(op.outputs[0], op.attrs["name"], op.types[0], persistable=True)
    if not params:
        return
    specs = [(op.attrs["name"], op.types[0].dtype, op.types[0].shape) for op in params]
    values = read_params(read_file(params_file), specs, source=os.fspath(params_file))
    for name, value in values.items():
        ctx.scope.set(name, value)


def _fetch(ctx: PirContext, op: PirOp) -> str:
    """The var fetched as ``op``'s name: the operand itself, or a copy when it has another name."""
    name: str = op.attrs["name"]
    if ctx.var(op.inputs[0]) != name:
        ctx.emit("assign", {"X": op.inputs[0]}, {"Out": op.outputs[0]})
    return ctx.names.get(op.outputs[0], name)


def _convert(ctx: PirContext, op: PirOp) -> None:
    try:
        _ops.CONVERTERS[op.short](ctx, op)
    except HalfwayError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as e:
        ctx.fail(f"cannot convert ({type(e).__name__}: {e})")
