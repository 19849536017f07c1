"""Paddle 3 PIR import: ``model.json`` + ``model.pdiparams`` in, ``(program, feed_names,
fetch_names, scope)`` out, the program in halfway's (Paddle's legacy ``ProgramDesc``) vocabulary.

    program, feeds, fetches, scope = halfway.frontends.paddle.load("exported/")

Steps: find the files (a folder holding one PIR program ``*.json``, a ``<prefix>``, or the
``.json`` path); read the program (``pir``, which checks its structure); check every op has a
converter (all unsupported ops reported at once) and that parameters, feeds and fetches are as
Paddle writes them; declare parameters, their values read from the ``.pdiparams`` (legacy layout, sorted by
name); declare ``pd_op.data`` feeds; convert the ops in order (``ops.CONVERTERS``); name the
fetched values after their fetch ops; add Paddle's feed and fetch ops and verify.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ...ir import limits
from ...ir.errors import HalfwayError, SerdeError
from ...ir.fileset import read_file
from ...ir.io import set_feed_fetch
from ...ir.params import read_params
from ...ir.program import Program
from ...ir.scope import Scope
from ...ir.verifier import verify
from . import ops as _ops
from .context import PirContext, UnsupportedPirOpError
from .pir import MISSING, PirOp, read_program

__all__ = ["load", "pir_files", "is_pir_program", "PIR_SUFFIX"]

PIR_SUFFIX = ".json"
PARAMS_SUFFIX = ".pdiparams"
_BOOKKEEPING = {"parameter", "pd_op.data", "pd_op.fetch"}
_HEAD_BYTES = 4096
_PIR_HEAD = re.compile(rb'\s*\{\s*"base_code"\s*:\s*\{[^{}]*"magic"\s*:\s*"pir"')


def pir_files(path: str | os.PathLike[str]) -> tuple[Path, Path] | None:
    """``(program.json, params.pdiparams)`` when ``path`` names a PIR model — the ``.json`` file,
    its prefix, or a folder holding no ``.pdmodel`` and one ``.json`` file that is a PIR program
    (found by its content among the others an export folder holds: ``config.json``, tokenizer
    files) — else None.

    Raises:
        SerdeError: a folder holding several PIR programs, naming them.
    """
    text = os.fspath(path)
    p = Path(text)
    if p.is_dir():
        if any(p.glob("*.pdmodel")) or (p / "__model__").exists():
            return None
        found = [file for file in sorted(p.glob(f"*{PIR_SUFFIX}")) if is_pir_program(file)]
        if len(found) > 1:
            raise SerdeError(f"{p}: holds several Paddle PIR programs ({', '.join(f.name for f in found)}); pass "
                             f"the path of one")
        if not found:
            return None
        p = found[0]
    elif not text.endswith(PIR_SUFFIX):
        if not Path(text + PIR_SUFFIX).is_file():
            return None
        p = Path(text + PIR_SUFFIX)
    return p, p.with_name(p.name[:-len(PIR_SUFFIX)] + PARAMS_SUFFIX)


def is_pir_program(file: Path) -> bool:
    """Whether ``file`` begins as ``paddle.jit.save`` writes a PIR program: an object whose
    ``base_code`` (its first member) has the magic ``pir``."""
    try:
        with open(file, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    return _PIR_HEAD.match(head) is not None


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
                         f"holding one PIR program .json file)")
    program_file, params_file = files
    source = os.fspath(program_file)
    limits.check_file_size(program_file, "a model file")
    pir_ops = read_program(read_file(program_file).decode("utf-8", errors="replace"), source)
    _check_supported(pir_ops, source)
    _check_bookkeeping(pir_ops, source)
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


def _check_bookkeeping(pir_ops: list[PirOp], source: str) -> None:
    """SerdeError naming the op and value for a parameter, feed or fetch op that is not as Paddle
    writes it: one result (and a fetch one operand), a name, a fetch's col unique, a feed's or a
    parameter's dtype and dims, a feed within the tensor size limit."""
    cols: dict[int, int] = {}
    for index, op in enumerate(pir_ops):
        where = f"{source}: op #{index} {op.name}"
        if op.name not in _BOOKKEEPING:
            continue
        name = op.attrs.get("name")
        if len(op.outputs) != 1 or not isinstance(name, str) or not name:
            raise SerdeError(f"{where}: expected one result and a name, got results {op.outputs} and name {name!r}")
        if op.name == "pd_op.fetch":
            col: Any = op.attrs.get("col")
            valid = isinstance(col, int) and not isinstance(col, bool) and col >= 0
            clash = cols.get(col) if valid else None
            if len(op.inputs) != 1 or op.inputs[0] == MISSING or not valid or clash is not None:
                also = f" (op #{clash} fetches col {col} too)" if clash is not None else ""
                raise SerdeError(f"{where} (value %{op.outputs[0]}): expected one operand and a col of its own, got "
                                 f"operands {op.inputs} and col {col!r}{also}")
            cols[col] = index
            continue
        declared = op.types[0]
        if declared.dtype is None or (op.name == "parameter" and min(declared.shape, default=0) < 0):
            raise SerdeError(f"{where} (value %{op.outputs[0]}): its type declares no dtype and dims halfway "
                             f"reads ({declared})")
        limits.check_tensor_size(declared.shape, declared.dtype.numpy, f"{where} (value %{op.outputs[0]})")


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
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ArithmeticError) as e:
        ctx.fail(f"cannot convert ({type(e).__name__}: {e})")
