"""Where a circuit graph's parts stand (viz/circuit_graph.py draws them): the model's nodes in
data-flow order, the letters of the inputs an edge enters (q, k, v beside a head), the words
beside the end nodes, and each edge's path from writer to reader around everything it would pass
over (viz/routing.py).

Two layouts (a ``Room``): a wide one, the data flowing left to right (layers across, a layer's
heads down, its MLP under them), and a narrow one for a phone, flowing top to bottom (a layer's
heads across). Places are in units; a room also says the least px a unit takes in any window it
is drawn in, and every distance that must hold on the screen (a line's from a node, a letter's
from an arrowhead) is kept at that scale, so that it holds in every larger one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import numpy as np

from lang import speaking, tr
from viz.common import safe
from viz.measure import text_px
from viz.routing import Obstacle, crossings, route, via


@dataclass(frozen=True)
class Room:
    """One layout's sizes: whether the data flows down (a phone's), a node's marker, its name's,
    a letter's and an arrowhead's px, the least px a unit takes across (x) and down (y) in any
    window it is drawn in, the most units across it may take (``span``), and the width in px
    it is laid out for at least (its legend's rows)."""

    narrow: bool
    node: int
    text: int
    letter: int
    arrow: int
    sx: float
    sy: float
    span: float
    width: float


# The wide layout on a page's column (1280 × 720: 744 px; 40 px a unit up to 28 units); the
# narrow one on a phone of 320 px at least (a 390 px phone's column: 358 px), its nodes 32 px:
# a finger's target.
WIDE = Room(False, node=40, text=13, letter=14, arrow=12, sx=40.0, sy=56.0, span=28.0, width=700)
NARROW = Room(True, node=32, text=10, letter=12, arrow=10, sx=40.0, sy=44.0, span=7.5, width=300)
# Where an input's letter stands, in units from its head's centre: back along the flow, aside
# (the query's to one side, the value's to the other).
PORTS = {"q": (0.9, 0.35), "k": (1.0, 0.0), "v": (0.9, -0.35)}
GAPS = {"heads": 2.0, "mlp": 1.25, "end": 1.25}  # units before a column of this kind
LANE = 0.5  # units beside the outermost rows: room for a line around a column
NODE = re.compile(r"(?:(encoder|decoder|cross)\.)?L(\d+)(?:H(\d+)|MLP)$")


@dataclass(frozen=True)
class Column:
    """Nodes that stand at one place along the flow: ``kind`` "end", "heads" or "mlp"."""

    kind: str
    names: tuple[str, ...]


# ---- the model's nodes -----------------------------------------------------------------------
def stacks(config) -> list[tuple[str, bool]]:
    """(node names' prefix, whether its layers have cross-attention), in data-flow order."""
    if getattr(config, "arch", "") != "encoder-decoder":
        return [("", False)]
    return [("encoder.", False), ("decoder.", True)]


def columns(config) -> list[Column]:
    """Every node of the model, column by column in data-flow order (analysis.circuits' names)."""
    found = []
    for prefix, crossed in stacks(config):
        found.append(Column("end", (f"{prefix}embed",)))
        for layer in range(config.n_layers):
            heads = [f"{prefix}L{layer}H"] + [f"cross.L{layer}H"] * crossed
            for name in heads:
                found.append(Column("heads", tuple(f"{name}{h}" for h in range(config.n_heads))))
            found.append(Column("mlp", (f"{prefix}L{layer}MLP",)))
        found.append(Column("end", ("memory" if prefix == "encoder." else "logits",)))
    return found


def target_node(target: str, config) -> tuple[str, str]:
    """An edge's target as (node, kind): "L1H0.k" -> ("L1H0", "k"); a key/value group's edge
    ("L1KV0.k") arrives at the group's first head; "memory", "logits" and an MLP are their
    own kind."""
    n_heads = config.n_heads
    n_kv = getattr(config, "kv_heads", n_heads) or n_heads
    node, _, kind = target.rpartition(".")
    if kind not in PORTS:
        if target in ("logits", "memory"):
            return target, target
        return target, "mlp"
    group = re.fullmatch(r"(.*L\d+)KV(\d+)", node)
    if group:
        node = f"{group[1]}H{int(group[2]) * (n_heads // n_kv)}"
    return node, kind


def words() -> dict[str, str]:
    """The nodes that are no head or MLP, in words: the embeddings, encoder output, logits."""
    return {"embed": tr("embeddings"), "logits": tr("logits"), "memory": tr("encoder output")}


def hover_name(name: str) -> str:
    """A node or an edge's end as its hover names it: a head's or an MLP's id as the CSV has it
    ("L1H0.q", "decoder.L0MLP"), the embeddings, the encoder's output and the logits in words
    ("decoder.embed" -> "decoder.embeddings")."""
    stack, dot, short = name.rpartition(".")
    word = words().get(short)
    return f"{stack}{dot}{word}" if word else name


def inside_name(name: str) -> str:
    """A head's or an MLP's name as its marker holds it, on two lines ("L1<br>H0", "L0<br>MLP");
    "" for the end nodes (their words stand beside them)."""
    found = NODE.search(name)
    if not found:
        return ""
    _, layer, head = found.groups()
    return f"L{layer}<br>" + ("MLP" if head is None else f"H{head}")


def stack_word(prefix: str) -> str:
    """An encoder-decoder's stack in words."""
    said = {"encoder": tr("encoder"), "decoder": tr("decoder (◆ cross-attention heads)")}
    return said[prefix.rstrip(".")]


def touched_by(kept, config) -> set[str]:
    """The nodes the edges touch (a key/value group's edge: its first head)."""
    found = set()
    for source, target in zip(kept["source"], kept["target"], strict=True):
        found.update((str(source), target_node(str(target), config)[0]))
    return found


def inputs_of(kept, config) -> set[tuple[str, str]]:
    """The (head, kind) the edges enter."""
    entered = (target_node(str(target), config) for target in kept["target"])
    return {(node, kind) for node, kind in entered if kind in PORTS}


# ---- where everything stands -----------------------------------------------------------------
@dataclass
class Plan:
    """One layout of the graph: each node's place (units), each entered input's letter's place,
    the plot's ranges, the words beside the end nodes (annotations) and what no line may pass
    over (px of the room's least scale), by kind: "node", "letter", "label"."""

    room: Room
    places: dict[str, tuple[float, float]]
    ports: dict[tuple[str, str], tuple[float, float]]
    x_range: tuple[float, float]
    y_range: tuple[float, float]
    labels: list[dict]
    obstacles: dict[str, list[Obstacle]]

    def px(self, point: tuple[float, float]) -> tuple[float, float]:
        """A point in px of the room's least scale (the routing's)."""
        return point[0] * self.room.sx, point[1] * self.room.sy

    def units(self, point: tuple[float, float]) -> tuple[float, float]:
        return point[0] / self.room.sx, point[1] / self.room.sy

    @property
    def across(self) -> float:
        return self.x_range[1] - self.x_range[0]

    @property
    def down(self) -> float:
        return self.y_range[1] - self.y_range[0]

    def fits(self, flow: float) -> bool:
        """Whether it keeps within its room's units across and ``flow`` units down (a phone's)."""
        return self.across <= self.room.span and (not self.room.narrow or self.down <= flow)


def _slots(found: list[Column], keep: set[str] | None) -> dict[str, tuple[float, float]]:
    """Each node drawn as (units along the flow, rows across it): a column's heads in order
    (every head, or only those in ``keep``), its MLP under the rows of heads, an end node in
    the middle; a column with nothing drawn is left out."""
    shown = [
        Column(c.kind, tuple(n for n in c.names if keep is None or c.kind == "end" or n in keep))
        for c in found
    ]
    shown = [c for c in shown if c.names]
    rows = max([1, *(len(c.names) for c in shown if c.kind == "heads")])
    slots, flow = {}, 0.0
    for i, column in enumerate(shown):
        flow += GAPS[column.kind] if i else 0.0
        for row, name in enumerate(column.names):
            across = {"heads": row, "mlp": rows, "end": (rows - 1) / 2}[column.kind]
            slots[name] = (flow, float(across))
    return slots


DIAMOND = 0.8  # a cross head's marker to a node's (Plotly's diamond reaches 0.65 of its size)


def size_of(name: str, node: int) -> float:
    """A node's marker size in px: a cross head's diamond smaller, as far across as a circle."""
    return DIAMOND * node if name.startswith("cross.") else node


def reach(name: str, node: int) -> float:
    """px from a node's centre to its marker's farthest point: a circle's radius, a square's
    half-diagonal (an MLP), a diamond's vertex (a cross head's)."""
    if name.endswith("MLP"):
        return node / math.sqrt(2)
    if name.startswith("cross."):
        return 0.65 * size_of(name, node)
    return node / 2


def rim(name: str, node: int, direction: tuple[float, float]) -> float:
    """px from a node's centre to its marker's edge along ``direction`` (px): where an arrow
    arriving that way stops."""
    dx, dy = (abs(v) for v in direction)
    length = math.hypot(dx, dy) or 1.0
    c, s = dx / length, dy / length
    if name.endswith("MLP"):
        return node / 2 / max(c, s)
    if name.startswith("cross."):
        return 0.65 * size_of(name, node) / (c + s)
    return node / 2


def _box(cx: float, cy: float, width: float, height: float) -> list[Obstacle]:
    """A label's box (px) as circles along its length, each as tall as the box."""
    r = height / 2 + 2
    count = max(1, math.ceil(width / height))
    xs = np.linspace(cx - width / 2 + r - 2, cx + width / 2 - r + 2, count) if count > 1 else [cx]
    return [Obstacle(float(x), cy, r) for x in xs]


def plan(config, kept, room: Room, compact: bool) -> Plan:
    """The layout of ``room`` for the edges ``kept``: only the nodes they touch (``compact``),
    else every node of the model; the letters of the inputs they enter."""
    slots = _slots(columns(config), touched_by(kept, config) if compact else None)
    if room.narrow:  # flowing down, a layer's heads across; back: up, the query's side: left
        places = {n: (c, -f) for n, (f, c) in slots.items()}
        back, aside = (0.0, 1.0), (-1.0, 0.0)
    else:  # flowing right, a layer's heads down; back: left, the query's side: up
        places = {n: (f, -c) for n, (f, c) in slots.items()}
        back, aside = (-1.0, 0.0), (0.0, 1.0)
    ports = {}
    for node, kind in sorted(inputs_of(kept, config)):
        x, y = places[node]
        b, s = PORTS[kind]
        ports[node, kind] = (x + b * back[0] + s * aside[0], y + b * back[1] + s * aside[1])
    obstacles, labels = _obstacles(places, ports, room, config)
    boxes = [p for group in obstacles.values() for p in group]
    pad = max(p.r for p in boxes)  # px beyond the farthest centre
    xs, ys = [p.x for p in boxes], [p.y for p in boxes]
    # across the flow, a lane each side for the lines that go around a whole column of heads
    lane_x, lane_y = (LANE, 0.1) if room.narrow else (0.1, LANE)
    x_range = ((min(xs) - pad) / room.sx - lane_x, (max(xs) + pad) / room.sx + lane_x)
    y_range = ((min(ys) - pad) / room.sy - lane_y, (max(ys) + pad) / room.sy + lane_y)
    return Plan(room, places, ports, x_range, y_range, labels, obstacles)


def _obstacles(places, ports, room: Room, config) -> tuple[dict, list[dict]]:
    """What no line may pass over, in px of the room's least scale, by kind — each node's
    marker, each input's letter, the words beside the end nodes — and those words."""
    found = {"node": [], "letter": [], "label": []}
    for name, (x, y) in places.items():
        found["node"].append(Obstacle(x * room.sx, y * room.sy, reach(name, room.node) + 2))
    half = math.hypot(0.7 * room.letter + 4, 1.3 * room.letter + 2) / 2  # a letter's box
    found["letter"] = [Obstacle(x * room.sx, y * room.sy, half) for x, y in ports.values()]
    labels = []
    for name, (x, y) in places.items():
        short = name.rpartition(".")[2]
        if short not in words():
            continue
        text = _end_words(name, room.narrow)
        with speaking("en"):  # the wider of its words in either language: the same lines in both
            english = _end_words(name, room.narrow)
        width = max(text_px(text, room.letter), text_px(english, room.letter))
        height = 1.3 * room.letter
        side = _side(name, room.narrow)
        gap = room.node / 2 + 4
        dx, dy = {"left": (-1, 0), "right": (1, 0), "above": (0, 1), "below": (0, -1)}[side]
        cx = x * room.sx + dx * (gap + width / 2)
        cy = y * room.sy + dy * (gap + height / 2)
        found["label"] += _box(cx, cy, width, height)
        labels.append(_beside(text, x, y, side, gap, room.letter))
    return found, labels


def _end_words(name: str, narrow: bool) -> str:
    """The words beside an end node; a phone's encoder-decoder names the stack of each of its
    embeddings there too (its stacks have no row of their own to be named over)."""
    stack, _, short = name.rpartition(".")
    word = words()[short]
    if narrow and short == "embed" and stack:
        return tr("{stack}: {word}", stack=tr(stack), word=word)
    return word


def _side(name: str, narrow: bool) -> str:
    """Where an end node's words stand: where no edge leaves or arrives — the first embeddings
    before the flow, the logits after it; an encoder-decoder's output and its decoder's
    embeddings, which edges pass, over and under their nodes (wide) or beside the flow (a
    phone's, on the MLPs' side)."""
    short = name.rpartition(".")[2]
    first = short == "embed" and not name.startswith("decoder.")
    if narrow:
        return "above" if first else "below" if short == "logits" else "right"
    # (the encoder's output above its node, the decoder's embeddings, a column later, below)
    return {"embed": "left" if first else "below", "logits": "right"}.get(short, "above")


def _beside(text: str, x: float, y: float, side: str, gap: float, size: int) -> dict:
    """An end node's words as an annotation ``gap`` px beside it."""
    shift = {"left": (-gap, 0), "right": (gap, 0), "above": (0, gap), "below": (0, -gap)}[side]
    anchor = {"left": ("right", "middle"), "right": ("left", "middle"),
              "above": ("center", "bottom"), "below": ("center", "top")}[side]  # fmt: skip
    return {
        "text": safe(text),
        "x": x,
        "y": y,
        "xref": "x",
        "yref": "y",
        "xshift": shift[0],
        "yshift": shift[1],
        "xanchor": anchor[0],
        "yanchor": anchor[1],
        "showarrow": False,
        "font": {"size": size, "color": "#333"},
    }


def path(plan_: Plan, source: str, node: str, kind: str) -> list[tuple[float, float]]:
    """An edge's points (units): from its source's centre around every node, letter and word it
    would pass over (its own ends and letter excepted), through its input's letter (an edge into
    a head), to its reader's centre. Where the straight way still passes over one, the way along
    a lane beside every row is taken, if it passes over fewer."""
    own_ends = {source, node}
    nodes = [o for o, name in zip(plan_.obstacles["node"], plan_.places, strict=True)
             if name not in own_ends]  # fmt: skip
    letters = [o for o, key in zip(plan_.obstacles["letter"], plan_.ports, strict=True)
               if key != (node, kind)]  # fmt: skip
    obstacles = nodes + letters + plan_.obstacles["label"]
    port = plan_.ports.get((node, kind))
    start = plan_.px(plan_.places[source])
    end = plan_.px(port if port is not None else plan_.places[node])
    inset = 8  # px: a bend's line inside the plot, its width with it
    (x0, x1), (y0, y1) = plan_.x_range, plan_.y_range
    room = plan_.room
    left, bottom = x0 * room.sx + inset, y0 * room.sy + inset
    right, top = x1 * room.sx - inset, y1 * room.sy - inset
    bounds = (left, bottom, right, top)
    ways = [[start, *route(start, end, obstacles, bounds)]]
    if crossings(ways[0], obstacles):  # along a lane: the plot's sides across the flow
        sides = (left, right) if room.narrow else (bottom, top)
        for lane in sides:
            turns = [(lane, start[1]), (lane, end[1])] if room.narrow else [
                (start[0], lane), (end[0], lane)]  # fmt: skip
            ways.append([start, *via([start, *turns, end], obstacles, bounds)])
    points = min(ways, key=lambda way: (crossings(way, obstacles), len(way)))
    if port is not None:
        points.append(plan_.px(plan_.places[node]))
    return [plan_.units(p) for p in points]


def compact(room: Room, span: float) -> Room:
    """The room for a graph of only the nodes its edges touch, ``span`` units across."""
    return replace(room, span=room.span if room.narrow else span)
