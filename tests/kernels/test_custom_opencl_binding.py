"""Custom OpenCL kernels checked against what they bind: arguments against the kernel's
parameter types (from the built program's kernel info), constants that are numeric arrays,
work sizes that launch something where there is an output to write and that a launch can hold,
and the user's functions (source, work sizes, constants, defines), whose failures name the op,
the kernel and the function."""

from __future__ import annotations

import numpy as np
import pytest

from halfway.executor import OpenCLPlace
from halfway.ir.attrs import AttrType
from halfway.ir.dtypes import DType
from halfway.ir.schema import AttrSpec, OpSchema, Slot, register_op, same_as
from halfway.kernels.opencl.custom import Attr, Constant, CustomKernelError, Input, Output, Size, numel, opencl_kernel
from tests.support.oprun import run_op

pytestmark = pytest.mark.opencl

SCALE = """
__kernel void scale(__global const T* x, __global T* out, float alpha, int n) {
    int i = get_global_id(0);
    if (i < n) STORE(out, i, LOAD(x, i) * (REAL)alpha);
}
"""
SCALE_ARGS = (Input("X"), Output("Out"), Attr("alpha"), Size("X"))
X = np.arange(12, dtype=np.float32).reshape(3, 4)


def _flat(spec) -> list[int]:
    return [numel(spec.input("X"))]


def scale_op() -> None:
    register_op(OpSchema("scale_by", inputs=[Slot("X")], outputs=[Slot("Out")],
                         attrs=[AttrSpec("alpha", AttrType.FLOAT, 2.0), AttrSpec("count", AttrType.INT, 3)],
                         infer=same_as("X", "Out")))


def scale_kernel(source=SCALE, args=SCALE_ARGS, **options) -> None:
    scale_op()
    opencl_kernel("scale_by", source, "scale", args=args, **{"global_size": _flat, **options},
                  dtypes=[DType.float32, DType.int32])


def _refused(*fragments: str, x: np.ndarray = X) -> CustomKernelError:
    with pytest.raises(CustomKernelError) as info:
        run_op("scale_by", {"X": x}, {"alpha": 2.0}, place=OpenCLPlace(strict=True))
    message = str(info.value)
    for fragment in ("op scale_by: OpenCL kernel 'scale'", *fragments):
        assert fragment in message, message
    return info.value


def test_the_kernel_runs_when_everything_fits():
    scale_kernel()
    np.testing.assert_array_equal(run_op("scale_by", {"X": X}, {"alpha": 2.0}, place=OpenCLPlace(strict=True)).out,
                                  X * 2)


# -- arguments against the kernel's parameters ----------------------------------------------------
def test_an_int_attr_bound_to_a_float_parameter_is_refused():
    scale_kernel(args=(Input("X"), Output("Out"), Attr("alpha", np.int32), Size("X")))
    _refused("Attr(name='alpha', dtype=<class 'numpy.int32'>)", "int32 scalar bound to the float parameter 'alpha'",
             "np.float32")


def test_a_size_bound_to_a_long_parameter_is_refused():
    scale_kernel(source=SCALE.replace("int n)", "long n)"))
    _refused("Size(slot='X'", "int32 scalar bound to the long parameter 'n'")


def test_a_buffer_of_another_element_type_is_refused():
    scale_kernel(source=SCALE.replace("__global const T* x", "__global const float* x").replace("(REAL)alpha", "alpha"))
    _refused("Input(slot='X'", "a buffer of int32 bound to the parameter '__global float* x'", x=X.astype(np.int32))


def test_a_buffer_bound_to_a_scalar_parameter_is_refused():
    scale_kernel(args=(Input("X"), Output("Out"), Input("X"), Size("X")))
    _refused("a buffer bound to the float parameter 'alpha'")


def test_a_scalar_bound_to_a_pointer_parameter_is_refused():
    scale_kernel(args=(np.float32(1), Output("Out"), Attr("alpha"), Size("X")))
    _refused("scalar bound to the pointer parameter")


@pytest.mark.parametrize("value", [1.5, 2**40])
def test_an_attr_an_int_parameter_cannot_hold_is_refused(value):
    scale_op()
    source = SCALE.replace("float alpha", "int alpha").replace("(REAL)alpha", "(REAL)alpha")
    opencl_kernel("scale_by", source, "scale", args=(Input("X"), Output("Out"), Attr("alpha", np.int32), Size("X")),
                  global_size=_flat)
    with pytest.raises(CustomKernelError, match="Attr.name='alpha'.* is .*(cannot hold|beyond the range of int32)"):
        run_op("scale_by", {"X": X}, {"alpha": value}, place=OpenCLPlace(strict=True))


# -- constants --------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, kind", [(np.array([object(), 1], dtype=object), "an array of object"),
                                         (np.array(["a", "b"]), "an array of <U1"), ("text", "a str")])
def test_a_constant_that_is_no_numeric_array_is_refused(value, kind):
    source = SCALE.replace("float alpha", "__global const float* c, float alpha")
    scale_kernel(source=source, args=(Input("X"), Output("Out"), Constant("c"), Attr("alpha"), Size("X")),
                 constants={"c": lambda spec: value})
    _refused(f"constant 'c' is {kind}; a constant is a numpy array of numbers")


# -- work sizes -------------------------------------------------------------------------------------
def test_a_global_size_launching_nothing_over_a_non_empty_output_is_refused():
    scale_kernel(global_size=(0, 7))
    _refused("global_size [0, 7] runs no work-item, but output Out holds 12 elements")


@pytest.mark.parametrize("size", [(2**40, 7), (2**31,)])
def test_a_global_size_beyond_a_launch_is_refused_without_crashing(size):
    scale_kernel(global_size=size)
    _refused("work-items; at most 2,147,483,647 are launched")


# -- the user's functions -------------------------------------------------------------------------------
def test_a_source_that_is_no_text_is_refused_when_registered():
    scale_op()
    with pytest.raises(CustomKernelError, match="source must be OpenCL C text or a function .* got a bytes"):
        opencl_kernel("scale_by", SCALE.encode(), "scale", args=SCALE_ARGS, global_size=_flat)


def test_a_source_function_returning_none_is_named():
    def render(spec, mode):
        return None

    scale_kernel(source=render)
    _refused("source function test_a_source_function_returning_none_is_named.<locals>.render returned a NoneType")


def _broken(spec, *rest):
    raise ValueError("no such dim")


@pytest.mark.parametrize("options, what", [({"global_size": _broken}, "global_size function _broken"),
                                           ({"local_size": _broken}, "local_size function _broken"),
                                           ({"defines": _broken}, "defines function _broken"),
                                           ({"source": _broken}, "source function _broken"),
                                           ({"constants": {"c": _broken}}, "constant 'c' function _broken")])
def test_an_exception_in_a_users_function_names_the_op_and_the_function(options, what):
    scale_kernel(**options)
    error: BaseException | None = _refused(f"its {what} raised ValueError: no such dim")
    while error is not None and not isinstance(error, ValueError):
        error = error.__cause__
    assert isinstance(error, ValueError)  # the user's exception, kept as the cause
