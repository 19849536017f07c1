"""The tiny Llama of ``tests/fixtures/llm/llama`` as decoder ONNX exports, for the ONNX LLM tests.

    /path/to/torchenv/bin/python scripts/llm_onnx_fixtures.py
    /path/to/torchenv/bin/python scripts/llm_onnx_fixtures.py --checkpoint DIR --out DIR/model.onnx

Run it with a Python that has torch, transformers and onnx (and onnxscript for the dynamo
exporter), after ``scripts/llm_fixtures.py llama``: it loads that checkpoint in float32 and
writes ``tests/fixtures/llm/llama_onnx/`` beside it, whose tokens and logits are the
checkpoint's (``reference.npz`` there):

- ``dynamo.onnx``: ``torch.onnx.export(dynamo=True)`` of the model with its sdpa attention;
- ``torchscript.onnx``: the TorchScript exporter's, with eager attention;

each with transformers' (and optimum's) interface: ``input_ids``, ``attention_mask`` [B, past +
S], ``position_ids`` and ``past_key_values.{i}.key/.value`` [B, kv heads, past, head size] in;
``logits`` and ``present.{i}.key/.value`` out. The folder gets the checkpoint's ``config.json``
and ``generation_config.json``, as an export's folder holds them.

With ``--checkpoint DIR --out FILE`` it writes the dynamo export of any Llama checkpoint folder
instead (``benchmarks/bench_llm.py``'s model), its weights in ``FILE.data`` beside it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path
from typing import Any

import onnx
import torch
import transformers

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "llm" / "llama"
OUT = ROOT / "tests" / "fixtures" / "llm" / "llama_onnx"
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


def _names(layers: int) -> tuple[list[str], list[str]]:
    pairs = [f"{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    return (["input_ids", "attention_mask", "position_ids"] + [f"past_key_values.{p}" for p in pairs],
            ["logits"] + [f"present.{p}" for p in pairs])


def _example(config: Any) -> tuple[torch.Tensor, ...]:
    head = config.hidden_size // config.num_attention_heads
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", type=Path, help="export this Llama checkpoint folder instead")
    parser.add_argument("--out", type=Path, help="where its export goes (with --checkpoint)")
    args = parser.parse_args()
    if args.checkpoint:
        export("sdpa", _dynamo, args.out or args.checkpoint / "model.onnx", args.checkpoint, external=True)
        return
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    for file in ("config.json", "generation_config.json"):
        shutil.copy(SOURCE / file, OUT / file)
    export("sdpa", _dynamo, OUT / "dynamo.onnx")
    export("eager", _torchscript, OUT / "torchscript.onnx")


if __name__ == "__main__":
    main()
