"""Run one op through the builder and the executor, for kernel tests.

    ran = run_op("elementwise_add", {"X": x, "Y": y}, {"axis": 1})
    ran.out                      # Out[0]; ran["Mask"][0] for another slot
    ran.kernel_dtypes            # [DType.float32]: the kernel the executor chose
    run_op(..., params="all")    # inputs as parameters (persistable vars in the scope), not feeds
    run_op(..., place=OpenCLPlace())

Every run checks what any kernel owes: the inputs (given read-only) are left as they were, bit for
bit; each output has the dtype and shape inference gave it; and an output shares an input's
memory only where the schema declares it a view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
from attrs import frozen

import halfway
from halfway.executor import Executor, Place, PrepareReport
from halfway.ir.builder import append_op, program_guard
from halfway.ir.dtypes import DType
from halfway.ir.schema import get_schema
from halfway.ir.variable import Variable
from halfway.kernels.registry import KernelKey

__all__ = ["Ran", "run_op", "read_only", "assert_same_bits", "float16_tolerance"]

Inputs = Mapping[str, np.ndarray | Sequence[np.ndarray]]


@frozen
class Ran:
    """What one op's run gave: its outputs by slot, the inputs it read, and the prepare report."""

    outputs: dict[str, list[Any]]
    inputs: dict[str, list[np.ndarray]]
    report: PrepareReport

    def __getitem__(self, slot: str) -> list[Any]:
        return self.outputs[slot]

    @property
    def out(self) -> Any:
        return self.outputs["Out"][0]

    @property
    def kernels(self) -> list[KernelKey]:
        return [key for _, _, key in self.report.kernels]

    @property
    def kernel_dtypes(self) -> list[DType]:
        return [key.dtype for key in self.kernels]


def run_op(op_type: str, inputs: Inputs, attrs: Mapping[str, Any] | None = None, *,
           params: Sequence[str] | Literal["all"] = (), outputs: Mapping[str, int] | None = None,
           place: Place | None = None) -> Ran:
    """Run one ``op_type`` op on ``inputs`` (arrays, or lists of arrays for duplicable slots) on
    ``place`` (the CPU by default). ``params`` names the input slots given as parameters instead
    of feeds (``"all"``: every slot); ``outputs`` sets how many vars an output slot gets."""
    given = {slot: [read_only(a) for a in ([v] if isinstance(v, np.ndarray) else v)] for slot, v in inputs.items()}
    before = {slot: [a.copy() for a in arrays] for slot, arrays in given.items()}
    as_param = set(given) if params == "all" else set(params)
    prog, scope = halfway.Program(), halfway.Scope()
    block = prog.global_block()
    feed: dict[str, np.ndarray] = {}
    in_vars: dict[str, list[Variable]] = {}
    with program_guard(prog):
        for slot, arrays in given.items():
            in_vars[slot] = []
            for i, array in enumerate(arrays):
                var = block.create_var(f"{slot.lower()}_{i}", dtype=array.dtype, shape=array.shape,
                                       persistable=slot in as_param)
                (scope.__setitem__ if slot in as_param else feed.__setitem__)(var.name, array)
                in_vars[slot].append(var)
        out_vars = append_op(op_type, in_vars, attrs, outputs)
    made = [(slot, var) for slot, vs in out_vars.items() for var in vs]
    prepared = Executor(place).prepare(prog, list(feed), [v.name for _, v in made], scope,  # a kernel's overflow is
                                       feed_shapes={n: a.shape for n, a in feed.items()},  # what some tests check
                                       check_float16_range=False)
    results = prepared.run(feed)
    for slot, arrays in given.items():
        for array, copy in zip(arrays, before[slot]):
            assert_same_bits(array, copy, f"{op_type} changed its input {slot}")
    _check_outputs(op_type, made, results, [*(a for arrays in given.values() for a in arrays), *(scope[n] for n in scope)])
    grouped: dict[str, list[Any]] = {}
    for (slot, _), value in zip(made, results):
        grouped.setdefault(slot, []).append(value)
    return Ran(grouped, given, prepared.report)


def read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array``: a kernel writing into it raises."""
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view


def assert_same_bits(actual: np.ndarray, expected: np.ndarray, message: str) -> None:
    as_bytes = [np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in (actual, expected)]
    np.testing.assert_array_equal(*as_bytes, err_msg=message)


def _check_outputs(op_type: str, made: Sequence[tuple[str, Variable]], results: Sequence[Any],
                   inputs: Sequence[np.ndarray]) -> None:
    """Each output has its inferred dtype and shape (-1: any size), and shares an input's memory
    only where the schema declares a view: else the memory plan could let a later op overwrite
    the input through it."""
    views = get_schema(op_type).views
    for (slot, var), value in zip(made, results):
        if value is None:  # a dispensable output the kernel left out
            continue
        assert isinstance(value, np.ndarray), f"{op_type}: {slot} is a {type(value).__name__}"
        shape = var.tensor_shape
        assert value.dtype == var.tensor_dtype.numpy, f"{op_type}: {slot} is {value.dtype}, inferred {var.dtype}"
        assert value.ndim == len(shape) and all(d in (-1, v) for d, v in zip(shape, value.shape)), (
            f"{op_type}: {slot} has shape {value.shape}, inferred {list(shape)}")
        if slot not in views:
            assert not any(np.shares_memory(value, a) for a in inputs), (
                f"{op_type}: output {slot} shares an input's memory but the schema declares no view")


def float16_tolerance(reduction_length: int = 1) -> float:
    """Relative tolerance of a float16-storage, float32-accumulate kernel against a float32
    reference computed from the same float16 inputs: one float16 rounding of the result, plus
    float32 rounding growing with the reduction length."""
    eps16 = float(np.finfo(np.float16).eps)
    eps32 = float(np.finfo(np.float32).eps)
    return eps16 + reduction_length * eps32
