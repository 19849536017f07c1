"""Paddle 3 models, as PIR JSON and as legacy .pdmodel, load and match paddle.inference's outputs."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway.executor import Executor
from halfway.executor.signatures import PreparedBySignature
from halfway.frontends.paddle import PirConversionError, UnsupportedPirOpError
from halfway.frontends.paddle import load as load_pir
from halfway.ir.io import save_inference_model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle3"
MODELS = ["resnet", "mobilenet", "encoder", "detector"]


def _model(fmt: str, name: str) -> tuple[Path, list[dict[str, np.ndarray]]]:
    """The model's path and its recorded runs (inputs and Paddle's outputs), one per input shape."""
    folder = FIXTURES / fmt
    path = folder / name if fmt == "pir" else folder / f"{name}.pdmodel"
    runs = sorted(folder.glob(f"{name}_io*.npz"))
    return path, [dict(np.load(run)) for run in runs]


@pytest.mark.parametrize(("fmt", "name"), [("pir", "ops")] + [(fmt, name) for name in MODELS for fmt in ("pir", "legacy")])
def test_matches_paddle_on_every_fetch(fmt, name):
    path, runs = _model(fmt, name)
    program, feeds, fetches, scope = halfway.load(path)
    prepared = Executor().prepare(program, feeds, fetches, scope)
    for io in runs:
        assert fetches == list(io["__fetch_names__"])
        got = prepared.run({n: io[n] for n in feeds})
        for fetch, value in zip(fetches, got):
            expected = io[fetch]
            assert value.shape == expected.shape, fetch
            assert np.abs(value - expected).max() <= 1e-4 * np.abs(expected).max(), fetch


@pytest.mark.parametrize("name", ["resnet", "encoder"])
def test_one_import_runs_at_every_recorded_shape(name):
    path, runs = _model("pir", name)
    program, feeds, fetches, scope = halfway.load(path)
    prepared = Executor().prepare(program, feeds, fetches, scope)
    assert isinstance(prepared, PreparedBySignature)
    for io in runs:
        prepared.run({n: io[n] for n in feeds})
    assert len(prepared.signatures) == len(runs) == 2


def test_encoder_declares_its_ids_and_mask_with_unknown_dims():
    program, feeds, _, _ = halfway.load(FIXTURES / "pir" / "encoder")
    block = program.global_block()
    assert feeds == ["input_ids", "attention_mask"]
    assert [(block.var(n).dtype.name, list(block.var(n).shape)) for n in feeds] == [("int64", [-1, -1])] * 2
    types = {op.type for op in block.ops}
    assert {"lookup_table_v2", "layer_norm", "fill_any_like", "cumsum", "matmul_v2", "gelu"} <= types


def test_detector_keeps_its_run_time_size_as_ops():
    program, _, _, _ = halfway.load(FIXTURES / "pir" / "detector")
    ops = program.global_block().ops
    bilinear = [op for op in ops if op.type == "bilinear_interp_v2"]
    assert len(bilinear) == 2 and all(op.input("OutSize") for op in bilinear)
    assert {"shape", "slice", "nearest_interp_v2", "conv2d_transpose"} <= {op.type for op in ops}


def test_folder_prefix_and_json_path_load_the_same_program():
    folder = FIXTURES / "pir" / "resnet"
    loaded = [halfway.load(p) for p in (folder, folder / "model", folder / "model.json")]
    assert len({prog.to_bytes() for prog, *_ in loaded}) == 1
    assert {halfway.frontends.load.model_format(p) for p in (folder, folder / "model", folder / "model.json")} == {"pir"}


def test_full_operands_become_attrs():
    program, _, _, scope = halfway.load(FIXTURES / "pir" / "encoder")
    ops = program.global_block().ops
    reshape = next(op for op in ops if op.type == "reshape2")
    assert list(reshape.attr("shape")) == [0, 0, 4, 8] and not reshape.input("Shape")
    dropout = next(op for op in ops if op.type == "dropout")
    assert dropout.attr("dropout_prob") == pytest.approx(0.1)
    assert all(not name.startswith("constant") for name in scope)


def _edited(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / "pir" / "resnet", folder)
    data = json.loads((folder / "model.json").read_text())
    edit(data["program"]["regions"][0]["blocks"][0]["ops"])
    (folder / "model.json").write_text(json.dumps(data))
    return folder


def test_unsupported_ops_are_listed_at_once(tmp_path):
    def rename(ops):
        for op in ops:
            if op["#"] == "1.relu":
                op["#"] = "1.my_relu"
            if op["#"] == "1.pool2d":
                op["#"] = "1.my_pool"

    folder = _edited(tmp_path, rename)
    with pytest.raises(UnsupportedPirOpError, match=r"model\.json: \d+ op\(s\) of 2 type\(s\) .*\(pd_op\.my_pool, "
                                                    r"pd_op\.my_relu\)"):
        halfway.load(folder)


def test_computed_operand_where_an_attr_is_needed_names_the_op(tmp_path):
    def pool_size_from_a_feed(ops):
        pool = next(op for op in ops if op["#"] == "1.pool2d")
        data = next(op for op in ops if op["#"] == "1.data")
        pool["I"][1] = {"%": data["O"][0]["%"]}

    with pytest.raises(PirConversionError, match=r"model\.json: op #\d+ pd_op\.pool2d: pool2d's kernel_size must "
                                                 r"be a constant"):
        load_pir(_edited(tmp_path, pool_size_from_a_feed))


def test_not_pir_json_is_refused_naming_the_file(tmp_path):
    (tmp_path / "model.json").write_text('{"base_code": {"magic": "other"}}')
    with pytest.raises(halfway.HalfwayError, match=r"model\.json: not a Paddle PIR program"):
        halfway.load(tmp_path / "model.json")


def test_parameters_that_disagree_with_the_program_are_refused(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / "pir" / "resnet", folder)
    params = folder / "model.pdiparams"
    params.write_bytes(params.read_bytes()[:-4])
    with pytest.raises(halfway.HalfwayError, match=r"model\.pdiparams"):
        halfway.load(folder)


@pytest.mark.parametrize("name", MODELS)
def test_legacy_models_save_back_byte_for_byte(tmp_path, name):
    path, _ = _model("legacy", name)
    program, feeds, fetches, scope = halfway.load(path)
    save_inference_model(tmp_path / name, feeds, fetches, program, scope)
    assert (tmp_path / f"{name}.pdmodel").read_bytes() == path.read_bytes()
    assert (tmp_path / f"{name}.pdiparams").read_bytes() == path.with_suffix(".pdiparams").read_bytes()


def test_reader_decodes_names_attrs_types_and_missing_operands():
    from halfway.frontends.paddle.pir import MISSING, read_program

    tensor = {"#": "0.t_dtensor", "D": [{"#": "0.t_f32"}, [-1, 8], "NCHW", [], 0]}
    program = {"base_code": {"magic": "pir", "trainable": True, "version": 4}, "program": {"regions": [{"blocks": [{
        "#": "block_0", "args": [], "ops": [
            {"#": "p", "A": [0, 1, 1, "w"], "O": {"%": 1, "TT": tensor}},
            {"#": "1.dropout", "I": [{"%": 1}, {"%": 0}], "O": [{"%": 2, "TT": tensor}],
             "A": [{"N": "mode", "AT": {"#": "0.a_str", "D": "upscale_in_train"}},
                   {"N": "axes", "AT": {"#": "0.a_array", "D": [{"#": "0.a_i64", "D": 1}]}},
                   {"N": "shape", "AT": {"#": "1.a_intarray", "D": [2, 3]}}]}]}]}]}}
    param, dropout = read_program(json.dumps(program), "m.json")
    assert (param.name, param.attrs, param.outputs) == ("parameter", {"name": "w"}, [1])
    assert (dropout.name, dropout.short, dropout.inputs) == ("pd_op.dropout", "dropout", [1, MISSING])
    assert dropout.attrs == {"mode": "upscale_in_train", "axes": [1], "shape": [2, 3]}
    assert (dropout.types[0].dtype.name, dropout.types[0].shape) == ("float32", (-1, 8))
