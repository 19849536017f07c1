"""``halfway transpile``: saved models that still compute Paddle's outputs, float16 ones within
float16's error, reports, plugin passes, and nothing written on failure."""

from __future__ import annotations

import json

import numpy as np
import pytest

import halfway
from halfway.executor import Executor
from halfway.proto import framework_pb2
from tests.support.clirun import PLUGIN, RESNET_TINY, halfway_json, one_line_error, proto_of, proto_op_types
from tests.support.clirun import halfway as cli

IO = np.load(RESNET_TINY.with_name("resnet_tiny_io.npz"))
FETCH = str(IO["__fetch_names__"][0])
FP16 = framework_pb2.VarType.FP16


def _outputs(model) -> np.ndarray:
    program, feeds, fetches, scope = halfway.load_inference_model(str(model))
    assert feeds == ["image"] and fetches == [FETCH]
    image = IO["image"].astype(program.global_block().var("image").dtype.numpy)
    return Executor().run(program, {"image": image}, fetches, scope)[0]


def _var_dtypes(model) -> dict[str, int]:
    return {v.name: v.type.dense_tensor.tensor.data_type for v in proto_of(model).blocks[0].vars
            if v.type.HasField("dense_tensor")}


def test_default_pipeline_fuses_and_keeps_paddles_outputs(tmp_path):
    done = cli("transpile", RESNET_TINY, "-o", tmp_path / "fused")
    assert done.returncode == 0, done.stderr
    saved = tmp_path / "fused.pdmodel"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fused.pdiparams", "fused.pdmodel", "fused.pdmodel.sha256"]
    before, after = proto_op_types(RESNET_TINY), proto_op_types(saved)
    assert "batch_norm" not in after and after["fused_conv2d"] > 0
    assert sum(after.values()) < sum(before.values())
    np.testing.assert_allclose(_outputs(saved), IO[FETCH], rtol=1e-5, atol=1e-6)
    assert "fuse_conv_bn" in done.stdout and f"wrote {saved}" in done.stdout


def test_json_report_counts_what_changed(tmp_path):
    report = halfway_json("transpile", RESNET_TINY, "-o", tmp_path / "m", "--passes",
                          "fold_constants,fuse_conv_bn,dce")
    assert [p["pass"] for p in report["passes"]] == ["fold_constants", "fuse_conv_bn", "dce"]
    batch_norms = proto_op_types(RESNET_TINY)["batch_norm"]
    assert report["passes"][1]["op_delta"]["batch_norm"] == -batch_norms
    after = proto_op_types(tmp_path / "m.pdmodel")
    assert report["ops_fused"] == sum(proto_op_types(RESNET_TINY).values()) - sum(after.values())
    assert report["output"] == [str(tmp_path / "m.pdmodel"), str(tmp_path / "m.pdiparams")]
    assert report["float16"] is None


def test_no_passes_saves_the_same_program(tmp_path):
    assert cli("transpile", RESNET_TINY, "-o", tmp_path / "same", "--passes", "none").returncode == 0
    assert proto_of(tmp_path / "same.pdmodel") == proto_of(RESNET_TINY)


def test_fp16_halves_the_parameters_and_stays_close(tmp_path):
    done = cli("transpile", RESNET_TINY, "-o", tmp_path / "half", "--fp16")
    assert done.returncode == 0, done.stderr
    half = tmp_path / "half.pdmodel"
    dtypes = _var_dtypes(half)
    assert dtypes["image"] == framework_pb2.VarType.FP32 and dtypes[FETCH] == framework_pb2.VarType.FP32
    assert proto_op_types(half)["cast"] >= 2
    assert sum(d == FP16 for d in dtypes.values()) > len(dtypes) // 2
    np.testing.assert_allclose(_outputs(half), IO[FETCH], rtol=2e-2, atol=2e-3)
    assert "casts inserted" in done.stdout
    params = tmp_path / "half.pdiparams"
    assert params.stat().st_size < 0.7 * RESNET_TINY.with_suffix(".pdiparams").stat().st_size


def test_fp16_options(tmp_path):
    assert cli("transpile", RESNET_TINY, "-o", tmp_path / "io16", "--fp16", "--no-keep-io-types").returncode == 0
    dtypes = _var_dtypes(tmp_path / "io16.pdmodel")
    assert dtypes["image"] == FP16 and dtypes[FETCH] == FP16
    report = halfway_json("transpile", RESNET_TINY, "-o", tmp_path / "black", "--fp16", "--black-list", "softmax")
    assert report["float16"]["casts inserted"] != "0"
    program = halfway.load_inference_model(str(tmp_path / "black"))[0]
    softmax = [op for op in program.global_block().ops if op.type == "softmax"]
    assert softmax and all(program.global_block().var(op.output("Out")[0]).dtype.name == "float32"
                           for op in softmax)
    np.savez(tmp_path / "calibration.npz", image=IO["image"])
    assert cli("transpile", RESNET_TINY, "-o", tmp_path / "cal", "--fp16", "--calibrate",
               tmp_path / "calibration.npz").returncode == 0


def test_dump_dir_holds_the_program_around_every_pass(tmp_path):
    assert cli("transpile", RESNET_TINY, "-o", tmp_path / "m", "--passes", "fuse_conv_bn,fuse_conv_act",
               "--dump-dir", tmp_path / "dump").returncode == 0
    names = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert names == ["00_fuse_conv_bn.after.txt", "00_fuse_conv_bn.before.txt",
                     "01_fuse_conv_act.after.txt", "01_fuse_conv_act.before.txt"]
    before, after = ((tmp_path / "dump" / names[i]).read_text() for i in (1, 0))
    assert before.count(" = batch_norm(") == proto_op_types(RESNET_TINY)["batch_norm"]
    assert after.count(" = batch_norm(") < before.count(" = batch_norm(")


def test_fp16_runs_as_a_pass_of_the_pipeline(tmp_path):
    """--fp16 is the float16 pass run last by the PassManager: timed in the table, verified, dumped."""
    report = halfway_json("transpile", RESNET_TINY, "-o", tmp_path / "m", "--passes", "fuse_conv_bn", "--fp16",
                          "--dump-dir", tmp_path / "dump")
    assert [p["pass"] for p in report["passes"]] == ["fuse_conv_bn", "float16"]
    float16 = report["passes"][1]
    assert float16["modified"] and float16["seconds"] > 0 and float16["op_delta"]["cast"] >= 2
    assert float16["stats"]["casts"] == float16["op_delta"]["cast"]
    assert report["float16"]["casts inserted"] == str(float16["stats"]["casts"])
    assert report["ops_fused"] == -sum(report["passes"][0]["op_delta"].values())
    dumped = (tmp_path / "dump" / "01_float16.after.txt").read_text()
    assert dumped.count(" = cast(") == float16["op_delta"]["cast"]
    table = cli("transpile", RESNET_TINY, "-o", tmp_path / "t", "--passes", "none", "--fp16").stdout
    assert "float16" in table.split("casts inserted")[0] and " ms" in table


def test_a_plugin_pass_runs_from_the_command_line(tmp_path):
    out = tmp_path / "squared"
    done = cli("transpile", RESNET_TINY, "-o", out, "--plugin", PLUGIN, "--passes", "swap_relu_for_square_relu",
               "--json")
    assert done.returncode == 0, done.stderr
    relus = proto_op_types(RESNET_TINY)["relu"]
    assert json.loads(done.stdout)["passes"][0]["stats"] == {"swapped": relus}
    assert proto_op_types(out.with_suffix(".pdmodel"))["square_relu"] == relus
    # running it needs the plugin's op: without it, one line naming the op
    one_line_error(cli("run", out.with_suffix(".pdmodel")), "square_relu")
    assert cli("run", out.with_suffix(".pdmodel"), "--plugin", PLUGIN).returncode == 0


def test_failures_write_nothing(tmp_path):
    out = tmp_path / "m"
    one_line_error(cli("transpile", RESNET_TINY, "-o", out, "--passes", "no_such_pass"), "no_such_pass")
    one_line_error(cli("transpile", RESNET_TINY, "-o", out, "--fp16", "--calibrate", tmp_path / "none.npz"),
                   "none.npz")
    one_line_error(cli("transpile", RESNET_TINY, "-o", tmp_path / "m.onnx", "--onnx-opset", "12"), "opset 12")
    assert list(tmp_path.iterdir()) == []
    assert cli("transpile", RESNET_TINY).returncode == 2  # -o is required


def test_an_onnx_output_is_an_onnx_model_that_onnxruntime_runs(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import onnx

    out = tmp_path / "fused.onnx"
    done = cli("transpile", RESNET_TINY, "-o", out, "--onnx-contrib", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == [str(out)]
    model = onnx.load(out)
    onnx.checker.check_model(model, full_check=True)
    assert "FusedConv" in {node.op_type for node in model.graph.node}
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = session.run([FETCH], {"image": IO["image"]})[0]
    np.testing.assert_allclose(got, IO[FETCH], rtol=1e-4, atol=1e-5 * float(np.abs(IO[FETCH]).max()))
