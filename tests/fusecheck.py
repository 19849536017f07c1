"""Helpers of the fusion tests: random CNNs built with the builder, and a before/after check.

    prog, scope, outs = random_cnn(seed)
    result = fuse_and_compare(prog, scope, "fuse_conv_bn,fuse_conv_act", outs)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

import halfway
from halfway import layers
from halfway.executor import Executor
from halfway.ir.builder import apply_act
from halfway.passes import PassManager, PipelineResult

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
    want = Executor().run(prog, feed, list(fetch), scope)
    result = PassManager(pipeline, count_ops=True).run(prog, scope)
    got = Executor().run(result.program, feed, list(fetch), result.scope)
    for name, w, g in zip(fetch, want, got):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{pipeline} changed {name}")
    return result


def op_types(program: halfway.Program) -> Counter[str]:
    return Counter(o.type for o in program.global_block().ops)
