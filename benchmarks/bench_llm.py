"""Decoder LLM speed on the CPU: prefill and decode tokens/s of a Llama-shape model of about
125 M parameters (random weights, float32, batch 1) in ``halfway.llm`` — from its checkpoint
folder and from its ONNX export — beside ONNX Runtime running the same export's past/present
loop (IO binding: each step's presents stay ONNX Runtime's values, bound as the next step's
pasts) and, with ``--transformers PYTHON`` (an interpreter with torch and transformers),
transformers eager; every runtime with the same threads (HALFWAY_NUM_THREADS, else
OPENBLAS_NUM_THREADS, default 2: ``HALFWAY_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1`` gives halfway's
backend two threads that cut the products, each on a single-threaded BLAS). The
bandwidth bound of decode is the weight bytes one token reads (every layer's and the output
projection's, the embedding's one row aside) over the copy bandwidth measured here, before and
after the runtimes, the better taken (numpy copying a 256 MiB array on as many threads, the
bytes read and written counted, as STREAM's copy counts them).

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_llm.py \\
        [--dir DIR] [--prompt 128] [--new 32] [--repeats 3] [--transformers PYTHON] [--json OUT]

The checkpoint (``config.json`` and ``model.safetensors``) is written with numpy into ``DIR``
(default ``~/.cache/halfway/bench_llm``, or ``$HALFWAY_BENCH_LLM``) when missing; the export
``DIR/model.onnx`` is made from it by ``scripts/llm_onnx_fixtures.py --checkpoint DIR`` in a
Python with torch (without it, the export's rows are left out). Greedy tokens are checked to
agree between the runtimes. Each figure is the median over ``--repeats`` generations, halfway's
and ONNX Runtime's taking turns round by round (transformers' after them, in its interpreter).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import halfway  # noqa: E402 (before numpy, so that halfway.api.openblas can pick OpenBLAS's kernels)

# isort: split
import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import Results, add_json_option  # noqa: E402

DEFAULT_DIR = Path(os.environ.get("HALFWAY_BENCH_LLM", Path.home() / ".cache" / "halfway" / "bench_llm"))
THREADS = int(os.environ.get("HALFWAY_NUM_THREADS") or os.environ["OPENBLAS_NUM_THREADS"])
"""Every runtime's threads: halfway's numpy backend's (HALFWAY_NUM_THREADS, else the BLAS's)."""
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32000, "hidden_size": 768,
          "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12, "num_key_value_heads": 4,
          "head_dim": 64, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "hidden_act": "silu",
          "rope_theta": 10000.0, "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
          "torch_dtype": "float32"}
"""The benchmark's model: Llama's shape at 125 M parameters (grouped-query attention, 4 key/value heads)."""
EXPORT = "scripts/llm_onnx_fixtures.py --checkpoint {dir}"


# -- the model ------------------------------------------------------------------------------------
def _tensors(config: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The checkpoint's tensor names and shapes."""
    hidden, inner, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * config["head_dim"]
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,),
                                          "lm_head.weight": (vocab, hidden)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,),
                       p + "self_attn.q_proj.weight": (hidden, hidden), p + "self_attn.k_proj.weight": (kv, hidden),
                       p + "self_attn.v_proj.weight": (kv, hidden), p + "self_attn.o_proj.weight": (hidden, hidden),
                       p + "mlp.gate_proj.weight": (inner, hidden), p + "mlp.up_proj.weight": (inner, hidden),
                       p + "mlp.down_proj.weight": (hidden, inner)})
    return shapes


def make_checkpoint(folder: Path) -> None:
    """``CONFIG`` with seeded random weights (norms near 1), written with numpy and safetensors."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    weights = {name: (1.0 + 0.1 * rng.standard_normal(shape) if len(shape) == 1 else
                      0.02 * rng.standard_normal(shape)).astype(np.float32) for name, shape in _tensors(CONFIG).items()}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(CONFIG, indent=1) + "\n")


def bytes_per_token(config: dict[str, Any]) -> tuple[int, int]:
    """The parameters, and the float32 weight bytes one decode step reads (the embedding's one row)."""
    shapes = _tensors(config)
    params = sum(int(np.prod(s)) for s in shapes.values())
    embed = int(np.prod(shapes["model.embed_tokens.weight"]))
    return params, 4 * (params - embed + config["hidden_size"])


def copy_bandwidth(threads: int = THREADS) -> float:
    """Bytes per second ``threads`` threads copy a 256 MiB array at (each its share; the bytes
    read and written, the best of 10)."""
    source = np.ones(1 << 26, np.float32)
    target = np.empty_like(source)
    parts = [(source[s], target[s]) for s in (slice(i * len(source) // threads, (i + 1) * len(source) // threads)
                                              for i in range(threads))]
    best = float("inf")
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(10):
            start = time.perf_counter()
            list(pool.map(lambda pair: np.copyto(pair[1], pair[0]), parts))
            best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best


# -- the runtimes ---------------------------------------------------------------------------------
Generation = Callable[[], tuple[float, float, np.ndarray]]
"""One greedy generation: its prefill and decode tokens/s and its new tokens."""


def halfway_generation(path: Path, prompt: np.ndarray, new: int) -> Generation:
    """halfway.llm's generation of ``new`` tokens after ``prompt``, warmed up."""
    lm = halfway.llm.load(path, max_length=len(prompt) + new + 8)

    def generate() -> tuple[float, float, np.ndarray]:
        tokens = lm.generate(prompt, new, eos_token_id=())[0, len(prompt):]
        return lm.stats.prefill_tokens_per_second, lm.stats.decode_tokens_per_second, tokens

    generate()
    return generate


def _ort_step(session: Any, ids: np.ndarray, past: dict[str, Any], total: int) -> tuple[np.ndarray, dict[str, Any]]:
    """One past/present step through IO binding: the logits of the last token and the presents,
    left as ONNX Runtime's values."""
    binding = session.io_binding()
    start = total - ids.shape[1]
    binding.bind_cpu_input("input_ids", ids)
    binding.bind_cpu_input("attention_mask", np.ones((1, total), np.int64))
    binding.bind_cpu_input("position_ids", np.arange(start, total, dtype=np.int64)[None])
    for name, value in past.items():
        binding.bind_ortvalue_input(name, value)
    outputs = [o.name for o in session.get_outputs()]
    for name in outputs:
        binding.bind_output(name)
    session.run_with_iobinding(binding)
    values = binding.get_outputs()
    presents = {name.replace("present.", "past_key_values."): value for name, value in zip(outputs[1:], values[1:])}
    return values[0].numpy()[0, -1], presents


def onnxruntime_generation(path: Path, prompt: np.ndarray, new: int) -> Generation:
    """ONNX Runtime's generation over the export's past/present loop, warmed up."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    pasts = [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]

    def generate() -> tuple[float, float, np.ndarray]:
        empty = {i.name: onnxruntime.OrtValue.ortvalue_from_numpy(np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32))
                 for i in pasts}
        start = time.perf_counter()
        logits, past = _ort_step(session, prompt[None], empty, len(prompt))
        prefill = time.perf_counter() - start
        tokens = [int(logits.argmax())]
        start = time.perf_counter()
        for step in range(new - 1):
            logits, past = _ort_step(session, np.array([[tokens[-1]]], np.int64), past, len(prompt) + step + 1)
            tokens.append(int(logits.argmax()))
        return len(prompt) / prefill, (new - 1) / (time.perf_counter() - start), np.array(tokens)

    generate()
    return generate


def rounds(generations: dict[str, Generation], repeats: int) -> dict[str, tuple[float, float, np.ndarray]]:
    """Each runtime's median prefill and decode tokens/s and its tokens, the runtimes taking turns
    round by round (a busy machine's slow spells fall on all of them)."""
    runs: dict[str, list[tuple[float, float, np.ndarray]]] = {name: [] for name in generations}
    for _ in range(repeats):
        for name, generate in generations.items():
            runs[name].append(generate())
    return {name: (statistics.median(r[0] for r in done), statistics.median(r[1] for r in done), done[-1][2])
            for name, done in runs.items()}


def transformers_peer(python: str, folder: Path, prompt: np.ndarray, new: int, repeats: int) -> dict[str, Any]:
    """``llm_peers.run_transformers`` in the interpreter ``python``."""
    request = json.dumps({"folder": str(folder), "prompt": prompt.tolist(), "new": new, "repeats": repeats,
                          "threads": THREADS})
    script = Path(__file__).with_name("llm_peers.py")
    done = subprocess.run([python, str(script), request], capture_output=True, text=True, check=True)
    peer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return peer


# -- the report -----------------------------------------------------------------------------------
def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the model's folder")
    parser.add_argument("--prompt", type=int, default=128, help="prompt tokens")
    parser.add_argument("--new", type=int, default=32, help="tokens generated")
    parser.add_argument("--repeats", type=int, default=3, help="timed generations of each runtime")
    parser.add_argument("--transformers", metavar="PYTHON", help="an interpreter with torch and transformers")
    add_json_option(parser)
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    results = Results("bench_llm", args.json)
    bandwidth = copy_bandwidth()
    if not (args.dir / "model.safetensors").exists():
        make_checkpoint(args.dir)
    prompt = np.random.default_rng(1).integers(3, CONFIG["vocab_size"], args.prompt).astype(np.int64)
    export = args.dir / "model.onnx"
    generations = {"halfway (checkpoint folder)": halfway_generation(args.dir, prompt, args.new)}
    if export.exists():
        generations["halfway (ONNX export)"] = halfway_generation(export, prompt, args.new)
        generations["onnxruntime (ONNX export)"] = onnxruntime_generation(export, prompt, args.new)
    else:
        print(f"no {export}: make it with a Python that has torch:\n    python {EXPORT.format(dir=args.dir)}",
              file=sys.stderr)
    rows = rounds(generations, args.repeats)
    if args.transformers:
        peer = transformers_peer(args.transformers, args.dir, prompt, args.new, args.repeats)
        rows[f"transformers eager (torch {peer['torch']})"] = (peer["prefill"], peer["decode"],
                                                               np.array(peer["tokens"]))
    report(results, rows, max(bandwidth, copy_bandwidth()), args)
    results.write()


def report(results: Any, rows: dict[str, tuple[float, float, np.ndarray]], bandwidth: float,
           args: argparse.Namespace) -> None:
    params, weight_bytes = bytes_per_token(CONFIG)
    bound = bandwidth / weight_bytes
    first = next(iter(rows.values()))[2]
    print(f"{params / 1e6:.0f} M parameters, float32, batch 1, prompt {args.prompt}, {args.new} new tokens, "
          f"{THREADS} threads each")
    print(f"\n{'runtime':42} {'prefill tok/s':>14} {'decode tok/s':>13} {'ms/token':>9}  tokens")
    for name, (prefill, decode, tokens) in rows.items():
        same = np.array_equal(tokens, first)
        print(f"{name:42} {prefill:14.1f} {decode:13.2f} {1e3 / decode:9.1f}  {'same' if same else 'DIFFER'}")
        results.add("speed", runtime=name, prefill_tokens_per_s=prefill, decode_tokens_per_s=decode,
                    decode_ms_per_token=1e3 / decode, same_tokens=bool(same))
    ort = rows.get("onnxruntime (ONNX export)")
    print(f"\ncopy bandwidth {bandwidth / 1e9:.1f} GB/s, {weight_bytes / 2**20:.0f} MiB of weights per token: "
          f"bound {bound:.2f} tokens/s")
    figures: dict[str, float] = {}
    for name, key in (("halfway (checkpoint folder)", "checkpoint"), ("halfway (ONNX export)", "export")):
        if name not in rows:
            continue
        prefill, decode, _ = rows[name]
        figures[f"{key}_time_over_bound"] = bound / decode
        line = f"{name}: decode {bound / decode:.2f}x the bound's time"
        if ort:
            figures[f"{key}_decode_over_onnxruntime"] = decode / ort[1]
            figures[f"{key}_prefill_over_onnxruntime"] = prefill / ort[0]
            line += f", {decode / ort[1]:.2f}x ONNX Runtime's decode tokens/s, {prefill / ort[0]:.2f}x its prefill's"
        print(line)
    results.summary(params=params, weight_bytes_per_token=weight_bytes, copy_gb_per_s=bandwidth / 1e9,
                    bound_tokens_per_s=bound, **figures, threads=THREADS, prompt=args.prompt, new_tokens=args.new)

if __name__ == "__main__":
    main()
