"""Write the transformer demo model shipped with halfway: api/data/demo_bert.onnx.

A BERT-style encoder (Devlin et al. 2018) with a sequence classifier: word and position
embeddings and a layer norm, four post-norm layers (hidden 128, 4 heads of 32, a GELU MLP of
512), BERT's pooler (the first token's state, dense, tanh) and a 4-way classifier. Its inputs are
int64 ``input_ids`` and ``attention_mask`` [batch, sequence] with symbolic dims; its outputs are
``logits`` [batch, 4] and ``last_hidden_state`` [batch, sequence, 128]. About 1.1 M parameters.

The graph is written as PyTorch's exporter writes ``transformers``' BertForSequenceClassification
at opset 17: LayerNormalization, GELU as ``x * 0.5 * (1 + erf(x / sqrt(2)))``, linear layers as
MatMul + Add, the padding mask as ``(1 - mask[:, None, None, :]) * float32.min`` added to the
scores, heads split by a Reshape to ``x.size()[:-1] + (4, 32)`` and a Transpose (keys transposed
straight to [batch, heads, 32, sequence]), scores divided by sqrt(32), and heads merged back by a
Reshape to ``x.size()[:-2] + (128,)``. halfway's default passes fuse it into layer_norm, fc, gelu
and scaled_dot_product_attention ops.

The weights are seeded, not trained, and scaled so activations look like a trained model's:
layer norms see unit-scale inputs, the query and key projections are scaled so the attention
scores spread over a few units (attention picks tokens rather than averaging them all), and the
classifier's logits spread over a few units. Everything is numpy: no measurement, so the file
is byte-identical from run to run and machine to machine.

Run from the repository root (needs onnx):
    .venv/bin/python scripts/make_demo_bert.py [--out api/data/demo_bert.onnx]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB = 2048
MAX_POSITIONS = 512
HIDDEN = 128
HEADS = 4
LAYERS = 4
INTERMEDIATE = 512
CLASSES = 4
SEED = 0
OPSET = 17
EPSILON = 1e-12
QK_GAIN = 1.3
"""Query and key weights' std over the unit scale: scores of std QK_GAIN**2 after the 1/sqrt(32)."""
LOGIT_STD = 3.0
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "api" / "data" / "demo_bert.onnx"


class _Graph:
    """Collects nodes and initializers, naming them as PyTorch's exporter names a module's."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.rng = rng

    def node(self, op_type: str, inputs: list[str], name: str, **attrs: object) -> str:
        """Append ``op_type`` named ``name``; returns its output, ``{name}_output_0``."""
        self.nodes.append(helper.make_node(op_type, inputs, [f"{name}_output_0"], name=name, **attrs))
        return f"{name}_output_0"

    def const(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def normal(self, name: str, shape: tuple[int, ...], std: float) -> str:
        return self.const(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def linear(self, x: str, module: str, cin: int, cout: int, gain: float = 1.0) -> str:
        """``x @ W + b``, W [cin, cout] of std gain / sqrt(cin) (the exporter transposes nn.Linear's)."""
        w = self.normal(f"{module}.weight", (cin, cout), gain / np.sqrt(cin))
        b = self.normal(f"{module}.bias", (cout,), 0.02)
        y = self.node("MatMul", [x, w], f"/{module}/MatMul")
        return self.node("Add", [b, y], f"/{module}/Add")

    def layer_norm(self, x: str, module: str) -> str:
        gamma = self.const(f"{module}.weight", self.rng.uniform(0.8, 1.2, HIDDEN).astype(np.float32))
        beta = self.normal(f"{module}.bias", (HIDDEN,), 0.05)
        return self.node("LayerNormalization", [x, gamma, beta], f"/{module}/LayerNormalization", axis=-1,
                         epsilon=EPSILON)

    def reshape_tail(self, x: str, scope: str, keep: int, tail: list[int]) -> str:
        """``x.view(x.size()[:keep] + tail)``: Shape, Slice, Concat, Reshape."""
        shape = self.node("Shape", [x], f"{scope}/Shape")
        bounds = [self.const(f"{scope}/{n}", np.array([v], np.int64)) for n, v in
                  (("starts", 0), ("ends", keep), ("axes", 0))]
        head = self.node("Slice", [shape, *bounds], f"{scope}/Slice")
        target = self.node("Concat", [head, self.const(f"{scope}/tail", np.array(tail, np.int64))],
                           f"{scope}/Concat", axis=0)
        return self.node("Reshape", [x, target], f"{scope}/Reshape")

    def scalar(self, name: str, value: float) -> str:
        return self.const(name, np.array(value, np.float32))


def _embeddings(g: _Graph) -> str:
    """Word and position embeddings, summed and normalized: [batch, sequence, HIDDEN]."""
    words = g.normal("bert.embeddings.word_embeddings.weight", (VOCAB, HIDDEN), 1.0)
    positions = g.normal("bert.embeddings.position_embeddings.weight", (MAX_POSITIONS, HIDDEN), 0.5)
    ids = g.const("bert.embeddings.position_ids", np.arange(MAX_POSITIONS, dtype=np.int64)[None])
    shape = g.node("Shape", ["input_ids"], "/bert/embeddings/Shape")
    length = g.node("Gather", [shape, g.const("/bert/embeddings/one", np.array(1, np.int64))],
                    "/bert/embeddings/Gather", axis=0)
    end = g.node("Unsqueeze", [length, g.const("/bert/embeddings/axes", np.array([0], np.int64))],
                 "/bert/embeddings/Unsqueeze")
    zero, one = (g.const(f"/bert/embeddings/{n}_1d", np.array([v], np.int64)) for n, v in (("zero", 0), ("one", 1)))
    position_ids = g.node("Slice", [ids, zero, end, one], "/bert/embeddings/Slice")
    summed = g.node("Add", [g.node("Gather", [words, "input_ids"], "/bert/embeddings/word_embeddings/Gather"),
                            g.node("Gather", [positions, position_ids], "/bert/embeddings/position_embeddings/Gather")],
                    "/bert/embeddings/Add")
    return g.layer_norm(summed, "bert.embeddings.LayerNorm")


def _mask(g: _Graph) -> str:
    """BERT's extended attention mask: 0 where attended, float32's min where padded, [batch, 1, 1, sequence]."""
    axes = g.const("/bert/mask_axes", np.array([1, 2], np.int64))
    mask = g.node("Cast", [g.node("Unsqueeze", ["attention_mask", axes], "/bert/Unsqueeze")], "/bert/Cast",
                  to=TensorProto.FLOAT)
    inverted = g.node("Sub", [g.scalar("/bert/one", 1.0), mask], "/bert/Sub")
    return g.node("Mul", [inverted, g.scalar("/bert/min", float(np.finfo(np.float32).min))], "/bert/Mul")


def _attention(g: _Graph, x: str, mask: str, layer: str) -> str:
    """Multi-head self-attention, its output projection, the residual add and layer norm."""
    scope = f"/{layer}/attention/self"
    heads = [HEADS, HIDDEN // HEADS]
    q, k, v = (g.reshape_tail(g.linear(x, f"{layer}.attention.self.{n}", HIDDEN, HIDDEN, gain), f"{scope}/{n}",
                              -1, heads)
               for n, gain in (("query", QK_GAIN), ("key", QK_GAIN), ("value", 1.0)))
    q = g.node("Transpose", [q], f"{scope}/Transpose", perm=[0, 2, 1, 3])
    k = g.node("Transpose", [k], f"{scope}/Transpose_1", perm=[0, 2, 3, 1])
    v = g.node("Transpose", [v], f"{scope}/Transpose_2", perm=[0, 2, 1, 3])
    scores = g.node("Div", [g.node("MatMul", [q, k], f"{scope}/MatMul"),
                            g.scalar(f"{scope}/sqrt_head_size", float(np.sqrt(HIDDEN // HEADS)))], f"{scope}/Div")
    probs = g.node("Softmax", [g.node("Add", [scores, mask], f"{scope}/Add")], f"{scope}/Softmax", axis=-1)
    context = g.node("Transpose", [g.node("MatMul", [probs, v], f"{scope}/MatMul_1")], f"{scope}/Transpose_3",
                     perm=[0, 2, 1, 3])
    merged = g.reshape_tail(context, f"{scope}/merge", -2, [HIDDEN])
    out = g.linear(merged, f"{layer}.attention.output.dense", HIDDEN, HIDDEN)
    residual = g.node("Add", [out, x], f"/{layer}/attention/output/Add")
    return g.layer_norm(residual, f"{layer}.attention.output.LayerNorm")


def _mlp(g: _Graph, x: str, layer: str) -> str:
    """The GELU MLP (erf form, as ``transformers``' GELUActivation exports), residual add and layer norm."""
    scope = f"/{layer}/intermediate/intermediate_act_fn"
    h = g.linear(x, f"{layer}.intermediate.dense", HIDDEN, INTERMEDIATE)
    erf = g.node("Erf", [g.node("Div", [h, g.scalar(f"{scope}/sqrt2", float(np.sqrt(2.0)))], f"{scope}/Div")],
                 f"{scope}/Erf")
    gate = g.node("Add", [erf, g.scalar(f"{scope}/one", 1.0)], f"{scope}/Add")
    act = g.node("Mul", [g.node("Mul", [h, gate], f"{scope}/Mul"), g.scalar(f"{scope}/half", 0.5)], f"{scope}/Mul_1")
    out = g.linear(act, f"{layer}.output.dense", INTERMEDIATE, HIDDEN, gain=0.7)
    return g.layer_norm(g.node("Add", [out, x], f"/{layer}/output/Add"), f"{layer}.output.LayerNorm")


def _classifier(g: _Graph, hidden: str) -> str:
    """BERT's pooler (the first token's state, dense, tanh) and a linear classifier: [batch, CLASSES]."""
    first = g.node("Gather", [hidden, g.const("/bert/pooler/first", np.array(0, np.int64))], "/bert/pooler/Gather",
                   axis=1)
    pooled = g.node("Tanh", [g.linear(first, "bert.pooler.dense", HIDDEN, HIDDEN)], "/bert/pooler/activation/Tanh")
    return g.linear(pooled, "classifier", HIDDEN, CLASSES, gain=LOGIT_STD)


def _rename(nodes: list[onnx.NodeProto], names: dict[str, str]) -> None:
    """Give the graph's outputs their names, as the exporter does (in place)."""
    for node in nodes:
        for slots in (node.input, node.output):
            slots[:] = [names.get(name, name) for name in slots]


def build(rng: np.random.Generator) -> onnx.ModelProto:
    g = _Graph(rng)
    hidden, mask = _embeddings(g), _mask(g)
    for i in range(LAYERS):
        hidden = _mlp(g, _attention(g, hidden, mask, f"bert.encoder.layer.{i}"), f"bert.encoder.layer.{i}")
    _rename(g.nodes, {_classifier(g, hidden): "logits", hidden: "last_hidden_state"})
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes, "demo_bert",
        [helper.make_tensor_value_info(name, TensorProto.INT64, dims) for name in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES]),
         helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, HIDDEN])],
        g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="halfway scripts/make_demo_bert.py", ir_version=8)
    model.doc_string = "A 4-layer BERT-style encoder and classifier with seeded weights (halfway's demo transformer)"
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the .onnx file")
    args = parser.parse_args()
    model = build(np.random.default_rng(SEED))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(model.SerializeToString())
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"wrote {args.out}: {len(model.graph.node)} nodes, {params} parameters, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
