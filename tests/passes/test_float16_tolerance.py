"""Mixed precision with an accuracy budget (``tolerance``): the float16 program stays within it on
the calibration feeds with fewer float32 ops than float32 everywhere; a loose budget keeps the
plain decisions; one that cannot be met is an error naming the error reached."""

import re

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.ir import PassError
from halfway.passes.float16.tolerance import relative_error
from tests.support.clirun import halfway as cli
from tests.support.modern import FIXTURE_DIR, cases

MODEL = "bert_eager_torchscript"


@pytest.fixture(scope="module")
def bert():
    program, _, fetches, scope = halfway.load(str(FIXTURE_DIR / f"{MODEL}.onnx"))
    feeds = [inputs for inputs, _ in cases(MODEL)[:2]]
    return program, fetches, scope, feeds


def output_error(program, half, scope, feeds, fetches) -> float:
    executor = halfway.Executor()
    return max(relative_error(got, want) for feed in feeds
               for got, want in zip(executor.run(half, feed, fetches, scope), executor.run(program, feed, fetches, scope)))


def test_a_tolerance_tighter_than_plain_float16_is_met_with_few_float32_ops(bert):
    program, fetches, scope, feeds = bert
    before = program.to_bytes()
    plain, plain_report = halfway.float16_transpile(program, scope, calibration_feeds=feeds, fetch_names=fetches)
    plain_error = output_error(program, plain, scope, feeds, fetches)
    tolerance = plain_error / 3
    half, report = halfway.float16_transpile(program, scope, calibration_feeds=feeds, fetch_names=fetches,
                                             tolerance=tolerance)
    assert output_error(program, half, scope, feeds, fetches) <= tolerance
    promoted = {k: why for k, why in report.kept_float32().items() if why.startswith("tolerance: ")}
    assert promoted and len(report.float32_ops) > len(plain_report.float32_ops)
    assert len(report.float16_ops) > len(report.ops) // 4, "most of the program should stay float16"
    for why in promoted.values():  # each one's own effect: without it the output error misses the tolerance
        found = re.fullmatch(r"tolerance: promoting it cut the output error from (\S+) to (\S+)", why)
        assert found and float(found[1]) > tolerance >= float(found[2]), why
    assert program.to_bytes() == before, "the caller's program changed"


def test_a_loose_tolerance_keeps_the_plain_decisions(bert):
    program, fetches, scope, feeds = bert
    _, plain = halfway.float16_transpile(program, scope, calibration_feeds=feeds, fetch_names=fetches)
    half, report = halfway.float16_transpile(program, scope, calibration_feeds=feeds, fetch_names=fetches,
                                             tolerance=1e-2)
    assert [(e.index, e.dtype, e.reason) for e in report.ops] == [(e.index, e.dtype, e.reason) for e in plain.ops]


def _fc_program():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [4, 16])
        h = layers.fc(x, 16, act="relu")
        out = layers.fc(h, 8)
    scope = halfway.init_scope(prog, seed=0)
    feed = {"x": np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)}
    return prog, scope, feed, out.name


def test_a_tolerance_float32_everywhere_misses_is_an_error_giving_the_error_reached():
    prog, scope, feed, out = _fc_program()
    before = prog.to_bytes()
    # float16 feeds (keep_io_types=False) round the input itself: no op kept float32 undoes that
    with pytest.raises(PassError, match=r"tolerance 1e-07 cannot be met .* with all \d+ float16 ops kept float32 "
                                        r"still [0-9.e-]+; loosen the tolerance"):
        halfway.float16_transpile(prog, scope, calibration_feeds=feed, fetch_names=[out], tolerance=1e-7,
                                  keep_io_types=False)
    assert prog.to_bytes() == before


def test_a_tolerance_needs_calibration_feeds():
    prog, scope, _, out = _fc_program()
    with pytest.raises(PassError, match="tolerance=0.001 needs calibration_feeds"):
        halfway.float16_transpile(prog, scope, fetch_names=[out], tolerance=1e-3)
    with pytest.raises(PassError, match="tolerance"):
        halfway.float16_transpile(prog, scope, fetch_names=[out], tolerance=0.0)


def test_the_float32_ops_option_keeps_the_given_ops_float32():
    prog, scope, feed, out = _fc_program()
    index = next(i for i, op in enumerate(prog.global_block().ops) if op.type == "relu")
    _, report = halfway.float16_transpile(prog, scope, fetch_names=[out], float32_ops={index: "kept by hand"})
    assert report.kept_float32()[f"#{index} relu"] == "kept by hand"


def test_the_command_line_transpiles_within_a_tolerance(tmp_path, bert):
    program, fetches, scope, feeds = bert
    np.savez(tmp_path / "inputs.npz", **feeds[0])
    model = FIXTURE_DIR / f"{MODEL}.onnx"
    done = cli("transpile", model, "-o", tmp_path / "m", "--fp16", "--calibrate", tmp_path / "inputs.npz",
               "--tolerance", "3e-4")
    assert done.returncode == 0, done.stderr
    assert "tolerance: " in done.stdout
    half, _, _, half_scope = halfway.load(str(tmp_path / "m"))
    got = halfway.Executor().run(half, feeds[0], fetches, half_scope)
    want = halfway.Executor().run(program, feeds[0], fetches, scope)
    assert max(relative_error(g, w) for g, w in zip(got, want)) <= 3e-4
    usage = cli("transpile", model, "-o", tmp_path / "n", "--fp16", "--tolerance", "1e-3")
    assert usage.returncode == 2 and "--calibrate" in usage.stderr
