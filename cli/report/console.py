"""Where the command line writes: results on stdout, progress and errors on stderr.

Colours and live progress bars appear only on a terminal (rich turns colour off when a stream is
not a TTY, and so does ``NO_COLOR``). Off a terminal, each finished step is one plain log line,
written when the command ends without error (``finish``; a failed command writes only its one
error line), and tables are laid out ``COLUMNS`` wide (default 160), so piped output stays
readable. In JSON mode stdout carries exactly one JSON document and nothing else.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

__all__ = ["Output"]

PIPE_WIDTH = 160


def _console(file: IO[str]) -> Console:
    is_tty = file.isatty()
    width = None if is_tty else int(os.environ.get("COLUMNS", PIPE_WIDTH))
    return Console(file=file, width=width, highlight=False, soft_wrap=False)


class Output:
    """The two streams of one command; ``json_mode`` makes stdout a single JSON document."""

    def __init__(self, *, json_mode: bool = False, stdout: IO[str] | None = None,
                 stderr: IO[str] | None = None) -> None:
        self.json_mode = json_mode
        self.out = _console(stdout or sys.stdout)
        self.err = _console(stderr or sys.stderr)
        self._done: list[str] = []

    def print(self, *items: RenderableType) -> None:
        """Human output on stdout (silent in JSON mode, where only ``json`` writes)."""
        if not self.json_mode:
            self.out.print(*items)

    def raw(self, text: str) -> None:
        """``text`` on stdout exactly as given: no markup, wrapping or cropping."""
        self.out.file.write(text if text.endswith("\n") else text + "\n")
        self.out.file.flush()

    def json(self, document: Any) -> None:
        """``document`` as strict JSON: NaN and infinities as the strings ``"NaN"``, ``"Infinity"``
        and ``"-Infinity"`` (JSON has no such numbers)."""
        self.raw(json.dumps(_jsonable(document), indent=2, allow_nan=False, default=str))

    def warning(self, text: str) -> None:
        """``halfway: warning: text`` on stderr: the command goes on, but its results need a look."""
        self.err.print(f"[bold yellow]halfway: warning:[/] {escape(text)}", soft_wrap=True)

    def note(self, text: str) -> None:
        """A side remark on stderr (never mixed into results)."""
        self.err.print(f"[dim]{escape(text)}[/]")

    def finish(self) -> None:
        """Write the steps held back off a terminal (the command ended without error)."""
        for line in self._done:
            self.err.print(line)
        self._done.clear()

    def error(self, text: str) -> None:
        self._done.clear()
        self.err.print(f"[bold red]halfway: error:[/] {escape(text)}", soft_wrap=True)

    @contextmanager
    def task(self, description: str, total: int | None = None) -> Iterator[Callable[[], None]]:
        """A step of long work: a live spinner (or bar, given ``total``) on a terminal, then one
        ``✓ description (time)`` line. Yields a function to call once per unit of ``total``."""
        start = time.perf_counter()
        if self.err.is_terminal:
            columns = [SpinnerColumn(), TextColumn("{task.description}")]
            if total is not None:
                columns += [BarColumn(), MofNCompleteColumn()]
            with Progress(*columns, TimeElapsedColumn(), console=self.err, transient=True) as progress:
                task = progress.add_task(escape(description), total=total)
                yield lambda: progress.advance(task)
        else:
            yield lambda: None
        seconds = time.perf_counter() - start
        line = f"[green]✓[/] {escape(description)} [dim]({seconds:.2f} s)[/]"
        if self.err.is_terminal:
            self.err.print(line)
        else:
            self._done.append(line)


def _jsonable(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as lists and numbers, and the floats JSON has no
    number for as strings (other odd values, such as paths, become strings when written)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return _jsonable(value.tolist())
    return value
