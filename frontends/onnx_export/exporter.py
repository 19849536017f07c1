"""ONNX export: a program halfway runs (imported, fused, float16) out as an ONNX model.

    model = halfway.frontends.onnx_export.to_onnx(program, scope, feed_names, fetch_names)
    halfway.save_onnx("out.onnx", feed_names, fetch_names, program, scope)

Steps: check the opset and that every op has an exporter (all that do not are reported at once);
write each op of the global block, in order, through its exporter (``registry.EXPORTERS``); the
parameters the nodes read become initializers; feeds and fetches become the graph's inputs and
outputs, a -1 dim a named dim (the name the import recorded, else ``<var>_dim<i>``).
``save_onnx`` writes the file atomically (``halfway.ir.tempfiles``): a failing export writes
nothing and changes nothing.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Sequence
from pathlib import Path

import onnx
from onnx import ModelProto, TensorProto, ValueInfoProto, helper, numpy_helper

from ...ir.errors import HalfwayError, SerdeError
from ...ir.fileset import manifest_path, write_files
from ...ir.operator import Operator
from ...ir.program import Program
from ...ir.scope import Scope
from ...ir.tempfiles import remove, write_file
from . import (  # noqa: F401  (register exporters)
    attention,
    conv,
    detection,
    family,
    gated,
    image,
    indexing,
    loss,
    matmul,
    ngram,
    norm,
    pool,
    quantize,
    resize,
    signal,
    tensor,
)
from .context import CONTRIB_DOMAIN, ExportContext, ExportError, UnsupportedExportError, onnx_type
from .registry import EXPORTERS

__all__ = ["to_onnx", "save_onnx", "DEFAULT_OPSET", "MIN_EXPORT_OPSET"]

DEFAULT_OPSET = 17
"""The opset written unless asked otherwise: LayerNormalization's first; Gelu (20), Attention and
RMSNormalization (23) are decomposed below theirs."""
MIN_EXPORT_OPSET = 13
"""The oldest opset the exporters write (axes and split sizes as inputs)."""
_SKIPPED = ("feed", "fetch")


def to_onnx(program: Program, scope: Scope, feed_names: Sequence[str], fetch_names: Sequence[str], *,
            opset: int = DEFAULT_OPSET, contrib: bool = False) -> ModelProto:
    """The ONNX model of ``program`` fed ``feed_names`` and fetching ``fetch_names``, its
    parameters' values from ``scope``. ``contrib``: write ONNX Runtime's fused ops (com.microsoft)
    where they compute an op. The program and scope are not changed.

    Raises:
        UnsupportedExportError: listing every op type without an ONNX form.
        ExportError: a bad opset, an unknown feed or fetch, a parameter without a value, or an op
            whose attrs have no ONNX form (naming the op).
    """
    newest = onnx.defs.onnx_opset_version()
    if not MIN_EXPORT_OPSET <= opset <= newest:
        raise ExportError(f"opset {opset} is outside the range the exporter writes, {MIN_EXPORT_OPSET} to {newest}")
    block = program.global_block()
    ops = [op for op in block.ops if op.type not in _SKIPPED]
    _check_supported(ops)
    for name in (*feed_names, *fetch_names):
        if not block.has_var(name):
            raise ExportError(f"feed or fetch {name!r} is not a var of the program")
    ctx = ExportContext(program, scope, opset, contrib)
    for op in ops:
        ctx.op = op
        try:
            EXPORTERS[op.type](ctx, op)
        except ExportError:
            raise
        except HalfwayError as e:
            ctx.fail(str(e))
    ctx.op = None
    graph = helper.make_graph(ctx.nodes, "halfway", [_value_info(ctx, name) for name in feed_names],
                              [_value_info(ctx, name) for name in fetch_names],
                              _initializers(ctx, set(feed_names)))
    opsets = [helper.make_opsetid("", opset)]
    if any(node.domain == CONTRIB_DOMAIN for node in ctx.nodes):
        opsets.append(helper.make_opsetid(CONTRIB_DOMAIN, 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="halfway")
    tabled = opset <= max(row[2] for row in helper.VERSION_TABLE)  # else newer than the table: onnx's own IR
    model.ir_version = helper.find_min_ir_version_for(opsets, ignore_unknown=True) if tabled else onnx.IR_VERSION
    return model


def save_onnx(path: str | os.PathLike[str], feed_names: Sequence[str], fetch_names: Sequence[str],
              program: Program, scope: Scope, *, opset: int = DEFAULT_OPSET, contrib: bool = False,
              manifest: bool = False) -> None:
    """Write ``program`` as the ONNX model ``path`` (``to_onnx`` says what is written), atomically
    (one file: it holds the new model or the old one), creating missing folders; on any error no
    file changes. ``manifest`` also writes ``path.sha256``, its digest in ``sha256sum -c``'s form
    (``halfway.ir.fileset``); without, a manifest an earlier save left is removed (it names the
    old bytes)."""
    model = to_onnx(program, scope, feed_names, fetch_names, opset=opset, contrib=contrib)
    target = Path(path)
    if manifest:
        write_files({target: model.SerializeToString()})
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SerdeError(f"{target}: cannot write ({e.strerror or e}); nothing was written") from None
    write_file(target, model.SerializeToString())
    remove(manifest_path(target))


def _check_supported(ops: Sequence[Operator]) -> None:
    missing = collections.Counter(op.type for op in ops if op.type not in EXPORTERS)
    if missing:
        listed = ", ".join(f"{t} (x{n})" if n > 1 else t for t, n in sorted(missing.items()))
        raise UnsupportedExportError(f"ops with no ONNX form: {listed}", sorted(missing))


def _value_info(ctx: ExportContext, name: str) -> ValueInfoProto:
    """A graph input or output: a -1 dim is named as the var's ``DIM_NAMES`` record names it
    (an imported ONNX model's dim_params, which inputs and outputs share), else ``<var>_dim<i>``."""
    names = ctx.var(name).dim_names()
    dims = [d if d >= 0 else (names[i] or f"{name}_dim{i}") for i, d in enumerate(ctx.shape(name))]
    return helper.make_tensor_value_info(name, onnx_type(ctx.dtype(name)), dims)


def _initializers(ctx: ExportContext, feeds: set[str]) -> list[TensorProto]:
    """The made constants, and the parameters the nodes read."""
    produced = {name for node in ctx.nodes for name in node.output}
    tensors = dict(ctx.initializers)
    for node in ctx.nodes:
        for name in node.input:
            if not name or name in produced or name in feeds or name in tensors:
                continue
            value = ctx.value(name) if ctx.block.has_var(name) else None
            if value is None:
                raise ExportError(f"var {name!r} (read by ONNX node {node.op_type} {node.name!r}) is neither fed, "
                                  f"computed nor a parameter with a value in the scope")
            tensors[name] = numpy_helper.from_array(value, name)
    return list(tensors.values())
