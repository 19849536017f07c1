"""The graph page's layered layout: on a transformer-shaped graph of over 1,000 ops (a residual
stream, an attention mask every block reads) no two nodes overlap, no edge passes through a node,
every edge runs from its source's bottom to its target's top, and the drawing wraps into columns
of a screen's shape rather than one column tens of thousands of pixels tall."""

from __future__ import annotations

import re

import pytest

from halfway import HalfwayError
from halfway.cli.report.graph_layout import Box, Layout, layout
from tests.support.graph_shapes import transformer

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
STEPS = 8
"""Points sampled on each curve of a path."""


@pytest.fixture(scope="module")
def big() -> tuple[dict[str, tuple[float, float]], list[tuple[str, str, str]], Layout]:
    sizes, edges = transformer(84)
    assert len(sizes) > 1000
    return sizes, edges, layout(sizes, edges)


def _inside(point: tuple[float, float], box: Box, margin: float = 0.5) -> bool:
    x, y = point
    return box.x + margin < x < box.x + box.width - margin and box.y + margin < y < box.y + box.height - margin


def _samples(d: str) -> list[tuple[float, float]]:
    """Points along an SVG path of M, L and vertical-tangent C commands."""
    points: list[tuple[float, float]] = []
    for command, args in re.findall(r"([MLC])([^MLC]*)", d):
        values = [float(v) for v in NUMBER.findall(args)]
        if command in "ML":
            end = (values[0], values[1])
            if points:  # a straight line
                start = points[-1]
                points += [(start[0] + (end[0] - start[0]) * t / STEPS, start[1] + (end[1] - start[1]) * t / STEPS)
                           for t in range(1, STEPS + 1)]
            else:
                points.append(end)
        else:
            p0, (p1, p2, p3) = points[-1], zip(values[0::2], values[1::2])
            for t in (i / STEPS for i in range(1, STEPS + 1)):
                u = 1 - t
                points.append(tuple(u ** 3 * a + 3 * u * u * t * b + 3 * u * t * t * c + t ** 3 * e
                                    for a, b, c, e in zip(p0, p1, p2, p3)))
    return points


def test_no_two_nodes_overlap(big) -> None:
    sizes, _, where = big
    boxes = sorted(where.boxes.values(), key=lambda b: b.x)
    assert len(boxes) == len(sizes)
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            if b.x >= a.x + a.width:
                break
            assert a.y + a.height <= b.y or b.y + b.height <= a.y, (a, b)
    assert all((b.width, b.height) == sizes[n] for n, b in where.boxes.items())


def test_edges_join_their_ends_and_pass_through_no_node(big) -> None:
    _, edges, where = big
    assert {(r.source, r.target) for r in where.routes} == {(s, t) for s, t, _ in edges}
    rows: dict[float, list[Box]] = {}
    for box in where.boxes.values():
        rows.setdefault(box.y, []).append(box)
    firsts: dict[str, tuple[float, float]] = {}
    for route in where.routes:
        points = _samples(route.d)
        target = where.boxes[route.target]
        assert points[-1][1] == pytest.approx(target.y, abs=0.1)  # onto the target's top
        assert target.x <= points[-1][0] <= target.x + target.width
        for point in points:
            near = [box for y, row in rows.items() if y - 1 <= point[1] <= y + 43 for box in row]
            assert not any(_inside(point, box) for box in near), (route.source, route.target, point)
        firsts.setdefault(route.source, points[0])
    for source, start in firsts.items():  # the first edge of a source leaves its bottom (the others, its lane)
        box = where.boxes[source]
        assert start[1] == pytest.approx(box.y + box.height) and box.x <= start[0] <= box.x + box.width


def test_a_deep_graph_wraps_into_columns_of_a_screens_shape(big) -> None:
    _, _, where = big
    assert where.height < 8000 and 0.8 < where.width / where.height < 4
    lefts = sorted({round(b.x) for b in where.boxes.values()})
    assert lefts[-1] - lefts[0] > 5000  # several columns side by side


def test_a_small_graph_stays_one_column_of_layers() -> None:
    sizes = {"in": (100.0, 42.0), "a": (100.0, 42.0), "b": (100.0, 42.0), "c": (100.0, 42.0)}
    edges = [("in", "a", "y"), ("in", "b", "y"), ("a", "c", "y"), ("b", "c", "y")]
    where = layout(sizes, edges)
    box = where.boxes
    assert box["a"].y == box["b"].y > box["in"].y and box["c"].y > box["a"].y
    assert box["a"].x + box["a"].width <= box["b"].x or box["b"].x + box["b"].width <= box["a"].x
    centre = {n: b.x + b.width / 2 for n, b in box.items()}
    assert centre["in"] == pytest.approx((centre["a"] + centre["b"]) / 2)  # between its readers
    assert centre["c"] == pytest.approx(centre["in"])


def test_two_tensors_between_two_ops_are_two_drawn_routes() -> None:
    """A split whose two outputs a concat reads: one route per tensor, each with its own path."""
    sizes = {"in": (100.0, 42.0), "split": (100.0, 42.0), "concat": (100.0, 42.0)}
    edges = [("in", "split", "x"), ("split", "concat", "a"), ("split", "concat", "b")]
    routes = [r for r in layout(sizes, edges).routes if r.source == "split"]
    assert sorted(r.key for r in routes) == ["a", "b"] and all(r.d.startswith("M") for r in routes)


def test_an_edge_going_backward_is_refused() -> None:
    with pytest.raises(HalfwayError, match="edge b -> a goes backward"):
        layout({"a": (90.0, 42.0), "b": (90.0, 42.0)}, [("b", "a", "y")])
