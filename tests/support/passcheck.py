"""Helpers for pass tests: random builder programs, and checks that passes keep outputs.

    program, scope, feed, fetches = random_program(seed)
    result = check_pass("dce", program, scope, feed, fetches, **fetch_options(program, fetches))

    prog, scope, outs = random_cnn(seed)
    result = fuse_and_compare(prog, scope, "fuse_conv_bn,fuse_conv_act", outs)

``check_pass`` runs the numpy executor before and after the pass, verifies the result, checks
the scope's arrays are unchanged, and that a second run of the pass changes nothing.
``fuse_and_compare`` runs a pipeline and compares outputs on random feeds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import halfway
from halfway import layers
from halfway.executor import CPUPlace, Executor
from halfway.ir.builder import append_op, apply_act, create_parameter
from halfway.ir.dtypes import VarKind
from halfway.passes import PassManager, PassResult, PipelineResult, get_pass

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "paddle"


def run(program: halfway.Program, scope: halfway.Scope, feed: Mapping[str, np.ndarray],
        fetches: Sequence[str]) -> list[np.ndarray]:
    return Executor(CPUPlace()).run(program, feed=feed, fetch_list=list(fetches), scope=scope)


def check_pass(name: str, program: halfway.Program, scope: halfway.Scope, feed: Mapping[str, np.ndarray],
               fetches: Sequence[str], *, rtol: float = 1e-6, atol: float = 1e-6, **options: Any) -> PassResult:
    """Apply pass ``name`` and check it kept the fetched values (within ``rtol``/``atol``: the
    numpy backend runs a chain of pointwise ops as one compiled call, whose exp or tanh may differ
    from numpy's in the last bits, so a pass that moves a chain's ends moves its values by as much)."""
    reference = run(program.clone(), scope, feed, fetches)
    before = {n: scope[n].copy() for n in scope}
    result = get_pass(name, **options)(program, scope)
    assert result.program is program
    halfway.verify(program, feed_names=list(feed))
    for got, want in zip(run(program, scope, feed, fetches), reference):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    for n, value in before.items():
        np.testing.assert_array_equal(scope[n], value)
    again = get_pass(name, **options)(program, scope)
    assert not again.modified, f"second {name} run changed the program again: {dict(again.stats)}"
    return result


ACTIVATIONS = {
    "relu": {},
    "relu6": {"threshold": 4.0},
    "leaky_relu": {"alpha": 0.1},
    "sigmoid": {},
    "hard_swish": {},
    "swish": {"beta": 1.5},
}


def lively_params(scope: halfway.Scope, rng: np.random.Generator) -> None:
    """Give every 1-D parameter (biases, batch_norm statistics) values in [0.5, 1.5], so folds
    and bias fusions are not identities."""
    for name in list(scope):
        if scope[name].ndim == 1:
            scope[name] = rng.uniform(0.5, 1.5, scope[name].shape).astype(scope[name].dtype)


def random_cnn(seed: int, layers_count: int = 4) -> tuple[halfway.Program, halfway.Scope, list[str]]:
    """A small random CNN: convs (plain, grouped, depthwise; NCHW or NHWC; with or without
    bias), batch_norms, every fusable activation, residual adds, and now and then an
    intermediate read twice; ends in fc layers. Returns the program, its scope and the output."""
    rng = np.random.default_rng(seed)
    layout = "NHWC" if rng.random() < 0.3 else "NCHW"
    prog = halfway.Program()
    with halfway.program_guard(prog):
        shape = [2, 6, 6, 4] if layout == "NHWC" else [2, 4, 6, 6]
        y = layers.data("x", shape)
        extra = []
        for _ in range(layers_count):
            c = y.shape[-1] if layout == "NHWC" else y.shape[1]
            groups = int(rng.choice([1, c])) if rng.random() < 0.5 else 1
            filters = c * int(rng.integers(1, 3)) if groups > 1 else int(rng.integers(2, 7))
            conv = layers.conv2d(y, filters, int(rng.choice([1, 3])), padding="SAME", groups=groups,
                                 bias_attr=bool(rng.random() < 0.5), data_format=layout)
            z = layers.batch_norm(conv, data_layout=layout) if rng.random() < 0.7 else conv
            if rng.random() < 0.2:
                extra.append(layers.sigmoid(z))
            if rng.random() < 0.3 and z.shape == y.shape:
                z = layers.elementwise_add(z, y)
            act = str(rng.choice(list(ACTIVATIONS)))
            y = apply_act(z, act, **ACTIVATIONS[act]) if rng.random() < 0.8 else z
        y = layers.fc(y, 5, num_flatten_dims=1, act="relu")
        y = layers.fc(layers.reshape(y, [2, 1, 5]), 3, num_flatten_dims=2)
    scope = halfway.init_scope(prog, seed=seed)
    lively_params(scope, rng)
    return prog, scope, [y.name] + [e.name for e in extra]


def fuse_and_compare(prog: halfway.Program, scope: halfway.Scope, pipeline: str, fetch: Sequence[str],
                     feed: dict[str, np.ndarray] | None = None, rtol: float = 1e-4,
                     atol: float = 1e-5) -> PipelineResult:
    """Run ``pipeline`` and check every fetch matches the original program's on random feeds."""
    if feed is None:
        rng = np.random.default_rng(0)
        block = prog.global_block()
        names = prog.feed_names() or [v.name for v in block.vars.values() if v.need_check_feed]
        feed = {n: rng.standard_normal(block.var(n).shape).astype(np.float32) for n in names}
    want = run(prog, scope, feed, fetch)
    result = PassManager(pipeline, count_ops=True).run(prog, scope)
    got = run(result.program, result.scope, feed, fetch)
    for name, w, g in zip(fetch, want, got):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{pipeline} changed {name}")
    return result


def op_types(program: halfway.Program) -> Counter[str]:
    return Counter(o.type for o in program.global_block().ops)


def add_fetch_ops(program: halfway.Program, names: Sequence[str]) -> None:
    """Give a builder program fetch ops for ``names``, as a saved inference model has."""
    block = program.global_block()
    block.create_var("fetch", kind=VarKind.FETCH_LIST, persistable=True)
    for col, name in enumerate(names):
        block.append_op("fetch", {"X": [name]}, {"Out": ["fetch"]}, {"col": col})


def load_fixture(name: str = "resnet_tiny") -> tuple[halfway.Program, halfway.Scope, dict[str, np.ndarray], list[str]]:
    program, feeds, fetches, scope = halfway.load_inference_model(str(FIXTURES / name))
    io = np.load(FIXTURES / f"{name}_io.npz")
    return program, scope, {n: io[n] for n in feeds}, fetches


def insert_after(block: halfway.Block, name: str, ops: Sequence[halfway.Operator], result: str) -> None:
    """Put ``ops`` right after the writer of ``name``; its readers read ``result`` instead."""
    readers = {id(op): op for op, _, _ in block.uses(name)}.values()
    writer = block.producers(name)[0][0]
    block.insert_ops(writer.index + 1, ops)
    for op in readers:
        op.rename_input(name, result)


def random_program(seed: int) -> tuple[halfway.Program, halfway.Scope, dict[str, np.ndarray], list[str]]:
    """A chain of 6-13 random steps over x [2, 3, 4, 4]: identities, cast round trips, constant
    subgraphs, dead branches, merges with earlier values. Fetches the last value and, half the
    time, one intermediate; odd seeds have fetch ops, even ones none (see ``fetch_options``)."""
    rng = np.random.default_rng(seed)
    program = halfway.Program()
    with halfway.program_guard(program):
        h = layers.data("x", [2, 3, 4, 4])
        seen = [h]
        for _ in range(int(rng.integers(6, 14))):
            h = _STEPS[int(rng.integers(len(_STEPS)))](h, rng, seen)
            seen.append(h)
    fetches = [h.name]
    if rng.random() < 0.5 and len(seen) > 2:
        fetches.insert(0, seen[int(rng.integers(1, len(seen) - 1))].name)
    if seed % 2:
        add_fetch_ops(program, fetches)
    scope = halfway.init_scope(program, seed=seed)
    feed = {"x": rng.standard_normal((2, 3, 4, 4)).astype(np.float32)}
    return program, scope, feed, fetches


def fetch_options(program: halfway.Program, fetches: Sequence[str]) -> dict[str, list[str]]:
    """The ``fetch_names`` option a cleanup pass needs: none when the program has fetch ops."""
    return {} if program.fetch_names() else {"fetch_names": list(fetches)}


def _scale(h, rng, seen):
    scale, bias = [(1.0, 0.0), (1.0, 0.0), (2.0, 0.5), (1.0, 0.25)][int(rng.integers(4))]
    return layers.scale(h, scale, bias)


def _dropout(h, rng, seen):
    implementation = ["downgrade_in_infer", "upscale_in_train"][int(rng.integers(2))]
    return layers.dropout(h, float(rng.choice([0.0, 0.25])), is_test=bool(rng.random() < 0.8),
                          dropout_implementation=implementation)


def _assigns(h, rng, seen):
    for _ in range(int(rng.integers(1, 4))):
        h = layers.assign(h)
    return h


def _reshapes(h, rng, seen):
    flat = layers.reshape(h, [[2, -1], [6, 16], [0, 3, 16]][int(rng.integers(3))])
    return layers.reshape(flat, [2, 3, 4, 4])


def _paddle_style(h, rng, seen):
    """reshape2 of reshape2 and a dropout, with the XShape and Mask outputs Paddle gives them."""
    flat = append_op("reshape2", {"X": h}, {"shape": [6, 16]}, outputs={"Out": 1, "XShape": 1})["Out"][0]
    h = append_op("reshape2", {"X": flat}, {"shape": [2, 3, 4, 4]}, outputs={"Out": 1, "XShape": 1})["Out"][0]
    attrs = {"dropout_prob": float(rng.choice([0.0, 0.5])), "is_test": True}
    return append_op("dropout", {"X": h}, attrs, outputs={"Out": 1, "Mask": 1})["Out"][0]


def _float16_region(h, rng, seen):
    low = layers.cast(h, "float16")
    if rng.random() < 0.5:
        low = layers.relu(low)
    twin = layers.cast(h, "float16")
    return layers.cast(layers.elementwise_add(low, twin), "float32")


def _cast_round_trip(h, rng, seen):
    return layers.cast(layers.cast(h, ["float16", "float64", "float32"][int(rng.integers(3))]), "float32")


def _parameter_math(h, rng, seen):
    w = create_parameter("w", [4])
    folded = layers.elementwise_mul(layers.scale(w, 2.0, 1.0), layers.fill_constant([4], "float32", 0.5))
    return layers.elementwise_add(h, layers.reshape(folded, [1, 1, 1, 4]))


def _dead_branch(h, rng, seen):
    layers.exp(layers.scale(h, 1.0, 0.0))
    return layers.relu(h)


def _merge(h, rng, seen):
    return layers.elementwise_add(h, seen[int(rng.integers(len(seen)))])


_STEPS = [_scale, _dropout, _assigns, _reshapes, _paddle_style, _float16_region, _cast_round_trip, _parameter_math,
          _dead_branch, _merge, lambda h, rng, seen: layers.relu(h)]
