"""The command line as a whole: help, exit codes, one-line errors, plugins, registry listings."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap

import pytest

from halfway.cli.main import COMMANDS
from halfway.passes import DEFAULT_PIPELINE
from tests.support.clirun import BIN, PLUGIN, RESNET_TINY, halfway, halfway_json, one_line_error

NAMES = [c.name for c in COMMANDS]


def test_help_lists_every_command_and_the_exit_codes():
    done = halfway("--help")
    assert done.returncode == 0
    for name in ["demo", "inspect", "transpile", "run", "bench", "diff", "graph", "devices", "passes", "ops"]:
        assert name in NAMES and f"    {name}" in done.stdout
    words = " ".join(done.stdout.split())
    assert all(f"{listed.name} {listed.summary}" in words for listed in COMMANDS)
    assert "exit codes" in done.stdout and "halfway.plugins" in done.stdout


@pytest.mark.parametrize("listed", COMMANDS, ids=NAMES)
def test_each_command_explains_itself(listed):
    command = listed.load()
    done = halfway(listed.name, "--help")
    assert done.returncode == 0, done.stderr
    assert command.description.split("\n")[0] in done.stdout
    assert "--debug" in done.stdout and "--plugin" in done.stdout


def test_a_malformed_command_line_exits_2():
    assert halfway().returncode == 2
    assert halfway("inspect").returncode == 2  # MODEL missing
    assert halfway("frobnicate").returncode == 2
    assert halfway("bench", RESNET_TINY, "--repeat", "0").returncode == 2


@pytest.mark.parametrize("args", [("inspect", "{}"), ("run", "{}"), ("bench", "{}"), ("graph", "{}", "-o", "x.dot"),
                                  ("transpile", "{}", "-o", "m"), ("diff", "{}", RESNET_TINY),
                                  ("demo", "--model", "{}")], ids=lambda a: a[0])
def test_a_missing_model_is_one_line_naming_it(tmp_path, args):
    missing = tmp_path / "nowhere" / "model.pdmodel"
    done = halfway(*(str(missing) if a == "{}" else a for a in args), cwd=tmp_path)
    one_line_error(done, str(missing))
    assert done.returncode == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".pdmodel", ".onnx"])
def test_a_corrupt_model_is_one_line_and_writes_nothing(tmp_path, suffix):
    corrupt = tmp_path / f"broken{suffix}"
    corrupt.write_bytes(b"\x08\x96\x01 this is not a model \xff\xfe" * 20)
    for args in (("inspect",), ("transpile", "-o", tmp_path / "m"), ("graph", "-o", tmp_path / "g.dot")):
        done = halfway(args[0], corrupt, *args[1:])
        one_line_error(done, corrupt.name)
    assert sorted(p.name for p in tmp_path.iterdir()) == [corrupt.name]


def test_debug_shows_the_traceback(tmp_path):
    done = halfway("inspect", tmp_path / "missing.onnx", "--debug")
    assert done.returncode != 0
    assert "Traceback" in done.stderr and "missing.onnx" in done.stderr


def test_passes_and_ops_list_the_registries():
    listed = halfway_json("passes")
    fresh = subprocess.run([sys.executable, "-c", "import halfway.passes as p; print([i.name for i in "
                            "p.registered_passes()])"], capture_output=True, text=True, check=True).stdout
    assert [p["name"] for p in listed] == ast.literal_eval(fresh)
    assert set(DEFAULT_PIPELINE.split(",")) <= {p["name"] for p in listed}
    assert all(p["from"] == "built-in" for p in listed)
    ops = {o["op"]: o for o in halfway_json("ops")}
    assert ops["conv2d"]["schema"] and "float16" in ops["conv2d"]["kernels"]["numpy"]
    assert "square_relu" not in ops
    table = halfway("ops").stdout
    assert "conv2d" in table and "numpy kernels" in table


def test_a_plugin_file_adds_a_pass_an_op_and_its_kernel():
    passes = {p["name"]: p for p in halfway_json("passes", "--plugin", PLUGIN)}
    assert passes["swap_relu_for_square_relu"]["from"] == str(PLUGIN)
    assert passes["swap_relu_for_square_relu"]["summary"] == "Replace relu by square_relu (a plugin op)."
    ops = {o["op"]: o for o in halfway_json("ops", "--plugin", PLUGIN)}
    assert ops["square_relu"]["from"] == str(PLUGIN)
    assert ops["square_relu"]["kernels"]["numpy"] == ["float16", "float32"]
    # also accepted before the subcommand
    assert "swap_relu_for_square_relu" in halfway("--plugin", PLUGIN, "passes").stdout


def _install_entry_point(site, module_source: str, target: str) -> None:
    """An installed distribution, as pip leaves it: a module and its dist-info with entry points."""
    (site / "my_halfway_plugin.py").write_text(module_source)
    info = site / "my_halfway_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-halfway-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[halfway.plugins]\nmine = {target}\n")


def test_an_entry_point_plugin_loads_without_flags(tmp_path):
    _install_entry_point(tmp_path, PLUGIN.read_text(), "my_halfway_plugin")
    done = halfway("passes", "--json", env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    origin = {p["name"]: p["from"] for p in json.loads(done.stdout)}
    assert origin["swap_relu_for_square_relu"] == "mine"


def test_an_entry_point_naming_a_function_is_called(tmp_path):
    source = PLUGIN.read_text().replace("register_op(", "def register():\n    register_op(", 1)
    source = source.replace('@register_pass("swap_relu_for_square_relu")', '@register_pass("late_pass")')
    _install_entry_point(tmp_path, source, "my_halfway_plugin:register")
    done = halfway("ops", "--json", env={"PYTHONPATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert {o["op"]: o["from"] for o in json.loads(done.stdout)}["square_relu"] == "mine"


def test_a_broken_plugin_is_one_line_naming_it(tmp_path):
    broken = tmp_path / "broken_plugin.py"
    broken.write_text("raise RuntimeError('cannot start')\n")
    one_line_error(halfway("passes", "--plugin", broken), "broken_plugin.py", "RuntimeError: cannot start")
    one_line_error(halfway("passes", "--plugin", "no.such.module"), "no.such.module")
    twice = tmp_path / "twice.py"
    twice.write_text(textwrap.dedent("""
        from halfway.passes import register_pass
        @register_pass("fuse_conv_bn")
        def again(program, scope, options):
            pass
    """))
    one_line_error(halfway("passes", "--plugin", twice), "twice.py", "fuse_conv_bn", "already registered")


def test_a_reader_that_goes_away_stops_it_quietly():
    """``halfway inspect --text | head``: the pipe closes before the text is written."""
    command = [str(BIN), "inspect", RESNET_TINY, "--text"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    assert process.wait(timeout=300) == 141
    assert process.stderr.read() == b""


# -- bad input: one line, no hang, nothing written -----------------------------------------------------
@pytest.mark.parametrize("body", ["import sys\nsys.exit(0)\n", "raise SystemExit(3)\n"])
def test_a_plugin_that_exits_does_not_set_the_exit_code(tmp_path, body):
    plugin = tmp_path / "quitter.py"
    plugin.write_text(body)
    done = halfway("passes", "--plugin", plugin)
    assert done.returncode == 1
    one_line_error(done, "plugin", "quitter.py", "called sys.exit(")


def test_model_files_that_are_not_regular_files_fail_at_once(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.onnx")
    os.mkfifo(tmp_path / "pipe.pdmodel")
    (tmp_path / "zero").symlink_to("/dev/zero")
    for name in ("pipe.onnx", "pipe.pdmodel", "zero"):
        one_line_error(halfway("inspect", tmp_path / name), name, "not a regular file")


def test_an_npy_header_claiming_more_than_the_file_holds(tmp_path):
    import io

    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12,)})
    (tmp_path / "huge.npy").write_bytes(header.getvalue() + bytes(16))
    done = halfway("run", RESNET_TINY, "--input", f"image={tmp_path / 'huge.npy'}")
    one_line_error(done, "huge.npy: the header claims a float32 array of shape [1000000000000]")


@pytest.mark.parametrize("args", [("run", RESNET_TINY, "--seed", "-1"), ("diff", RESNET_TINY, RESNET_TINY, "--atol", "nan"),
                                  ("diff", RESNET_TINY, RESNET_TINY, "--rtol", "-1")])
def test_out_of_range_numbers_are_usage_errors(args):
    done = halfway(*args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr


def test_an_empty_output_path_writes_nothing(tmp_path):
    done = halfway("transpile", RESNET_TINY, "-o", "", cwd=tmp_path)
    one_line_error(done, "empty path")
    assert list(tmp_path.iterdir()) == []


def test_a_failed_command_writes_only_its_error_line(tmp_path):
    (tmp_path / "taken.pdmodel").mkdir()
    done = halfway("transpile", RESNET_TINY, "-o", tmp_path / "taken")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("halfway: error: "), done.stderr


def test_demo_says_which_model_it_saved_when_the_second_save_fails(tmp_path):
    (tmp_path / "demo_bert" / "model_fp16.pdmodel").mkdir(parents=True)  # the shipped models: a folder each
    done = halfway("demo", "--out", tmp_path, "--samples", "1", "--place", "cpu")
    line = one_line_error(done, "model_fp16.pdmodel: cannot write", "the float32 model was saved")
    assert str(tmp_path / "demo_bert" / "model_fp32.pdmodel") in line
    assert (tmp_path / "demo_resnet18" / "model_fp16.pdmodel").is_file()
