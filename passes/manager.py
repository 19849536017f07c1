"""The PassManager: runs a pipeline of passes on a copy of a program, checking after each.

    pm = PassManager("fuse_conv_bn,fuse_conv_act", after=[my_pass], timing=True)
    result = pm.run(program, scope)        # program and scope are left as they were
    result.program, result.scope, result.records

1. The pipeline is a list of pass names / Pass instances or a comma-separated string; ``before``
   and ``after`` put user passes around it. ``None`` means the default inference pipeline.
   ``run(..., fetch=[...])`` names the outputs of a program that has no fetch ops.
2. Passes run on a clone of the program unless ``in_place=True``. Parameters a pass creates go
   to a scope layered over the caller's (``result.scope``; its parent is the caller's scope), a
   fresh layer per pass that is merged only when the pass succeeds — the caller's scope never
   gains, loses or changes an entry, and a pass may not shadow an existing parameter.
3. After each pass the verifier runs (``verify=True``); with ``timing`` each record holds its
   time, with ``count_ops`` the op counts before/after; ``dump_dir`` gets the IR text before
   and after every pass; ``debug`` runs the program on random feeds before and after every pass
   and compares the outputs (``rtol``/``atol``), on the reference evaluator
   (``halfway.ir.evaluate``), and keeps the rewrite rules' near misses in each record
   (``record.near_misses``: rule, root op, why it declined), logging them at INFO.
4. Any failure raises a PassError naming the pass (and position) with the cause chained; the
   caller's program and scope are untouched (with ``in_place`` the program may be half-changed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ..ir.dtypes import VarKind
from ..ir.errors import HalfwayError, PassError
from ..ir.evaluate import evaluate
from ..ir.program import FETCH_VAR, Program
from ..ir.scope import Scope
from ..ir.verifier import verify as verify_program
from .base import Pass, PassResult, get_pass
from .rewrite import NearMiss, collect_near_misses

__all__ = ["PassManager", "PassRecord", "PipelineResult", "parse_pipeline"]

log = logging.getLogger("halfway.passes")

PassSpec = str | Pass
Pipeline = str | Sequence[PassSpec] | None


@attrs.frozen
class PassRecord:
    """What one pass did: its stats and report (``PassResult.report``), and where asked its wall
    and CPU time (of this process), op counts (by type), and with ``debug`` the rewrite rules'
    near misses (matches a rule declined, with the reason)."""

    name: str
    modified: bool
    stats: Mapping[str, int]
    seconds: float | None = None
    cpu_seconds: float | None = None
    ops_before: Mapping[str, int] | None = None
    ops_after: Mapping[str, int] | None = None
    report: Any = None
    near_misses: tuple[NearMiss, ...] = ()

    @property
    def op_delta(self) -> dict[str, int]:
        """Change of the count of each op type (types that did not change left out)."""
        if self.ops_before is None or self.ops_after is None:
            return {}
        types = sorted(set(self.ops_before) | set(self.ops_after))
        delta = {t: self.ops_after.get(t, 0) - self.ops_before.get(t, 0) for t in types}
        return {t: d for t, d in delta.items() if d}


@attrs.frozen
class PipelineResult:
    program: Program
    scope: Scope | None
    records: tuple[PassRecord, ...]

    @property
    def modified(self) -> bool:
        return any(r.modified for r in self.records)


def parse_pipeline(pipeline: Pipeline) -> list[Pass]:
    """Pass instances for a pipeline: a comma-separated string or a list of names / Passes."""
    from .pipeline import DEFAULT_PIPELINE

    if pipeline is None:
        pipeline = DEFAULT_PIPELINE
    items = [s.strip() for s in pipeline.split(",") if s.strip()] if isinstance(pipeline, str) else list(pipeline)
    passes = []
    for item in items:
        if isinstance(item, Pass):
            passes.append(item)
        elif isinstance(item, str):
            passes.append(get_pass(item))
        else:
            raise PassError(f"a pipeline holds pass names or Pass instances, got {item!r}")
    return passes


class PassManager:
    """Runs passes with checks between them (module docstring)."""

    def __init__(self, pipeline: Pipeline = None, *, before: Sequence[PassSpec] = (),
                 after: Sequence[PassSpec] = (), verify: bool = True, timing: bool = False,
                 count_ops: bool = False, dump_dir: str | os.PathLike[str] | None = None, debug: bool = False,
                 in_place: bool = False, rtol: float = 1e-4, atol: float = 1e-5, seed: int = 0) -> None:
        self.passes = parse_pipeline(list(before)) + parse_pipeline(pipeline) + parse_pipeline(list(after))
        self.verify = verify
        self.timing = timing
        self.count_ops = count_ops
        self.dump_dir = Path(dump_dir) if dump_dir is not None else None
        self.debug = debug
        self.in_place = in_place
        self.rtol, self.atol, self.seed = rtol, atol, seed

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.passes]

    def run(self, program: Program, scope: Scope | None = None, *, fetch: Sequence[str] = ()) -> PipelineResult:
        """Run the pipeline; see the module docstring for what is checked and kept.

        ``fetch`` names outputs of a program without fetch ops (as the builder makes them):
        they get fetch ops in the copy, so passes keep them and dead-code removal knows them.
        """
        if self.verify:
            verify_program(program)
        work = program if self.in_place else program.clone()
        _add_fetches(work, fetch)
        staged = scope.new_scope() if scope is not None else None
        checker = _NumericCheck(self, work, staged) if self.debug else None
        records = []
        for position, p in enumerate(self.passes):
            try:
                work, record = self._run_one(position, p, work, staged, checker)
            except HalfwayError as e:
                raise PassError(f"pass #{position} {p.name!r} failed: {e}") from e
            except Exception as e:
                raise PassError(f"pass #{position} {p.name!r} failed: {type(e).__name__}: {e}") from e
            records.append(record)
            log.info("pass %s: %s%s", p.name, dict(record.stats),
                     f" in {record.seconds * 1e3:.1f} ms" if record.seconds is not None else "")
        return PipelineResult(work, staged, tuple(records))

    def _run_one(self, position: int, p: Pass, program: Program, staged: Scope | None,
                 checker: _NumericCheck | None) -> tuple[Program, PassRecord]:
        before = _op_counts(program) if self.count_ops else None
        self._dump(position, p.name, "before", program)
        trial = staged.new_scope() if staged is not None else None
        start, cpu_start = time.perf_counter(), time.process_time()
        collector: contextlib.AbstractContextManager[list[NearMiss]] = (
            collect_near_misses() if self.debug else contextlib.nullcontext([]))
        with collector as near_misses:
            result = p(program, trial)
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        for miss in near_misses:
            log.info("pass %s: near miss: %s", p.name, miss)
        if not isinstance(result, PassResult):
            raise PassError(f"returned {type(result).__name__}, expected a PassResult")
        if self.verify:
            verify_program(result.program)
        if trial is not None and staged is not None:
            _merge(trial, staged)
        if checker is not None:
            checker.check(result.program)
        self._dump(position, p.name, "after", result.program)
        after = _op_counts(result.program) if self.count_ops else None
        record = PassRecord(p.name, result.modified, dict(result.stats), seconds if self.timing else None,
                            cpu_seconds if self.timing else None, before, after, result.report, tuple(near_misses))
        return result.program, record

    def _dump(self, position: int, name: str, when: str, program: Program) -> None:
        if self.dump_dir is None:
            return
        self.dump_dir.mkdir(parents=True, exist_ok=True)
        _write_text(self.dump_dir / f"{position:02d}_{name}.{when}.txt", program.to_text())


def _add_fetches(program: Program, names: Sequence[str]) -> None:
    block = program.global_block()
    fetched = program.fetch_names()
    missing = [n for n in dict.fromkeys(names) if n not in fetched]
    unknown = [n for n in missing if not block.has_var(n)]
    if unknown:
        raise PassError(f"cannot fetch {unknown}: the program declares no such var")
    if missing and not block.has_var(FETCH_VAR):
        block.create_var(FETCH_VAR, kind=VarKind.FETCH_LIST, persistable=True)
    for col, name in enumerate(missing, start=len(fetched)):
        block.append_op("fetch", {"X": name}, {"Out": FETCH_VAR}, {"col": col})


def _merge(trial: Scope, staged: Scope) -> None:
    """Move a successful pass's new parameters into the staging scope; refuse shadowing."""
    taken = [n for n in trial if n in staged]
    if taken:
        raise PassError(f"wrote parameters that already exist: {', '.join(sorted(taken)[:5])} "
                        "(passes must give new parameters new names)")
    for name in trial:
        staged.set(name, trial.get(name))


def _op_counts(program: Program) -> dict[str, int]:
    return dict(Counter(o.type for o in program.all_ops()))


def _write_text(path: Path, text: str) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


class _NumericCheck:
    """Runs the program on fixed random feeds and compares each pass's outputs with the last."""

    def __init__(self, manager: PassManager, program: Program, scope: Scope | None) -> None:
        self.rtol, self.atol = manager.rtol, manager.atol
        self.scope = scope if scope is not None else Scope()
        self.feeds = _random_feeds(program, np.random.default_rng(manager.seed))
        self.fetches = program.fetch_names() or _sinks(program)
        self.expected = self._run(program)

    def _run(self, program: Program) -> list[np.ndarray]:
        return evaluate(program, self.feeds, self.fetches, self.scope)

    def check(self, program: Program) -> None:
        got = self._run(program)
        for name, want, have in zip(self.fetches, self.expected, got):
            if want.shape != have.shape or not np.allclose(have, want, rtol=self.rtol, atol=self.atol):
                worst = float(np.max(np.abs(have.astype(np.float64) - want))) if want.shape == have.shape else None
                raise PassError(f"changed the value of {name!r} on random feeds (shape {list(want.shape)} -> "
                                f"{list(have.shape)}, max abs difference {worst}; rtol={self.rtol}, atol={self.atol})")
        self.expected = got


def _random_feeds(program: Program, rng: np.random.Generator) -> dict[str, np.ndarray]:
    block = program.global_block()
    names = program.feed_names() or [v.name for v in block.vars.values() if v.need_check_feed]
    feeds = {}
    for name in names:
        v = block.var(name)
        shape = tuple(d if d >= 0 else 1 for d in (v.shape or ()))
        dtype = v.dtype.numpy if v.dtype is not None else np.float32
        data = rng.standard_normal(shape) if np.issubdtype(dtype, np.floating) else np.zeros(shape)
        feeds[name] = data.astype(dtype)
    return feeds


def _sinks(program: Program) -> list[str]:
    """Main outputs (first output slot) no op reads: the results of a program without fetch ops."""
    block = program.global_block()
    found = []
    for o in block.ops:
        main = next(iter(o.outputs.values()), ())
        found += [n for n in main if not block.uses(n) and block.has_var(n) and not block.var(n).persistable]
    return found
