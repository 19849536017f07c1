"""The decoder families the checkpoint builder knows, by the architecture ``config.json`` names:
how each reads its config into a ``DecoderConfig`` and where its tensors lie.

- Llama, Mistral, Qwen2: ``model.layers.N.self_attn.{q,k,v,o}_proj``, a SwiGLU MLP
  (``mlp.{gate,up,down}_proj``), RMS norms; Qwen2's query, key and value projections have biases,
  Mistral's layers attend within a sliding window;
- Gemma: Llama's tensors, norms scaling by ``1 + weight``, embeddings scaled by the square root of
  the hidden size, a GeGLU MLP (gelu's tanh form), the embeddings tied to the output;
- Phi-3: Llama's blocks with the projections fused (``qkv_proj``, ``gate_up_proj``);
- GPT-2: ``transformer.h.N``, layer norms with biases, one ``c_attn`` product ([in, out] already),
  a plain gelu MLP, learned positions, multi-head attention.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from attrs import frozen

from .config import ACTIVATIONS, DecoderConfig, Rope, read_int, token_ids
from .files import CONFIG, CheckpointError, CheckpointFiles
from .weights import DecoderWeights, LayerWeights, bias, linear

__all__ = ["Family", "FAMILIES", "family_of"]

ConfigReader = Callable[[Mapping[str, Any], Mapping[str, Any]], DecoderConfig]
WeightReader = Callable[[CheckpointFiles, DecoderConfig], DecoderWeights]


@frozen
class Family:
    """A family: its config reader (config, generation config) and its weight reader."""

    name: str
    config: ConfigReader
    weights: WeightReader


# -- configs ------------------------------------------------------------------------------------
def _activation(config: Mapping[str, Any], *keys: str) -> str:
    name = next((config[k] for k in keys if config.get(k)), None)
    if name not in ACTIVATIONS:
        raise CheckpointError(f"{CONFIG}: activation {name!r} ({' or '.join(keys)}) is not one the builder makes "
                              f"(known: {', '.join(ACTIVATIONS)})")
    return ACTIVATIONS[name]


def _rope(config: Mapping[str, Any], head_dim: int) -> Rope:
    """The rotary embedding from v5's ``rope_parameters`` or v4's ``rope_theta``/``rope_scaling``."""
    parameters = dict(config.get("rope_parameters") or {})
    scaling = dict(config.get("rope_scaling") or {}) or parameters
    theta = parameters.get("rope_theta", config.get("rope_theta", 10000.0))
    partial = parameters.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    dim = int(head_dim * partial)
    return Rope(float(theta), dim - dim % 2, scaling)


def _windows(config: Mapping[str, Any], layers: int) -> tuple[int, ...]:
    """Each layer's sliding window: from ``layer_types`` where the config lists them, else
    ``sliding_window`` for every layer (Qwen2's from ``max_window_layers`` on, and only with
    ``use_sliding_window``)."""
    window = config.get("sliding_window") or 0
    if not window or config.get("use_sliding_window") is False:
        return (0,) * layers
    types = config.get("layer_types")
    if types:
        return tuple(window if kind == "sliding_attention" else 0 for kind in types)
    first = config.get("max_window_layers", 0) if "use_sliding_window" in config else 0
    return tuple(window if i >= first else 0 for i in range(layers))


def _generation(config: Mapping[str, Any], generation: Mapping[str, Any]) -> dict[str, Any]:
    """The token ids: the generation config's over the model config's."""
    def pick(key: str) -> Any:
        return generation.get(key) if generation.get(key) is not None else config.get(key)

    pad = token_ids(pick("pad_token_id"))
    bos = token_ids(pick("bos_token_id"))
    return {"eos_token_ids": token_ids(pick("eos_token_id")), "bos_token_id": bos[0] if bos else None,
            "pad_token_id": pad[0] if pad else None}


def _llama_config(config: Mapping[str, Any], generation: Mapping[str, Any], *, tie: bool = False,
                  gemma: bool = False) -> DecoderConfig:
    hidden, heads = read_int(config, "hidden_size"), read_int(config, "num_attention_heads")
    head_dim = read_int(config, "head_dim", default=hidden // heads)
    layers = read_int(config, "num_hidden_layers")
    return DecoderConfig(
        architecture="", vocab_size=read_int(config, "vocab_size"), hidden_size=hidden,
        layers=layers, heads=heads, kv_heads=read_int(config, "num_key_value_heads", default=heads),
        head_dim=head_dim, intermediate_size=read_int(config, "intermediate_size"), norm="rms_norm",
        norm_eps=float(config.get("rms_norm_eps", 1e-6)),
        activation=_activation(config, "hidden_activation", "hidden_act") if gemma else _activation(config, "hidden_act"),
        gated=True, rope=_rope(config, head_dim), max_positions=read_int(config, "max_position_embeddings"),
        tie_embeddings=bool(config.get("tie_word_embeddings", tie)), windows=_windows(config, layers),
        norm_offset=1.0 if gemma else 0.0, embed_scale=math.sqrt(hidden) if gemma else 1.0,
        **_generation(config, generation))


def _gpt2_config(config: Mapping[str, Any], generation: Mapping[str, Any]) -> DecoderConfig:
    if config.get("scale_attn_by_inverse_layer_idx") or config.get("scale_attn_weights") is False:
        raise CheckpointError(f"{CONFIG}: GPT-2's scale_attn_by_inverse_layer_idx and unscaled attention are not "
                              f"built")
    hidden, heads = read_int(config, "n_embd", "hidden_size"), read_int(config, "n_head", "num_attention_heads")
    layers = read_int(config, "n_layer", "num_hidden_layers")
    return DecoderConfig(
        architecture="", vocab_size=read_int(config, "vocab_size"), hidden_size=hidden,
        layers=layers, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        intermediate_size=read_int(config, "n_inner", default=4 * hidden), norm="layer_norm",
        norm_eps=float(config.get("layer_norm_epsilon", 1e-5)), activation=_activation(config, "activation_function"),
        gated=False, rope=None, max_positions=read_int(config, "n_positions", "max_position_embeddings"),
        tie_embeddings=bool(config.get("tie_word_embeddings", True)), windows=(0,) * layers,
        **_generation(config, generation))


# -- weights ------------------------------------------------------------------------------------
def _lm_head(files: CheckpointFiles, config: DecoderConfig) -> np.ndarray | None:
    if config.tie_embeddings:
        return None
    return linear(files, "lm_head", config.vocab_size, config.hidden_size)


def _llama_weights(files: CheckpointFiles, config: DecoderConfig, *, qkv_bias: bool, out_bias: bool,
                   mlp_bias: bool, fused: bool) -> DecoderWeights:
    hidden, inner, offset = config.hidden_size, config.intermediate_size, config.norm_offset
    q, kv = config.q_size, config.kv_size
    layers = []
    for i in range(config.layers):
        p = f"model.layers.{i}."
        attn, mlp = p + "self_attn.", p + "mlp."
        if fused:
            qkv, up = linear(files, attn + "qkv_proj", q + 2 * kv, hidden), linear(files, mlp + "gate_up_proj",
                                                                                     2 * inner, hidden)
        else:
            qkv = np.concatenate([linear(files, attn + f"{x}_proj", size, hidden)
                                  for x, size in (("q", q), ("k", kv), ("v", kv))], axis=1)
            up = np.concatenate([linear(files, mlp + f"{x}_proj", inner, hidden) for x in ("gate", "up")], axis=1)
        layers.append(LayerWeights(
            norm1=files.tensor(p + "input_layernorm.weight", (hidden,)) + offset, qkv=qkv,
            out=linear(files, attn + "o_proj", hidden, q),
            norm2=files.tensor(p + "post_attention_layernorm.weight", (hidden,)) + offset, up=up,
            down=linear(files, mlp + "down_proj", hidden, inner),
            qkv_bias=np.concatenate([bias(files, attn + f"{x}_proj", size) for x, size in
                                     (("q", q), ("k", kv), ("v", kv))]) if qkv_bias else None,
            out_bias=bias(files, attn + "o_proj", hidden) if out_bias else None,
            up_bias=np.concatenate([bias(files, mlp + f"{x}_proj", inner) for x in ("gate", "up")]) if mlp_bias
            else None,
            down_bias=bias(files, mlp + "down_proj", hidden) if mlp_bias else None))
    return DecoderWeights(embed=files.tensor("model.embed_tokens.weight", (config.vocab_size, hidden)),
                          layers=layers, norm=files.tensor("model.norm.weight", (hidden,)) + offset,
                          lm_head=_lm_head(files, config))


def _llama(files: CheckpointFiles, config: DecoderConfig) -> DecoderWeights:
    raw = files.config
    return _llama_weights(files, config, qkv_bias=bool(raw.get("attention_bias")),
                          out_bias=bool(raw.get("attention_bias")), mlp_bias=bool(raw.get("mlp_bias")), fused=False)


def _qwen2(files: CheckpointFiles, config: DecoderConfig) -> DecoderWeights:
    return _llama_weights(files, config, qkv_bias=True, out_bias=False, mlp_bias=False, fused=False)


def _phi3(files: CheckpointFiles, config: DecoderConfig) -> DecoderWeights:
    return _llama_weights(files, config, qkv_bias=False, out_bias=False, mlp_bias=False, fused=True)


def _gpt2(files: CheckpointFiles, config: DecoderConfig) -> DecoderWeights:
    prefix = "transformer." if files.has("transformer.wte.weight") else ""
    hidden, inner = config.hidden_size, config.intermediate_size

    def conv1d(name: str, inputs: int, out: int) -> tuple[np.ndarray, np.ndarray]:
        """GPT-2's ``Conv1D``: a weight stored [in, out] and its bias."""
        return files.tensor(f"{name}.weight", (inputs, out)), bias(files, name, out)

    layers = []
    for i in range(config.layers):
        p = f"{prefix}h.{i}."
        (qkv, qkv_b), (out, out_b) = conv1d(p + "attn.c_attn", hidden, 3 * hidden), conv1d(p + "attn.c_proj", hidden,
                                                                                              hidden)
        (up, up_b), (down, down_b) = conv1d(p + "mlp.c_fc", hidden, inner), conv1d(p + "mlp.c_proj", inner, hidden)
        layers.append(LayerWeights(
            norm1=files.tensor(p + "ln_1.weight", (hidden,)), norm1_bias=bias(files, p + "ln_1", hidden),
            qkv=qkv, qkv_bias=qkv_b, out=out, out_bias=out_b,
            norm2=files.tensor(p + "ln_2.weight", (hidden,)), norm2_bias=bias(files, p + "ln_2", hidden),
            up=up, up_bias=up_b, down=down, down_bias=down_b))
    return DecoderWeights(embed=files.tensor(prefix + "wte.weight", (config.vocab_size, hidden)), layers=layers,
                          norm=files.tensor(prefix + "ln_f.weight", (hidden,)),
                          norm_bias=bias(files, prefix + "ln_f", hidden), lm_head=_lm_head(files, config),
                          positions=files.tensor(prefix + "wpe.weight", (config.max_positions, hidden)))


def _gemma_config(config: Mapping[str, Any], generation: Mapping[str, Any]) -> DecoderConfig:
    return _llama_config(config, generation, tie=True, gemma=True)


FAMILIES: dict[str, Family] = {
    "LlamaForCausalLM": Family("llama", _llama_config, _llama),
    "MistralForCausalLM": Family("mistral", _llama_config, _llama),
    "Qwen2ForCausalLM": Family("qwen2", _llama_config, _qwen2),
    "GemmaForCausalLM": Family("gemma", _gemma_config, _llama),
    "Phi3ForCausalLM": Family("phi3", _llama_config, _phi3),
    "GPT2LMHeadModel": Family("gpt2", _gpt2_config, _gpt2),
}
"""Architecture (``config.json``'s ``architectures[0]``) -> its family."""


def family_of(config: Mapping[str, Any], where: str) -> Family:
    """The family of the architecture ``config`` names (CheckpointError naming ``where`` and the
    known architectures when the builder knows none of it)."""
    names = config.get("architectures") or []
    for name in names:
        if name in FAMILIES:
            return FAMILIES[name]
    what = f"architecture {', '.join(map(str, names))}" if names else "no architectures entry"
    raise CheckpointError(f"{where}: {what}; the checkpoint builder knows {', '.join(FAMILIES)}")
