"""Peers of ``bench_llm.py`` that run in another interpreter (one with torch and transformers):

    PYTHON benchmarks/llm_peers.py '{"folder": DIR, "prompt": [...], "new": 32, "repeats": 3, "threads": 2}'

prints one JSON line: transformers eager's prefill and decode tokens/s (medians), its greedy
tokens and torch's version. It imports neither halfway nor its dependencies.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["run_transformers"]


def run_transformers(folder: Path, prompt: list[int], new: int, repeats: int, threads: int) -> dict[str, Any]:
    """transformers eager's prefill and decode tokens/s (medians) and greedy tokens: run in an
    interpreter with torch (``--transformers``), printed as JSON."""
    import torch
    import transformers

    torch.set_num_threads(threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    ids = torch.tensor([prompt])

    def generate() -> tuple[float, float, list[int]]:
        with torch.inference_mode():
            start = time.perf_counter()
            out = model(ids, use_cache=True)
            prefill = time.perf_counter() - start
            tokens, cache = [int(out.logits[0, -1].argmax())], out.past_key_values
            start = time.perf_counter()
            for _ in range(new - 1):
                out = model(torch.tensor([[tokens[-1]]]), past_key_values=cache, use_cache=True)
                tokens.append(int(out.logits[0, -1].argmax()))
                cache = out.past_key_values
            return len(prompt) / prefill, (new - 1) / (time.perf_counter() - start), tokens

    generate()
    runs = [generate() for _ in range(repeats)]
    return {"prefill": statistics.median(r[0] for r in runs), "decode": statistics.median(r[1] for r in runs),
            "tokens": runs[-1][2], "torch": torch.__version__}


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    print(json.dumps(run_transformers(Path(request["folder"]), request["prompt"], request["new"], request["repeats"],
                                      request["threads"])))
