"""The executor: runs a program on a place, with the kernel ``select_kernel`` chooses for every
op from its input dtypes (``halfway.ir.op_dtype``) on the place's backend."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial

import numpy as np

from ..ir.block import Block
from ..ir.program import Program
from ..ir.scope import Scope
from ..ir.variable import Variable
from ..ir.verifier import verify
from .backend import backend_for
from .place import CPUPlace, Place
from .prepared import PreparedProgram, check_feeds
from .preparer import Preparer
from .signatures import PreparedBySignature

__all__ = ["Executor"]


class Executor:
    """Runs programs on ``place`` (default: the CPU with numpy kernels)."""

    def __init__(self, place: Place | None = None) -> None:
        self.place = place or CPUPlace()

    def run(self, program: Program, feed: Mapping[str, np.ndarray] | None = None,
            fetch_list: Sequence[str | Variable] | None = None, scope: Scope | None = None, *,
            check_float16_range: bool = True) -> list[np.ndarray]:
        """Prepare and run once. ``fetch_list`` defaults to the program's fetch ops.

        Raises:
            FeedError: ``feed`` is not a dict of var names to numpy arrays, names a var the
                program does not declare or computes, or a value's dtype or shape does not fit.
        """
        feed = dict(check_feeds(feed if feed is not None else {}))
        fetch_names = _names(fetch_list) if fetch_list is not None else program.fetch_names()
        feed_shapes = {n: np.shape(v) for n, v in feed.items()}
        prepared = self.prepare(program, list(feed), fetch_names, scope if scope is not None else Scope(),
                                feed_shapes=feed_shapes, check_float16_range=check_float16_range)
        return prepared.run(feed)

    def prepare(self, program: Program, feed_names: Sequence[str], fetch_names: Sequence[str | Variable],
                scope: Scope, *, feed_shapes: Mapping[str, Sequence[int]] | None = None,
                reuse_memory: bool = True, check_float16_range: bool = True, share: PreparedProgram | None = None,
                ) -> PreparedProgram | PreparedBySignature:
        """Verify, infer shapes, choose kernels, plan memory and bind kernels once for these feeds
        and fetches (``halfway.executor.preparer``).

        ``feed_shapes`` fixes dims the program leaves unknown (-1). A feed with unknown dims left
        makes the result a ``PreparedBySignature``: the program (as it is now) is prepared at the
        first run with each new set of feed shapes, and kept for the runs after.
        ``reuse_memory=False`` plans a buffer per value and runs no kernel in place (results are
        the same; a baseline for the memory figures and for checking the plan).
        ``check_float16_range=False`` drops the checks a program holding float16 values gets
        around each run (``halfway.executor.float16_range``: a feed beyond float16's range,
        a fetch gone inf/NaN where float32 stays finite, raise ``Float16RangeError``).

        Parameters are bound here, and kernels may precompute from them (Winograd-transformed
        filters, batch norm's per-channel affine): to run with new parameter values, prepare again.
        ``share``: a program prepared on the same place from the same scope (another shape of
        this program: a decoder's prefill and decode steps) whose device buffers this one binds
        for the parameters both take from the same scope arrays, instead of uploading them again;
        state — a parameter an op writes, such as a key/value cache — is then one buffer both
        programs read and write (``halfway.executor.preparer``).
        """
        verify(program, feed_names=feed_names)
        feed_names, fetches, shapes = list(feed_names), _names(fetch_names), dict(feed_shapes or {})
        block = program.global_block()
        dynamic = [n for n in feed_names if n not in shapes and block.has_var(n)
                   and any(d < 0 for d in block.var(n).shape or ())]

        def prepare(signature: Mapping[str, Sequence[int]], block: Block = block) -> PreparedProgram:
            preparer = Preparer(block, backend_for(self.place), scope, reuse=reuse_memory, strict=self.place.strict,
                                check_float16_range=check_float16_range, share=share)
            return preparer.prepare(feed_names, fetches, {**shapes, **signature})

        if not dynamic:
            return prepare({})
        return PreparedBySignature(partial(prepare, block=program.clone().global_block()), feed_names, fetches, dynamic)


def _names(items: Sequence[str | Variable]) -> list[str]:
    return [v.name if isinstance(v, Variable) else v for v in items]
