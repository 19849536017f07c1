"""The decoder ONNX exports of ``tests/fixtures/llm/llama_onnx`` (made by
``scripts/llm_onnx_fixtures.py`` from the tiny Llama checkpoint, whose reference outputs they
share), and ONNX Runtime's greedy loop over an export's past/present interface.

    path = export("dynamo")                     # dynamo, torchscript, attention23, static_cache, genai, genai_int4
    ids = onnxruntime_greedy(path, prompt, 32)  # the prompt, then 32 tokens
    model = merged(onnx.load(path))             # optimum's decoder_model_merged.onnx of an export
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from .checkpoints import LLM

__all__ = ["ONNX", "EXPORTS", "ONNXRUNTIME_EXPORTS", "export", "int4_reference", "onnxruntime_greedy", "merged"]

ONNX = LLM / "llama_onnx"
EXPORTS = ("dynamo", "torchscript", "attention23", "static_cache", "genai")
ONNXRUNTIME_EXPORTS = EXPORTS[:4]
"""The exports ONNX Runtime runs: its GroupQueryAttention takes head sizes that are multiples of
16, the tiny Llama's are 8."""


def export(name: str) -> Path:
    return ONNX / f"{name}.onnx"


def int4_reference() -> dict[str, np.ndarray]:
    """transformers' tokens and logits with ``genai_int4.onnx``'s dequantized weights."""
    with np.load(ONNX / "genai_int4.npz") as data:
        return dict(data)


def onnxruntime_greedy(path: Path, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy tokens of one prompt through ONNX Runtime, the presents of a step fed back as the
    next step's pasts (the loop ONNX Runtime GenAI runs); a static cache's pasts start as zeros of
    their length, written at ``write_indices``; a merged decoder's first step takes its no-past
    branch (``use_cache_branch`` false), the later ones its with-past branch."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # not the static cache's warning at every scatter
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    pasts = [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    names = {i.name for i in session.get_inputs()}
    feeds = {i.name: np.zeros((1, i.shape[1], i.shape[2] if isinstance(i.shape[2], int) else 0, i.shape[3]),
                              np.float32) for i in pasts}
    ids = np.asarray(prompt, np.int64)[None]
    tokens = list(prompt)
    for _ in range(new_tokens):
        length = len(tokens) - ids.shape[1]
        feeds.update(input_ids=ids, attention_mask=np.ones((1, len(tokens)), np.int64),
                     position_ids=np.arange(length, len(tokens), dtype=np.int64)[None],
                     write_indices=np.array([length]), nonpad_kv_seqlen=np.array([len(tokens)]),
                     use_cache_branch=np.array([length > 0]))
        logits, *presents = session.run(None, {name: value for name, value in feeds.items() if name in names})
        feeds.update({p.name: value for p, value in zip(pasts, presents)})
        tokens.append(int(logits[0, -1].argmax()))
        ids = np.array([[tokens[-1]]], np.int64)
    return np.array(tokens, np.int64)


def _branch(model: onnx.ModelProto, name: str, with_past: bool) -> onnx.GraphProto:
    """The export's nodes as a subgraph reading the weights and inputs from the outer graph, its
    values renamed ``<name>/<branch>`` (a subgraph's names may not shadow the outer graph's);
    without a past, the attentions read none (their presents are the new keys and values)."""
    nodes = []
    for node in model.graph.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        if node.op_type == "Attention" and not with_past:
            del copy.input[4:]
        nodes.append(copy)
    rename = {out: f"{out}/{name}" for node in nodes for out in node.output if out}
    for node in nodes:
        node.input[:] = [rename.get(n, n) for n in node.input]
        node.output[:] = [rename.get(n, n) for n in node.output]
    outputs = [helper.make_tensor_value_info(rename[o.name], o.type.tensor_type.elem_type, None)
               for o in model.graph.output]
    return helper.make_graph(nodes, name, [], outputs)


def merged(model: onnx.ModelProto) -> onnx.ModelProto:
    """optimum's ``decoder_model_merged.onnx`` of a past/present export of ONNX ``Attention`` nodes:
    the weights in the outer graph, and one ``If`` on the input ``use_cache_branch`` between the
    decoder with the past (then) and the one without (else), both real subgraphs."""
    cond = helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])
    node = helper.make_node("If", ["use_cache_branch"], [o.name for o in model.graph.output], name="optimum::if",
                            then_branch=_branch(model, "with_past", True),
                            else_branch=_branch(model, "no_past", False))
    graph = helper.make_graph([node], "merged", [*model.graph.input, cond], list(model.graph.output),
                              list(model.graph.initializer))
    return helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)
