"""A layered (Sugiyama-style) layout of a directed acyclic graph, for the graph page.

1. **Layers.** A node sits one layer below the deepest node feeding it (longest path); a node
   nothing feeds (an input) moves down to just above its first reader, so it draws no long edge.
2. **Lanes.** The edges from one source that skip layers share a chain of *lane* points, one per
   layer they cross; each reader branches off the chain in the layer above it. Every drawn
   segment then joins two adjacent layers, or runs straight down a lane's own slot.
3. **Order.** Barycentric sweeps, down then up, sort each layer by the mean slot of its
   neighbours in the layer before, which removes most crossings.
4. **Positions.** Each sweep puts every node as near as it may to the mean x of its neighbours,
   keeping the layer's order and the gaps: a weighted isotonic regression (pool adjacent
   violators), exact and linear. Lanes weigh more, so that long edges run straight.
5. **Columns.** A deep graph (a transformer's hundreds of layers) wraps into side-by-side columns,
   cut where the fewest edges cross, so the whole fits a screen's shape. An edge cut by a column
   break runs below its column, up the gutter beside it and over the top of the next one.

Segments between adjacent layers stay inside the gap between them, lanes hold slots of their own
and the cut edges run in margins and gutters, so no edge passes through a node.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

from attrs import frozen

from ...ir.errors import HalfwayError

__all__ = ["Box", "Route", "Layout", "layout", "GAP_X", "GAP_Y"]

GAP_X, GAP_Y = 24.0, 44.0
"""Space between nodes of a layer, and between layers (edge labels sit in it)."""
LANE_WIDTH = 10.0
GUTTER = 80.0
"""Space between columns; the edges a column break cuts run up its middle."""
SWEEPS = 4
LANE_WEIGHT = 8.0
MIN_ROWS = 24
"""A graph of fewer layers than this (or than 1.5 times this) stays in one column."""

Point = tuple[float, float]
Slot = str | tuple[str, str, str, int]
"""A node's id, or a lane: (``"lane"``, source, key, layer)."""


@frozen
class Box:
    """A node's rectangle: top-left corner and size."""

    x: float
    y: float
    width: float
    height: float


@frozen
class Route:
    """One edge drawn as an SVG path ``d`` (where it leaves the lane it shares with the source's
    other edges of its key, if an edge before it drew that); ``start`` is where ``d`` starts."""

    source: str
    target: str
    key: str
    d: str
    start: Point


@frozen
class Layout:
    boxes: Mapping[str, Box]
    routes: tuple[Route, ...]
    width: float
    height: float


class _Grid:
    """Layers of slots (node ids, and lanes named ``("lane", group, layer)``) with their sizes."""

    def __init__(self, sizes: Mapping[str, tuple[float, float]], edges: Sequence[tuple[str, str, str]]) -> None:
        self.sizes = sizes
        self.layer = _layers(list(sizes), edges)
        self.width: dict[Slot, float] = {n: sizes[n][0] for n in sizes}
        self.preds: dict[Slot, list[Slot]] = defaultdict(list)
        self.succs: dict[Slot, list[Slot]] = defaultdict(list)
        self.paths: list[tuple[str, list[Slot]]] = []
        """(key, chain from the source through its lanes to the target), one per edge."""
        self._add_lanes(edges)
        rows: dict[int, list[Slot]] = defaultdict(list)
        for slot in self.width:
            rows[self.layer[slot]].append(slot)
        self.rows = [rows[i] for i in range(max(rows, default=-1) + 1)]
        self.row_height = max((h for _, h in sizes.values()), default=0.0)

    def _add_lanes(self, edges: Sequence[tuple[str, str, str]]) -> None:
        groups: dict[tuple[str, str], list[str]] = defaultdict(list)
        for source, target, key in edges:
            groups[(source, key)].append(target)
        for (source, key), targets in groups.items():
            chain: list[Slot] = [source]
            for depth in range(self.layer[source] + 1, max(self.layer[t] for t in targets)):
                lane = ("lane", source, key, depth)
                self.layer[lane], self.width[lane] = depth, LANE_WIDTH
                self._link(chain[-1], lane)
                chain.append(lane)
            for target in sorted(dict.fromkeys(targets), key=lambda t: self.layer[t]):
                via = chain[: self.layer[target] - self.layer[source]]
                self._link(via[-1], target)
                self.paths.append((key, [*via, target]))

    def _link(self, a: Slot, b: Slot) -> None:
        if b not in self.succs[a]:
            self.succs[a].append(b)
            self.preds[b].append(a)


def _layers(nodes: list[str], edges: Sequence[tuple[str, str, str]]) -> dict[Slot, int]:
    incoming: dict[str, list[str]] = defaultdict(list)
    outgoing: dict[str, list[str]] = defaultdict(list)
    for source, target, _ in edges:
        incoming[target].append(source)
        outgoing[source].append(target)
    layer: dict[Slot, int] = {}
    for node in nodes:
        late = [s for s in incoming[node] if s not in layer]
        if late:
            raise HalfwayError(f"graph layout: edge {late[0]} -> {node} goes backward; list the nodes so that every "
                               "edge goes forward")
        layer[node] = max((layer[s] + 1 for s in incoming[node]), default=0)
    for node in nodes:
        if not incoming[node] and outgoing[node]:
            layer[node] = max(0, min(layer[t] for t in outgoing[node]) - 1)
    return layer


def _order(grid: _Grid) -> None:
    """Barycentric sweeps over ``grid.rows``, in place."""
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        indices = range(1, len(grid.rows)) if down else range(len(grid.rows) - 2, -1, -1)
        for i in indices:
            ref = grid.rows[i - 1] if down else grid.rows[i + 1]
            slot_of = {s: k for k, s in enumerate(ref)}
            near = grid.preds if down else grid.succs
            row = grid.rows[i]

            def key(item: tuple[int, Slot], near: Mapping[Slot, list[Slot]] = near,
                    slot_of: Mapping[Slot, int] = slot_of) -> float:
                where = [slot_of[n] for n in near.get(item[1], ()) if n in slot_of]
                return sum(where) / len(where) if where else float(item[0]) * len(ref) / max(len(row), 1)

            grid.rows[i] = [s for _, s in sorted(enumerate(row), key=key)]


def _isotonic(targets: list[float], weights: list[float]) -> list[float]:
    """The non-decreasing sequence nearest ``targets`` in weighted least squares."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for t, w in zip(targets, weights):
        blocks.append([t, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return [m for m, _, c in blocks for _ in range(int(c))]


def _place_row(row: list[Slot], grid: _Grid, x: dict[Slot, float], near: Mapping[Slot, list[Slot]]) -> None:
    """Centres for ``row`` as near its neighbours' mean as its order and gaps allow."""
    offsets, total = [], 0.0
    for k, slot in enumerate(row):
        if k:
            total += (grid.width[row[k - 1]] + grid.width[slot]) / 2 + GAP_X
        offsets.append(total)
    targets, weights = [], []
    for slot, offset in zip(row, offsets):
        around = [x[n] for n in near.get(slot, ()) if n in x]
        targets.append((sum(around) / len(around) if around else x.get(slot, offset)) - offset)
        weights.append((LANE_WEIGHT if isinstance(slot, tuple) else 1.0) * (1.0 if around else 0.1))
    for slot, base, offset in zip(row, _isotonic(targets, weights), offsets):
        x[slot] = base + offset


def _centres(grid: _Grid) -> dict[Slot, float]:
    x: dict[Slot, float] = {}
    for row in grid.rows:
        _place_row(row, grid, x, {})
    for sweep in range(SWEEPS):
        down = sweep % 2 == 0
        rows = grid.rows[1:] if down else grid.rows[-2::-1]
        for row in rows:
            _place_row(row, grid, x, grid.preds if down else grid.succs)
    return x


def _breaks(grid: _Grid, x: Mapping[Slot, float], aspect: float) -> list[int]:
    """First layers of the columns: about ``sqrt(aspect * height / width)`` of them, each cut
    at the layer boundary near its share that the fewest edges cross."""
    count = len(grid.rows)
    if count < 1.5 * MIN_ROWS:
        return [0]
    spans = sorted(max(x[s] + grid.width[s] / 2 for s in r) - min(x[s] - grid.width[s] / 2 for s in r)
                   for r in grid.rows)
    width = max(spans[len(spans) // 2], 1.0) + GUTTER
    columns = max(1, min(count // MIN_ROWS, round(math.sqrt(aspect * count * (grid.row_height + GAP_Y) / width))))
    share = count / columns
    starts = [0]
    for c in range(1, columns):
        aim = round(c * share)
        window = range(max(starts[-1] + MIN_ROWS // 2, aim - int(share / 5)), min(count, aim + int(share / 5) + 1))
        starts.append(min(window, key=lambda i: (_crossing(grid, i), abs(i - aim)), default=aim))
    return starts


def _crossing(grid: _Grid, layer: int) -> int:
    """How many segments enter ``layer`` from the layer above."""
    return sum(len(grid.preds[s]) for s in grid.rows[layer])


class _Frame:
    """Where each layer lands: its column's x shift and its top y."""

    def __init__(self, grid: _Grid, x: Mapping[Slot, float], starts: list[int]) -> None:
        self.column_of: list[int] = []
        self.shift: list[float] = []
        self.right: list[float] = []
        self.row_height = grid.row_height
        self.pitch = grid.row_height + GAP_Y
        self.start_of: list[int] = []
        left_edge = 0.0
        for c, first in enumerate(starts):
            last = starts[c + 1] if c + 1 < len(starts) else len(grid.rows)
            slots = [s for r in grid.rows[first:last] for s in r]
            lo = min(x[s] - grid.width[s] / 2 for s in slots)
            hi = max(x[s] + grid.width[s] / 2 for s in slots)
            self.shift.append(left_edge - lo)
            self.right.append(left_edge + hi - lo)
            left_edge += hi - lo + GUTTER
            self.column_of += [c] * (last - first)
            self.start_of += [first] * (last - first)
        self.width = left_edge - GUTTER
        rows_max = max((self.column_of.count(c) for c in range(len(starts))), default=0)
        self.height = rows_max * self.pitch - GAP_Y

    def top(self, layer: int) -> float:
        return (layer - self.start_of[layer]) * self.pitch

    def bottom_of_column(self, column: int) -> float:
        return (self.column_of.count(column) - 1) * self.pitch + self.row_height


def _ports(grid: _Grid, x: Mapping[Slot, float]) -> dict[tuple[Slot, Slot], tuple[float, float]]:
    """(a, b) -> x where the segment a->b leaves a and enters b, spread along the node's side."""
    port: dict[tuple[Slot, Slot], tuple[float, float]] = {}
    out_x: dict[tuple[Slot, Slot], float] = {}
    for a, succs in grid.succs.items():
        for k, b in enumerate(sorted(succs, key=lambda s: x[s])):
            out_x[(a, b)] = _spread(a, k, len(succs), grid, x)
    for b, preds in grid.preds.items():
        for k, a in enumerate(sorted(preds, key=lambda s: x[s])):
            port[(a, b)] = (out_x[(a, b)], _spread(b, k, len(preds), grid, x))
    return port


def _spread(slot: Slot, k: int, n: int, grid: _Grid, x: Mapping[Slot, float]) -> float:
    if isinstance(slot, tuple):
        return x[slot]
    usable = grid.width[slot] * 0.6
    return x[slot] - usable / 2 + usable * (k + 1) / (n + 1)


def layout(sizes: Mapping[str, tuple[float, float]], edges: Sequence[tuple[str, str, str]],
           aspect: float = 1.6) -> Layout:
    """Boxes and edge routes for the nodes ``sizes`` (id -> (width, height), listed so that every
    edge goes forward) and ``edges`` (source, target, key: a source's edges of one key share a
    lane). ``aspect`` is the width / height the columns aim at."""
    grid = _Grid(sizes, edges)
    if not grid.rows:
        return Layout({}, (), 0.0, 0.0)
    _order(grid)
    x = _centres(grid)
    frame = _Frame(grid, x, _breaks(grid, x, aspect))
    boxes = {}
    for node, (w, h) in sizes.items():
        layer = grid.layer[node]
        centre = x[node] + frame.shift[frame.column_of[layer]]
        boxes[node] = Box(centre - w / 2, frame.top(layer) + (grid.row_height - h) / 2, w, h)
    ports = _ports(grid, x)
    drawn: dict[tuple[Slot, str], set[tuple[Slot, Slot]]] = defaultdict(set)  # by lane: (source, key)
    routes = tuple(_route(key, chain, grid, x, frame, ports, drawn[(chain[0], key)]) for key, chain in grid.paths)
    return Layout(boxes, routes, frame.width, frame.height)


def _route(key: str, chain: list[Slot], grid: _Grid, x: Mapping[Slot, float], frame: _Frame,
           ports: Mapping[tuple[Slot, Slot], tuple[float, float]], drawn: set[tuple[Slot, Slot]]) -> Route:
    """The path along ``chain`` from the first segment not ``drawn`` yet: the edges of one lane
    draw its shared segments once (the shortest edge first, so that it starts at the source)."""
    parts: list[str] = []
    start: Point | None = None
    for a, b in zip(chain, chain[1:]):
        if (a, b) in drawn:
            continue
        drawn.add((a, b))
        la, lb = grid.layer[a], grid.layer[b]
        xa, xb = ports[(a, b)]
        xa += frame.shift[frame.column_of[la]]
        xb += frame.shift[frame.column_of[lb]]
        ya = frame.top(la) + (grid.row_height + _height(a, grid)) / 2  # a's bottom
        yb = frame.top(lb) + (grid.row_height - _height(b, grid)) / 2  # b's top
        if start is None:
            start = (xa, ya)
            parts.append(f"M{xa:.1f},{ya:.1f}")
        elif isinstance(a, tuple):  # straight down the lane's slot
            parts.append(f"L{xa:.1f},{ya:.1f}")
        if frame.column_of[la] == frame.column_of[lb]:
            mid = (ya + yb) / 2
            parts.append(f"C{xa:.1f},{mid:.1f} {xb:.1f},{mid:.1f} {xb:.1f},{yb:.1f}")
        else:
            parts.append(_across(xa, ya, xb, yb, frame, frame.column_of[la]))
    source, target = chain[0], chain[-1]
    assert isinstance(source, str) and isinstance(target, str)
    return Route(source, target, key, " ".join(parts), start or (0.0, 0.0))


def _across(xa: float, ya: float, xb: float, yb: float, frame: _Frame, column: int) -> str:
    """Below column ``column``, up the gutter on its right, over the top of the next column."""
    below = frame.bottom_of_column(column) + GAP_Y / 2
    gutter = frame.right[column] + GUTTER / 2
    above = -GAP_Y / 2
    return (f"L{xa:.1f},{below:.1f} L{gutter:.1f},{below:.1f} L{gutter:.1f},{above:.1f} "
            f"L{xb:.1f},{above:.1f} L{xb:.1f},{yb:.1f}")


def _height(slot: Slot, grid: _Grid) -> float:
    """A lane fills its layer's band, so that no edge bends beside a node."""
    return grid.row_height if isinstance(slot, tuple) else grid.sizes[slot][1]
