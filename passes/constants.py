"""``fold_constants``: compute, once, the ops of block 0 whose inputs are all constants.

Constants are parameters (persistable vars the scope holds and no op writes), the outputs of
``fill_constant`` ops whose own inputs are constants, and the outputs of folded ops. One forward
sweep over block 0:

1. A ``fill_constant`` stays as it is: a fill at run time is cheaper than a stored tensor. Its
   value is computed only when an op that reads it is folded; a fill whose every reader was
   folded is removed.
2. Any other op whose inputs are all constants is run by the reference evaluator
   (``halfway.ir.evaluate``: a family row's numpy math, the numpy kernels for the other ops).
   Each output someone reads becomes a new parameter with a new unique name
   (``<output>.folded_N``); its readers read that, and the op and its old output vars go. A new
   parameter that a later fold leaves unread is removed again, from the program and the scope.

Never folded: ops with no inputs, ops of ``SIDE_EFFECT_OPS`` or ``RANDOM_OPS``, ops with
sub-blocks, ops reading or writing anything but dense tensors, ops writing a persistable var, a
fetched or fed var, a var with several writers or a var of another block, ops the evaluator
has no kernel for, ops none of whose outputs is read (``dce``'s job; without fetch ops such an
output may be the program's result), and (the size limit) ops whose outputs take more than ``max_growth``
times the bytes of their parameter inputs, unless they take at most ``small_bytes``: folding
``expand`` or a ``fill_constant`` sum into a large stored tensor trades run time nobody notices
for model size everyone does. Outputs nobody reads (XShape) are dropped.

The caller's scope arrays are never modified: new values are new entries, copies of what the
kernels return, and kernels see the parameters as read-only views. The folded ops' old inputs
stay declared; ``dce`` removes the parameters nothing reads any more.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import numpy as np

from ..ir.block import Block
from ..ir.dtypes import VarKind
from ..ir.errors import HalfwayError
from ..ir.evaluate import evaluate_op
from ..ir.operator import Operator
from ..ir.program import Program
from ..ir.schema import RANDOM_OPS
from ..ir.scope import Scope
from .base import PassResult, register_pass
from .dce import has_side_effects
from .rewire import Guard, remove_unused_vars, sole_writer

__all__ = ["FoldOptions", "RANDOM_OPS", "fold_constants"]



@attrs.frozen
class FoldOptions:
    """``fetch_names``: vars that must survive besides the fetch targets. ``max_growth`` and
    ``small_bytes``: the size limit (see the module docstring)."""

    fetch_names: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    max_growth: float = attrs.field(default=2.0, validator=attrs.validators.ge(0))
    small_bytes: int = attrs.field(default=4096, validator=attrs.validators.ge(0))


@register_pass("fold_constants", options=FoldOptions, needs_scope=True)
def fold_constants(program: Program, scope: Scope | None, options: FoldOptions) -> PassResult:
    """Fold ops whose inputs are all parameters or constant fills into new parameters."""
    assert scope is not None
    guard = Guard.of(program, options.fetch_names, "fold_constants")
    folder = _Folder(program.global_block(), scope, guard, options)
    for op in folder.block.ops:
        folder.visit(op)
    fills = folder.remove_spent_fills()
    stats = {"folded": folder.folded, "params_added": len(folder.added), "ops_removed": folder.folded + fills,
             "vars_removed": folder.vars_removed}
    return PassResult(program, modified=folder.folded > 0, stats=stats)


class _Folder:
    """The state of one sweep: known constant values, fills seen, what was added and removed."""

    def __init__(self, block: Block, scope: Scope, guard: Guard, options: FoldOptions) -> None:
        self.block, self.scope, self.guard, self.options = block, scope, guard, options
        self.values: dict[str, np.ndarray] = {}
        self.fills: dict[str, Operator] = {}
        self.added: list[str] = []
        self.folded = 0
        self.vars_removed = 0

    def is_constant(self, name: str) -> bool:
        if name in self.values or name in self.fills:
            return True
        return (self._dense(name) and self.block.var(name).persistable and name in self.scope
                and not self.block.producers(name) and name not in self.guard.elsewhere)

    def _dense(self, name: str) -> bool:
        """Whether ``name`` is a var of block 0 holding a dense tensor of a known dtype."""
        if not self.block.has_var(name):
            return False
        var = self.block.var(name)
        return var.kind is VarKind.DENSE_TENSOR and var.dtype is not None

    def value(self, name: str) -> np.ndarray:
        if name not in self.values:
            if name in self.fills:
                self.values[name] = self._run(self.fills[name])[name]
            else:
                self.values[name] = _read_only(self.scope.get(name))
        return self.values[name]

    def visit(self, op: Operator) -> None:
        if not self._foldable(op):
            return
        if op.type == "fill_constant":
            self.fills[op.output("Out")[0]] = op
            return
        try:
            results = self._run(op)
        except HalfwayError:
            return
        if self._too_large(op, results):
            return
        self._replace(op, results)

    def _foldable(self, op: Operator) -> bool:
        inputs, outputs = op.input_names(), op.output_names()
        if op.type in RANDOM_OPS or has_side_effects(op) or not all(self.is_constant(n) for n in inputs):
            return False
        if any(sole_writer(self.block, n) is not op or not self._dense(n) for n in outputs):
            return False
        if op.type == "fill_constant":
            return True
        return bool(inputs) and bool(self._read_outputs(op)) and not any(self.guard.kept(n) for n in outputs)

    def _run(self, op: Operator) -> dict[str, np.ndarray]:
        """The op's read outputs, computed by the reference evaluator from the known constants."""
        wanted = self._read_outputs(op) if op.type != "fill_constant" else op.output("Out")
        results = evaluate_op(op, {n: self.value(n) for n in op.input_names()})
        if not all(n in results for n in wanted):
            raise HalfwayError(f"fold_constants: {op.describe()} gave no value for some of {wanted}")
        return {n: results[n] for n in wanted}

    def _too_large(self, op: Operator, results: Mapping[str, np.ndarray]) -> bool:
        stored = sum(self.value(n).nbytes for n in set(op.input_names()) if n not in self.fills)
        made = sum(results[n].nbytes for n in self._read_outputs(op))
        return made > max(self.options.small_bytes, self.options.max_growth * stored)

    def _read_outputs(self, op: Operator) -> list[str]:
        return [n for n in dict.fromkeys(op.output_names()) if self.block.uses(n)]

    def _replace(self, op: Operator, results: Mapping[str, np.ndarray]) -> None:
        """Each read output becomes a new parameter; the op and its old outputs go."""
        outputs = op.output_names()
        for name in self._read_outputs(op):
            param = self._new_param(name, results[name])
            for reader in {id(r): r for r, _, _ in self.block.uses(name)}.values():
                reader.rename_input(name, param)
        self.block.remove_op(op)
        self.vars_removed += len(remove_unused_vars(self.block, outputs, self.guard))
        for name in remove_unused_vars(self.block, [n for n in op.input_names() if n in self.added], self.guard):
            self.scope.remove(name)
            self.added.remove(name)
        self.folded += 1

    def _new_param(self, name: str, value: np.ndarray) -> str:
        param = self.block.unique_name(f"{name}.folded")
        while param in self.scope:
            param = self.block.unique_name(f"{name}.folded")
        value = np.array(value, copy=True)
        self.block.create_var(param, dtype=self.block.var(name).dtype, shape=value.shape, persistable=True)
        self.scope.set(param, value)
        self.values[param] = _read_only(value)
        self.added.append(param)
        return param

    def remove_spent_fills(self) -> int:
        """Remove the fills whose readers were all folded; returns how many."""
        spent = [op for name, op in self.fills.items()
                 if name in self.values and not self.block.uses(name) and not self.guard.kept(name)]
        for op in spent:
            outputs = op.output_names()
            self.block.remove_op(op)
            self.vars_removed += len(remove_unused_vars(self.block, outputs, self.guard))
        return len(spent)


def _read_only(value: np.ndarray) -> np.ndarray:
    view = value.view()
    view.flags.writeable = False
    return view
