"""Commands without an optional extra: those that need it fail with one line naming it, the rest
run as before (numba's absence only leaves the numpy epilogues, silently)."""

from __future__ import annotations

import json

import pytest

from tests.support.clirun import DEMO_ONNX, RESNET_TINY, halfway_without, one_line_error

NO_OPENCL = ("pyopencl",)
OPENCL_EXTRA = "pip install 'halfway[opencl]'"


@pytest.mark.parametrize("args", [("devices",), ("run", RESNET_TINY, "--random", "--place", "opencl"),
                                  ("bench", RESNET_TINY, "--place", "opencl:0", "--repeat", "1")],
                         ids=["devices", "run", "bench"])
def test_opencl_commands_name_the_opencl_extra(args):
    one_line_error(halfway_without(NO_OPENCL, *args), OPENCL_EXTRA)


def test_bench_compare_names_the_onnx_extra():
    done = halfway_without(("onnxruntime",), "bench", DEMO_ONNX, "--place", "cpu", "--compare", "onnxruntime",
                           "--repeat", "1")
    one_line_error(done, "pip install 'halfway[onnx]'")


def test_the_demo_runs_on_numpy_with_no_extra():
    done = halfway_without(("pyopencl", "onnxruntime", "numba"), "demo", "--samples", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "numba" not in done.stderr and "onnxruntime" not in done.stderr
    assert f"running on the CPU only: the OpenCL backend needs pyopencl: {OPENCL_EXTRA}" in done.stderr
    assert {row["place"] for row in json.loads(done.stdout)["rows"]} == {"cpu"}
