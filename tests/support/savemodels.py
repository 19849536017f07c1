"""A one-op model with one parameter for the save tests: y = x * w, with w of ``width`` seeded
values, so that models of other widths (other programs) or seeds (other weights) tell apart."""

from __future__ import annotations

import numpy as np

from halfway.ir import Program
from halfway.ir.scope import Scope

__all__ = ["scaled_model"]


def scaled_model(width: int, seed: int) -> tuple[Program, Scope]:
    """y = x * w with w of ``width`` values drawn from ``seed``."""
    prog = Program()
    block = prog.global_block()
    block.create_var("x", shape=[width])
    block.create_var("w", shape=[width], persistable=True)
    block.create_var("y", shape=[width])
    block.append_op("elementwise_mul", {"X": ["x"], "Y": ["w"]}, {"Out": ["y"]}, {"axis": -1})
    return prog, Scope({"w": np.random.default_rng(seed).standard_normal(width).astype(np.float32)})
