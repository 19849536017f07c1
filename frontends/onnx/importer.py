"""ONNX import: a model file or ModelProto in, ``(program, feed_names, fetch_names, scope)`` out.

    program, feeds, fetches, scope = halfway.frontends.onnx.load("model.onnx")

Steps: read the model (external data included), expand the ops ONNX defines as functions that
no converter takes (``functions``), and check the graph (every input defined,
no cycle, every op either convertible or foldable — all unsupported ops are reported at
once); declare the graph inputs that are not initializers (old IR versions list initializers
among the inputs) as feeds; then walk the nodes in dependency order, folding what is
computable at import (``folding``) and converting the rest (``registry.CONVERTERS``). The
program gets Paddle's feed and fetch ops and is verified before it is returned.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto, helper

from ...ir import limits
from ...ir.errors import HalfwayError, SerdeError
from ...ir.fileset import read_file
from ...ir.io import set_feed_fetch
from ...ir.program import Program
from ...ir.scope import Scope
from ...ir.variable import Variable
from ...ir.verifier import verify
from . import (  # noqa: F401  (register converters)
    attention,
    composed,
    control,
    conv,
    detection,
    image,
    indexing,
    loss,
    math,
    matmul,
    ngram,
    norm,
    pool,
    quantize,
    recurrent,
    resize,
    signal,
    tensor,
)
from .context import ConversionError, GraphContext, UnsupportedOpError, node_label
from .folding import fold, foldable
from .functions import function_body, inline_functions
from .inferred import inferred_dims
from .registry import CONVERTERS
from .spec import check_node
from .tensors import TensorError, elem_dtype, read_external_data, tensor_array

__all__ = ["load", "read_model", "MIN_OPSET"]

MIN_OPSET = 7
"""The oldest default-domain opset the converters follow (numpy broadcasting came with 7)."""


def load(model: str | os.PathLike[str] | ModelProto, *, input_shapes: Mapping[str, Sequence[int]] | None = None,
         max_tensor_bytes: int | None = None) -> tuple[Program, list[str], list[str], Scope]:
    """Import an ONNX model: ``(program, feed_names, fetch_names, scope)`` as
    ``load_inference_model`` returns them. A ModelProto given is not changed.

    ``input_shapes`` fixes the dims of graph inputs by name (symbolic dims are otherwise -1),
    which lets shape computations on them fold. ``max_tensor_bytes`` bounds every tensor the
    import computes or the program declares from a shape (``halfway.ir.limits``).

    Raises:
        SerdeError: the file is missing, not an ONNX model, truncated, or its external data is
            missing.
        UnsupportedOpError: listing every node whose op has no converter and cannot be folded.
        ConversionError: a malformed graph (an input nothing defines, a cycle, a node that breaks
            its op's ONNX spec, a malformed initializer) or a node that cannot be converted (a
            dynamic shape that cannot be folded, an unsupported attr, a tensor over the size
            limit); the message names the file and the node.
    """
    proto, source = read_model(model)
    opset = _opset(proto, source)
    proto = inline_functions(proto, opset)
    graph = proto.graph
    ctx = GraphContext(source, opset, limits.max_tensor_bytes(max_tensor_bytes))
    nodes = _sorted_nodes(graph, source)
    _check_supported(nodes, graph, source)
    feeds = _declare_inputs(ctx, graph, _input_shapes(input_shapes, source))
    ctx.known_dims = inferred_dims(proto)
    ctx.used = {name for node in nodes for name in node.input} | {out.name for out in graph.output}
    declared = _declared_types(graph)
    ctx.convert_node = lambda node: _import_node(ctx, node, declared)
    for node in nodes:
        _import_node(ctx, node, declared)
    ctx.node = None
    fetches = [_fetchable(ctx, out) for out in graph.output]
    for out, fetch in zip(graph.output, fetches):
        _name_dims(ctx.block.var(fetch), _dim_params(out))
    set_feed_fetch(ctx.block, feeds, fetches)
    verify(ctx.program)
    return ctx.program, feeds, fetches, ctx.scope


# -- reading ---------------------------------------------------------------------------------------
def read_model(model: str | os.PathLike[str] | ModelProto) -> tuple[ModelProto, str]:
    """The ModelProto, with external data loaded, and the name errors use for it. A ModelProto
    given is returned as it is: one whose tensors keep their data in external files is refused,
    as it has no folder to find them in."""
    if isinstance(model, ModelProto):
        _refuse_external_data(model)
        return model, "<ModelProto>"
    path = Path(model)
    source = os.fspath(path)
    limits.check_file_size(path, "a model file")
    data = read_file(path)
    proto = ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise SerdeError(f"{source}: not an ONNX model, or a truncated one ({e})") from None
    if proto.ir_version <= 0 or not proto.HasField("graph") or not proto.graph.output:
        raise SerdeError(f"{source}: not an ONNX model (no IR version, graph or graph outputs)")
    _load_external_data(proto, path.parent, source)
    return proto, source


def _external_tensors(proto: ModelProto) -> list[TensorProto]:
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    return [item for item in _get_all_tensors(proto) if uses_external_data(item)]


def _load_external_data(proto: ModelProto, base: Path, source: str) -> None:
    for item in _external_tensors(proto):
        try:
            read_external_data(item, base, f"tensor {item.name!r}")
        except TensorError as e:
            raise SerdeError(f"{source}: {e}") from None


def _refuse_external_data(proto: ModelProto) -> None:
    external = [item.name for item in _external_tensors(proto)]
    if external:
        raise SerdeError(f"<ModelProto>: tensors {external[:4]} keep their data in external files, which a "
                         f"ModelProto has no folder to find; pass the model's path, or read the data first "
                         f"(onnx.load_external_data_for_model)")


def _input_shapes(shapes: Mapping[str, Sequence[int]] | None, source: str) -> dict[str, list[int]]:
    """``input_shapes`` checked: a mapping from input names to lists of dims (-1 = unknown)."""
    if shapes is None:
        return {}
    if not isinstance(shapes, Mapping):
        raise ConversionError(f"{source}: input_shapes must map input names to shapes, got {type(shapes).__name__}")
    checked: dict[str, list[int]] = {}
    for name, dims in shapes.items():
        try:
            given: list[int] | None = [operator.index(d) for d in dims]
        except TypeError:
            given = None
        if given is None or any(d < -1 for d in given):
            raise ConversionError(f"{source}: input_shapes[{name!r}] must be a list of dims (ints, -1 = unknown), "
                                  f"got {dims!r}")
        checked[name] = given
    return checked


def _opset(proto: ModelProto, source: str) -> int:
    versions: list[int] = [op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")]
    if not versions:
        raise SerdeError(f"{source}: the model imports no opset of the default domain (a truncated or "
                         f"incomplete file?)")
    version = versions[0]
    newest = onnx.defs.onnx_opset_version()
    if version > newest:
        raise ConversionError(f"{source}: opset {version} is newer than the newest this onnx ({onnx.__version__}) "
                              f"knows ({newest})")
    if version < MIN_OPSET:
        raise ConversionError(f"{source}: opset {version} is older than the oldest supported ({MIN_OPSET}); "
                              f"upgrade it with onnx.version_converter.convert_version")
    return version


# -- graph checks ----------------------------------------------------------------------------------
def _sorted_nodes(graph: GraphProto, source: str) -> list[NodeProto]:
    """The nodes in dependency order (stable). ConversionError for an input nothing defines,
    a value defined twice, or a cycle."""
    defined = {t.name for t in graph.initializer} | {i.name for i in graph.input}
    producer: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for name in node.output:
            if name and (name in producer or name in defined):
                raise ConversionError(f"{source}: {node_label(node)}: output {name!r} is already defined")
            if name:
                producer[name] = i
    waits: list[set[int]] = []
    for node in graph.node:
        deps = set()
        for name in node.input:
            if not name or name in defined:
                continue
            if name not in producer:
                raise ConversionError(f"{source}: {node_label(node)}: input {name!r} is not defined by any node, "
                                      f"initializer or graph input")
            deps.add(producer[name])
        waits.append(deps)
    return [graph.node[i] for i in _kahn(waits, graph, source)]


def _kahn(waits: list[set[int]], graph: GraphProto, source: str) -> list[int]:
    import heapq

    users: dict[int, list[int]] = {}
    for i, deps in enumerate(waits):
        for d in deps:
            users.setdefault(d, []).append(i)
    pending = [len(deps) for deps in waits]
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in users.get(i, ()):
            pending[j] -= 1
            if pending[j] == 0:
                heapq.heappush(ready, j)
    if len(order) != len(waits):
        stuck = [node_label(graph.node[i]) for i, n in enumerate(pending) if n][:6]
        raise ConversionError(f"{source}: the graph has a cycle among {', '.join(stuck)}")
    return order


def _check_supported(nodes: list[NodeProto], graph: GraphProto, source: str) -> None:
    """UnsupportedOpError listing every node that has no converter and whose inputs are not all
    constants (Shape and Size count as foldable: static shapes are checked when converting)."""
    constant = {t.name for t in graph.initializer}
    missing = []
    for node in nodes:
        default_domain = node.domain in ("", "ai.onnx")
        if default_domain and (node.op_type in ("Shape", "Size") or all(n in constant for n in node.input if n)):
            constant.update(node.output)
        elif not default_domain or node.op_type not in CONVERTERS:
            domain = f"{node.domain}." if not default_domain else ""
            missing.append(f"{node.name or '<unnamed>'} ({domain}{node.op_type})")
    if missing:
        raise UnsupportedOpError(f"{source}: {len(missing)} node(s) use ops halfway cannot import: "
                                 f"{', '.join(missing)}")


# -- import ----------------------------------------------------------------------------------------
def _declare_inputs(ctx: GraphContext, graph: GraphProto, shapes: dict[str, list[int]]) -> list[str]:
    for init in graph.initializer:
        try:
            ctx.consts[init.name] = tensor_array(init, f"initializer {init.name!r}")
        except TensorError as e:
            raise ConversionError(f"{ctx.source}: {e}") from None
    feeds = []
    for value in graph.input:
        if value.name in ctx.consts:
            continue
        if not value.type.HasField("tensor_type"):
            raise ConversionError(f"{ctx.source}: graph input {value.name!r} is a {value.type.WhichOneof('value')}; "
                                  f"only tensors are supported")
        tensor_type = value.type.tensor_type
        shape = shapes.pop(value.name, None)
        names = [] if shape is not None else _dim_params(value)
        if shape is None:
            shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim]
        try:
            dtype = elem_dtype(tensor_type.elem_type, f"graph input {value.name!r}")
            limits.check_tensor_size(shape, dtype.numpy, f"graph input {value.name!r}", ctx.max_bytes)
        except HalfwayError as e:
            raise ConversionError(f"{ctx.source}: {e}") from None
        feeds.append(ctx.declare_input(value.name, shape, dtype))
        _name_dims(ctx.block.var(feeds[-1]), names)
    if shapes:
        raise ConversionError(f"{ctx.source}: input_shapes names {sorted(shapes)}, which are not graph inputs "
                              f"(inputs: {[v.name for v in graph.input if v.name not in ctx.consts]})")
    return feeds


def _dim_params(value: ValueInfoProto) -> list[str]:
    """The dim_params of a graph input's or output's shape ("" for a dim without one)."""
    return [d.dim_param for d in value.type.tensor_type.shape.dim] if value.type.HasField("tensor_type") else []


def _name_dims(var: Variable, names: list[str]) -> None:
    """Record ``names`` as ``var``'s ``DIM_NAMES`` where some dim has one, the rank matches and
    no other names are recorded (a fed var fetched keeps its input's)."""
    if any(names) and len(names) == len(var.shape or ()) and not any(var.dim_names()):
        var.set_dim_names(names)


def _declared_types(graph: GraphProto) -> dict[str, int]:
    """The element types the file states: of the graph inputs and the initializers."""
    types = {value.name: value.type.tensor_type.elem_type for value in graph.input if value.type.HasField("tensor_type")}
    types.update((init.name, init.data_type) for init in graph.initializer)
    return types


def _input_types(ctx: GraphContext, node: NodeProto, declared: Mapping[str, int]) -> list[int]:
    """The ONNX element type of each input of ``node`` where it is certain (0 elsewhere): stated
    by the file, or a floating type computed by the nodes before (halfway may hold the integers
    ONNX computes in other widths)."""
    types = []
    for name in node.input:
        if name in declared:
            types.append(declared[name])
        elif name and ctx.has(name) and ctx.info(name).dtype.numpy.kind == "f":
            types.append(helper.np_dtype_to_tensor_dtype(ctx.info(name).dtype.numpy))
        else:
            types.append(0)
    return types


def _import_node(ctx: GraphContext, node: NodeProto, declared: Mapping[str, int]) -> None:
    ctx.node = node
    try:
        rank = len(ctx.info(node.input[0]).shape) if node.input and node.input[0] and ctx.has(node.input[0]) else None
        check_node(node, ctx.opset, _input_types(ctx, node, declared), rank)
        if foldable(ctx, node):
            for name, value in zip(node.output, fold(ctx, node)):
                if name:
                    ctx.consts[name] = np.asarray(value)
            return
        convert = CONVERTERS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if convert is None:
            domain = f"{node.domain}." if node.domain not in ("", "ai.onnx") else ""
            raise UnsupportedOpError(f"{ctx.source}: {node_label(node)}: halfway has no converter for "
                                     f"{domain}{node.op_type}, and its inputs are not constants it could fold")
        try:
            convert(ctx, node, ctx.attrs(node))
        except ConversionError:
            body = function_body(node, ctx.opset, {n: (ctx.info(n).dtype.numpy, ctx.shape(n)) for n in node.input if n})
            if body is None:
                raise
            for part in body:
                _import_node(ctx, part, declared)
    except ConversionError:
        raise
    except HalfwayError as e:
        ctx.fail(str(e))
    except (KeyError, IndexError, ValueError, TypeError, ArithmeticError, MemoryError) as e:
        ctx.fail(f"{type(e).__name__}: {e}")


def _fetchable(ctx: GraphContext, output: ValueInfoProto) -> str:
    """The var to fetch for graph output ``output``, of the element type it declares: a constant
    output is copied from its parameter."""
    name = output.name
    _check_output_type(ctx, output)
    if name in ctx.names and not ctx.is_const(name):
        return ctx.names[name]
    if not ctx.has(name):
        raise ConversionError(f"{ctx.source}: graph output {name!r} is not computed by any node")
    value = ctx.temp(name)
    ctx.consts[value] = ctx.consts.pop(name)
    ctx.emit("assign", {"X": value}, {"Out": name})
    return ctx.names[name]


def _check_output_type(ctx: GraphContext, output: ValueInfoProto) -> None:
    """ConversionError when a graph output declares a floating element type the graph does not
    compute (a float output computed as int32, float16 or double)."""
    declared = output.type.tensor_type.elem_type if output.type.HasField("tensor_type") else 0
    if not declared or not ctx.has(output.name):
        return
    computed = ctx.info(output.name).dtype.numpy
    stated = np.dtype(helper.tensor_dtype_to_np_dtype(declared))
    if computed != stated and (stated.kind == "f" or computed.kind == "f"):
        raise ConversionError(f"{ctx.source}: graph output {output.name!r} is declared "
                              f"{TensorProto.DataType.Name(declared)}, but the graph computes it as {computed}")
