"""The backend interface and registry: a third backend is one module (a class and its kernels),
found by its place's backend name, built in or declared by a ``halfway.backends`` entry point;
ops it has no kernel for run on numpy with explicit transfers through its upload/download."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from attrs import frozen

import halfway
from halfway import layers
from halfway.executor import Executor, Place
from halfway.executor.backend import backend_for, register_backend, registered_backends
from halfway.executor.cpu import NumpyBackend
from halfway.ir import DType, HalfwayError
from halfway.kernels.registry import register_kernel


@register_backend
class RecordingBackend(NumpyBackend):
    """numpy arrays, counting what crosses the host boundary."""

    name = "t_recording"
    moves: list[str] = []

    def upload(self, state, handle, array):
        self.moves.append("upload")
        super().upload(state, handle, array)

    def download(self, state, handle, dtype):
        self.moves.append("download")
        return super().download(state, handle, dtype)


@frozen
class RecordingPlace(Place):
    backend: str = "t_recording"
    strict: bool = False


@register_kernel("relu", "t_recording", (DType.float32,))
def _relu(spec):
    return lambda x: np.maximum(x, 0)


def _relu_scale() -> tuple[halfway.Program, str]:
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [2, 3])
        y = layers.scale(layers.relu(x), scale=2.0)
    return prog, y.name


def test_a_third_backend_runs_its_kernels_and_falls_back_for_the_others():
    prog, out = _relu_scale()
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    prepared = Executor(RecordingPlace()).prepare(prog, ["x"], [out], halfway.Scope())
    report = prepared.report
    assert [str(key) for _, _, key in report.kernels] == ["relu/t_recording/float32", "scale/numpy/float32"]
    assert [(t, why) for _, t, why in report.fallbacks] == [("scale", "no t_recording kernel for float32")]
    RecordingBackend.moves.clear()
    np.testing.assert_array_equal(prepared.run({"x": x})[0], np.maximum(x, 0) * 2)
    # the feed in; the fallback's input out and its output back; the fetch out
    assert RecordingBackend.moves == ["upload", "download", "upload", "download"]


def test_strict_place_of_any_backend_refuses_fallbacks():
    prog, out = _relu_scale()
    with pytest.raises(HalfwayError, match=r"strict place .*op #1 scale \(no t_recording kernel"):
        Executor(RecordingPlace(strict=True)).prepare(prog, ["x"], [out], halfway.Scope())


def test_an_unknown_backend_lists_the_registered_ones():
    with pytest.raises(HalfwayError, match="no backend 't_nowhere'.*registered: .*numpy, opencl"):
        backend_for(RecordingPlace(backend="t_nowhere"))
    assert {"numpy", "t_recording"} <= set(registered_backends())


def test_a_backend_name_is_registered_once():
    with pytest.raises(HalfwayError, match="'t_recording' is already registered"):
        register_backend(RecordingBackend)


ENTRY_POINT_MODULE = '''
import numpy as np
from halfway.executor import register_backend
from halfway.executor.cpu import NumpyBackend
from halfway.ir import DType
from halfway.kernels.registry import register_kernel

@register_backend
class PluginBackend(NumpyBackend):
    name = "t_plugin"

@register_kernel("relu", "t_plugin", (DType.float32,))
def relu(spec):
    return lambda x: np.maximum(x, 0) + 100  # recognisably this backend's
'''


def _installed(folder, module: str, source: str) -> None:
    """An installed distribution in ``folder`` whose ``halfway.backends`` entry point ``t_plugin``
    is ``module``, holding ``source``."""
    (folder / f"{module}.py").write_text(source)
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[halfway.backends]\nt_plugin = {module}\n")


def _run_plugin_place(folder) -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import json, sys
        sys.path.insert(0, {str(folder)!r})
        import numpy as np
        import halfway
        from halfway import layers
        from halfway.executor import Executor, Place
        from attrs import frozen

        @frozen
        class Named(Place):
            backend: str = "t_plugin"

        prog = halfway.Program()
        with halfway.program_guard(prog):
            y = layers.relu(layers.data("x", [3]))
        prepared = Executor(Named()).prepare(prog, ["x"], [y.name], halfway.Scope())
        out = prepared.run({{"x": np.array([-1, 0, 2], np.float32)}})[0]
        print(json.dumps([out.tolist(), [str(k) for _, _, k in prepared.report.kernels]]))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_entry_points_bring_backends_and_their_kernels(tmp_path):
    _installed(tmp_path, "t_plugin_backend", ENTRY_POINT_MODULE)
    done = _run_plugin_place(tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [[100, 100, 102], ["relu/t_plugin/float32"]]


def test_a_broken_entry_point_is_named(tmp_path):
    _installed(tmp_path, "t_broken_backend", "import t_not_installed\n")
    done = _run_plugin_place(tmp_path)
    assert done.returncode != 0
    assert ("HalfwayError: loading the t_plugin backend's kernels (entry point t_broken_backend) failed: "
            "ModuleNotFoundError: No module named 't_not_installed'") in done.stderr
