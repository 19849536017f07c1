"""``load``: one entry point for every model format halfway reads, chosen by the file.

* an ``onnx.ModelProto``, or a file ending ``.onnx`` or holding an ONNX model: the ONNX importer;
* a Paddle 3 PIR model — a ``.json`` file, a folder holding one ``.json`` that is a PIR program
  (beside any others, such as ``config.json``; and no ``.pdmodel``), or a path prefix with
  ``<prefix>.json`` (and no ``<prefix>.pdmodel``), its parameters in the ``.pdiparams`` beside
  it: the PIR importer (``halfway.frontends.paddle``);
* a Paddle or halfway inference model — a ``.pdmodel`` file, a folder holding one (or the
  legacy ``__model__`` with per-parameter files), or a path prefix with ``<prefix>.pdmodel``:
  ``load_inference_model``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..ir import limits
from ..ir.errors import SerdeError
from ..ir.io import load_inference_model
from ..ir.program import Program
from ..ir.schema import has_schema
from ..ir.scope import Scope
from .paddle.importer import pir_files

__all__ = ["load", "model_format", "UnknownOpError", "check_known_ops"]

ONNX_SUFFIX = ".onnx"
_PADDLE_SUFFIXES = (".pdmodel", ".pdiparams")


def model_format(path: str | os.PathLike[str]) -> str:
    """"onnx", "pir" or "paddle" for the model at ``path`` (SerdeError when it is none of them)."""
    text = os.fspath(path)
    p = Path(text)
    if text.endswith(ONNX_SUFFIX) and not p.is_dir():
        return "onnx"
    if not Path(text + ".pdmodel").is_file() and pir_files(text) is not None:
        return "pir"
    if p.is_dir() or text.endswith(_PADDLE_SUFFIXES) or Path(text + ".pdmodel").is_file():
        return "paddle"
    if p.is_file():
        return "onnx" if _looks_like_onnx(p) else "paddle"
    if p.exists():
        raise SerdeError(f"{text}: not a regular file (a model is an .onnx file, a .pdmodel file or a folder)")
    raise SerdeError(f"{text}: no such model: expected an .onnx file, a .pdmodel file, a Paddle 3 model.json, a "
                     f"folder holding a Paddle model, or a prefix naming <prefix>.pdmodel or <prefix>.json")


def _looks_like_onnx(path: Path) -> bool:
    """Whether a file of another name parses as an ONNX model with a graph (FileSizeError when it
    is larger than a model file may be)."""
    from onnx import ModelProto

    limits.check_file_size(path, "a model file")
    proto = ModelProto()
    try:
        proto.ParseFromString(path.read_bytes())
    except Exception:  # any parse failure means "not ONNX"; the Paddle loader reports it
        return False
    return proto.ir_version > 0 and proto.HasField("graph") and len(proto.graph.node) > 0


def load(model: Any, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
         max_tensor_bytes: int | None = None, **paddle_options: Any) -> tuple[Program, list[str], list[str], Scope]:
    """Load a model of any supported format: ``(program, feed_names, fetch_names, scope)``.

    ``input_shapes`` (ONNX only) fixes input dims; ``max_tensor_bytes`` (ONNX only) bounds the
    tensors the import computes from shapes (default: ``HALFWAY_MAX_TENSOR_BYTES``, else 2 GiB);
    ``paddle_options`` (``model_filename``, ``params_filename``) go to ``load_inference_model``.
    A Paddle 3 PIR model's unsupported ops are all reported at once (``UnsupportedPirOpError``).
    """
    is_path = isinstance(model, (str, os.PathLike))
    if not is_path:
        from onnx import ModelProto

        if not isinstance(model, ModelProto):
            raise SerdeError(f"load takes a model's path or an onnx.ModelProto, got {type(model).__name__}")
    if not is_path or model_format(model) == "onnx":
        if paddle_options:
            raise SerdeError(f"{model if is_path else '<ModelProto>'}: {sorted(paddle_options)} apply to "
                             f"Paddle models only")
        from .onnx import load as load_onnx

        return load_onnx(model, input_shapes=input_shapes, max_tensor_bytes=max_tensor_bytes)
    if input_shapes:
        raise SerdeError(f"{model}: input_shapes applies to ONNX models only")
    if model_format(model) == "pir":
        if paddle_options:
            raise SerdeError(f"{model}: {sorted(paddle_options)} apply to .pdmodel models only")
        from .paddle import load as load_pir

        return load_pir(model)
    loaded = load_inference_model(model, **paddle_options)
    check_known_ops(loaded[0], os.fspath(model))
    return loaded


class UnknownOpError(SerdeError):
    """A Paddle model uses op types halfway has no schema for; the message lists every one."""


def check_known_ops(program: Program, source: str) -> None:
    """UnknownOpError naming ``source`` and every op (block, index, type) without a schema."""
    unknown = [f"block {block.idx} op #{i} {op.type}" for block in program.blocks
               for i, op in enumerate(block.ops) if not has_schema(op.type)]
    if unknown:
        types = sorted({entry.rsplit(" ", 1)[1] for entry in unknown})
        raise UnknownOpError(f"{source}: {len(unknown)} op(s) of {len(types)} type(s) halfway does not know "
                             f"({', '.join(types)}): {', '.join(unknown)}; register their schemas "
                             f"(halfway.ir.schema.register_op, or a plugin) to load this model")
