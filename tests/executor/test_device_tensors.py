"""Feeds and fetches that stay in device memory (``PreparedProgram.to_device``, ``run(on_device=True)``):
the same results as host runs on numpy and OpenCL, programs chained on the device, fetches that
later runs do not overwrite, and clear errors for tensors of another device, of the wrong dtype or
shape, and for float16 programs that check float16's range on the host."""

from __future__ import annotations

import numpy as np
import pytest

import halfway
from halfway import layers
from halfway.executor import DeviceTensor, Executor, OpenCLPlace
from halfway.ir.errors import FeedError

RNG = np.random.default_rng(5)


def two_layers(width: int = 6, batch: int = 4) -> tuple[halfway.Program, halfway.Scope, str]:
    """fc + relu, fc: a program whose output can feed another of its kind."""
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [batch, width])
        y = layers.fc(layers.fc(x, size=width, act="relu"), size=width)
    return prog, halfway.init_scope(prog, seed=2), y.name


def reference(prog: halfway.Program, scope: halfway.Scope, fetch: str, x: np.ndarray) -> np.ndarray:
    return Executor().run(prog, {"x": x}, [fetch], scope)[0]


def places() -> list:
    return [pytest.param(None, id="numpy"), pytest.param("opencl", id="opencl", marks=pytest.mark.opencl)]


def make_place(kind: str | None):
    return OpenCLPlace() if kind == "opencl" else None


@pytest.mark.parametrize("kind", places())
def test_device_feeds_and_fetches_give_the_host_results(kind):
    prog, scope, fetch = two_layers()
    prepared = Executor(make_place(kind)).prepare(prog, ["x"], [fetch], scope)
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    want = reference(prog, scope, fetch, x)
    on_device = prepared.to_device({"x": x})
    assert isinstance(on_device["x"], DeviceTensor) and on_device["x"].shape == (4, 6)
    np.testing.assert_allclose(prepared.run(on_device)[0], want, rtol=1e-5, atol=1e-6)
    fetched = prepared.run({"x": x}, on_device=True)[0]
    assert isinstance(fetched, DeviceTensor) and fetched.dtype.name == "float32"
    np.testing.assert_allclose(fetched.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", places())
def test_programs_chain_on_the_device_and_fetches_outlive_the_next_run(kind):
    place = make_place(kind)
    prog, scope, fetch = two_layers()
    first = Executor(place).prepare(prog, ["x"], [fetch], scope)
    second = Executor(place).prepare(prog, ["x"], [fetch], scope)
    x, other = (RNG.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    middle = first.run(first.to_device({"x": x}), on_device=True)[0]
    end = second.run({"x": middle}, on_device=True)[0]
    first.run({"x": other}, on_device=True)  # overwrites the program's own fetch buffer
    want = reference(prog, scope, fetch, reference(prog, scope, fetch, x))
    np.testing.assert_allclose(end.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(middle.numpy(), reference(prog, scope, fetch, x), rtol=1e-5, atol=1e-6)


@pytest.mark.opencl
def test_a_tensor_of_another_memory_is_refused():
    prog, scope, fetch = two_layers()
    on_numpy = Executor().prepare(prog, ["x"], [fetch], scope)
    on_opencl = Executor(OpenCLPlace()).prepare(prog, ["x"], [fetch], scope)
    tensor = on_numpy.to_device({"x": np.zeros((4, 6), np.float32)})["x"]
    with pytest.raises(FeedError, match="feed 'x' is a DeviceTensor on .*not in this program's memory"):
        on_opencl.run({"x": tensor})


def test_wrong_dtype_shape_and_name_are_refused_and_the_array_is_left_alone():
    prog, scope, fetch = two_layers()
    prepared = Executor().prepare(prog, ["x"], [fetch], scope)
    with pytest.raises(FeedError, match="feed 'x' has dtype float64, expected float32"):
        prepared.to_device({"x": np.zeros((4, 6))})
    with pytest.raises(FeedError, match="unknown feed name"):
        prepared.to_device({"y": np.zeros((4, 6), np.float32)})
    narrow = two_layers(batch=3)
    tensor = Executor().prepare(narrow[0], ["x"], [narrow[2]], narrow[1]).to_device(
        {"x": np.zeros((3, 6), np.float32)})["x"]
    with pytest.raises(FeedError, match=r"feed 'x' has shape \[3, 6\], expected \[4, 6\]"):
        prepared.run({"x": tensor})
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    kept = x.copy()
    tensor = prepared.to_device({"x": x})["x"]
    x[:] = 0  # the tensor is a copy
    np.testing.assert_allclose(prepared.run({"x": tensor})[0], reference(prog, scope, fetch, kept), rtol=1e-5)
    with pytest.raises(ValueError):
        tensor.value[0, 0] = 1  # and read-only on numpy


def test_float16_range_checks_need_host_values_unless_turned_off():
    prog, scope, fetch = two_layers()
    prog16, _ = halfway.float16_transpile(prog, scope)  # its parameters join the scope
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    checked = Executor().prepare(prog16, ["x"], [fetch], scope)
    with pytest.raises(FeedError, match="check_float16_range=False"):
        checked.run({"x": x}, on_device=True)
    with pytest.raises(FeedError, match="check_float16_range=False"):
        checked.run(checked.to_device({"x": x}))
    unchecked = Executor().prepare(prog16, ["x"], [fetch], scope, check_float16_range=False)
    got = unchecked.run(unchecked.to_device({"x": x}), on_device=True)[0].numpy()
    np.testing.assert_allclose(got, checked.run({"x": x})[0], rtol=0, atol=0)


def test_a_program_of_unknown_dims_takes_device_tensors_at_any_signature():
    prog = halfway.Program()
    with halfway.program_guard(prog):
        x = layers.data("x", [-1, 6])
        y = layers.fc(x, size=3, act="relu")
    scope = halfway.init_scope(prog, seed=4)
    prepared = Executor().prepare(prog, ["x"], [y.name], scope)
    for batch in (2, 5):
        x_value = RNG.standard_normal((batch, 6)).astype(np.float32)
        tensors = prepared.to_device({"x": x_value})
        got = prepared.run(tensors, on_device=True)[0]
        assert got.shape == (batch, 3)
        np.testing.assert_allclose(got.numpy(), reference(prog, scope, y.name, x_value), rtol=1e-5, atol=1e-6)
