"""``halfway generate``: tokens streamed as ids or text, the figures at the end, Ctrl-C, and bad
command lines."""

from __future__ import annotations

import numpy as np

from halfway.api import llm
from halfway.cli.main import main
from tests.support.checkpoints import folder, reference
from tests.support.clirun import halfway, halfway_json, one_line_error

LLAMA = folder("llama")


def test_ids_stream_and_end_with_tokens_per_second():
    ref = reference("llama")
    prompt = ref["prompt_0"].tolist()
    done = halfway("generate", LLAMA, "--ids", ",".join(map(str, prompt)), "--max-new-tokens", "6")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(t) for t in ref["greedy_0"][:len(prompt) + 6]]
    assert "6 new tokens on cpu (float32)" in done.stderr and "tokens/s" in done.stderr


def test_json_holds_tokens_text_and_figures():
    text = np.load(LLAMA / "text.npz")
    facts = halfway_json("generate", LLAMA, "--prompt", "Once upon a time", "--max-new-tokens", "8", "--max-length", "32")
    assert facts["tokens"] == text["greedy"][len(text["prompt"]):][:8].tolist()
    assert facts["text"] == llm.load(LLAMA, max_length=32).generate_text("Once upon a time", 8)
    assert facts["prompt_tokens"] == len(text["prompt"]) and facts["decode_tokens"] == 7
    assert facts["cache_bytes"] == llm.load(LLAMA, max_length=32).cache_bytes() and not facts["interrupted"]


def test_seeded_sampling_repeats():
    args = ("generate", LLAMA, "--ids", "1,2,3", "--max-new-tokens", "8", "--sample", "--top-p", "0.9", "--seed", "5")
    assert halfway_json(*args)["tokens"] == halfway_json(*args)["tokens"]


def test_ctrl_c_stops_cleanly(monkeypatch, capsys):
    def interrupted(self, *args, **kwargs):
        yield np.array([7])
        raise KeyboardInterrupt

    monkeypatch.setattr(llm.LanguageModel, "stream", interrupted)
    assert main(["generate", str(LLAMA), "--ids", "1,2", "--max-new-tokens", "5"]) == 130
    out, err = capsys.readouterr()
    assert out.split() == ["1", "2", "7"] and "interrupted: 1 new tokens" in err


def test_bad_command_lines():
    assert halfway("generate", LLAMA, "--ids", "1,2", "--seed", "3").returncode == 2  # --seed without --sample
    assert halfway("generate", LLAMA).returncode == 2  # neither --prompt nor --ids
    one_line_error(halfway("generate", LLAMA, "--ids", "1,999"), "token id 999", "vocabulary of 128")
    one_line_error(halfway("generate", LLAMA, "--ids", "1,2", "--max-new-tokens", "40", "--max-length", "32"),
                   "beyond max_length 32")
    one_line_error(halfway("generate", folder("mistral"), "--prompt", "hi"), "no tokenizer.json")
