"""Paddle inference models through halfway.load: run, fuse and transpile to float16, save back in
the layout they came in, reload, and still match Paddle's own outputs."""

from pathlib import Path

import numpy as np
import pytest

import halfway
from halfway.executor import Executor

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"
LAYOUTS = {  # fixture -> (io file, save options reproducing its layout)
    "resnet_tiny": ("resnet_tiny_io.npz", {}),
    "mlp_tiny": ("mlp_tiny_io.npz", {}),
    "resnet_tiny_legacy": ("resnet_tiny_io.npz", {"model_filename": "__model__"}),
}


def _run(loaded, io):
    program, feeds, fetches, scope = loaded
    return Executor().run(program, {n: io[n] for n in feeds}, fetches, scope)


def _saved_name(name, tmp_path):
    return tmp_path / name if LAYOUTS[name][1] else tmp_path / f"{name}.pdmodel"


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("fuse", [False, True])
def test_float16_transpiled_paddle_models_round_trip_and_match_paddle(tmp_path, name, fuse):
    io_file, options = LAYOUTS[name]
    io = np.load(FIXTURES / io_file)
    program, feeds, fetches, scope = halfway.load(FIXTURES / name)
    if fuse:
        result = halfway.PassManager().run(program, scope)
        program, scope = result.program, result.scope
    half, report = halfway.float16_transpile(program, scope)
    assert any(var.dtype is halfway.DType.float16 for var in half.persistable_vars())
    target = _saved_name(name, tmp_path)
    halfway.save_inference_model(target, feeds, fetches, half, scope, **options)
    if options:
        assert (target / "__model__").is_file() and not list(target.glob("*.pdiparams"))
    else:
        assert target.with_suffix(".pdiparams").is_file()
    reloaded = halfway.load(target, **options)
    assert reloaded[1:3] == (feeds, fetches)
    got = _run(reloaded, io)
    for fetch, value in zip(fetches, got):
        assert value.dtype == np.float32  # float16 inside, float32 at the edges
        np.testing.assert_allclose(value, io[fetch], rtol=2e-2, atol=2e-3)
    resaved = tmp_path / "again"
    halfway.save_inference_model(resaved / "m.pdmodel", feeds, fetches, reloaded[0], reloaded[3])
    assert (resaved / "m.pdmodel").read_bytes() == reloaded[0].to_bytes()


def test_paddle_models_keep_their_extra_attrs_through_load_and_save(tmp_path):
    program, feeds, fetches, scope = halfway.load(FIXTURES / "resnet_tiny")
    names = {name for op in program.global_block().ops for name in op.attrs}
    assert {"op_callstack", "op_role"} & names  # Paddle's bookkeeping attrs are kept
    halfway.save_inference_model(tmp_path / "copy", feeds, fetches, program, scope)
    assert (tmp_path / "copy.pdmodel").read_bytes() == (FIXTURES / "resnet_tiny.pdmodel").read_bytes()
