"""Greedy decode tokens/s of a random-weight Llama on a GPU: halfway.llm on OpenCL (float16, from
its transformers checkpoint folder) beside transformers' generate on CUDA with a static cache,
eager and with its decode step compiled into CUDA graphs (torch.compile, mode reduce-overhead),
in the same run, beside the bandwidth bound (the weight bytes a token reads over the copy
bandwidth torch measures on the device).

The checkpoint (``--dir``) is written first if absent: ``LlamaForCausalLM(config).half()`` of a
Llama-3.2-1B-like shape (``--hidden``, ``--layers`` ...). Decode tokens/s are halfway's own
figures (``lm.stats``) and, for transformers, (new - 1) tokens over the time generate takes for
``--new`` tokens less the time it takes for one, each the median of ``--repeats``.

    python benchmarks/bench_opencl_decode.py [--dir /tmp/llama-1b] [--prompt 128] [--new 128]
                                             [--no-compile] [--json OUT]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from results import Results, add_json_option

import halfway


def make_checkpoint(folder: Path, args: argparse.Namespace) -> None:
    import torch
    import transformers

    config = transformers.LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate,
                                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                                      num_key_value_heads=args.kv_heads, vocab_size=args.vocab,
                                      max_position_embeddings=4096, tie_word_embeddings=False)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).half().save_pretrained(folder)


def median(fn: Callable[[], float], repeats: int) -> float:
    fn()
    return statistics.median(fn() for _ in range(repeats))


def halfway_decode(folder: Path, prompt: np.ndarray, new: int, repeats: int) -> float:
    lm = halfway.llm.load(folder, place="opencl", dtype="float16", max_length=len(prompt) + new + 8)

    def tokens_per_second() -> float:
        lm.generate(prompt, new, eos_token_id=())
        return lm.stats.decode_tokens_per_second

    return median(tokens_per_second, repeats)


def transformers_decode(folder: Path, prompt: np.ndarray, new: int, repeats: int, compiled: bool) -> float:
    import torch
    import transformers

    model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch.float16).cuda().eval()
    ids = torch.from_numpy(prompt[None]).cuda()

    def seconds(count: int) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.inference_mode():
            model.generate(ids, max_new_tokens=count, min_new_tokens=count, do_sample=False,
                           cache_implementation="static", disable_compile=not compiled)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    seconds(new)
    return (new - 1) / (median(lambda: seconds(new), repeats) - median(lambda: seconds(1), repeats))


def copy_bandwidth() -> float:
    """Bytes per second (read and written) of a 1 GiB device-to-device copy through torch."""
    import torch

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    dst.copy_(src)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        dst.copy_(src)
    torch.cuda.synchronize()
    return 2 * 10 * src.numel() / (time.perf_counter() - start)


def weight_bytes(args: argparse.Namespace) -> int:
    """The bytes of float16 weights one token's decode step reads (its embedding row aside)."""
    head = args.hidden // args.heads
    attention = args.hidden * (2 * args.hidden + 2 * args.kv_heads * head)
    return 2 * (args.layers * (attention + 3 * args.hidden * args.intermediate) + args.hidden * args.vocab)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/halfway-llama-1b"))
    for name, default in (("hidden", 2048), ("intermediate", 8192), ("layers", 16), ("heads", 32), ("kv_heads", 8),
                          ("vocab", 32000), ("prompt", 128), ("new", 128), ("repeats", 3)):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default)
    parser.add_argument("--no-compile", action="store_true", help="leave out transformers' compiled decode step")
    add_json_option(parser)
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    results = Results("bench_opencl_decode", args.json)
    if not (args.dir / "config.json").exists():
        make_checkpoint(args.dir, args)
    prompt = np.random.default_rng(1).integers(3, args.vocab, args.prompt).astype(np.int64)
    rates: dict[str, float] = {"halfway.llm, OpenCL": halfway_decode(args.dir, prompt, args.new, args.repeats)}
    rates["transformers, static cache"] = transformers_decode(args.dir, prompt, args.new, args.repeats, False)
    if not args.no_compile:
        rates["transformers, static cache, CUDA graphs"] = transformers_decode(args.dir, prompt, args.new,
                                                                               args.repeats, True)
    bound = copy_bandwidth() / weight_bytes(args)
    report(results, rates, bound, args)
    results.write()


def report(results: Results, rates: dict[str, float], bound: float, args: argparse.Namespace) -> None:
    print(f"decode, batch 1, prompt {args.prompt}, {args.new} new tokens; bandwidth bound {bound:.0f} tokens/s")
    for system, rate in rates.items():
        print(f"  {system:42} {rate:8.1f} tokens/s  {rate / bound:6.1%} of the bound", flush=True)
        results.add("decode", system=system, tokens_per_s=rate, of_bound=rate / bound)
    results.summary(bound_tokens_per_s=bound, weight_bytes_per_token=weight_bytes(args), layers=args.layers,
                    hidden=args.hidden, prompt=args.prompt, new=args.new)


if __name__ == "__main__":
    main()
