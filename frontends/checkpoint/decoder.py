"""The program a decoder checkpoint becomes: one program for prefill and decode alike, built with
the builder's ops, that reads and appends a key/value cache per layer (``cached_attention``).

Feeds (``FEEDS``), for a batch of B sequences of S new tokens each (S = 1 to decode):

- ``input_ids`` [B, S] int64: the new tokens (a right-padded prompt: each sequence's own length
  lies in the runtime's hands, not the program's);
- ``position_ids`` [B, S] int64: their positions (``past_lengths[b] + i``);
- ``past_lengths`` [B] int64: the positions each sequence's caches hold before this step;
- ``rows`` [R] int64: the tokens whose logits to compute, as indices into the B * S new tokens
  (each sequence's last prompt token to generate, every token for teacher forcing).

Fetch: ``logits`` [R, vocab] float32. The caches are the persistable vars ``cache_names``
[B, kv heads, max length, head size] of the program's dtype; their values are the runtime's
(``halfway.api.llm``), in the scope it prepares the program with. Weights are the checkpoint's in
the program's dtype, norm weights and the rotary tables float32. Tied embeddings are held once,
as the output projection [hidden, vocab] (``HEAD``), whose product by a few rows reads it as it
lies; their lookup gathers its columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from attrs import frozen

from ...ir import layers
from ...ir.builder import append_op, program_guard
from ...ir.dtypes import DType
from ...ir.io import set_feed_fetch
from ...ir.ops.matmul import GATED
from ...ir.program import Program
from ...ir.scope import Scope
from ...ir.variable import Variable
from .config import DecoderConfig
from .rope import rope_tables
from .weights import DecoderWeights, LayerWeights

__all__ = ["DecoderProgram", "build_decoder", "FEEDS", "LOGITS"]

FEEDS = ("input_ids", "position_ids", "past_lengths", "rows")
LOGITS = "logits"
HEAD = "lm_head.weight"
"""The output projection [hidden, vocab]; tied embeddings are its columns."""


@frozen
class DecoderProgram:
    """A built decoder: its program, a scope of its weights, and what the runtime needs to know."""

    program: Program
    scope: Scope
    config: DecoderConfig
    dtype: DType
    max_length: int
    caches: tuple[tuple[str, str], ...]
    """Per layer, the names of its key and value caches."""

    def cache_shape(self, batch: int) -> tuple[int, int, int, int]:
        c = self.config
        return batch, c.kv_heads, self.max_length, c.head_dim


def _op(op_type: str, attrs: dict[str, Any] | None = None, **inputs: Variable) -> Variable:
    """The Out of one ``op_type`` op on ``inputs``."""
    return append_op(op_type, inputs, attrs)["Out"][0]


class _Builder:
    """Appends a decoder's ops to the current program, collecting the parameter values."""

    def __init__(self, config: DecoderConfig, dtype: DType, max_length: int) -> None:
        self.config, self.dtype, self.max_length = config, dtype, max_length
        self.values: dict[str, np.ndarray] = {}
        self.block = Program().global_block()

    def param(self, name: str, value: np.ndarray, dtype: DType | None = None) -> Variable:
        """A persistable var holding ``value`` (in the program's dtype unless ``dtype`` is given)."""
        array = np.ascontiguousarray(value, dtype=(dtype or self.dtype).numpy)
        self.values[name] = array
        return self.block.create_var(name, dtype=dtype or self.dtype, shape=array.shape, persistable=True)

    def linear(self, x: Variable, name: str, weight: np.ndarray, bias: np.ndarray | None) -> Variable:
        out = layers.matmul(x, self.param(f"{name}.weight", weight))
        return out if bias is None else _op("elementwise_add", X=out, Y=self.param(f"{name}.bias", bias))

    def norm(self, x: Variable, name: str, weight: np.ndarray, bias: np.ndarray | None) -> Variable:
        """RMS or layer norm over the last dim; its weights float32."""
        inputs = {"X": x, "Scale": self.param(f"{name}.weight", weight, DType.float32)}
        if bias is not None:
            inputs["Bias"] = self.param(f"{name}.bias", bias, DType.float32)
        attrs = {"begin_norm_axis": len(x.tensor_shape) - 1, "epsilon": self.config.norm_eps}
        return append_op(self.config.norm, inputs, attrs)["Y"][0]

    def activation(self, x: Variable) -> Variable:
        kind = self.config.activation
        if kind == "silu":
            return _op("silu", X=x)
        return _op("gelu", {"approximate": kind == "gelu_tanh"}, X=x)

    def attention(self, x: Variable, i: int, w: LayerWeights, feeds: dict[str, Variable],
                  rope: tuple[Variable, Variable] | None) -> Variable:
        c = self.config
        qkv = self.linear(x, f"layers.{i}.qkv", w.qkv, w.qkv_bias)
        q, k, v = layers.split(qkv, [c.q_size, c.kv_size, c.kv_size], dim=-1)
        if rope is not None:
            assert c.rope is not None
            q, k = (append_op("rotary_embedding", {"X": t, "Cos": rope[0], "Sin": rope[1],
                                                   "PositionIds": feeds["position_ids"]},
                              {"num_heads": heads, "rotary_dim": c.rope.dim})["Out"][0]
                    for t, heads in ((q, c.heads), (k, c.kv_heads)))
        shape = [-1, c.kv_heads, self.max_length, c.head_dim]
        k_cache, v_cache = (self.block.create_var(f"layers.{i}.{kind}_cache", dtype=self.dtype, shape=shape,
                                                  persistable=True) for kind in ("key", "value"))
        out = append_op("cached_attention",
                        {"Q": q, "K": k, "V": v, "KCache": k_cache, "VCache": v_cache, "Past": feeds["past_lengths"]},
                        {"q_num_heads": c.heads, "kv_num_heads": c.kv_heads, "window": c.windows[i]},
                        outputs={"Out": 1, "KCacheOut": [k_cache], "VCacheOut": [v_cache]})["Out"][0]
        return self.linear(out, f"layers.{i}.out", w.out, w.out_bias)

    def mlp(self, x: Variable, i: int, w: LayerWeights) -> Variable:
        if self.config.gated and self.config.activation == "silu":
            hidden = self.gated(x, f"layers.{i}.up", w.up, w.up_bias)
        elif self.config.gated:
            gate, up = layers.split(self.linear(x, f"layers.{i}.up", w.up, w.up_bias), 2, dim=-1)
            hidden = _op("elementwise_mul", X=self.activation(gate), Y=up)
        else:
            hidden = self.activation(self.linear(x, f"layers.{i}.up", w.up, w.up_bias))
        return self.linear(hidden, f"layers.{i}.down", w.down, w.down_bias)

    def gated(self, x: Variable, name: str, weight: np.ndarray, bias: np.ndarray | None) -> Variable:
        """silu(gate) * up of the gate and up projections side by side in ``weight``: one fc gating
        its product's halves (as ``fuse_projections`` makes of an export's two projections)."""
        inputs = {"Input": x, "W": self.param(f"{name}.weight", weight)}
        if bias is not None:
            inputs["Bias"] = self.param(f"{name}.bias", bias)
        attrs = {"in_num_col_dims": len(x.tensor_shape) - 1, "activation_type": GATED}
        return append_op("fc", inputs, attrs)["Out"][0]

    def embeddings(self, weights: DecoderWeights, feeds: dict[str, Variable]) -> Variable:
        ids = feeds["input_ids"]
        if weights.lm_head is None:
            x = self.tied_lookup(ids, self.param(HEAD, weights.embed.T))
        else:
            x = append_op("lookup_table_v2", {"W": self.param("embed", weights.embed), "Ids": ids})["Out"][0]
        if self.config.embed_scale != 1.0:
            x = layers.scale(x, scale=float(np.asarray(self.config.embed_scale, self.dtype.numpy)))
        if weights.positions is not None:
            at = append_op("lookup_table_v2", {"W": self.param("positions", weights.positions),
                                               "Ids": feeds["position_ids"]})["Out"][0]
            x = _op("elementwise_add", X=x, Y=at)
        return x

    def tied_lookup(self, ids: Variable, head: Variable) -> Variable:
        """The embeddings of ``ids`` [B, S] as columns of the output projection ``head`` [H, vocab]
        (tied embeddings are held once, in the layout its product reads fastest), [B, S, H]."""
        columns = append_op("gather", {"X": head, "Index": layers.reshape(ids, [-1])}, {"axis": 1})["Out"][0]
        hidden = self.param("embed.hidden_size", np.array([self.config.hidden_size]), DType.int32)
        shape = layers.concat([layers.shape(ids), hidden])
        return layers.reshape(layers.transpose(columns, [1, 0]), shape)

    def logits(self, x: Variable, weights: DecoderWeights, rows: Variable) -> Variable:
        """The final norm and output projection of the ``rows`` picked from the [B, S, H] states."""
        flat = layers.reshape(x, [-1, self.config.hidden_size])
        picked = append_op("gather", {"X": flat, "Index": rows}, {"axis": 0})["Out"][0]
        h = self.norm(picked, "norm", weights.norm, weights.norm_bias)
        head = self.block.var(HEAD) if weights.lm_head is None else self.param(HEAD, weights.lm_head)
        out = self.block.create_var(LOGITS, dtype=DType.float32, shape=(-1, self.config.vocab_size))
        wide = self.dtype is DType.float32
        logits = append_op("matmul_v2", {"X": h, "Y": head}, outputs={"Out": [out] if wide else 1})["Out"][0]
        if wide:
            return logits
        attrs = {"in_dtype": int(self.dtype), "out_dtype": int(DType.float32)}
        return append_op("cast", {"X": logits}, attrs, outputs={"Out": [out]})["Out"][0]


def build_decoder(config: DecoderConfig, weights: DecoderWeights, *, dtype: DType | str = DType.float32,
                  max_length: int) -> DecoderProgram:
    """The decoder program of ``config`` and ``weights`` in ``dtype`` (float32 or float16), with
    caches of ``max_length`` positions (see the module docstring)."""
    builder = _Builder(config, DType.from_any(dtype), max_length)
    program = builder.block.program
    assert program is not None
    with program_guard(program):
        feeds = {name: layers.data(name, [-1] if name in ("past_lengths", "rows") else [-1, -1], "int64")
                 for name in FEEDS}
        rope = None
        if config.rope is not None:
            cos, sin = rope_tables(config.rope, max_length)
            rope = builder.param("rope.cos", cos, DType.float32), builder.param("rope.sin", sin, DType.float32)
        x = builder.embeddings(weights, feeds)
        for i, w in enumerate(weights.layers):
            h = builder.norm(x, f"layers.{i}.norm1", w.norm1, w.norm1_bias)
            x = _op("elementwise_add", X=x, Y=builder.attention(h, i, w, feeds, rope))
            h = builder.norm(x, f"layers.{i}.norm2", w.norm2, w.norm2_bias)
            x = _op("elementwise_add", X=x, Y=builder.mlp(h, i, w))
        builder.logits(x, weights, feeds["rows"])
    set_feed_fetch(builder.block, list(FEEDS), [LOGITS])
    caches = tuple((f"layers.{i}.key_cache", f"layers.{i}.value_cache") for i in range(config.layers))
    return DecoderProgram(program, Scope(builder.values), config, builder.dtype, max_length, caches)
