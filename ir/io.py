"""Saving and loading inference models: a program file plus the values of its parameters.

Where the files are (save and load alike; ``path`` is a str or os.PathLike):

1. ``model_filename`` or ``params_filename`` given: ``path`` is a directory in Paddle's fluid
   layout, holding ``model_filename`` (default ``__model__``) and either ``params_filename`` (all
   parameters in one file) or, when that is None, one file per parameter named after it.
2. ``path`` ends with ``.pdmodel``: that file, with the parameters in the same name ending
   ``.pdiparams``.
3. ``path`` is an existing directory (or ends with a path separator):
   save writes ``model.pdmodel`` and ``model.pdiparams`` in it; load reads the one ``*.pdmodel``
   in it with its ``.pdiparams`` or, if it holds none, ``__model__`` with one file per parameter
   (the legacy layout). A directory holding several candidates is an error that lists them.
4. Otherwise ``path`` is a prefix: ``<path>.pdmodel`` and ``<path>.pdiparams``.

A program without parameters needs no parameter file: save writes none (as Paddle does) and load
accepts its absence.

Saving checks everything first (feed and fetch names, a value of the right dtype and shape for
every parameter), then writes the files with a manifest of their digests (``fileset``): on any
failure no new file remains and existing files are as they were; after a kill at any moment the
path loads the old model or the new one (the next save of it finishes the killed one's moves).
A parameter file of an older model that the new one does not need is removed. Loading checks the
files against the manifest when there is one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from . import serde
from .attrs import AttrType
from .block import Block
from .dtypes import DType, VarKind
from .errors import HalfwayError, IRError, SerdeError
from .fileset import Manifest, folder_lock, read_file, write_files
from .limits import check_file_size
from .operator import Operator
from .params import ParamSpec, encode_tensor, param_mismatch, param_specs, read_param_file, read_params, write_params
from .program import Program
from .scope import Scope

__all__ = ["save_inference_model", "load_inference_model", "set_feed_fetch"]

MODEL_SUFFIX = ".pdmodel"
PARAMS_SUFFIX = ".pdiparams"
LEGACY_MODEL = "__model__"
DEFAULT_STEM = "model"
FEED_HOLDER = "feed"
FETCH_HOLDER = "fetch"


class _Layout(NamedTuple):
    """Where a model lives: its program file, and either one parameter file or a folder of them."""

    model: Path
    params: Path | None
    param_dir: Path | None


# -- save -------------------------------------------------------------------------------------------
def save_inference_model(path: str | os.PathLike[str], feed_names: Sequence[str], fetch_names: Sequence[str],
                         program: Program, scope: Scope | Mapping[str, np.ndarray], *,
                         model_filename: str | None = None, params_filename: str | None = None) -> None:
    """Save ``program`` with feed ops for ``feed_names``, fetch ops for ``fetch_names``, and the
    values of its parameters taken from ``scope``. ``program`` itself is not changed.

    The saved program is a copy whose global block has Paddle's feed/fetch ops: the existing ones
    are kept untouched if they already feed and fetch exactly these names (so a loaded Paddle
    model saves byte-identically); otherwise all are replaced by a ``feed`` op per input
    (``X=["feed"]``, ``Out=[name]``, ``col=i``; each prepended, as Paddle does) and a ``fetch``
    op per output (``X=[name]``, ``Out=["fetch"]``, ``col=i``; appended), with persistable
    ``feed`` (FEED_MINIBATCH) and ``fetch`` (FETCH_LIST) vars.

    Raises:
        IRError: a feed or fetch name the global block does not declare.
        SerdeError: a parameter without a value in ``scope`` or whose value has another dtype or
            shape than its var; a file that cannot be written. Nothing is written then.
    """
    layout = _save_layout(os.fspath(path), model_filename, params_filename)
    feeds, fetches = _name_list(feed_names, "feed"), _name_list(fetch_names, "fetch")
    saved = program.clone()
    _set_feed_fetch(saved.global_block(), feeds, fetches)
    try:
        specs = param_specs(saved)
    except SerdeError as e:
        raise SerdeError(f"cannot save to {layout.model}: {e}") from None
    values = _values_for(specs, scope, layout.model)
    files = {layout.model: saved.to_bytes()}
    if layout.param_dir is not None:
        for spec in specs:
            files[_param_file(layout, spec.name)] = encode_tensor(values[spec.name], spec.dtype)
    elif specs:
        assert layout.params is not None  # a layout has a parameter folder or a parameter file
        files[layout.params] = write_params(values, dtypes={spec.name: spec.dtype for spec in specs})
    stale = (layout.params,) if layout.params is not None and not specs else ()
    write_files(files, remove=stale)


def _save_layout(path: str, model_filename: str | None, params_filename: str | None) -> _Layout:
    if not path:
        raise SerdeError("cannot save to an empty path; give a path prefix, a .pdmodel file or a folder")
    if model_filename is not None or params_filename is not None:
        return _fluid_layout(Path(path), model_filename, params_filename)
    if path.endswith(MODEL_SUFFIX):
        return _prefix_layout(path[:-len(MODEL_SUFFIX)])
    if os.path.isdir(path) or path.endswith(os.sep) or (os.altsep is not None and path.endswith(os.altsep)):
        return _prefix_layout(os.path.join(path, DEFAULT_STEM))
    return _prefix_layout(path)


def _fluid_layout(directory: Path, model_filename: str | None, params_filename: str | None) -> _Layout:
    model = directory / _plain_name(model_filename or LEGACY_MODEL, "model file name")
    if params_filename is None:
        return _Layout(model, None, directory)
    params = directory / _plain_name(params_filename, "parameter file name")
    if params == model:
        raise SerdeError(f"{model}: the model and its parameters cannot share one file")
    return _Layout(model, params, None)


def _prefix_layout(prefix: str) -> _Layout:
    return _Layout(Path(prefix + MODEL_SUFFIX), Path(prefix + PARAMS_SUFFIX), None)


def _name_list(names: Sequence[str], what: str) -> list[str]:
    items = list(names) if not isinstance(names, str) else []
    if isinstance(names, str) or not all(isinstance(n, str) and n for n in items):
        raise IRError(f"{what} names must be a list of var names, got {names!r}")
    if len(set(items)) != len(items):
        raise IRError(f"{what} names repeat a name: {items}")
    return items


def set_feed_fetch(block: Block, feed_names: Sequence[str], fetch_names: Sequence[str]) -> None:
    """Give ``block`` Paddle's feed/fetch ops (and holder vars) for these names, replacing any
    it has, as a saved inference program holds them (for importers building such programs).

    Raises:
        IRError: a name that repeats or that the block does not declare; nothing is changed then.
    """
    _set_feed_fetch(block, _name_list(feed_names, "feed"), _name_list(fetch_names, "fetch"))


def _set_feed_fetch(block: Block, feeds: list[str], fetches: list[str]) -> None:
    """Give ``block`` Paddle's feed/fetch ops for these names (see save_inference_model)."""
    unknown = [name for name in feeds + fetches if not block.has_var(name) or name in (FEED_HOLDER, FETCH_HOLDER)]
    if unknown:
        raise IRError(f"cannot save: feed/fetch names not declared in the global block: {unknown}")
    if _has_feed_fetch(block, feeds, fetches):
        return
    for op in block.ops:
        if op.type in ("feed", "fetch"):
            block.remove_op(op)
    if feeds:
        _holder(block, FEED_HOLDER, VarKind.FEED_MINIBATCH)
    if fetches:
        _holder(block, FETCH_HOLDER, VarKind.FETCH_LIST)
    for col, name in enumerate(feeds):
        block.insert_op(0, _io_op("feed", FEED_HOLDER, name, col))
    for col, name in enumerate(fetches):
        block.insert_op(len(block.ops), _io_op("fetch", name, FETCH_HOLDER, col))


def _has_feed_fetch(block: Block, feeds: list[str], fetches: list[str]) -> bool:
    """Whether ``block`` already starts with exactly these feed ops and ends with these fetch ops."""
    ops = block.ops
    head, tail = ops[:len(feeds)], ops[len(ops) - len(fetches):]
    feed_ops = [op for op in ops if op.type == "feed"]
    fetch_ops = [op for op in ops if op.type == "fetch"]
    return (len(feed_ops) == len(feeds) and all(op.type == "feed" for op in head)
            and len(fetch_ops) == len(fetches) and all(op.type == "fetch" for op in tail)
            and _cols_match(feed_ops, feeds, "feed") and _cols_match(fetch_ops, fetches, "fetch")
            and (not feeds or _is_holder(block, FEED_HOLDER, VarKind.FEED_MINIBATCH))
            and (not fetches or _is_holder(block, FETCH_HOLDER, VarKind.FETCH_LIST)))


def _cols_match(ops: list[Operator], names: list[str], op_type: str) -> bool:
    """Whether ``ops`` are one ``op_type`` op per name, each with its col and slots."""
    cols = set()
    for op in ops:
        col = op.attr("col") if op.has_attr("col") and op.attr_type("col") is AttrType.INT else -1
        if not 0 <= col < len(names):
            return False
        x, out = _io_slots(op_type, names[col])
        if op.inputs != {"X": (x,)} or op.outputs != {"Out": (out,)}:
            return False
        cols.add(col)
    return len(cols) == len(ops) == len(names)


def _is_holder(block: Block, name: str, kind: VarKind) -> bool:
    return block.has_var(name) and block.var(name).kind is kind and block.var(name).persistable


def _holder(block: Block, name: str, kind: VarKind) -> None:
    if not block.has_var(name):
        block.create_var(name, kind=kind, persistable=True)
    elif block.var(name).kind is not kind:
        raise IRError(f"cannot save: var {name!r} is {block.var(name).kind.name}, but the {name} list "
                      f"of an inference program must be {kind.name}; rename the var")
    else:
        block.var(name).persistable = True


def _io_slots(op_type: str, name: str) -> tuple[str, str]:
    return (FEED_HOLDER, name) if op_type == "feed" else (name, FETCH_HOLDER)


def _io_op(op_type: str, x: str, out: str, col: int) -> Operator:
    op = Operator(op_type, {"X": [x]}, {"Out": [out]})
    op.set_attr("col", col, AttrType.INT)
    return op


def _values_for(specs: list[ParamSpec], scope: Scope | Mapping[str, np.ndarray],
                model: Path) -> dict[str, np.ndarray]:
    """The value of every parameter, checked against its var; SerdeError listing every problem."""
    lookup = scope.find if isinstance(scope, Scope) else scope.get
    values, missing, wrong = {}, [], []
    for spec in specs:
        value = lookup(spec.name)
        if value is None:
            missing.append(spec.name)
            continue
        problem = _value_problem(spec, value)
        if problem is not None:
            wrong.append(problem)
        values[spec.name] = value
    if missing or wrong:
        parts = ([f"no value in the scope for {len(missing)} parameter(s): {missing}"] if missing else []) + wrong
        raise SerdeError(f"cannot save to {model}: {'; '.join(parts)}")
    return values


def _value_problem(spec: ParamSpec, value: object) -> str | None:
    if not isinstance(value, np.ndarray):
        return f"the value of var {spec.name!r} is a {type(value).__name__}, not a numpy array"
    native = value.dtype.newbyteorder("=")
    if spec.dtype is not None and native == spec.dtype.numpy:
        dtype = spec.dtype
    else:
        try:
            dtype = DType.from_any(native)
        except HalfwayError:
            return f"the value of var {spec.name!r} has numpy dtype {value.dtype}, which cannot be stored"
    return param_mismatch(spec, dtype, value.shape)


# -- load -------------------------------------------------------------------------------------------
def load_inference_model(path: str | os.PathLike[str], *, model_filename: str | None = None,
                         params_filename: str | None = None) -> tuple[Program, list[str], list[str], Scope]:
    """Load a model saved by halfway or Paddle: ``(program, feed_names, fetch_names, scope)``.

    Feed and fetch names come from the feed/fetch ops of the global block in ``col`` order; the
    scope holds every parameter. Raises SerdeError naming the file for a missing or unreadable
    file, a program file larger than ``HALFWAY_MAX_MODEL_BYTES`` (``halfway.ir.limits``; checked
    before it is read), a file that is not a ProgramDesc, malformed feed/fetch ops, or
    parameters that are missing, corrupt or disagree with their vars.
    """
    layout = _load_layout(Path(path), model_filename, params_filename)
    source = os.fspath(layout.model)
    check_file_size(layout.model, "a model file")
    with folder_lock(layout.model.parent, exclusive=False):
        data = _read(layout.model)
        manifest = Manifest.read(layout.model, data)
        program = serde.program_from_bytes(data, source=source)
        feeds, fetches, specs = _program_facts(program, source)
        values = _read_values(layout, specs, manifest)
    return program, feeds, fetches, Scope(values)


def _program_facts(program: Program, source: str) -> tuple[list[str], list[str], list[ParamSpec]]:
    feeds = _io_names(program.global_block(), "feed", "Out", source)
    fetches = _io_names(program.global_block(), "fetch", "X", source)
    try:
        specs = param_specs(program)
    except SerdeError as e:
        raise SerdeError(f"{source}: {e}") from None
    return feeds, fetches, specs


def _load_layout(path: Path, model_filename: str | None, params_filename: str | None) -> _Layout:
    if model_filename is not None or params_filename is not None:
        return _fluid_layout(path, model_filename, params_filename)
    text = os.fspath(path)
    if text.endswith(MODEL_SUFFIX):
        return _prefix_layout(text[:-len(MODEL_SUFFIX)])
    if not path.is_dir():
        return _prefix_layout(text)
    try:
        names = os.listdir(path)
    except OSError as e:
        raise SerdeError(f"{path}: cannot list the directory ({e.strerror or e})") from None
    candidates = sorted(n for n in names if n.endswith(MODEL_SUFFIX) or n == LEGACY_MODEL)
    if len(candidates) != 1:
        found = f"it holds {candidates}" if candidates else "it holds none"
        raise SerdeError(f"{path}: expected one *{MODEL_SUFFIX} or a {LEGACY_MODEL} in the directory, "
                         f"but {found}; pass the model's path prefix or file")
    if candidates[0] == LEGACY_MODEL:
        return _Layout(path / LEGACY_MODEL, None, path)
    return _prefix_layout(os.fspath(path / candidates[0][:-len(MODEL_SUFFIX)]))


def _io_names(block: Block, op_type: str, slot: str, source: str) -> list[str]:
    """The names the feed (or fetch) ops of ``block`` write (or read), in ``col`` order."""
    by_col: dict[int, str] = {}
    for index, op in enumerate(block.ops):
        if op.type != op_type:
            continue
        names = op.output(slot) if op_type == "feed" else op.input(slot)
        where = f"{source}: op #{index} {op_type}"
        if len(names) != 1 or not op.has_attr("col") or op.attr_type("col") not in (AttrType.INT, AttrType.LONG):
            raise SerdeError(f"{where}: expected one var in slot {slot} and an int attr col, got {op.describe()}")
        if not block.has_var(names[0]):
            raise SerdeError(f"{where}: var {names[0]!r} is not declared in the global block")
        col = op.attr("col")
        if col in by_col:
            raise SerdeError(f"{where}: col {col} is also used by the {op_type} of {by_col[col]!r}")
        by_col[col] = names[0]
    if sorted(by_col) != list(range(len(by_col))):
        raise SerdeError(f"{source}: {op_type} ops have cols {sorted(by_col)}; expected 0 to {len(by_col) - 1}")
    return [by_col[col] for col in range(len(by_col))]


def _read_values(layout: _Layout, specs: list[ParamSpec], manifest: Manifest | None) -> dict[str, np.ndarray]:
    """The parameter values, from files checked against ``manifest`` (when the program has one)."""
    if layout.param_dir is not None:
        values = {}
        for spec in specs:
            file = _param_file(layout, spec.name)
            values[spec.name] = read_param_file(_read(file, manifest), spec, source=os.fspath(file))
        return values
    assert layout.params is not None  # a layout has a parameter folder or a parameter file
    if not specs and (not layout.params.exists() or (manifest is not None and not manifest.lists(layout.params))):
        return {}
    return read_params(_read(layout.params, manifest), specs, source=os.fspath(layout.params))


def _read(path: Path, manifest: Manifest | None = None) -> bytes:
    if manifest is not None and manifest.lists(path):
        return manifest.file_bytes(path)
    return read_file(path)


def _param_file(layout: _Layout, name: str) -> Path:
    """The legacy file of parameter ``name``: a plain file name, not the model file."""
    assert layout.param_dir is not None  # called for layouts with a parameter folder
    try:
        file = layout.param_dir / _plain_name(name, "parameter name")
    except SerdeError as e:
        raise SerdeError(f"{layout.model}: {e}") from None
    if file == layout.model:
        raise SerdeError(f"{file}: parameter {name!r} would share the model's file")
    return file


def _plain_name(name: str, what: str) -> str:
    """``name`` if it names a file inside a directory (no separators, not '.' or '..')."""
    separators = [sep for sep in (os.sep, os.altsep, "/", "\0") if sep]
    if name in ("", ".", "..") or any(sep in name for sep in separators):
        raise SerdeError(f"{what} {name!r} cannot be used as a file name in a model directory")
    return name
