"""fuse_rotary: rotary embeddings as exports write them (rotate-half, partial, interleaved; tables
computed from positions or gathered from a cached table by position ids; slice bounds as
constants or computed from the shape) become one rotary_embedding, matching ONNX Runtime; the
forms that differ say why."""

import numpy as np
import pytest

import halfway
from halfway.passes import PassManager
from tests.support.onnx_graph import Graph, check_passes

B, H, S, D, P = 2, 4, 5, 8, 16
END = np.iinfo(np.int64).max
RNG = np.random.default_rng(7)


def _slice(g, x, start, stop, step=1):
    return g.node("Slice", x, g.ints(start), g.ints(stop), g.ints(-1), g.ints(step))


def _half_bound(g, x, shape_bounds):
    """D / 2 as a constant, or as TorchScript computes it from x's shape."""
    if not shape_bounds:
        return g.ints(D // 2)
    size = g.node("Gather", g.node("Shape", x), g.const(np.int64(3)), axis=0)
    return g.node("Unsqueeze", g.node("Div", size, g.const(np.int64(2))), g.ints(0))


def _halves_turned(g, x, width, shape_bounds, cut=None):
    half = g.ints(cut) if cut is not None else (_half_bound(g, x, shape_bounds) if width == D else g.ints(width // 2))
    lower = g.node("Slice", x, g.ints(0), half, g.ints(-1))
    upper = g.node("Slice", x, half, g.ints(END), g.ints(-1))
    return g.node("Concat", g.node("Neg", upper), lower, axis=-1)


def _pairs_turned(g, x):
    odd, even = _slice(g, x, 1, END, 2), _slice(g, x, 0, END, 2)
    stacked = g.node("Concat", g.node("Unsqueeze", g.node("Neg", odd), g.ints(-1)), g.node("Unsqueeze", even, g.ints(-1)),
                     axis=-1)
    return g.node("Reshape", stacked, g.ints(0, 0, 0, -1))


def _computed_tables(g, width):
    """HF LLaMA's: positions times the inverse frequencies, concatenated with themselves, cos and sin
    scaled by 1, broadcast over the heads."""
    positions = g.node("Cast", g.input("positions", np.int64, [1, "seq"]), to=1)
    inverse = g.const(1.0 / 10000 ** (np.arange(0, width, 2, dtype=np.float32) / width))
    freqs = g.node("Mul", g.node("Unsqueeze", positions, g.ints(-1)), inverse)
    angles = g.node("Concat", freqs, freqs, axis=-1)
    return [g.node("Unsqueeze", g.node("Mul", g.node(f, angles), g.const(np.float32(1.0))), g.ints(1))
            for f in ("Cos", "Sin")]


def _cached(width, interleaved, equal=True):
    angles = RNG.uniform(-3, 3, (P, width // 2)).astype(np.float32)
    full = np.repeat(angles, 2, axis=-1) if interleaved else np.concatenate([angles, angles], axis=-1)
    if not equal:
        full[:, -1] += 1.0
    return full


def _gathered_tables(g, width, interleaved, equal=True):
    """Rows of cached cos and sin tables picked by position ids."""
    ids = g.input("position_ids", np.int64, ["batch", "seq"])
    angles = _cached(width, interleaved, equal)
    return [g.node("Unsqueeze", g.node("Gather", g.const(f(angles)), ids, axis=0), g.ints(1)) for f in (np.cos, np.sin)]


def _rope(form="halves", tables="computed", swap=False, shape_bounds=False, rotary_dim=None, equal=True, cut=None):
    g = Graph()
    x = g.input("x", np.float32, ["batch", H, "seq", D])
    width = rotary_dim or D
    cos, sin = (_computed_tables(g, width) if tables == "computed"
                else _gathered_tables(g, width, form == "pairs", equal))
    part = x if rotary_dim is None else _slice(g, x, 0, width)
    turned = _pairs_turned(g, part) if form == "pairs" else _halves_turned(g, part, width, shape_bounds, cut)
    by_cos = g.node("Mul", cos, part) if swap else g.node("Mul", part, cos)
    by_sin = g.node("Mul", sin, turned) if swap else g.node("Mul", turned, sin)
    out = g.node("Add", by_sin, by_cos) if swap else g.node("Add", by_cos, by_sin)
    if rotary_dim is not None:
        out = g.node("Concat", out, _slice(g, x, width, END), axis=-1)
    return g.model([g.node("Relu", out)])


def _feeds(model):
    names = {i.name for i in model.graph.input}
    feeds = {"x": RNG.standard_normal((B, H, S, D)).astype(np.float32)}
    if "positions" in names:
        feeds["positions"] = np.arange(S, dtype=np.int64)[None]
    if "position_ids" in names:
        feeds["position_ids"] = RNG.integers(0, P, (B, S))
    return feeds


def _rotary(program):
    """The one rotary_embedding, the only reader of x; no negation is left."""
    block = program.global_block()
    assert "scale" not in {op.type for op in block.ops}
    (op,) = [use[0] for use in block.uses("x")]
    assert op.type == "rotary_embedding"
    return op


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("shape_bounds", [False, True])
def test_rotate_half_with_tables_computed_from_positions(swap, shape_bounds):
    model = _rope(swap=swap, shape_bounds=shape_bounds)
    op = _rotary(check_passes(model, _feeds(model)))
    assert not op.attr("interleaved") and op.attr("rotary_dim") == 0 and not op.input("PositionIds")


@pytest.mark.parametrize("form", ["halves", "pairs"])
def test_tables_gathered_by_position_ids_become_the_ops_position_ids(form):
    model = _rope(form, tables="gathered")
    op = _rotary(check_passes(model, _feeds(model)))
    assert op.input("PositionIds") == ("position_ids",) and op.attr("interleaved") == (form == "pairs")


@pytest.mark.parametrize("tables", ["computed", "gathered"])
def test_partial_rotary_rotates_the_first_entries(tables):
    model = _rope(tables=tables, rotary_dim=4)
    assert _rotary(check_passes(model, _feeds(model))).attr("rotary_dim") == 4


def _misses(model):
    program, _, fetches, scope = halfway.load(model)
    result = PassManager("fuse_rotary", debug=True).run(program, scope, fetch=fetches)
    assert "rotary_embedding" not in {op.type for op in result.program.global_block().ops}
    return [m.reason for r in result.records for m in r.near_misses]


@pytest.mark.parametrize("kwargs, reason", [
    ({"tables": "gathered", "equal": False}, "holds different values in the two entries of a pair"),
    ({"form": "pairs", "tables": "gathered", "equal": False}, "holds different values in the two entries of a pair"),
    ({"cut": 3}, "takes [3:8:1] of 8, not [4:8:1]"),
])
def test_near_misses_say_why(kwargs, reason):
    misses = _misses(_rope(**kwargs))
    assert any(reason in m for m in misses), misses


def test_tables_that_broadcast_over_another_axis_say_why():
    """x as [batch, sequence, heads, size] (the heads not split off first) with [b, S, 1, D] tables."""
    g = Graph()
    x = g.input("x", np.float32, ["batch", S, H, D])
    angles = g.const(RNG.uniform(-1, 1, (1, S, 1, D // 2)).astype(np.float32))
    cos, sin = (g.node(f, g.node("Concat", angles, angles, axis=-1)) for f in ("Cos", "Sin"))
    out = g.node("Add", g.node("Mul", x, cos), g.node("Mul", _halves_turned(g, x, D, False), sin))
    misses = _misses(g.model([out]))
    assert any("is not [batch or 1, 1, sequence, 8]" in m for m in misses), misses
