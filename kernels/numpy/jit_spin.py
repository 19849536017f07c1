"""The compiled waits of the numpy backend's thread team (``halfway.kernels.numpy.team``): loops
that poll a shared counter without the GIL, yielding the core between polls.

On virtual machines a thread that sleeps in the kernel (a futex: a queue, a lock, the GIL) takes
tens of microseconds to wake, as long as many of the loops it was woken for; a thread that polls
is there at once. These loops poll with an atomic load (a plain one could be hoisted out of the
loop) and call ``sched_yield`` between polls, so a thread with work on the same core (one of
OpenBLAS's) gets it. Imported through ``halfway.kernels.numpy.team`` where numba is installed.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["load", "store", "wait_change", "wait_job"]


@intrinsic
def load(typingctx, counters, index):  # pragma: no cover - compiled
    """``counters[index]`` (int64) read atomically, with acquire ordering."""

    def codegen(context, builder, signature, args):
        array, at = args
        pointer = cgutils.get_item_pointer(context, builder, signature.args[0],
                                           context.make_array(signature.args[0])(context, builder, array), [at])
        return builder.load_atomic(pointer, "acquire", 8)

    return types.int64(counters, index), codegen


@intrinsic
def store(typingctx, counters, index, value):  # pragma: no cover - compiled
    """``counters[index] = value`` (int64) written atomically, with release ordering."""

    def codegen(context, builder, signature, args):
        array, at, number = args
        pointer = cgutils.get_item_pointer(context, builder, signature.args[0],
                                           context.make_array(signature.args[0])(context, builder, array), [at])
        builder.store_atomic(number, pointer, "release", 8)
        return context.get_dummy_value()

    return types.void(counters, index, value), codegen


@intrinsic
def yield_core(typingctx):  # pragma: no cover - compiled
    """``sched_yield()``: another thread ready on this core runs first."""

    def codegen(context, builder, signature, args):
        callee = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), "sched_yield")
        builder.call(callee, [])
        return context.get_dummy_value()

    return types.void(), codegen


@njit(cache=True, nogil=True)
def wait_change(counters, index, seen, polls, done, finished, grace, taken):  # pragma: no cover - compiled
    """Store ``finished`` into ``done[index]`` (this thread's last part has ended), then poll
    ``counters[index]`` until it differs from ``seen``, at most ``polls`` times; returns its
    value (``seen``: no change). A change is stored into ``taken[index]`` (this thread is about to
    take the GIL for it); then it yields ``grace`` more times before returning, so that the caller
    that published it has let go of the GIL, which the part will need."""
    store(done, index, finished)
    for _ in range(polls):
        value = load(counters, index)
        if value != seen:
            store(taken, index, value)
            for _ in range(grace):
                yield_core()
            return value
        yield_core()
    return seen


@njit(cache=True, nogil=True)
def wait_job(done, workers, published, taken, finished):  # pragma: no cover - compiled
    """Poll until every ``done[i]`` is 1, then until each of the first ``workers`` threads that
    took its job (``taken[k] == published[k]``) polls again (``finished[k] == published[k]``): it
    has let go of the GIL by then, which the caller takes on return, so the caller does not sleep
    on it (a wake of tens of microseconds on a virtual machine)."""
    for i in range(done.size):
        while load(done, i) != 1:
            yield_core()
    for k in range(workers):
        job = load(published, k)
        while load(taken, k) == job and load(finished, k) != job:
            yield_core()
