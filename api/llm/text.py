"""Text in and out of a checkpoint's token ids: its ``tokenizer.json``, read with the optional
``tokenizers`` package (``pip install tokenizers``, or the ``llm`` extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...ir.errors import HalfwayError

__all__ = ["Tokenizer", "TOKENIZER"]

TOKENIZER = "tokenizer.json"
INSTALL_HINT = "pip install tokenizers (or 'halfway[llm]')"


class Tokenizer:
    """A checkpoint's tokenizer: ``encode`` adds the special tokens its template adds (a BOS),
    ``decode`` drops special tokens."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            from tokenizers import Tokenizer as _Tokenizer
        except ImportError as e:
            raise HalfwayError(f"{self.path}: text in and out needs the tokenizers package: {INSTALL_HINT}") from e
        try:
            self._tokenizer: Any = _Tokenizer.from_file(str(self.path))
        except Exception as e:  # tokenizers raises its own Exception for a missing or damaged file
            raise HalfwayError(f"{self.path}: cannot read the tokenizer: {e}") from e

    @classmethod
    def of_folder(cls, folder: str | Path) -> Tokenizer:
        path = Path(folder) / TOKENIZER
        if not path.is_file():
            raise HalfwayError(f"{folder}: no {TOKENIZER}; give token ids instead of text (input_ids, or --ids on "
                               f"the command line)")
        return cls(path)

    def encode(self, text: str) -> np.ndarray:
        return np.array(self._tokenizer.encode(text).ids, np.int64)

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        return str(self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=True))

    def continuation(self, prompt: Sequence[int] | np.ndarray, new: Sequence[int] | np.ndarray) -> str:
        """The text ``new`` adds after ``prompt``: decoded with the prompt, so that a first token's
        leading space (which a decoder drops at the start of a text) is kept."""
        before = self.decode(prompt)
        text = self.decode([*prompt, *new])
        return text[len(before):] if text.startswith(before) else self.decode(new)
