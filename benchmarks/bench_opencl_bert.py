"""BERT-base on halfway's OpenCL backend beside PyTorch on the same GPU, in one run.

The model is ``transformers``' BertModel with BERT-base's shape (12 layers, hidden 768, 12 heads,
MLP 3072), randomly initialised with a fixed seed, sdpa attention. PyTorch exports it to ONNX
(symbolic batch and sequence); halfway imports that file once, runs its default pass pipeline
(attention, layer_norm, GELU and fc fusions) and, for float16, ``halfway.float16_transpile``,
then prepares it on OpenCL for each batch size.

Rows, at sequence 128, batch 1 and 32, float32 and float16 (all tokens attended):

* halfway: ``PreparedProgram.run`` from host arrays (input_ids, attention_mask) to the host
  pooler output ([batch, 768]): uploads, every kernel, the read-back;
* PyTorch eager: ``model(ids, mask)`` on GPU tensors, synchronised (float16: ``model.half()``);
* PyTorch with a CUDA graph: the same call captured once and replayed.

Latency is the median of ``--runs`` calls after warm-up. The error column is the largest
difference of halfway's pooler output from PyTorch's float32 one over its largest magnitude. The
device memory column is what preparing took from the GPU (free memory before and after, as
``torch.cuda.mem_get_info`` reads it): parameters, activations and kernels' buffers.

    python benchmarks/bench_opencl_bert.py [--batches 1,32] [--sequence 128] [--runs 20] [--json OUT]
"""

from __future__ import annotations

import argparse
import copy
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from results import Results, add_json_option
from torch_peers import eager_and_graph_ms, median_ms

import halfway
from halfway.executor import Executor, OpenCLPlace
from halfway.passes import PassManager

HIDDEN, LAYERS, HEADS, MLP, VOCAB = 768, 12, 12, 3072, 30522


def _bert() -> Any:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                        intermediate_size=MLP, vocab_size=VOCAB, attn_implementation="sdpa")
    return BertModel(config).eval()


def _export(model: Any, path: Path) -> None:
    """TorchScript exporter at opset 17 with symbolic batch and sequence (the dynamo exporter where
    this PyTorch has no other)."""
    import torch

    ids = torch.ones(2, 16, dtype=torch.int64)
    args = (ids, torch.ones_like(ids))
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
            "pooler_output": {0: "batch"}}
    options = dict(input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state", "pooler_output"],
                   opset_version=17)
    try:
        torch.onnx.export(model, args, str(path), dynamic_axes=axes, dynamo=False, **options)
    except Exception:  # noqa: BLE001  (no TorchScript exporter in this PyTorch)
        batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
        shapes = {"input_ids": {0: batch, 1: sequence}, "attention_mask": {0: batch, 1: sequence}}
        torch.onnx.export(model, args, str(path), dynamic_shapes=shapes, dynamo=True, **options)


def _torch_rows(model: Any, ids: Any, mask: Any, runs: int) -> tuple[float, float, np.ndarray]:
    """Eager and CUDA-graph latencies (ms) and the pooler output."""
    import torch

    eager, graph = eager_and_graph_ms(lambda: model(ids, attention_mask=mask), runs)
    with torch.inference_mode():
        out = model(ids, attention_mask=mask).pooler_output.float().cpu().numpy()
    return eager, graph, out


def _halfway_row(program: Any, scope: Any, feeds: dict[str, np.ndarray], fetch: str, place: OpenCLPlace,
                 runs: int) -> tuple[float, np.ndarray, int]:
    import torch

    torch.cuda.synchronize()
    free_before = torch.cuda.mem_get_info()[0]
    prepared = Executor(place).prepare(program, {n: v.shape for n, v in feeds.items()}, [fetch], scope)
    out = prepared.run(feeds)[0]
    taken = free_before - torch.cuda.mem_get_info()[0]
    latency = median_ms(lambda: prepared.run(feeds), runs)
    if prepared.report.fallbacks:
        print(prepared.report.summary())
    return latency, out, taken


def _error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--sequence", type=int, default=128)
    parser.add_argument("--runs", type=int, default=20)
    add_json_option(parser)
    args = parser.parse_args()
    results = Results("bench_opencl_bert", args.json)
    import torch

    torch.backends.cudnn.benchmark = True
    model = _bert()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bert.onnx"
        _export(model, path)
        program, feed_names, fetch_names, scope = halfway.load(str(path))
    fused = PassManager().run(program, scope, fetch=fetch_names)
    counts = {kind: sum(op.type == kind for op in fused.program.global_block().ops)
              for kind in ("scaled_dot_product_attention", "layer_norm", "gelu", "fc")}
    print(f"BERT-base, {len(program.global_block().ops)} ops imported, {len(fused.program.global_block().ops)} "
          f"after the passes ({', '.join(f'{k} {v}' for k, v in counts.items())})")
    half, _ = halfway.float16_transpile(fused.program, fused.scope)
    place = OpenCLPlace()
    results.opencl_device = place.runtime.caps.name
    models = {"float32": model.cuda(), "float16": copy.deepcopy(model).half()}
    warm = np.ones((1, 8), np.int64)
    for prog in (fused.program, half):  # the OpenCL context and the kernels' builds, outside the measures
        _halfway_row(prog, fused.scope, {"input_ids": warm, "attention_mask": warm}, "pooler_output", place, 1)
    print(f"{'batch':>5} {'dtype':>7} {'halfway ms':>10} {'torch eager':>11} {'torch graph':>11} "
          f"{'vs eager':>8} {'vs graph':>8} {'rel err':>8} {'device MiB':>10}")
    for batch in (int(b) for b in args.batches.split(",")):
        rng = np.random.default_rng(batch)
        ids = rng.integers(0, VOCAB, (batch, args.sequence), dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        t_ids, t_mask = (torch.from_numpy(v).cuda() for v in feeds.values())
        reference = None
        for dtype, prog in (("float32", fused.program), ("float16", half)):
            eager, graph, theirs = _torch_rows(models[dtype], t_ids, t_mask, args.runs)
            reference = theirs.astype(np.float64) if reference is None else reference
            ours, out, taken = _halfway_row(prog, fused.scope, feeds, "pooler_output", place, args.runs)
            print(f"{batch:>5} {dtype:>7} {ours:>10.2f} {eager:>11.2f} {graph:>11.2f} {eager / ours:>8.2f} "
                  f"{graph / ours:>8.2f} {_error(out, reference):>8.1e} {taken / 2**20:>10.0f}")
            results.add("bert", model=f"BERT-base, sequence {args.sequence}", batch=batch, dtype=dtype,
                        halfway_ms=ours, torch_eager_ms=eager, torch_graph_ms=graph, rel_error=_error(out, reference),
                        device_memory_mib=taken / 2**20)
    results.write()


if __name__ == "__main__":
    main()
