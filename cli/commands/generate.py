"""``halfway generate MODEL``: generate tokens with a decoder LLM from a transformers checkpoint
folder, streaming them (as text with ``--prompt``, as ids with ``--ids``) and ending with the
prefill's and the decode steps' tokens per second. Ctrl-C stops the generation: what was made and
its figures are written, and the command exits with 130."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from ...api.llm import LanguageModel, load
from ...api.places import parse_place, place_label
from ..report.console import Output
from .base import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    Command,
    UsageError,
    add_json,
    add_model,
    add_places,
    non_negative,
    positive,
)

__all__ = ["COMMAND"]


def _ids(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected token ids separated by commas, got {text!r}") from None


def _probability(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text}")
    return value


def _configure(parser: argparse.ArgumentParser) -> None:
    add_model(parser, help="a transformers checkpoint folder (config.json and model.safetensors, or a sharded index)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", metavar="TEXT", help="the prompt, encoded with the folder's tokenizer.json")
    source.add_argument("--ids", type=_ids, metavar="1,2,3", help="the prompt as token ids")
    parser.add_argument("--max-new-tokens", type=non_negative, default=32, metavar="N",
                        help="the most tokens to generate (default: 32); generation stops at an end-of-sequence token")
    parser.add_argument("--max-length", type=positive, metavar="N",
                        help="the positions of the key/value cache (default: 2048, or the model's if fewer)")
    parser.add_argument("--fp16", action="store_true", help="run a float16 program (default: float32)")
    add_places(parser, several=False)
    sampling = parser.add_argument_group("sampling (default: greedy)")
    sampling.add_argument("--sample", action="store_true", help="draw tokens instead of taking the likeliest")
    sampling.add_argument("--temperature", type=float, default=1.0, metavar="T", help="divides the logits (default: 1)")
    sampling.add_argument("--top-k", type=non_negative, default=0, metavar="K",
                          help="draw among the K likeliest tokens (default: 0, all)")
    sampling.add_argument("--top-p", type=_probability, default=1.0, metavar="P",
                          help="draw among the likeliest tokens holding P of the probability (default: 1, all)")
    sampling.add_argument("--seed", type=non_negative, metavar="S", help="seed of the draws (default: fresh entropy)")
    parser.add_argument("--repetition-penalty", type=float, default=1.0, metavar="R",
                        help="divides the logits of tokens already in the sequence (default: 1, none)")
    add_json(parser)


class _Printer:
    """Streams a sequence's new tokens: text (each step's new characters) or ids."""

    def __init__(self, output: Output, lm: LanguageModel, prompt: np.ndarray, as_text: bool) -> None:
        self.output, self.lm, self.as_text, self.prompt = output, lm, as_text, prompt
        self.tokens: list[int] = []
        self.shown = ""
        if not output.json_mode:
            self._write(lm.tokenizer.decode(prompt) if as_text else " ".join(map(str, prompt.tolist())))

    def add(self, token: int) -> None:
        self.tokens.append(token)
        if self.output.json_mode:
            return
        if self.as_text:
            text = self.text
            self._write(text[len(self.shown):])
            self.shown = text
        else:
            self._write(f" {token}")

    @property
    def text(self) -> str:
        eos = set(self.lm.eos_token_ids)
        return self.lm.tokenizer.continuation(self.prompt, [t for t in self.tokens if t not in eos])

    def _write(self, text: str) -> None:
        self.output.out.file.write(text)
        self.output.out.file.flush()


def _run(args: argparse.Namespace, output: Output) -> int:
    if not args.sample and (args.temperature != 1.0 or args.top_k or args.top_p != 1.0 or args.seed is not None):
        raise UsageError("--temperature, --top-k, --top-p and --seed choose how --sample draws; add --sample")
    place = parse_place(args.place, args.tune)
    with output.task(f"load {args.model}"):
        lm = load(args.model, place=place, dtype="float16" if args.fp16 else "float32", max_length=args.max_length)
    prompt = lm.tokenizer.encode(args.prompt) if args.prompt is not None else np.array(args.ids, np.int64)
    printer = _Printer(output, lm, prompt, args.prompt is not None)
    sampling: dict[str, Any] = {"do_sample": args.sample, "temperature": args.temperature, "top_k": args.top_k,
                                "top_p": args.top_p, "seed": args.seed, "repetition_penalty": args.repetition_penalty}
    code = EXIT_OK
    try:
        for tokens in lm.stream(prompt, args.max_new_tokens, **sampling):
            printer.add(int(tokens[0]))
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    _report(output, lm, printer, place_label(place), interrupted=code != EXIT_OK)
    return code


def _report(output: Output, lm: LanguageModel, printer: _Printer, place: str, interrupted: bool) -> None:
    stats = lm.stats
    facts = {"model": str(lm.folder), "place": place, "dtype": lm.dtype, "tokens": printer.tokens,
             "interrupted": interrupted, "prompt_tokens": stats.prompt_tokens,
             "prefill_tokens_per_second": stats.prefill_tokens_per_second, "decode_tokens": stats.decode_tokens,
             "decode_tokens_per_second": stats.decode_tokens_per_second, "prepare_seconds": stats.prepare_seconds,
             "cache_bytes": lm.cache_bytes()}
    if printer.as_text:
        facts["text"] = printer.text
    if output.json_mode:
        output.json(facts)
        return
    output.raw("")
    output.note(f"{'interrupted: ' if interrupted else ''}{len(printer.tokens)} new tokens on {place} ({lm.dtype}); "
                f"prefill {stats.prompt_tokens} tokens at {stats.prefill_tokens_per_second:.1f} tokens/s, decode "
                f"{stats.decode_tokens} tokens at {stats.decode_tokens_per_second:.1f} tokens/s (preparing "
                f"{stats.prepare_seconds:.2f} s aside); cache {_size(lm.cache_bytes())}")


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.0f} KiB"


COMMAND = Command(
    "Generate tokens after a prompt with a decoder LLM (Llama, Mistral, Qwen2, Gemma, Phi-3, GPT-2)\n"
    "from a transformers checkpoint folder, streaming them as they come (text with --prompt and\n"
    "the folder's tokenizer.json, token ids with --ids), then the prefill's and the decode steps'\n"
    "tokens per second. Greedy unless --sample. Ctrl-C stops it.\n\n"
    "example: halfway generate ./TinyLlama --prompt 'Once upon a time' --max-new-tokens 64 --place opencl",
    _configure, _run)
