"""What the mutation fuzz tests share: one case's outcome within a watchdog, the folder it must
leave as it was, and the tally that fails the test on any finding.

    tally = Tally("pir fuzz")
    before = snapshot(folder)
    tally.add(label, *outcome(lambda: load(folder), seconds=20), changed=snapshot(folder) != before)
    tally.check()
"""

from __future__ import annotations

import collections
import traceback
from collections.abc import Callable
from pathlib import Path

from halfway.ir.errors import HalfwayError
from tests.support.watchdog import Expired, watchdog

__all__ = ["outcome", "snapshot", "Tally"]

ACCEPTED = ("ok", "halfway_error")


def outcome(call: Callable[[], object], seconds: float) -> tuple[str, str]:
    """("ok" | "halfway_error" | "hang" | "other", detail) of ``call()`` within ``seconds``."""
    try:
        with watchdog(seconds):
            call()
    except HalfwayError as e:
        return "halfway_error", str(e).splitlines()[0][:200]
    except Expired:
        return "hang", f"no result in {seconds} s"
    except BaseException as e:  # the finding a fuzz test exists for
        return "other", "".join(traceback.format_exception(type(e), e, e.__traceback__)[-3:]).strip()[:600]
    return "ok", ""


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder below ``folder``: its size and modification time."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


class Tally:
    """The outcomes of a fuzz run's cases, and the findings among them."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: collections.Counter[str] = collections.Counter()
        self.findings: list[str] = []

    def add(self, label: str, kind: str, detail: str, *, changed: bool = False) -> None:
        """One case: its outcome, and whether it changed the files it read ("wrote")."""
        if changed:
            kind, detail = "wrote", "the folder changed"
        self.counts[kind] += 1
        if kind not in ACCEPTED:
            self.findings.append(f"{label}: {kind}: {detail}")

    def check(self, seed: int) -> None:
        """Fail on any finding, or a run that never saw both accepted outcomes."""
        print(f"\n{self.name}: {sum(self.counts.values())} cases (seed {seed}): {dict(self.counts)}")
        assert not self.findings, "\n".join(self.findings[:20])
        assert self.counts["halfway_error"] and self.counts["ok"]  # both kinds of outcome were seen
