"""The conftest's ``isolated_registries``: what one test registers, or replaces, the next test does
not see. The tests run in file order: the first registers, the second checks."""

from __future__ import annotations

import numpy as np

from halfway.ir.dtypes import DType
from halfway.ir.errors import HalfwayError
from halfway.ir.schema import OpSchema, Slot, get_schema, has_schema, register_op, same_as
from halfway.kernels.registry import has_kernel, register_kernel
from halfway.passes import PassResult, get_pass, register_pass

PROBE = "t_registry_probe"
_seen: dict[str, object] = {}


def _kernel(spec: object) -> object:
    return lambda x: np.negative(x)


def test_a_test_registers_a_schema_a_kernel_and_a_pass_and_replaces_one() -> None:
    _seen["relu"] = get_schema("relu")
    register_op(OpSchema(PROBE, inputs=[Slot("X")], outputs=[Slot("Out")], infer=same_as("X")))
    register_op(OpSchema("relu", inputs=[Slot("X")], outputs=[Slot("Out")]), override=True)
    register_kernel(PROBE, "numpy", [DType.float32])(_kernel)
    register_pass(PROBE)(lambda program, scope, options: PassResult(program, False, {}))
    assert has_schema(PROBE) and has_kernel(PROBE, "numpy", DType.float32)
    assert get_pass(PROBE).name == PROBE
    assert get_schema("relu") is not _seen["relu"]


def test_the_next_test_sees_the_registries_as_they_were() -> None:
    assert _seen, "the registering test did not run first"
    assert not has_schema(PROBE)
    assert not has_kernel(PROBE, "numpy", DType.float32)
    try:
        get_pass(PROBE)
    except HalfwayError as e:
        assert PROBE in str(e)
    else:
        raise AssertionError(f"pass {PROBE} leaked into the next test")
    assert get_schema("relu") is _seen["relu"]
