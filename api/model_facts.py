"""What a program holds, as the reports describe it (``halfway inspect``, ``graph``, ``bench``,
the demo): op counts by type and precision, op types with the ONNX ops they stand for, parameter
bytes, inputs and outputs. Nothing here imports onnx, the passes or the executor."""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..frontends.onnx_names import onnx_names
from ..ir.dtypes import DType
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.scope import Scope

__all__ = ["param_bytes", "op_precision", "op_counts", "op_label", "io_specs"]

IO_OPS = ("feed", "fetch")


def param_bytes(program: Program, scope: Scope) -> int:
    """Bytes of the parameter values ``program`` reads from ``scope``."""
    values = (scope.find(v.name) for v in program.persistable_vars())
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


def op_precision(op: Operator) -> str:
    """The element type an op computes in: that of its first floating output (else its first
    output), as a name; ``-`` when unknown."""
    dtypes = [op.block.find_var(n).dtype for n in op.output_names()] if op.block is not None else []
    known = [d for d in dtypes if d is not None]
    chosen = [d for d in known if d.is_floating] or known
    return chosen[0].name if chosen else "-"


def op_counts(program: Program) -> Counter[tuple[str, str]]:
    """(op type, precision) -> count over all blocks, feed and fetch left out."""
    return Counter((op.type, op_precision(op)) for op in program.all_ops() if op.type not in IO_OPS)


def op_label(op_type: str) -> str:
    """``op_type`` with the ONNX ops it stands for (``halfway.frontends.onnx_names``), the
    first two: ``matmul_v2 (MatMul/Gemm/…)``; the op type alone when none does."""
    names = onnx_names(op_type)
    if not names:
        return op_type
    return f"{op_type} ({'/'.join(names[:2])}{'/…' if len(names) > 2 else ''})"


def io_specs(program: Program, names: list[str]) -> list[dict[str, object]]:
    """Name, dtype and shape (-1 for a dim known only at run time) of each of ``names``."""
    block = program.global_block()
    specs: list[dict[str, object]] = []
    for name in names:
        var = block.var(name)
        dtype = var.dtype.name if isinstance(var.dtype, DType) else "-"
        specs.append({"name": name, "dtype": dtype, "shape": list(var.shape or ())})
    return specs
