"""Decoder ONNX exports with a past/present cache as halfway decoder programs, which
``halfway.api.llm`` drives as it drives a checkpoint folder's.

    decoder = load_decoder("model.onnx", max_length=512)

The export is imported, run through the default pipeline and then ``cache_attention``, which
turns its past/present attention into ``cached_attention`` over caches it owns (the layout and
feeds of ``frontends.checkpoint.decoder``); running passes, it is a library service, not an
importer. optimum's merged decoder (``decoder_model_merged.onnx``) is read as its with-past
branch. A float32 export asked for as float16 goes through the ``float16`` pass between the two,
its pasts and presents float16 too, so the caches ``cache_attention`` makes are float16 and the
program is the one a float16 checkpoint builds: float16 weights and activations, norm weights and
rotary tables float32, float32 logits.

What the runtime needs to know beyond the program — the end-of-sequence and padding ids, the
architecture — comes from a ``config.json`` (and ``generation_config.json``) beside the file, as
transformers' exports leave them, else from ONNX Runtime GenAI's ``genai_config.json``; without
either the shapes come from the graph and no token ends a sequence.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
import onnx
from google.protobuf.message import DecodeError

from ...frontends.checkpoint import DEFAULT_MAX_LENGTH, DecoderConfig, DecoderProgram
from ...frontends.checkpoint.config import token_ids
from ...frontends.checkpoint.families import FAMILIES, family_of
from ...frontends.onnx.context import ConversionError
from ...frontends.onnx.genai import attention_windows, has_contrib_ops, lower_contrib_ops
from ...frontends.onnx.importer import load, read_model
from ...frontends.onnx.merged_decoder import is_merged_decoder, take_cache_branch
from ...frontends.onnx.static_cache import has_static_cache, lower_static_cache
from ...ir.dtypes import DType
from ...ir.errors import HalfwayError, PassError
from ...ir.program import Program
from ...ir.scope import Scope
from ...passes import Pass, PassManager, get_pass
from ...passes.cache_attention import LOGITS, cache_names

__all__ = ["load_decoder", "is_onnx"]


def is_onnx(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names an ONNX file (by its suffix)."""
    return Path(path).suffix == ".onnx" and Path(path).is_file()


def _json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise HalfwayError(f"{path}: not readable as JSON ({e})") from None
    return value if isinstance(value, dict) else {}


def _folder_config(folder: Path) -> DecoderConfig | None:
    """The config of a ``config.json`` beside the export whose architecture a family knows."""
    config = _json(folder / "config.json")
    if not any(a in FAMILIES for a in config.get("architectures") or []):
        return None
    family = family_of(config, str(folder / "config.json"))
    read = family.config(config, _json(folder / "generation_config.json"))
    architecture = next(a for a in config["architectures"] if a in FAMILIES)
    return attrs.evolve(read, architecture=architecture)


def _genai_model(folder: Path) -> dict[str, Any]:
    """The ``model`` record of ONNX Runtime GenAI's ``genai_config.json`` beside the export, or {}."""
    model = _json(folder / "genai_config.json").get("model")
    return model if isinstance(model, dict) else {}


def _with_genai(graph: DecoderConfig, model: dict[str, Any]) -> DecoderConfig:
    """The graph's config with the type, token ids and context length a ``genai_config.json`` gives."""
    if not model:
        return graph
    bos, pad = token_ids(model.get("bos_token_id")), token_ids(model.get("pad_token_id"))
    return attrs.evolve(graph, architecture=str(model.get("type", graph.architecture)),
                        max_positions=int(model.get("context_length", graph.max_positions)),
                        eos_token_ids=token_ids(model.get("eos_token_id")), bos_token_id=bos[0] if bos else None,
                        pad_token_id=pad[0] if pad else None)


def _past_shapes(graph: onnx.GraphProto) -> dict[str, list[int]]:
    """The past keys and values of ONNX ``Attention`` nodes that are causal with their sequence
    dim fixed at 1: the converter needs a past's length (the causal diagonal starts after it),
    and once ``cache_attention`` has run nothing reads it. Other exports keep theirs unknown
    (their shape arithmetic may read a past's other dims)."""
    pasts = {name for node in graph.node if node.op_type == "Attention" and node.domain in ("", "ai.onnx")
             and any(a.name == "is_causal" and a.i for a in node.attribute) for name in node.input[4:6] if name}
    shapes = {}
    for value in graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim]
        if value.name in pasts and len(dims) == 4:
            shapes[value.name] = [*dims[:2], 1 if dims[2] < 0 else dims[2], dims[3]]
    return shapes


Imported = tuple[Program, list[str], list[str], Scope]
"""``halfway.frontends.onnx.load``'s program, feeds, fetches and scope."""


def _imported(path: str | os.PathLike[str]) -> tuple[Imported, tuple[int, ...]]:
    """The import of the export at ``path``, its merged branches (``merged_decoder``), GenAI
    contrib ops (``genai``) and static caches (``static_cache``) rewritten first, and the sliding
    windows of its GroupQueryAttentions, which the rewritten graph does not hold
    (``genai.attention_windows``)."""
    try:
        header = onnx.load(os.fspath(path), load_external_data=False)
    except (OSError, DecodeError, ValueError):
        return load(path), ()  # the import says what is wrong with the file
    if not any(found(header) for found in (is_merged_decoder, has_contrib_ops, has_static_cache)):
        return load(path, input_shapes=_past_shapes(header.graph)), ()
    source = os.fspath(path)
    try:
        model = lower_static_cache(lower_contrib_ops(take_cache_branch(read_model(path)[0])))
        return load(model, input_shapes=_past_shapes(model.graph)), attention_windows(header)
    except ConversionError as e:
        raise ConversionError(f"{source}: {str(e).removeprefix('<ModelProto>: ')}") from e


def _graph_config(program: Program, layers: int, name: str) -> DecoderConfig:
    """What the program itself says of the decoder."""
    block = program.global_block()
    _, kv_heads, _, head_dim = block.var(cache_names(0)[0]).tensor_shape
    attention = next(op for op in block.ops if op.type == "cached_attention")
    q_heads = block.var(attention.input("Q")[0]).tensor_shape[1]
    vocab = block.var(LOGITS).tensor_shape[-1]
    return DecoderConfig(
        architecture=name, vocab_size=vocab, hidden_size=q_heads * head_dim, layers=layers, heads=q_heads,
        kv_heads=kv_heads, head_dim=head_dim, intermediate_size=-1, norm="", norm_eps=0.0, activation="",
        gated=False, rope=None, max_positions=DEFAULT_MAX_LENGTH, tie_embeddings=False, windows=(0,) * layers,
        eos_token_ids=())


def _check_agrees(config: DecoderConfig, graph: DecoderConfig, source: str) -> None:
    for field in ("layers", "kv_heads", "head_dim", "vocab_size"):
        want, got = getattr(config, field), getattr(graph, field)
        if got >= 0 and want != got:
            raise HalfwayError(f"{source}: the graph has {field} {got}, its config.json {want}")


def _float_type(program: Program, names: list[str]) -> DType:
    """The float type the export computes in: its first float input or output's (the pasts, the logits)."""
    block = program.global_block()
    return next((t for t in (block.var(n).tensor_dtype for n in names) if t.is_floating), DType.float32)


def _passes(computes: DType, wanted: DType, cached: Pass, source: str) -> list[Pass]:
    """The passes after the default pipeline that make the ``wanted`` program of an export that
    ``computes`` in its own float type, ``cached`` (``cache_attention``) last."""
    if wanted is computes:
        return [cached]
    if (computes, wanted) == (DType.float32, DType.float16):
        return [get_pass("float16", keep_io_types=False, drop_unused_params=True), cached]
    raise HalfwayError(f"{source}: the export computes in {computes.name}; it loads as a {computes.name} program"
                       f"{' or a float16 one' if computes is DType.float32 else ''}, not {wanted.name}")


def load_decoder(path: str | os.PathLike[str], *, dtype: DType | str = DType.float32,
                 max_length: int | None = None) -> DecoderProgram:
    """The decoder program of the ONNX export at ``path`` in ``dtype`` (the export's float type,
    or float16 for a float32 export), with caches of ``max_length`` positions (default:
    ``DEFAULT_MAX_LENGTH``, or the config's positions where fewer).

    Raises:
        HalfwayError: an export without present outputs, or whose attention does not read them
            (naming the file and what the pass found); a ``dtype`` the export does not load as;
            a config.json that disagrees with the graph. As ``halfway.frontends.onnx.load``.
    """
    source = os.fspath(path)
    folder_config, genai = _folder_config(Path(path).parent), _genai_model(Path(path).parent)
    positions = folder_config.max_positions if folder_config else int(genai.get("context_length", DEFAULT_MAX_LENGTH))
    length = max_length if max_length is not None else min(DEFAULT_MAX_LENGTH, positions)
    (program, feeds, fetches, scope), windows = _imported(path)
    cached = get_pass("cache_attention", max_length=length, windows=windows)
    after = [*_passes(_float_type(program, feeds + fetches), DType.from_any(dtype), cached, source),
             get_pass("fuse_cached_attention")]
    try:
        result = PassManager(after=after).run(program, scope, fetch=fetches)
    except PassError as e:
        raise HalfwayError(f"{source}: not a decoder with a past/present cache halfway can run: {e}") from e
    program = result.program
    layers = sum(1 for op in program.global_block().ops if op.type == "cached_attention")
    graph = _graph_config(program, layers, Path(path).stem)
    config = folder_config or _with_genai(graph, genai)
    _check_agrees(config, graph, source)
    caches = tuple(cache_names(i) for i in range(layers))
    program_dtype = program.global_block().var(caches[0][0]).tensor_dtype
    values = result.scope if result.scope is not None else scope
    return DecoderProgram(program, values, config, program_dtype, length, caches)
