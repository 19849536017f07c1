"""The numpy backend: an index per tensor, parameters in every run's list, a bound op writing its
outputs and dropping the values it was the last reader of, and runs that share nothing."""

from __future__ import annotations

import numpy as np

from halfway.executor import CPUPlace, MemoryPlan
from halfway.executor.cpu import NumpyBackend
from halfway.ir import DType
from halfway.ir.schema import TensorInfo

INFO = TensorInfo((2,), DType.float32)


def _backend() -> tuple[NumpyBackend, dict[str, int], np.ndarray]:
    backend = NumpyBackend(CPUPlace())
    w = np.array([10, 20], np.float32)
    handles = backend.allocate({"x": INFO, "w": INFO, "y": INFO, "z": INFO}, MemoryPlan(), {"w": w}, ["x"])
    return backend, handles, w


def test_every_run_starts_from_the_parameters_alone():
    backend, handles, w = _backend()
    first, second = backend.start(), backend.start()
    backend.upload(first, handles["x"], np.ones(2, np.float32))
    assert first is not second and second[handles["x"]] is None
    assert first[handles["w"]] is w and second[handles["w"]] is w


def test_a_bound_op_writes_its_outputs_and_drops_its_dying_inputs():
    backend, h, w = _backend()
    add = backend.bind(lambda x, w: x + w, [h["x"], h["w"]], [h["y"]], [h["x"]])
    split = backend.bind(lambda y: (y[:1], y[1:]), [h["y"]], [h["y"], h["z"]], [])
    negate = backend.bind(lambda y: -y, [h["y"]], [h["y"]], [h["z"]])
    assert (add.launches, split.launches, negate.launches) == (1, 1, 1)
    values = backend.start()
    backend.upload(values, h["x"], np.array([1, 2], np.float32))
    for binding in (add, split, negate):
        binding.run(values)
    assert values[h["x"]] is None and values[h["z"]] is None
    np.testing.assert_array_equal(backend.download(values, h["y"], DType.float32), [-11])
    np.testing.assert_array_equal(w, [10, 20])
