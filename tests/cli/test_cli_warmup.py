"""``halfway warmup`` and the line a first compile writes: numba's cache filled ahead, then
found warm."""

from __future__ import annotations

import json

import pytest

from tests.support.clirun import DEMO_BERT, DEMO_ONNX, halfway

pytest.importorskip("numba")

COMPILING = "halfway: compiling the CPU loops with numba, once"


def test_warmup_fills_the_cache_that_the_next_runs_load(tmp_path):
    cache = tmp_path / "numba"
    env = {"NUMBA_CACHE_DIR": str(cache), "HALFWAY_JIT": "1"}
    done = halfway("warmup", "--json", env=env)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith(COMPILING)]
    assert len(lines) == 1 and str(cache) in lines[0] and "halfway warmup" in lines[0]
    facts = json.loads(done.stdout)
    assert facts["jit"] and facts["warm"] and facts["cache"] == str(cache)
    assert facts["models"] == [str(DEMO_ONNX), str(DEMO_BERT)]
    assert any(cache.rglob("*.nbi"))
    for model in (DEMO_ONNX, DEMO_BERT):
        again = halfway("run", model, env=env)
        assert again.returncode == 0 and COMPILING not in again.stderr, again.stderr


def test_without_numba_there_is_nothing_to_compile(tmp_path):
    done = halfway("warmup", "--json", env={"HALFWAY_JIT": "0", "NUMBA_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0 and "nothing to compile" in done.stderr
    assert json.loads(done.stdout)["jit"] is False and list(tmp_path.iterdir()) == []
