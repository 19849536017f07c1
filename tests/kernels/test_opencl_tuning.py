"""Kernel configurations chosen by measurement (``halfway.kernels.opencl.tuning``): the fastest
candidate is kept and remembered across processes, a broken candidate or cache file is passed
over, and on tensor cores ``OpenCLPlace(tune=True)`` tunes a convolution that still matches numpy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.extras import import_pyopencl

cl = import_pyopencl()

from halfway.executor import OpenCLPlace  # noqa: E402
from halfway.ir.dtypes import DType  # noqa: E402
from halfway.kernels.opencl import gemm, tuning  # noqa: E402
from halfway.kernels.opencl.base import launch  # noqa: E402
from halfway.kernels.opencl.runtime import get_runtime  # noqa: E402
from tests.kernels.test_opencl_kernels import check, rand  # noqa: E402

SPIN = """
__kernel void spin(__global float* out, int steps) {
    float x = out[get_global_id(0)];
    for (int i = 0; i < steps; ++i) x = x * 0.999f + 1.0f;
    out[get_global_id(0)] = x;
}
"""


@pytest.fixture(scope="module")
def rt():
    return get_runtime()


class Spins:
    """Candidates that loop ``steps`` times per work-item (a negative count: a kernel that does
    not build); records which ones were launched."""

    def __init__(self, rt) -> None:
        self.rt = rt
        self.out = rt.alloc(4 * 1024)
        self.launched: list[int] = []

    def __call__(self, steps: int, queue):
        self.launched.append(steps)
        text = SPIN if steps >= 0 else "__kernel void spin( {"
        kernel = self.rt.kernel(text, "spin")
        return [launch(self.rt, kernel, (1024,), None, self.out, np.int32(steps), queue=queue)]


def choose(tuner, spins, candidates=(20000, 10, 5000), key="k"):
    return tuner.choose(key, list(candidates), lambda steps: steps, spins)


def test_the_fastest_candidate_is_kept_and_remembered(rt, tmp_path):
    path = tmp_path / "device.json"
    spins = Spins(rt)
    first = tuning.Tuner(rt.context, path)
    assert choose(first, spins) is None and spins.launched == []  # not measuring: the kernel's own choice
    with first.measure():
        assert choose(first, spins) == 10
    assert sorted(spins.launched) == [10, 5000, 20000]
    assert json.loads(path.read_text()) == {"k": 10}
    later = tuning.Tuner(rt.context, path)  # another process
    spins.launched.clear()
    assert choose(later, spins) == 10 and spins.launched == []


def test_a_candidate_that_fails_is_passed_over(rt, tmp_path):
    tuner = tuning.Tuner(rt.context, tmp_path / "device.json")
    with tuner.measure():
        assert choose(tuner, Spins(rt), candidates=(-1, 3000, 30)) == 30
        assert choose(tuner, Spins(rt), candidates=(-1,), key="only broken") is None


def test_a_remembered_choice_no_longer_offered_is_measured_again(rt, tmp_path):
    path = tmp_path / "device.json"
    path.write_text(json.dumps({"k": 7}))
    tuner = tuning.Tuner(rt.context, path)
    assert choose(tuner, Spins(rt)) is None
    with tuner.measure():
        assert choose(tuner, Spins(rt)) == 10


def test_a_corrupt_cache_is_measured_afresh_and_replaced(rt, tmp_path):
    path = tmp_path / "device.json"
    path.write_text("{not json")
    tuner = tuning.Tuner(rt.context, path)
    with tuner.measure(), pytest.warns(UserWarning, match="tuning cache not read"):
        assert choose(tuner, Spins(rt)) == 10
    assert json.loads(path.read_text()) == {"k": 10}


def test_an_unwritable_cache_keeps_the_choice_for_the_process(rt, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    tuner = tuning.Tuner(rt.context, blocker / "device.json")  # its folder is a file
    with tuner.measure(), pytest.warns(UserWarning, match="tuning cache not saved"):
        assert choose(tuner, Spins(rt)) == 10
    spins = Spins(rt)
    assert choose(tuner, spins) == 10 and spins.launched == []
    assert blocker.read_text() == ""


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HALFWAY_CACHE_DIR", str(tmp_path))
    assert tuning.cache_folder() == tmp_path


def test_tuned_convolution_on_tensor_cores(monkeypatch, rt, tmp_path):
    """float16 convolutions on tensor cores, tuned as they are prepared, match numpy; the tuner
    remembers one choice per shape, among the candidates it timed."""
    if not gemm.uses_tensor_cores(rt, DType.float16):
        pytest.skip("the device has no tensor cores")
    tuner = tuning.Tuner(rt.context, tmp_path / "device.json")
    monkeypatch.setattr(gemm, "tuner", lambda _: tuner)
    monkeypatch.setattr("halfway.executor.opencl.tuner", lambda _: tuner)
    place = OpenCLPlace(tune=True)
    for side, channels, filters in ((64, 128, 128), (6, 256, 64)):  # read channels-last; where it lies (split K)
        inputs = {"Input": rand(1, channels, side, side, dtype=np.float16),
                  "Filter": rand(filters, channels, 3, 3, dtype=np.float16) * 0.1,
                  "Bias": rand(filters, dtype=np.float16)}
        check(place, "fused_conv2d", inputs, {"paddings": [1, 1], "fuse_activation": "relu"}, params=("Filter", "Bias"))
    choices = json.loads(tuner.path.read_text())
    assert len(choices) == 2
    tiles = [list(t) for t in gemm.MMA_TUNE_TILES]
    assert all(tile in tiles and splits >= 1 for tile, splits in choices.values())


def test_tensor_core_candidates_split_k_where_tiles_are_few():
    """Every tile the tuner times is offered; K is split toward 1 to 4 work-groups per compute unit
    where the tile gives fewer than 2 (never into splits of fewer than SPLIT_K_MIN k), else whole."""
    rt = type("Rt", (), {"caps": type("Caps", (), {"compute_units": 132})})()
    g = gemm.Gemm(512, 784, 4608, 1, (4608, 1, 0), (0, 0, 0), (0, 0, 0))  # VGG-19's 512-channel 3x3 on 28x28
    candidates = gemm._mma_candidates(rt, g)
    assert {c.tile.sizes for c in candidates} == set(gemm.MMA_TUNE_TILES)
    for tile, splits, chunk in candidates:
        assert chunk % gemm.SPLIT_K_STEP == 0 and (splits - 1) * chunk < g.k <= splits * chunk
        assert chunk >= gemm.SPLIT_K_MIN
        if gemm._work_groups(tile, g) >= 2 * 132:  # 32 x 32: 400 work-groups
            assert splits == 1
    splits = sorted(c.splits for c in candidates if c.tile.sizes == (2, 2, 4, 8, 3))  # 28 tiles of 128 x 128
    assert splits == [5, 8, 10, 15, 18]  # 1, 1.5, 2, 3 and 4 waves of 132 (19 capped at 18 x 256 k)
    many = gemm.Gemm(4096, 4096, 4096, 1, (4096, 1, 0), (0, 0, 0), (0, 0, 0))
    assert all(c.splits == 1 for c in gemm._mma_candidates(rt, many))
