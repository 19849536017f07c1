"""What a float16 transpile did: per-op dtypes and reasons, casts, parameters, bytes, flushes.

``str(report)`` is a plain-text table; ``report.__rich__()`` (and ``report.rich(label)``) gives a
``rich`` renderable when rich is installed (``rich.print(report)`` picks it up), without this
module requiring it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from attrs import define, field, frozen

__all__ = ["OpEntry", "CastEntry", "ParamEntry", "Float16Report"]


@frozen
class OpEntry:
    """One op of the input program: its index there, what it writes first, the dtype it runs now."""

    index: int
    type: str
    output: str
    dtype: str
    reason: str


@frozen
class CastEntry:
    var: str
    cast_name: str
    from_dtype: str
    to_dtype: str


@frozen
class ParamEntry:
    """A float32 parameter given a float16 copy ``float16_name``."""

    name: str
    float16_name: str
    elements: int
    flushed_to_zero: int
    to_subnormal: int


@define
class Float16Report:
    ops: list[OpEntry] = field(factory=list)
    casts: list[CastEntry] = field(factory=list)
    params: list[ParamEntry] = field(factory=list)
    params_removed: list[str] = field(factory=list)
    out_of_range: dict[str, int] = field(factory=dict)
    """float32 parameter -> values beyond float16's range (those parameters stay float32)"""
    clamped: dict[str, int] = field(factory=dict)
    """mask constant -> its values beyond float16's range, held at +-``max_abs_value / 2`` in float16"""
    param_bytes_before: int = 0
    param_bytes_after: int = 0

    @property
    def float16_ops(self) -> list[OpEntry]:
        return [e for e in self.ops if e.dtype == "float16"]

    @property
    def float32_ops(self) -> list[OpEntry]:
        return [e for e in self.ops if e.dtype == "float32"]

    @property
    def values_flushed_to_zero(self) -> int:
        return sum(p.flushed_to_zero for p in self.params)

    @property
    def values_to_subnormal(self) -> int:
        return sum(p.to_subnormal for p in self.params)

    @property
    def values_out_of_range(self) -> int:
        return sum(self.out_of_range.values())

    def kept_float32(self) -> dict[str, str]:
        """``"#index type"`` -> reason, for the ops that stay float32."""
        return {f"#{e.index} {e.type}": e.reason for e in self.float32_ops}

    def summary(self) -> list[tuple[str, str]]:
        return [
            ("ops float16 / float32", f"{len(self.float16_ops)} / {len(self.float32_ops)}"),
            ("casts inserted", str(len(self.casts))),
            ("parameters converted", str(len(self.params))),
            ("parameter bytes before -> after", f"{self.param_bytes_before} -> {self.param_bytes_after}"),
            ("values beyond float16 range (kept float32)", str(self.values_out_of_range)),
            ("mask values held in float16's range", str(sum(self.clamped.values()))),
            ("values flushed to zero / to subnormal", f"{self.values_flushed_to_zero} / {self.values_to_subnormal}"),
        ]

    def rows(self) -> list[tuple[str, str, str, str, str]]:
        return [(str(e.index), e.type, e.output, e.dtype, e.reason) for e in self.ops]

    def __str__(self) -> str:
        header = ("#", "op", "output", "dtype", "reason")
        lines = _table(header, self.rows())
        lines.append("")
        width = max(len(k) for k, _ in self.summary())
        lines.extend(f"{k:<{width}}  {v}" for k, v in self.summary())
        return "\n".join(lines)

    def __rich__(self) -> Any:
        return self.rich()

    def rich(self, label: Callable[[str], str] = str) -> Any:
        """The rich renderable, each op type shown as ``label`` gives it (the command line adds
        the ONNX ops it stands for)."""
        from rich.console import Group
        from rich.table import Table

        ops = Table("#", "op", "output", "dtype", "reason", title="float16 transpile")
        for index, op_type, *rest in self.rows():
            ops.add_row(index, label(op_type), *rest, style="green" if rest[1] == "float16" else None)
        totals = Table(show_header=False, box=None)
        for key, value in self.summary():
            totals.add_row(key, value)
        return Group(ops, totals)


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header), line, *(fmt.format(*r).rstrip() for r in rows)]
