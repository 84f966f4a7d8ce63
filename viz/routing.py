"""Lines that go around what stands in their way, for a graph whose nodes and labels no edge may
pass over (viz/circuit_layout.py).

A line from one point to another stays straight where it passes no obstacle (a circle) closer
than the obstacle's radius; where it would, it bends once beside the first such obstacle — of
the places beside it on either side, at its reach or further out (past a column of obstacles),
the one whose two straight parts cross the fewest — and each part is looked at again. A line
may also be led through given points (``via``: a lane along the plot's side). Points
and radii are in px of the smallest room the graph is drawn in: a larger room stretches the plot
(never by less in either direction), so a line stays as far from each obstacle there, or farther.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GAP = 4.0  # px between a bent line and the obstacle it goes around
DEPTH = 10  # bends within bends at most (a line still crossing after them is left so)
FURTHEST = 6  # a bend stands at most this many times an obstacle's reach from its centre


@dataclass(frozen=True)
class Obstacle:
    """A circle no line may cross: a node's marker, part of a label's box."""

    x: float
    y: float
    r: float


def _as_array(obstacles: list[Obstacle]) -> np.ndarray:
    """[n, 3]: each obstacle's x, y and radius."""
    return np.array([(p.x, p.y, p.r) for p in obstacles], dtype=float).reshape(-1, 3)


def _nearest(found: np.ndarray, a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each obstacle: its centre's distance from segment ab, where along ab (0 to 1) it is
    nearest, and on which side of ab it lies (the sign of ab × ap)."""
    d = np.subtract(b, a)
    p = found[:, :2] - a
    length2 = float(d @ d)
    t = np.zeros(len(found)) if length2 == 0 else np.clip(p @ d / length2, 0.0, 1.0)
    gap = p - t[:, None] * d
    return np.hypot(gap[:, 0], gap[:, 1]), t, d[0] * p[:, 1] - d[1] * p[:, 0]


def _count(a, b, found: np.ndarray) -> int:
    """How many obstacles segment ab passes closer to than their radius."""
    return int((_nearest(found, a, b)[0] < found[:, 2]).sum()) if len(found) else 0


def _segments_cross(starts: np.ndarray, ends: np.ndarray, found: np.ndarray) -> np.ndarray:
    """For each segment (starts[i] to ends[i], [m, 2] each): how many obstacles it passes closer
    than their radius, [m]."""
    d = ends - starts  # (m, 2)
    p = found[None, :, :2] - starts[:, None]  # (m, n, 2)
    length2 = np.maximum((d * d).sum(-1), 1e-12)  # (m,)
    t = np.clip((p * d[:, None]).sum(-1) / length2[:, None], 0.0, 1.0)  # (m, n)
    gap = p - t[..., None] * d[:, None]  # (m, n, 2)
    return (np.hypot(gap[..., 0], gap[..., 1]) < found[None, :, 2]).sum(-1)


def _beside(i: int, a, b, found: np.ndarray, bounds) -> tuple:
    """Where a line from a to b bends to pass obstacle i (see the module's doc), inside
    ``bounds`` (x0, y0, x1, y1) where it can."""
    x, y, r = found[i]
    d = np.subtract(b, a)
    normal = np.array([-d[1], d[0]]) / (np.hypot(*d) or 1.0)  # ab's normal, to its left
    side = _nearest(found[i : i + 1], a, b)[2][0]
    away = -1.0 if side > 0 else 1.0  # the obstacle lies left of ab: bend to the right
    steps = np.array([s * k for k in range(1, FURTHEST + 1) for s in (away, -away)])
    options = np.array([x, y]) + steps[:, None] * normal * (r + GAP)  # (m, 2), in order
    beyond = np.zeros(len(options))
    if bounds is not None:
        x0, y0, x1, y1 = bounds
        lows, highs = np.array([x0, y0]) - options, options - np.array([x1, y1])
        beyond = np.maximum(0.0, np.maximum(lows, highs).max(-1))
    reach = found[None, :, 2] + GAP - np.hypot(*(found[None, :, :2] - options[:, None]).T).T
    inside = np.maximum(0.0, reach.max(-1))
    a_, b_ = np.broadcast_to(a, options.shape), np.broadcast_to(b, options.shape)
    crossed = _segments_cross(a_, options, found) + _segments_cross(options, b_, found)
    best = np.lexsort((np.arange(len(options)), crossed, inside, beyond))[0]
    return float(options[best, 0]), float(options[best, 1])


def _route(a, b, found: np.ndarray, depth: int, bounds) -> list[tuple]:
    if depth <= 0 or not len(found):
        return [b]
    distance, t, _ = _nearest(found, a, b)
    hit = np.flatnonzero(distance < found[:, 2])
    if not len(hit):
        return [b]
    w = _beside(int(hit[np.argmin(t[hit])]), a, b, found, bounds)
    return _route(a, w, found, depth - 1, bounds) + _route(w, b, found, depth - 1, bounds)


def route(
    a: tuple, b: tuple, obstacles: list[Obstacle], bounds=None, depth: int = DEPTH
) -> list[tuple]:
    """The points of a line from a to b that passes around ``obstacles``, bending inside
    ``bounds`` (x0, y0, x1, y1: the plot's, where the line is drawn) where it can: b, after any
    bends (a itself is not repeated)."""
    ends = tuple(map(float, a)), tuple(map(float, b))
    points = _route(*ends, _as_array(obstacles), depth, bounds)
    return [(float(x), float(y)) for x, y in points]


def crossings(points: list[tuple], obstacles: list[Obstacle]) -> int:
    """How many times a line through ``points`` passes an obstacle closer than its radius."""
    found = _as_array(obstacles)
    return sum(_count(a, b, found) for a, b in zip(points, points[1:], strict=False))


def via(points: list[tuple], obstacles: list[Obstacle], bounds=None) -> list[tuple]:
    """A line through each of ``points`` in turn, each stretch routed around the obstacles:
    every point after the first, with the bends between them."""
    found = []
    for a, b in zip(points, points[1:], strict=False):
        found += route(a, b, obstacles, bounds)
    return found
