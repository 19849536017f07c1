"""save_inference_model / load_inference_model: Paddle's files byte for byte, layouts, atomic writes."""

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from halfway.ir import AttrType, DType, IRError, Program, SerdeError, VarKind
from halfway.ir import io as hio
from halfway.ir.io import load_inference_model, save_inference_model
from halfway.ir.params import encode_tensor
from halfway.ir.scope import Scope

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"
RESNET = FIXTURES / "resnet_tiny"
LEGACY = FIXTURES / "resnet_tiny_legacy"
FEEDS, FETCHES = ["image"], ["softmax_0.tmp_0"]


def _files(folder: Path) -> dict[str, bytes]:
    """The model files in ``folder`` by name (manifests left out)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if not p.name.endswith(".sha256")}


def _hand_built() -> tuple[Program, Scope]:
    """x -> conv2d(w) + b -> y, with a float16 and a bfloat16 parameter on the side."""
    prog = Program()
    block = prog.global_block()
    block.create_var("x", shape=[-1, 3, 8, 8])
    block.create_var("conv.w", shape=[4, 3, 3, 3], persistable=True)
    block.create_var("conv.b", shape=[4], persistable=True)
    block.create_var("half", dtype="float16", shape=[2, 2], persistable=True)
    block.create_var("brain", dtype="bfloat16", shape=[3], persistable=True)
    block.create_var("t", shape=[-1, 4, 8, 8])
    block.create_var("y", shape=[-1, 4, 8, 8])
    block.append_op("conv2d", {"Input": ["x"], "Filter": ["conv.w"]}, {"Output": ["t"]},
                    {"strides": [1, 1], "paddings": [1, 1]})
    block.append_op("elementwise_add", {"X": ["t"], "Y": ["conv.b"]}, {"Out": ["y"]}, {"axis": 1})
    rng = np.random.default_rng(0)
    scope = Scope({"conv.w": rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
                   "conv.b": rng.standard_normal(4).astype(np.float32),
                   "half": np.array([[1, 2], [3, 4]], np.float16),
                   "brain": np.array([0x3F80, 0x4000, 0xC040], np.uint16)})
    return prog, scope


def _assert_same_values(a: Scope, b: Scope) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype
        np.testing.assert_array_equal(a[name], b[name])


# -- loading Paddle's files -----------------------------------------------------------------------------
def test_load_paddle_model_and_legacy_folder_agree():
    prog, feeds, fetches, scope = load_inference_model(RESNET)
    assert (feeds, fetches) == (FEEDS, FETCHES)
    assert len(scope) == 23
    assert sorted(scope) == sorted(v.name for v in prog.persistable_vars())
    assert prog.to_bytes() == (FIXTURES / "resnet_tiny.pdmodel").read_bytes()
    legacy_prog, legacy_feeds, legacy_fetches, legacy_scope = load_inference_model(LEGACY)
    assert (legacy_feeds, legacy_fetches) == (FEEDS, FETCHES)
    assert legacy_prog.to_bytes() == prog.to_bytes()
    _assert_same_values(scope, legacy_scope)


def test_every_way_of_naming_a_model(tmp_path):
    _, _, _, scope = load_inference_model(RESNET)
    folder = tmp_path / "only"
    folder.mkdir()
    shutil.copy(FIXTURES / "resnet_tiny.pdmodel", folder / "net.pdmodel")
    shutil.copy(FIXTURES / "resnet_tiny.pdiparams", folder / "net.pdiparams")
    for path in [str(RESNET), FIXTURES / "resnet_tiny.pdmodel", folder, str(folder) + os.sep]:
        _assert_same_values(load_inference_model(path)[3], scope)
    fluid = tmp_path / "fluid"
    fluid.mkdir()
    shutil.copy(FIXTURES / "resnet_tiny.pdmodel", fluid / "prog")
    shutil.copy(FIXTURES / "resnet_tiny.pdiparams", fluid / "params")
    _assert_same_values(load_inference_model(fluid, model_filename="prog", params_filename="params")[3], scope)


def test_mlp_fixture_loads():
    prog, feeds, fetches, scope = load_inference_model(FIXTURES / "mlp_tiny")
    assert len(feeds) == 1 and len(fetches) == 1
    assert len(scope) == len(prog.persistable_vars()) > 0


# -- saving --------------------------------------------------------------------------------------------
def test_resaving_a_paddle_model_is_byte_identical(tmp_path):
    prog, feeds, fetches, scope = load_inference_model(RESNET)
    save_inference_model(tmp_path / "resnet", feeds, fetches, prog, scope)
    assert (tmp_path / "resnet.pdmodel").read_bytes() == (FIXTURES / "resnet_tiny.pdmodel").read_bytes()
    assert (tmp_path / "resnet.pdiparams").read_bytes() == (FIXTURES / "resnet_tiny.pdiparams").read_bytes()
    save_inference_model(tmp_path / "legacy", feeds, fetches, prog, scope, model_filename="__model__")
    assert _files(tmp_path / "legacy") == _files(LEGACY)
    assert sorted(os.listdir(tmp_path)) == ["legacy", "resnet.pdiparams", "resnet.pdmodel", "resnet.pdmodel.sha256"]


def test_save_into_a_directory(tmp_path):
    prog, feeds, fetches, scope = load_inference_model(RESNET)
    save_inference_model(tmp_path, feeds, fetches, prog, scope)
    assert sorted(os.listdir(tmp_path)) == ["model.pdiparams", "model.pdmodel", "model.pdmodel.sha256"]
    save_inference_model(f"{tmp_path / 'new' / 'deeper'}{os.sep}", feeds, fetches, prog, scope)
    assert sorted(os.listdir(tmp_path / "new" / "deeper")) == ["model.pdiparams", "model.pdmodel", "model.pdmodel.sha256"]
    _assert_same_values(load_inference_model(tmp_path / "new" / "deeper")[3], scope)


def test_hand_built_program_save_load_save_is_byte_identical(tmp_path):
    prog, scope = _hand_built()
    save_inference_model(tmp_path / "a" / "net", ["x"], ["y"], prog, scope)
    loaded, feeds, fetches, loaded_scope = load_inference_model(tmp_path / "a" / "net")
    assert (feeds, fetches) == (["x"], ["y"])
    _assert_same_values(loaded_scope, scope)
    save_inference_model(tmp_path / "b" / "net", feeds, fetches, loaded, loaded_scope)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
    save_inference_model(tmp_path / "c", feeds, fetches, loaded, loaded_scope, model_filename="__model__")
    again, _, _, legacy_scope = load_inference_model(tmp_path / "c")
    assert again.to_bytes() == loaded.to_bytes()
    _assert_same_values(legacy_scope, scope)


def test_saved_program_has_paddle_feed_and_fetch_ops(tmp_path):
    prog, scope = _hand_built()
    prog.global_block().create_var("x2", shape=[1])
    save_inference_model(tmp_path / "net", ["x", "x2"], ["y", "t"], prog, scope)
    saved, feeds, fetches, _ = load_inference_model(tmp_path / "net")
    assert (feeds, fetches) == (["x", "x2"], ["y", "t"])
    block = saved.global_block()
    ops = block.ops
    assert [op.type for op in ops] == ["feed", "feed", "conv2d", "elementwise_add", "fetch", "fetch"]
    # Paddle prepends each feed op in turn, so the block starts with the last input's.
    assert [(dict(op.inputs), dict(op.outputs), op.attr("col")) for op in ops[:2]] == [
        ({"X": ("feed",)}, {"Out": ("x2",)}, 1), ({"X": ("feed",)}, {"Out": ("x",)}, 0)]
    assert [(dict(op.inputs), dict(op.outputs), op.attr("col")) for op in ops[-2:]] == [
        ({"X": ("y",)}, {"Out": ("fetch",)}, 0), ({"X": ("t",)}, {"Out": ("fetch",)}, 1)]
    assert all(op.attr_type("col") is AttrType.INT for op in ops if op.type in ("feed", "fetch"))
    assert (block.var("feed").kind, block.var("feed").persistable) == (VarKind.FEED_MINIBATCH, True)
    assert (block.var("fetch").kind, block.var("fetch").persistable) == (VarKind.FETCH_LIST, True)


def test_changed_feed_or_fetch_names_replace_the_old_ops(tmp_path):
    prog, _, _, scope = load_inference_model(RESNET)
    save_inference_model(tmp_path / "net", FEEDS, ["linear_0.tmp_1"], prog, scope)
    saved, feeds, fetches, _ = load_inference_model(tmp_path / "net")
    assert (feeds, fetches) == (FEEDS, ["linear_0.tmp_1"])
    types = [op.type for op in saved.global_block().ops]
    assert types.count("feed") == 1 and types.count("fetch") == 1 and types[-1] == "fetch"
    assert not saved.global_block().ops[0].has_attr("op_callstack")


def test_save_does_not_change_the_callers_program_or_scope(tmp_path):
    prog, scope = _hand_built()
    before = prog.to_bytes()
    values = {name: scope[name].copy() for name in scope}
    save_inference_model(tmp_path / "net", ["x"], ["y"], prog, scope)
    assert prog.to_bytes() == before
    assert [op.type for op in prog.global_block().ops] == ["conv2d", "elementwise_add"]
    assert not prog.global_block().has_var("feed")
    _assert_same_values(scope, Scope(values))


def test_save_accepts_a_plain_dict_of_values(tmp_path):
    prog, scope = _hand_built()
    save_inference_model(tmp_path / "net", ["x"], ["y"], prog, {name: scope[name] for name in scope})
    _assert_same_values(load_inference_model(tmp_path / "net")[3], scope)


# -- failing saves leave the files as they were ---------------------------------------------------------
@pytest.fixture
def occupied(tmp_path):
    """tmp_path with old files where a save of 'net' would write."""
    old = {"net.pdmodel": b"old model", "net.pdiparams": b"old params"}
    for name, data in old.items():
        (tmp_path / name).write_bytes(data)
    return tmp_path, old


def test_missing_parameter_writes_nothing(occupied):
    folder, old = occupied
    prog, scope = _hand_built()
    scope.remove("conv.b")
    scope.remove("half")
    with pytest.raises(SerdeError, match=r"no value in the scope for 2 parameter\(s\): \['conv.b', 'half'\]"):
        save_inference_model(folder / "net", ["x"], ["y"], prog, scope)
    assert _files(folder) == old
    with pytest.raises(SerdeError):
        save_inference_model(folder / "fresh", ["x"], ["y"], prog, scope, model_filename="__model__")
    assert _files(folder) == old


def test_wrong_parameter_values_are_named(occupied):
    folder, old = occupied
    prog, scope = _hand_built()
    scope["conv.w"] = np.zeros((4, 3, 3, 1), np.float32)
    scope["brain"] = np.zeros(3, np.float32)
    with pytest.raises(SerdeError) as info:
        save_inference_model(folder / "net", ["x"], ["y"], prog, scope)
    message = str(info.value)
    assert "var 'conv.w' is float32[4, 3, 3, 3] in the program but the value is float32[4, 3, 3, 1]" in message
    assert "var 'brain' is bfloat16[3] in the program but the value is float32[3]" in message
    assert _files(folder) == old


def test_unknown_feed_or_fetch_name(occupied):
    folder, old = occupied
    prog, scope = _hand_built()
    with pytest.raises(IRError, match=r"not declared in the global block: \['nope'\]"):
        save_inference_model(folder / "net", ["x"], ["nope"], prog, scope)
    with pytest.raises(IRError, match="feed names must be a list"):
        save_inference_model(folder / "net", "x", ["y"], prog, scope)
    assert _files(folder) == old


def test_unwritable_destination_writes_nothing(occupied):
    folder, old = occupied
    prog, scope = _hand_built()
    (folder / "plain_file").write_bytes(b"")
    with pytest.raises(SerdeError, match="plain_file/sub/net.pdmodel: cannot write"):
        save_inference_model(folder / "plain_file" / "sub" / "net", ["x"], ["y"], prog, scope)
    (folder / "net.pdiparams").unlink()
    (folder / "net.pdiparams").mkdir()
    with pytest.raises(SerdeError, match="net.pdiparams: cannot write"):
        save_inference_model(folder / "net", ["x"], ["y"], prog, scope)
    assert (folder / "net.pdmodel").read_bytes() == old["net.pdmodel"]
    assert sorted(os.listdir(folder)) == ["net.pdiparams", "net.pdmodel", "plain_file"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root may write anywhere")
def test_read_only_directory_writes_nothing(occupied):
    folder, old = occupied
    prog, scope = _hand_built()
    folder.chmod(0o500)
    try:
        with pytest.raises(SerdeError, match="cannot write"):
            save_inference_model(folder / "net", ["x"], ["y"], prog, scope)
    finally:
        folder.chmod(0o700)
    assert _files(folder) == old


def test_failure_while_moving_files_into_place_restores_the_old_ones(occupied, monkeypatch):
    folder, old = occupied
    prog, scope = _hand_built()
    real_replace, calls = os.replace, []

    def flaky_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(hio.os, "replace", flaky_replace)
    with pytest.raises(SerdeError, match="cannot write .No space left on device.; nothing was written"):
        save_inference_model(folder / "net", ["x"], ["y"], prog, scope)
    assert _files(folder) == old
    calls.clear()
    with pytest.raises(SerdeError):
        save_inference_model(folder / "legacy", ["x"], ["y"], prog, scope, model_filename="__model__")
    assert _files(folder) == old


# -- loading bad models -----------------------------------------------------------------------------------
def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(SerdeError, match=r"nothing\.pdmodel: cannot read"):
        load_inference_model(tmp_path / "nothing")
    (tmp_path / "text.pdmodel").write_text("this is not a protobuf message at all\n")
    with pytest.raises(SerdeError, match=r"text\.pdmodel: "):
        load_inference_model(tmp_path / "text")
    shutil.copy(FIXTURES / "resnet_tiny.pdmodel", tmp_path / "noparams.pdmodel")
    with pytest.raises(SerdeError, match=r"noparams\.pdiparams: cannot read"):
        load_inference_model(tmp_path / "noparams")


def test_directories_that_do_not_say_which_model(tmp_path):
    with pytest.raises(SerdeError, match=r"expected one \*.pdmodel or a __model__ in the directory, "
                                         "but it holds none"):
        load_inference_model(tmp_path)
    for name in ("a.pdmodel", "b.pdmodel"):
        shutil.copy(FIXTURES / "resnet_tiny.pdmodel", tmp_path / name)
    with pytest.raises(SerdeError, match=r"it holds \['a.pdmodel', 'b.pdmodel'\]; pass the model's path prefix"):
        load_inference_model(tmp_path)


def test_legacy_folder_missing_a_parameter_file(tmp_path):
    shutil.copytree(LEGACY, tmp_path / "m")
    (tmp_path / "m" / "conv2d_1.w_0").unlink()
    with pytest.raises(SerdeError, match=r"conv2d_1\.w_0: cannot read"):
        load_inference_model(tmp_path / "m")


def test_program_without_parameters_needs_no_parameter_file(tmp_path):
    prog = Program()
    block = prog.global_block()
    block.create_var("x", shape=[2])
    block.create_var("y", shape=[2])
    block.append_op("relu", {"X": ["x"]}, {"Out": ["y"]})
    save_inference_model(tmp_path / "relu", ["x"], ["y"], prog, Scope())
    assert sorted(os.listdir(tmp_path)) == ["relu.pdmodel", "relu.pdmodel.sha256"]
    loaded, feeds, fetches, scope = load_inference_model(tmp_path / "relu")
    assert (feeds, fetches, len(scope)) == (["x"], ["y"], 0)


def _program_with_io_ops(feed_cols: list[int]) -> Program:
    prog = Program()
    block = prog.global_block()
    block.create_var("feed", kind=VarKind.FEED_MINIBATCH, persistable=True)
    for i, col in enumerate(feed_cols):
        block.create_var(f"x{i}", shape=[1])
        op = block.append_op("feed", {"X": ["feed"]}, {"Out": [f"x{i}"]})
        op.set_attr("col", col, AttrType.INT)
    return prog


@pytest.mark.parametrize("cols, match", [([0, 2], r"feed ops have cols \[0, 2\]; expected 0 to 1"),
                                         ([1, 1], "col 1 is also used by the feed of 'x0'")])
def test_malformed_feed_ops(tmp_path, cols, match):
    (tmp_path / "m.pdmodel").write_bytes(_program_with_io_ops(cols).to_bytes())
    with pytest.raises(SerdeError, match=match):
        load_inference_model(tmp_path / "m")


def test_feed_op_without_col(tmp_path):
    prog = _program_with_io_ops([0])
    prog.global_block().ops[0].remove_attr("col")
    (tmp_path / "m.pdmodel").write_bytes(prog.to_bytes())
    with pytest.raises(SerdeError, match=r"m\.pdmodel: op #0 feed: expected one var in slot Out "
                                         "and an int attr col"):
        load_inference_model(tmp_path / "m")


def test_parameter_names_that_are_not_file_names(tmp_path):
    prog = Program()
    prog.global_block().create_var("../escape", shape=[1], persistable=True)
    prog.global_block().create_var("y", shape=[1])
    scope = Scope({"../escape": np.ones(1, np.float32)})
    with pytest.raises(SerdeError, match="parameter name '../escape' cannot be used as a file name"):
        save_inference_model(tmp_path / "m", [], ["y"], prog, scope, model_filename="__model__")
    assert os.listdir(tmp_path) == []
    (tmp_path / "__model__").write_bytes(prog.to_bytes())
    with pytest.raises(SerdeError, match="__model__: parameter name '../escape'"):
        load_inference_model(tmp_path)
    save_inference_model(tmp_path / "combined", [], ["y"], prog, scope)
    _assert_same_values(load_inference_model(tmp_path / "combined")[3], scope)


def test_bfloat16_and_float16_parameters_keep_their_wire_dtype(tmp_path):
    prog, scope = _hand_built()
    save_inference_model(tmp_path / "net", ["x"], ["y"], prog, scope)
    loaded, _, _, loaded_scope = load_inference_model(tmp_path / "net")
    assert loaded.global_block().var("brain").dtype is DType.bfloat16
    assert loaded_scope["brain"].dtype == np.uint16 and loaded_scope["half"].dtype == np.float16
    data = (tmp_path / "net.pdiparams").read_bytes()
    assert encode_tensor(scope["brain"], DType.bfloat16) in data


def test_strings_that_are_not_utf8_are_rejected_on_load(tmp_path):
    prog = _program_with_io_ops([0])
    prog.global_block().ops[0].set_attr("note", "marker", AttrType.STRING)
    data = prog.to_bytes()
    assert data.count(b"marker") == 1
    (tmp_path / "m.pdmodel").write_bytes(data.replace(b"marker", b"mark\xff\xfe"))
    with pytest.raises(SerdeError, match=r"m\.pdmodel: a .*OpDesc\.Attr\.s string is not valid UTF-8"):
        load_inference_model(tmp_path / "m")
