"""The demo: build a small CNN, verify it, save it as a Paddle-style inference model, load it
back and show that nothing was lost."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from halfway.executor import Executor
from halfway.ir import Program, Scope, init_scope, layers, program_guard
from halfway.ir.io import load_inference_model, save_inference_model
from halfway.ir.verifier import verify

__all__ = ["build_small_cnn", "run_demo"]


def build_small_cnn() -> tuple[Program, list[str], list[str]]:
    """conv-bn-relu, a residual block, a depthwise conv, pooling and a classifier."""
    prog = Program()
    with program_guard(prog):
        x = layers.data("image", [1, 3, 32, 32])
        y = layers.conv2d(x, num_filters=8, filter_size=3, padding=1)
        y = layers.batch_norm(y, act="relu")
        skip = y
        y = layers.conv2d(y, num_filters=8, filter_size=3, padding=1, act="relu")
        y = layers.conv2d(y, num_filters=8, filter_size=3, padding=1)
        y = layers.relu(layers.elementwise_add(y, skip))
        y = layers.conv2d(y, num_filters=8, filter_size=3, padding=1, groups=8, stride=2, act="relu6")
        y = layers.pool2d(y, pool_size=2, pool_type="max", pool_stride=2)
        y = layers.pool2d(y, pool_type="avg", global_pooling=True)
        y = layers.flatten(y, start_axis=1)
        y = layers.fc(y, size=10)
        y = layers.softmax(y)
    return prog, ["image"], [y.name]


def run_demo(out_dir: str | None = None, seed: int = 0) -> int:
    prog, feeds, fetches = build_small_cnn()
    scope = init_scope(prog, seed=seed)
    verify(prog)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = Path(out_dir or tmp) / "small_cnn"
        save_inference_model(str(prefix), feeds, fetches, prog, scope)
        loaded, loaded_feeds, loaded_fetches, loaded_scope = load_inference_model(str(prefix))
        verify(loaded)
        model_bytes = prefix.with_suffix(".pdmodel").read_bytes()
        params_bytes = prefix.with_suffix(".pdiparams").stat().st_size
        print(loaded)
        print(_summary(loaded, loaded_feeds, loaded_fetches, scope, loaded_scope, len(model_bytes), params_bytes))
        identical = loaded.to_bytes() == model_bytes
        same_outputs = _run_both(prog, scope, loaded, loaded_scope, feeds[0], fetches, seed)
    print(f"reload re-serializes byte-identically: {'yes' if identical else 'NO'}")
    return 0 if identical and same_outputs else 1


def _run_both(prog: Program, scope: Scope, loaded: Program, loaded_scope: Scope, feed: str,
              fetches: list[str], seed: int) -> bool:
    """Run the built and the reloaded program on the numpy backend on one random input."""
    shape = prog.global_block().var(feed).shape
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    before = Executor().run(prog, {feed: x}, fetches, scope)[0]
    after = Executor().run(loaded, {feed: x}, fetches, loaded_scope)[0]
    same = np.array_equal(before, after)
    print(f"numpy run: top-1 class {int(before.argmax())} (p={before.max():.3f}), "
          f"reloaded program gives identical outputs: {'yes' if same else 'NO'}")
    return same


def _summary(prog: Program, feeds: list[str], fetches: list[str], saved: Scope, loaded: Scope,
             model_bytes: int, params_bytes: int) -> str:
    ops = [op.type for op in prog.global_block().ops]
    counts = {t: ops.count(t) for t in sorted(set(ops))}
    same = all(np.array_equal(saved[n], loaded[n]) for n in saved)
    lines = [
        f"ops: {len(ops)} ({', '.join(f'{t} x{n}' for t, n in counts.items())})",
        f"parameters: {len(loaded)} ({sum(loaded[n].nbytes for n in loaded)} bytes), "
        f"identical after reload: {'yes' if same else 'NO'}",
        f"feeds: {feeds}  fetches: {fetches}",
        f"files: .pdmodel {model_bytes} bytes, .pdiparams {params_bytes} bytes",
    ]
    return "\n".join(lines)
