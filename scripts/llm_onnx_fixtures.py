"""The tiny Llama of ``tests/fixtures/llm/llama`` as decoder ONNX exports, for the ONNX LLM tests.

    /path/to/torchenv/bin/python scripts/llm_onnx_fixtures.py
    /path/to/torchenv/bin/python scripts/llm_onnx_fixtures.py --checkpoint DIR --out DIR/model.onnx

Run it with a Python that has torch, transformers and onnx (and onnxscript for the dynamo
exporter), after ``scripts/llm_fixtures.py llama``: it loads that checkpoint in float32 and
writes ``tests/fixtures/llm/llama_onnx/`` beside it, whose tokens and logits are the
checkpoint's (``reference.npz`` there):

- ``dynamo.onnx``: ``torch.onnx.export(dynamo=True)`` of the model with its sdpa attention;
- ``torchscript.onnx``: the TorchScript exporter's, with eager attention;
- ``attention23.onnx``: written with onnx.helper at opset 23 from the same weights: ONNX's own
  ``RMSNormalization``, ``RotaryEmbedding`` and causal ``Attention`` with ``past_key`` /
  ``past_value`` (no ``attention_mask`` input: the attention is causal over the past);
- ``static_cache.onnx``: the same at opset 24 over preallocated caches [B, kv heads, 128, head
  size]: ``TensorScatter`` writes the new keys and values at ``write_indices``, ``Attention``
  reads the whole caches under a causal mask of the positions and ``nonpad_kv_seqlen``;
- ``genai.onnx`` and ``genai_int4.onnx``: ONNX Runtime GenAI's model-builder form, written with
  onnx.helper: ``SimplifiedLayerNormalization``, com.microsoft ``SkipSimplifiedLayerNormalization``
  and ``GroupQueryAttention`` (``do_rotary``, ``seqlens_k`` and ``total_sequence_length`` from
  ``attention_mask``), float32 ``MatMul`` weights, or com.microsoft ``MatMulNBits`` of 4-bit
  blocks of 16; ``genai_int4.npz`` holds transformers' greedy tokens (``greedy_<i>`` after
  ``prompt_<i>``, as ``reference.npz``) and logits of the model whose linear weights are those
  blocks' values, which the int4 export must give.

each with transformers' (and optimum's) interface: ``input_ids``, ``attention_mask`` [B, past +
S], ``position_ids`` and ``past_key_values.{i}.key/.value`` [B, kv heads, past, head size] in;
``logits`` and ``present.{i}.key/.value`` out. The folder gets the checkpoint's ``config.json``
and ``generation_config.json``, as an export's folder holds them.

``tests/fixtures/llm/head16_onnx/genai.onnx`` is the GenAI form (float) of another tiny random
Llama, of head size 16 (ONNX Runtime's GroupQueryAttention takes no other on the CPU), without a
config: its reference is ONNX Runtime's. ``tests/fixtures/llm/mistral_onnx/dynamo.onnx`` is the dynamo export of the Mistral fixture, whose
sliding-window layers cut their presents to the window (its tokens: that fixture's reference).

With ``--checkpoint DIR --out FILE`` it writes the dynamo export of any Llama checkpoint folder
instead (``benchmarks/bench_llm.py``'s model), its weights in ``FILE.data`` beside it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
import transformers
from llm_fixtures import PROMPTS
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "llm" / "llama"
OUT = ROOT / "tests" / "fixtures" / "llm" / "llama_onnx"
MISTRAL = ROOT / "tests" / "fixtures" / "llm" / "mistral"
BATCH, NEW, PAST = 2, 3, 4
"""The shapes the exporters trace with (every dim but the heads' is dynamic in the export)."""


class PastPresent(torch.nn.Module):
    """The model with its cache as flat tensors: (ids, mask, positions, *pasts) -> (logits, *presents)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        cache = transformers.DynamicCache(config=self.model.config)
        for i in range(len(past) // 2):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
        return (out.logits, *(t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)))


def _head(config: Any) -> int:
    return int(getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)


def _names(layers: int) -> tuple[list[str], list[str]]:
    pairs = [f"{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    return (["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{p}" for p in pairs],
            ["logits"] + [f"present.{p}" for p in pairs])


def _example(config: Any) -> tuple[torch.Tensor, ...]:
    head = _head(config)
    ids = torch.randint(0, config.vocab_size, (BATCH, NEW))
    mask = torch.ones(BATCH, PAST + NEW, dtype=torch.int64)
    positions = torch.arange(PAST, PAST + NEW)[None].expand(BATCH, NEW)
    past = [torch.randn(BATCH, config.num_key_value_heads, PAST, head) for _ in range(2 * config.num_hidden_layers)]
    return (ids, mask, positions, *past)


def _dynamo(module: PastPresent, example: tuple[torch.Tensor, ...], path: Path, layers: int) -> None:
    batch, new, past, total = (torch.export.Dim(n) for n in ("batch", "sequence", "past", "total"))
    shapes = {"input_ids": {0: batch, 1: new}, "attention_mask": {0: batch, 1: total},
              "position_ids": {0: batch, 1: new}, "past": tuple({0: batch, 2: past} for _ in range(2 * layers))}
    inputs, outputs = _names(layers)
    torch.onnx.export(module, example, str(path), dynamo=True, input_names=inputs, output_names=outputs,
                      dynamic_shapes=shapes, optimize=True)


def _torchscript(module: PastPresent, example: tuple[torch.Tensor, ...], path: Path, layers: int) -> None:
    inputs, outputs = _names(layers)
    axes: dict[str, dict[int, str]] = {"input_ids": {0: "batch", 1: "sequence"},
                                       "attention_mask": {0: "batch", 1: "total"},
                                       "position_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
    axes.update({name: {0: "batch", 2: "past"} for name in inputs[3:]})
    axes.update({name: {0: "batch", 2: "total"} for name in outputs[1:]})
    torch.onnx.export(module, example, str(path), dynamo=False, input_names=inputs, output_names=outputs,
                      dynamic_axes=axes, opset_version=17)


def _compact(path: Path, out: Path, external: bool = False) -> None:
    """The export as one file (its weights in ``out.data`` when ``external``), without doc
    strings, metadata or intermediate value infos."""
    model = onnx.load(str(path))
    del model.graph.value_info[:]
    del model.metadata_props[:]
    for node in model.graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
    onnx.save(model, str(out), save_as_external_data=external, location=f"{out.name}.data")


def export(attention: str, exporter: Any, out: Path, source: Path = SOURCE, external: bool = False) -> None:
    model = transformers.AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32,
                                                              attn_implementation=attention).eval()
    module = PastPresent(model).eval()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "model.onnx"
        exporter(module, _example(model.config), raw, model.config.num_hidden_layers)
        _compact(raw, out, external)
    print(f"{out}: {out.stat().st_size / 1024:.0f} KiB")


class _Graph:
    """Nodes and initializers of a graph being written."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.TensorProto] = []

    def weight(self, name: str, value: np.ndarray) -> str:
        self.weights.append(numpy_helper.from_array(np.ascontiguousarray(value, np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, outputs: int = 1, **attrs: Any) -> list[str]:
        names = [out] if outputs == 1 else [f"{out}.{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, names, name=out, **attrs))
        return names


def _rope_tables(config: Any, positions: int) -> tuple[np.ndarray, np.ndarray]:
    head = _head(config)
    theta = (config.rope_parameters or {}).get("rope_theta", 10000.0)
    inverse = 1.0 / theta ** (np.arange(0, head, 2, dtype=np.float32) / head)
    angles = np.arange(positions, dtype=np.float32)[:, None] * inverse[None]
    return np.cos(angles), np.sin(angles)


Attend = Callable[[_Graph, Any, int, str, str, str], tuple[str, list[str]]]
"""(graph, config, layer, q, k, v) [B, S, heads * D] -> the attention's output and the layer's present
key and value."""


def _attend_past(g: _Graph, config: Any, i: int, q: str, k: str, v: str) -> tuple[str, list[str]]:
    """Causal ``Attention`` over ``past_key`` / ``past_value``, which concatenates them."""
    y, present_k, present_v = g.node("Attention", [q, k, v, "", f"past_key_values.{i}.key",
                                                   f"past_key_values.{i}.value"], f"layers.{i}.attention", 3,
                                     is_causal=1, q_num_heads=config.num_attention_heads,
                                     kv_num_heads=config.num_key_value_heads)
    return y, [present_k, present_v]


def _attend_static(g: _Graph, config: Any, i: int, q: str, k: str, v: str) -> tuple[str, list[str]]:
    """The new keys and values scattered into the preallocated caches at ``write_indices``, and
    ``Attention`` over the whole caches under ``causal_mask``, reading ``nonpad_kv_seqlen`` of them."""
    head = _head(config)

    def split(t: str, heads: int) -> str:
        shape = g.weight(f"{t}.shape", np.array([0, 0, heads, head]))
        g.weights[-1] = numpy_helper.from_array(np.array([0, 0, heads, head], np.int64), shape)
        return g.node("Transpose", [g.node("Reshape", [t, shape], f"{t}.split")[0]], f"{t}.heads", perm=[0, 2, 1, 3])[0]

    q4, k4, v4 = split(q, config.num_attention_heads), split(k, config.num_key_value_heads), split(
        v, config.num_key_value_heads)
    presents = [g.node("TensorScatter", [f"past_key_values.{i}.{kind}", new, "write_indices"], f"{new}.cache",
                       axis=2)[0] for kind, new in (("key", k4), ("value", v4))]
    y = g.node("Attention", [q4, *presents, "causal_mask", "", "", "nonpad_kv_seqlen"], f"layers.{i}.attention")[0]
    merged = g.node("Transpose", [y], f"{y}.moved", perm=[0, 2, 1, 3])[0]
    return g.node("Reshape", [merged, "merge_shape"], f"{y}.merged")[0], presents


def _layer23(g: _Graph, config: Any, weights: dict[str, np.ndarray], i: int, x: str,
             attend: Attend) -> tuple[str, list[str]]:
    """Layer ``i`` on the states ``x``: its output and its present key and value."""
    p, eps = f"model.layers.{i}.", config.rms_norm_eps
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads

    def linear(h: str, name: str) -> str:
        return g.node("MatMul", [h, g.weight(name, weights[name + ".weight"].T)], f"{name}.out")[0]

    h = g.node("RMSNormalization", [x, g.weight(p + "norm1", weights[p + "input_layernorm.weight"])], p + "h1",
               epsilon=eps)[0]
    q, k, v = (linear(h, p + f"self_attn.{n}_proj") for n in "qkv")
    q, k = (g.node("RotaryEmbedding", [t, "rope.cos", "rope.sin", "position_ids"], f"{t}.rotated", num_heads=n)[0]
            for t, n in ((q, heads), (k, kv_heads)))
    y, presents = attend(g, config, i, q, k, v)
    x = g.node("Add", [x, linear(y, p + "self_attn.o_proj")], p + "x1")[0]
    h = g.node("RMSNormalization", [x, g.weight(p + "norm2", weights[p + "post_attention_layernorm.weight"])],
               p + "h2", epsilon=eps)[0]
    gate, up = linear(h, p + "mlp.gate_proj"), linear(h, p + "mlp.up_proj")
    silu = g.node("Mul", [gate, g.node("Sigmoid", [gate], gate + ".sigmoid")[0]], gate + ".silu")[0]
    down = linear(g.node("Mul", [silu, up], p + "mlp.hidden")[0], p + "mlp.down_proj")
    return g.node("Add", [x, down], p + "x2")[0], presents


def quantize4(weight: np.ndarray, block: int = 16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``MatMulNBits``' 4-bit blocks of ``weight`` [N, K]: the packed values [N, K / block,
    block / 2] (uint8, the low nibble first), the scales [N * K / block] and the zero points
    (uint8, two blocks a byte)."""
    n, k = weight.shape
    blocks = weight.reshape(n, k // block, block)
    low, high = blocks.min(axis=2, keepdims=True), blocks.max(axis=2, keepdims=True)
    scale = np.maximum(high - low, 1e-8) / 15
    zero = np.clip(np.round(-low / scale), 0, 15)
    q = np.clip(np.round(blocks / scale + zero), 0, 15).astype(np.uint8)
    packed = q[..., 0::2] | (q[..., 1::2] << 4)
    zeros = zero.reshape(n, -1).astype(np.uint8)
    zeros = np.pad(zeros, ((0, 0), (0, zeros.shape[1] % 2)))
    return packed, scale.reshape(-1).astype(np.float32), (zeros[:, 0::2] | (zeros[:, 1::2] << 4)).reshape(-1)


def _dequantized(weight: np.ndarray, block: int = 16) -> np.ndarray:
    """The values ``quantize4``'s blocks of ``weight`` stand for."""
    packed, scales, zeros = quantize4(weight, block)
    n = weight.shape[0]
    q = np.stack([packed & 15, packed >> 4], axis=-1).reshape(n, -1, block).astype(np.float32)
    zero = np.stack([zeros & 15, zeros >> 4], axis=-1).reshape(n, -1)[:, :q.shape[1], None].astype(np.float32)
    return ((q - zero) * scales.reshape(n, -1, 1)).reshape(weight.shape)


def int4_reference(model: Any) -> dict[str, np.ndarray]:
    """transformers' greedy tokens and logits with the linear weights of ``genai_int4.onnx``."""
    import copy

    quantized = copy.deepcopy(model)
    with torch.no_grad():
        for name, p in quantized.named_parameters():
            if name.endswith("_proj.weight"):
                p.copy_(torch.from_numpy(_dequantized(p.detach().numpy())))
    arrays: dict[str, np.ndarray] = {}
    for i, prompt in enumerate(PROMPTS):
        out = quantized.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=32, min_new_tokens=0)
        arrays[f"prompt_{i}"], arrays[f"greedy_{i}"] = np.array(prompt, np.int64), out[0].numpy().astype(np.int64)
    with torch.no_grad():
        arrays["logits"] = quantized(torch.tensor(arrays["greedy_0"][None])).logits[0].numpy()
    return arrays


def _genai_linear(g: _Graph, h: str, name: str, weight: np.ndarray, int4: bool) -> str:
    if not int4:
        return g.node("MatMul", [h, g.weight(name, weight.T)], f"{name}.out")[0]
    packed, scales, zeros = quantize4(weight)
    g.weights += [numpy_helper.from_array(packed, f"{name}.q"), numpy_helper.from_array(scales, f"{name}.scales"),
                  numpy_helper.from_array(zeros, f"{name}.zeros")]
    n, k = weight.shape
    return g.node("MatMulNBits", [h, f"{name}.q", f"{name}.scales", f"{name}.zeros"], f"{name}.out",
                  domain="com.microsoft", K=k, N=n, bits=4, block_size=16)[0]


def _genai_norm(g: _Graph, x: str, residual: str | None, weight: str, out: str, eps: float) -> tuple[str, str]:
    """The norm of ``x`` (+ ``residual``): its output and the residual sum."""
    if residual is None:
        return g.node("SimplifiedLayerNormalization", [x, weight], out, epsilon=eps, axis=-1)[0], x
    normed, _, _, total = g.node("SkipSimplifiedLayerNormalization", [x, residual, weight], out, 4,
                                 domain="com.microsoft", epsilon=eps)
    return normed, total


def genai(model: Any, int4: bool, positions: int = 128) -> onnx.ModelProto:
    """The model in ONNX Runtime GenAI's form (``genai.onnx`` in the module docstring)."""
    config = model.config
    weights = {name: t.detach().numpy() for name, t in model.state_dict().items()}
    heads, kv_heads, eps = config.num_attention_heads, config.num_key_value_heads, config.rms_norm_eps
    g = _Graph()
    for name, table in zip(("rope.cos", "rope.sin"), _rope_tables(config, positions)):
        g.weight(name, table)
    lengths = g.node("ReduceSum", ["attention_mask", g.weight("axis1", np.array([1]))], "lengths", keepdims=0)[0]
    g.weights[-1] = numpy_helper.from_array(np.array([1], np.int64), "axis1")
    g.weights.append(numpy_helper.from_array(np.array(1, np.int64), "one"))
    seqlens = g.node("Cast", [g.node("Sub", [lengths, "one"], "seqlens64")[0]], "seqlens_k", to=TensorProto.INT32)[0]
    total = g.node("Cast", [g.node("Gather", [g.node("Shape", ["attention_mask"], "mask_shape")[0], "one"],
                                   "total64", axis=0)[0]], "total_sequence_length", to=TensorProto.INT32)[0]
    x = g.node("Gather", [g.weight("embed", weights["model.embed_tokens.weight"]), "input_ids"], "embedded")[0]
    residual: str | None = None
    inputs, outputs = _names(config.num_hidden_layers)
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        h, residual = _genai_norm(g, x, residual, g.weight(p + "norm1", weights[p + "input_layernorm.weight"]),
                                  p + "h1", eps)
        q, k, v = (_genai_linear(g, h, p + f"self_attn.{n}_proj", weights[p + f"self_attn.{n}_proj.weight"], int4)
                   for n in "qkv")
        g.nodes.append(helper.make_node(
            "GroupQueryAttention", [q, k, v, inputs[3 + 2 * i], inputs[4 + 2 * i], seqlens, total, "rope.cos",
                                    "rope.sin"], [p + "attention", outputs[1 + 2 * i], outputs[2 + 2 * i]],
            name=p + "attention", domain="com.microsoft", num_heads=heads, kv_num_heads=kv_heads, do_rotary=1))
        o = _genai_linear(g, p + "attention", p + "self_attn.o_proj", weights[p + "self_attn.o_proj.weight"], int4)
        h, residual = _genai_norm(g, o, residual, g.weight(p + "norm2", weights[p + "post_attention_layernorm.weight"]),
                                  p + "h2", eps)
        gate, up = (_genai_linear(g, h, p + f"mlp.{n}_proj", weights[p + f"mlp.{n}_proj.weight"], int4)
                    for n in ("gate", "up"))
        silu = g.node("Mul", [gate, g.node("Sigmoid", [gate], gate + ".sigmoid")[0]], gate + ".silu")[0]
        x = _genai_linear(g, g.node("Mul", [silu, up], p + "mlp.hidden")[0], p + "mlp.down_proj",
                          weights[p + "mlp.down_proj.weight"], int4)
    h, _ = _genai_norm(g, x, residual, g.weight("norm", weights["model.norm.weight"]), "final", eps)
    g.nodes.append(helper.make_node("MatMul", [h, g.weight("lm_head", weights["lm_head.weight"].T)], ["logits"]))
    head = _head(config)
    kv = ["batch", kv_heads, "past", head]
    graph = helper.make_graph(
        g.nodes, "llama", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
                           helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, kv) for n in inputs[3:]],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", config.vocab_size])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, [*kv[:2], "total", head]) for n in outputs[1:]],
        g.weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])


def _causal_mask(g: _Graph, length: int) -> None:
    """``causal_mask`` [B, 1, S, length]: cache position j is attended by the token at position p
    where j <= p."""
    g.weights.append(numpy_helper.from_array(np.arange(length, dtype=np.int64).reshape(1, 1, 1, length), "cache_slots"))
    g.weights.append(numpy_helper.from_array(np.array([1, 3], np.int64), "mask_axes"))
    g.weights.append(numpy_helper.from_array(np.array([0, 0, -1], np.int64), "merge_shape"))
    positions = g.node("Unsqueeze", ["position_ids", "mask_axes"], "positions4")[0]
    g.node("LessOrEqual", ["cache_slots", positions], "causal_mask")


def head16_model() -> Any:
    """A tiny random Llama of head size 16 (2 query heads, 1 key/value head), seeded."""
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                      max_position_embeddings=128, rms_norm_eps=1e-5, bos_token_id=1,
                                      eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape)
            p.copy_(1.0 + 0.1 * noise if p.ndim == 1 else 0.25 * noise)
    return model


def attention23(model: Any, positions: int = 128, static: bool = False) -> onnx.ModelProto:
    """The model at opset 23 (``attention23.onnx`` in the module docstring), or with ``static`` at
    opset 24 over preallocated caches of ``positions`` (``static_cache.onnx``)."""
    config = model.config
    weights = {name: t.detach().numpy() for name, t in model.state_dict().items()}
    g = _Graph()
    for name, table in zip(("rope.cos", "rope.sin"), _rope_tables(config, positions)):
        g.weight(name, table)
    x = g.node("Gather", [g.weight("embed", weights["model.embed_tokens.weight"]), "input_ids"], "embedded")[0]
    presents = []
    if static:
        _causal_mask(g, positions)
    for i in range(config.num_hidden_layers):
        x, kv = _layer23(g, config, weights, i, x, _attend_static if static else _attend_past)
        presents += kv
    h = g.node("RMSNormalization", [x, g.weight("norm", weights["model.norm.weight"])], "final",
               epsilon=config.rms_norm_eps)[0]
    g.nodes.append(helper.make_node("MatMul", [h, g.weight("lm_head", weights["lm_head.weight"].T)], ["logits"]))
    inputs, outputs = _names(config.num_hidden_layers)
    head = _head(config)
    kv = ["batch", config.num_key_value_heads, positions if static else "past", head]
    lengths = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch"])
               for n in ("write_indices", "nonpad_kv_seqlen")] if static else []
    graph = helper.make_graph(
        g.nodes, "llama", [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
                           for n in ("input_ids", "position_ids")] + lengths
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, kv) for n in inputs[3:]],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", config.vocab_size])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, [*kv[:2], kv[2] if static else "total", head])
           for n in outputs[1:]],
        g.weights)
    # the nodes writing the presents write the graph's outputs
    renames = dict(zip(presents, outputs[1:]))
    for node in graph.node:
        node.input[:] = [renames.get(o, o) for o in node.input]
        node.output[:] = [renames.get(o, o) for o in node.output]
    model_proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24 if static else 23)])
    onnx.checker.check_model(model_proto, full_check=True)
    return model_proto


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="export this Llama checkpoint folder instead")
    parser.add_argument("--out", type=Path, help="where its export goes (with --checkpoint)")
    args = parser.parse_args()
    if args.checkpoint:
        export("sdpa", _dynamo, args.out or args.checkpoint / "model.onnx", args.checkpoint, external=True)
        return
    for source, out in ((SOURCE, OUT), (MISTRAL, OUT.with_name("mistral_onnx"))):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for file in ("config.json", "generation_config.json"):
            shutil.copy(source / file, out / file)
    export("sdpa", _dynamo, OUT.with_name("mistral_onnx") / "dynamo.onnx", MISTRAL)
    export("sdpa", _dynamo, OUT / "dynamo.onnx")
    export("eager", _torchscript, OUT / "torchscript.onnx")
    model = transformers.AutoModelForCausalLM.from_pretrained(SOURCE, dtype=torch.float32).eval()
    onnx.save(attention23(model), str(OUT / "attention23.onnx"))
    print(f"attention23.onnx: {(OUT / 'attention23.onnx').stat().st_size / 1024:.0f} KiB")
    onnx.save(attention23(model, static=True), str(OUT / "static_cache.onnx"))
    for name, int4 in (("genai.onnx", False), ("genai_int4.onnx", True)):
        onnx.save(genai(model, int4), str(OUT / name))
        print(f"{name}: {(OUT / name).stat().st_size / 1024:.0f} KiB")
    np.savez_compressed(OUT / "genai_int4.npz", **int4_reference(model))
    head16 = OUT.with_name("head16_onnx")
    shutil.rmtree(head16, ignore_errors=True)
    head16.mkdir()
    onnx.save(genai(head16_model(), False), str(head16 / "genai.onnx"))


if __name__ == "__main__":
    main()
