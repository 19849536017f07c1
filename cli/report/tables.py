"""Tables and number formats shared by the command line's reports."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rich.table import Table

__all__ = ["table", "human_bytes", "milliseconds", "error_text", "percent"]


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
          caption: str | None = None, numeric: Sequence[str] = ()) -> Table:
    """A rich table; the columns named in ``numeric`` are right-aligned."""
    result = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for name in columns:
        result.add_column(name, justify="right" if name in numeric else "left")
    for row in rows:
        result.add_row(*(str(cell) for cell in row))
    return result


def human_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def milliseconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.2f} ms"


def error_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"
