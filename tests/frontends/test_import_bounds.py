"""Importers bound what a model file makes them do: ONNX's shape inference cannot hang on a
``Range(0, 1e11, 1)`` (it runs bounded), a required input left empty and an external-data
location holding a NUL byte are errors naming them, and a model file larger than
``HALFWAY_MAX_MODEL_BYTES`` is refused before it is read — .onnx, .pdmodel and model.json alike."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import halfway
from halfway.ir.errors import HalfwayError
from halfway.ir.limits import FileSizeError
from tests.support.watchdog import in_child, watchdog

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
F = TensorProto.FLOAT


def _model(nodes, inputs, inits=(), opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "bounds", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", F, None)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _range_model() -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("s", 0), ("l", 1e11), ("d", 1))]
    return _model([helper.make_node("Range", ["s", "l", "d"], ["r"]), helper.make_node("Add", ["x", "r"], ["y"])],
                  [("x", [1])], inits)


def _load_refused(model: onnx.ModelProto) -> None:
    """In the child: the import must end in a HalfwayError."""
    try:
        halfway.load(model)
    except HalfwayError:
        return
    raise AssertionError("the model loaded")


def test_a_huge_range_does_not_hang_shape_inference():
    kind, detail = in_child(_load_refused, _range_model(), seconds=90)
    assert (kind, detail) == ("ok", "")


def test_a_required_input_left_empty_is_named():
    pads = numpy_helper.from_array(np.array([1, 1], np.int64), "pads")
    model = _model([helper.make_node("Pad", ["", "pads"], ["y"])], [("x", [2])], [pads])
    with watchdog(30), pytest.raises(HalfwayError, match=r"input 0 \(data\) of Pad-17 is required, but the node "
                                                         r"gives none"):
        halfway.load(model)


def test_an_external_data_location_holding_nul_is_refused(tmp_path):
    weights = numpy_helper.from_array(np.ones(4, np.float32), "w")
    weights.data_location = TensorProto.EXTERNAL
    weights.ClearField("raw_data")
    entry = weights.external_data.add()
    entry.key, entry.value = "location", "weights\x00.bin"
    path = tmp_path / "m.onnx"
    path.write_bytes(_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", [4])], [weights]).SerializeToString())
    with watchdog(30), pytest.raises(HalfwayError, match=r"tensor 'w' keeps its data in external file "
                                                         r"'weights\\x00.bin'.*without NUL bytes"):
        halfway.load(path)


# -- the model file size limit --------------------------------------------------------------------------
def _onnx_file(folder: Path) -> Path:
    path = folder / "model.onnx"
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [4])]), path)
    return path


def _pdmodel_file(folder: Path) -> Path:
    shutil.copy(FIXTURES / "paddle" / "mlp_tiny.pdmodel", folder / "model.pdmodel")
    shutil.copy(FIXTURES / "paddle" / "mlp_tiny.pdiparams", folder / "model.pdiparams")
    return folder / "model.pdmodel"


def _pir_folder(folder: Path) -> Path:
    shutil.copytree(FIXTURES / "paddle3" / "pir" / "resnet", folder / "export")
    return folder / "export"


def _unnamed_onnx_file(folder: Path) -> Path:
    path = _onnx_file(folder)
    return path.rename(folder / "model")


MAKERS = {"onnx": _onnx_file, "pdmodel": _pdmodel_file, "model.json": _pir_folder, "no suffix": _unnamed_onnx_file}


@pytest.mark.parametrize("kind", MAKERS)
def test_a_model_file_over_the_limit_is_refused_naming_it_and_the_limit(tmp_path, monkeypatch, kind):
    path = MAKERS[kind](tmp_path)
    halfway.load(path)  # within the default limit
    monkeypatch.setenv("HALFWAY_MAX_MODEL_BYTES", "20")
    with pytest.raises(FileSizeError, match=r"a model file of [\d,]+ bytes, more than the limit of 20; "
                                            r"HALFWAY_MAX_MODEL_BYTES raises it"):
        halfway.load(path)


@pytest.mark.parametrize("name", ["big.onnx", "big.pdmodel", "big"])
def test_a_sparse_16_gb_model_file_is_refused_before_it_is_read(tmp_path, name):
    path = tmp_path / name
    with open(path, "wb") as f:
        f.truncate(16 << 30)  # sparse: no disk or memory spent
    with watchdog(30), pytest.raises(FileSizeError, match=rf"{name}: a model file of 17,179,869,184 bytes"):
        halfway.load(path)
