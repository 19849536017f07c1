"""optimum's merged decoders (``decoder_model_merged.onnx``): one ``If`` on the boolean input
``use_cache_branch`` choosing between the decoder without a past (the first step) and the one
with it, both subgraphs reading the weights from the outer graph. halfway's runtime always holds
a cache, so the import takes the with-past branch (``then_branch``), inlined in the If's place
before the import (``halfway.api.llm.onnx_decoder``)::

    use_cache_branch ─ If(then: with past, else: no past) ─ logits, present.*
                          becomes
    past_key_values.*, input_ids, ... ─ the with-past branch's nodes ─ logits, present.*

The branch's outputs are renamed to the If's (or copied to them with an ``Identity`` where the
branch passes an outer value through); its initializers join the graph's; ``use_cache_branch``
is dropped once nothing reads it. A with-past branch that reads none of the graph's
``past_key_values.*`` inputs is a ``ConversionError`` naming the node.
"""

from __future__ import annotations

from onnx import GraphProto, ModelProto, NodeProto, helper

from .context import ConversionError

__all__ = ["is_merged_decoder", "take_cache_branch"]

CONDITION = "use_cache_branch"


def _chooses_branch(node: NodeProto) -> bool:
    return node.op_type == "If" and node.domain in ("", "ai.onnx") and node.input[:1] == [CONDITION]


def is_merged_decoder(model: ModelProto) -> bool:
    """Whether ``model`` has an ``If`` on the graph input ``use_cache_branch``."""
    inputs = {value.name for value in model.graph.input}
    return CONDITION in inputs and any(_chooses_branch(node) for node in model.graph.node)


def _read(graph: GraphProto) -> set[str]:
    """The names ``graph``'s nodes read, their subgraphs' included."""
    names: set[str] = set()
    for node in graph.node:
        names.update(node.input)
        for attribute in node.attribute:
            for sub in [attribute.g, *attribute.graphs]:
                names |= _read(sub)
    return names


def _inlined(node: NodeProto, pasts: set[str]) -> tuple[list[NodeProto], GraphProto]:
    """The with-past branch's nodes, writing the If's outputs, and the branch."""
    branch = next(helper.get_attribute_value(a) for a in node.attribute if a.name == "then_branch")
    if pasts and not pasts & _read(branch):
        raise ConversionError(f"{node.name or 'If'} (If on {CONDITION}): its then_branch reads none of the pasts "
                              f"({', '.join(sorted(pasts))}), so it is not the with-past decoder")
    produced = {name for n in branch.node for name in n.output if name}
    rename = {value.name: out for value, out in zip(branch.output, node.output) if value.name in produced}
    nodes = []
    for original in branch.node:
        copy = NodeProto()
        copy.CopyFrom(original)
        copy.input[:] = [rename.get(name, name) for name in copy.input]
        copy.output[:] = [rename.get(name, name) for name in copy.output]
        nodes.append(copy)
    nodes += [helper.make_node("Identity", [value.name], [out], name=f"{out}.passed")
              for value, out in zip(branch.output, node.output) if value.name not in produced]
    return nodes, branch


def take_cache_branch(model: ModelProto) -> ModelProto:
    """A copy of ``model`` with each If on ``use_cache_branch`` replaced by its with-past branch
    (module docstring)."""
    pasts = {value.name for value in model.graph.input if value.name.startswith("past_key_values.")}
    out = ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    for node in model.graph.node:
        if not _chooses_branch(node):
            out.graph.node.append(node)
            continue
        nodes, branch = _inlined(node, pasts)
        out.graph.node.extend(nodes)
        out.graph.initializer.extend(branch.initializer)
        out.graph.value_info.extend(branch.value_info)
    if CONDITION not in _read(out.graph):
        kept = [value for value in out.graph.input if value.name != CONDITION]
        del out.graph.input[:]
        out.graph.input.extend(kept)
    return out
