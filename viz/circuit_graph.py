"""How the heads connect's graph (ui/tabs/circuits.py): a circuit's strongest edges between the
model's nodes — the embeddings, its heads and MLPs, the logits (an encoder-decoder's encoder
output, "memory", between its stacks) — as plain Plotly JSON.

An edge is a line from the node that writes to the node that reads, ending in an arrowhead on
the reader's rim: its width follows |score|, its colour the input it feeds, dotted where the
score is negative (the legend says so). An edge into a head arrives through the input it feeds,
whose letter (q, k or v) stands beside the head where those edges meet. A head's or an MLP's
name stands inside its node (32 px on a phone: a finger's target), the end nodes' words beside
them, and no line passes over a node, a letter or a word but its own (viz/circuit_layout.py
routes them around).

The figure holds two layouts: the wide one, and a phone's (``layout.meta.narrow``, which
viz.screen takes below the width the wide one needs), flowing top to bottom. A model too large
to draw whole (a real language model: 270 heads) shows only the nodes its drawn edges touch,
and as many of its strongest edges as each layout holds at its scale; the title counts them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from lang import tr
from viz.circuit_layout import (
    NARROW,
    WIDE,
    Plan,
    Room,
    compact,
    hover_name,
    inside_name,
    path,
    plan,
    rim,
    size_of,
    stack_word,
    stacks,
    target_node,
)
from viz.circuits import hung_layout, title_of
from viz.common import figure, safe
from viz.measure import legend_rows

KIND_COLOURS = {
    "q": "#1f77b4",
    "k": "#d62728",
    "v": "#2ca02c",
    "mlp": "#7f7f7f",
    "logits": "#555",
    "memory": "#9467bd",
}
KIND_NAMES = {
    "q": "query edge",
    "k": "key edge",
    "v": "value edge",
    "mlp": "MLP input edge",
    "logits": "edge to the logits",
    "memory": "edge to the encoder output",
}
MAX_WIDTH = 7.0  # px: the strongest edge drawn
MIN_WIDTH = 2.5  # px: the faintest still reads as its colour at 720p and on a phone
LESSON_WIDTH = 4.0  # px at least: the lesson's edge, opaque, over a white casing 4 px wider
HEAD = re.compile(r"L\d+H\d+$")  # a head's node ("L1H0", "cross.L1H0"), which a click opens
COMPACT_SPAN = 27.0  # units across a real model's wide graph: 1,100 px at 40 px a unit (1080p)
# units down a phone's graph at most: every node of a small model (an encoder-decoder's two
# stacks: 24 units, 1,200 px), or a real model's nodes its strongest edges touch (800 px)
WHOLE_FLOW, COMPACT_FLOW = 26.0, 18.0
TOP, BOTTOM, LEGEND_ROW = 80, 14, 20  # px: the title's margin, under the legend, a legend row
# A layout is drawn this much taller than its room's least scale down, the one its lines are
# routed at: a legend that takes a row more than estimated (a language's wider words) still
# leaves every line clear of what it passes. (Across, the column's width is the page's.)
SLACK = 1.15


# ---- the edges ---------------------------------------------------------------------------------
def _edge_trace(plan_: Plan, source, target, score, strongest, config, lesson: bool) -> dict:
    """One edge: its line from writer to reader (its width by √|score|, so that a tenth of the
    strongest still reads; its colour by the input it feeds; dotted where negative), an
    arrowhead on the reader's rim, its hover naming both ends."""
    node, kind = target_node(target, config)
    points = path(plan_, source, node, kind)
    strength = math.sqrt(abs(score) / strongest) if strongest else 1.0
    width = MIN_WIDTH + (MAX_WIDTH - MIN_WIDTH) * strength
    (x0, y0), (x1, y1) = plan_.px(points[-2]), plan_.px(points[-1])
    ends = f"{safe(hover_name(source))} → {safe(hover_name(target))}"
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "x": [round(x, 4) for x, _ in points],
        "y": [round(y, 4) for _, y in points],
        "line": {
            "color": KIND_COLOURS[kind],
            "width": round(max(width, LESSON_WIDTH) if lesson else width, 2),
            "dash": "solid" if score >= 0 else "dot",
            "backoff": 0,  # whole segments (Plotly's default trims each before a marker)
        },
        "marker": {  # the arrowhead: on the last point, along the line, its tip on the rim
            "symbol": "arrow",
            "size": [0] * (len(points) - 1) + [plan_.room.arrow],
            "angleref": "previous",
            "standoff": round(rim(node, plan_.room.node, (x1 - x0, y1 - y0)) + 1, 1),
            "color": KIND_COLOURS[kind],
            "opacity": 1.0,  # (Plotly's default for markers sized one by one: 0.7)
            "line": {"width": 0},
        },
        "opacity": 1.0 if lesson else round(0.55 + 0.45 * strength, 3),
        "showlegend": False,
        "hovertemplate": f"{ends}: {score:+.4f}<extra></extra>",
        "meta": {"edge": [source, target], "kind": kind, "node": node},
    }


def _casing(trace: dict) -> dict:
    """A white line under the lesson's edge, 4 px wider: it stands apart where others cross."""
    return {
        "type": "scatter",
        "mode": "lines",
        "x": trace["x"],
        "y": trace["y"],
        "line": {"color": "white", "width": trace["line"]["width"] + 4, "backoff": 0},
        "hoverinfo": "skip",
        "showlegend": False,
        "meta": {"casing": True},
    }


def _with_lesson(kept, n: int, lesson):
    """The n strongest edges, and the lesson's edge where the circuit keeps it further down."""
    part = kept.iloc[:n]
    if lesson is None:
        return part
    rows = kept[(kept["source"] == lesson[0]) & (kept["target"] == lesson[1])]
    if len(rows) and rows.index[0] not in part.index:
        part = kept.loc[[*part.index, rows.index[0]]]
    return part


def _planned(kept, config, room: Room, lesson) -> tuple[Plan, int]:
    """The room's layout and how many of the strongest edges it draws: all of them (the tab's
    60 at most) over every node, where that fits; else the most whose nodes alone fit."""
    whole = plan(config, kept, room, compact=False)
    if whole.fits(WHOLE_FLOW):
        return whole, len(kept)
    tight, best = compact(room, COMPACT_SPAN), None
    for n in range(1, len(kept) + 1):
        found = plan(config, _with_lesson(kept, n, lesson), tight, compact=True)
        if best is not None and not found.fits(COMPACT_FLOW):
            break
        best = (found, n)
    return best


@dataclass
class Drawing:
    """One layout's edges by (source, target), strongest first (the lesson's casing under
    "casing"), the kinds and signs they show, and how many they are."""

    plan: Plan
    edges: dict
    kinds: list[str]
    negative: bool
    count: int

    @property
    def touched(self) -> set[str]:
        found = set()
        for key, trace in self.edges.items():
            if key != "casing":
                found.update((key[0], trace["meta"]["node"]))
        return found


def _drawing(plan_: Plan, n: int, kept, config, lesson) -> Drawing:
    """One layout's edges: the n strongest (and the lesson's, drawn over the others)."""
    part = _with_lesson(kept, n, lesson)
    strongest = float(np.abs(kept["score"]).max()) if len(kept) else 1.0
    edges = {}
    for source, target, score in zip(part["source"], part["target"], part["score"], strict=True):
        key = (str(source), str(target))
        is_lesson = lesson is not None and key == tuple(lesson)
        trace = _edge_trace(plan_, *key, float(score), strongest, config, is_lesson)
        if is_lesson:
            edges["casing"] = _casing(trace)
        edges[key] = trace
    kinds = [k for k in KIND_COLOURS if any(t["meta"].get("kind") == k for t in edges.values())]
    return Drawing(plan_, edges, kinds, bool((part["score"] < 0).any()), len(part))


# ---- the legend, the nodes, the words ----------------------------------------------------------
def _legend_trace(name: str, colour: str, dash: str = "solid", width: float = 3.0) -> dict:
    """A legend entry with nothing drawn."""
    return {
        "type": "scatter",
        "mode": "lines",
        "x": [None],
        "y": [None],
        "line": {"color": colour, "width": width, "dash": dash},
        "name": name,
        "hoverinfo": "skip",
        "showlegend": True,
        "meta": {"legend": True},
    }


def _legend(kinds: list[str], negative: bool, lesson, crossed: bool) -> list[dict]:
    """The legend: each kind of input drawn, what a dotted line is, the lesson's edge, and an
    encoder-decoder's cross-attention heads (diamonds)."""
    entries = [_legend_trace(tr(KIND_NAMES[k]), KIND_COLOURS[k]) for k in kinds]
    if crossed:
        diamond = {"symbol": "diamond", "size": 11, "color": "#333"}
        entries.append({**_legend_trace(tr("cross-attention heads"), "#333"), "mode": "markers",
                        "marker": diamond})  # fmt: skip
    if negative:
        said = tr("dotted: negative (toward the corrupt answer)")
        entries.append(_legend_trace(said, "#555", "dot"))
    if lesson is not None:
        said = tr("the lesson: {edge}", edge=f"{lesson[0]} → {lesson[1]}")
        entries.append(_legend_trace(safe(said), KIND_COLOURS["k"], width=LESSON_WIDTH))
    return entries


def _node_trace(config, plan_: Plan, touched: set[str], names: list[str]) -> dict:
    """Every node this layout draws (the others' places empty), its name inside: the ones an
    edge touches dark, the others pale; an MLP a square, a cross-attention head a diamond. A
    head's hover says a click opens it (ui/js/circuits.js reads this trace, the last)."""
    opens = tr("click to open this head on the Attention tab")
    room = plan_.room
    places = [plan_.places.get(n) for n in names]
    return {
        "type": "scatter",
        "mode": "markers+text",
        "x": [None if p is None else p[0] for p in places],
        "y": [None if p is None else p[1] for p in places],
        "text": [inside_name(n) for n in names],
        "textposition": "middle center",
        "textfont": {
            "size": room.text,
            "color": ["white" if n in touched else "#666" for n in names],
        },  # fmt: skip
        "marker": {
            "size": [size_of(n, room.node) for n in names],
            "opacity": 1.0,  # over the lines that end at it (Plotly's default here: 0.7)
            "color": ["#333" if n in touched else "#eee" for n in names],
            "line": {"color": "#999", "width": [0 if n in touched else 1 for n in names]},
            "symbol": [
                "square" if n.endswith("MLP") else "diamond" if n.startswith("cross.") else "circle"
                for n in names
            ],
        },
        "cliponaxis": False,
        "customdata": names,  # what a click picks (ui/js/circuits.js)
        "hovertext": [
            safe(f"{n} · {opens}") if HEAD.search(n) else safe(hover_name(n)) for n in names
        ],
        "hovertemplate": "%{hovertext}<extra></extra>",
        "showlegend": False,
    }


def _letters(plan_: Plan) -> list[dict]:
    """Each input an edge enters, named by its letter where its edges meet beside the head, on
    a white ground (annotations lie above every line)."""
    return [
        {
            "text": f"<b>{kind}</b>",
            "x": x,
            "y": y,
            "xref": "x",
            "yref": "y",
            "showarrow": False,
            "font": {"size": plan_.room.letter, "color": KIND_COLOURS[kind]},
            "bgcolor": "rgba(255,255,255,0.9)",
            "borderpad": 1,
            "meta": {"input": [node, kind]},
        }
        for (node, kind), (x, y) in plan_.ports.items()
    ]


def _stack_names(config, plan_: Plan) -> list[dict]:
    """An encoder-decoder's stacks named over their columns (wide; a phone's name theirs beside
    their embeddings' words)."""
    if len(stacks(config)) == 1 or plan_.room.narrow:
        return []
    found = []
    for prefix, ends in (("encoder.", ("memory",)), ("decoder.", ("cross.", "logits"))):
        xs = [x for n, (x, _) in plan_.places.items() if n.startswith((prefix, *ends))]
        found.append(
            {
                "text": safe(stack_word(prefix)),
                "x": (min(xs) + max(xs)) / 2,
                "y": plan_.y_range[1],
                "xref": "x",
                "yref": "y",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 13},
            }
        )
    return found


# ---- the figure --------------------------------------------------------------------------------
def _heading(n_kept: int, drawn: int, total: int) -> str:
    if n_kept > drawn:  # more edges kept than the graph draws: say both, never one
        return tr(
            "The circuit of {n} edges (of {total}): its {shown} strongest drawn",
            n=n_kept,
            total=total,
            shown=drawn,
        )
    return tr("The circuit: the {n} strongest of {total} edges", n=drawn, total=total)


def circuit_figure(
    kept,
    config,
    faithfulness: float,
    total: int,
    share: float = 1.0,
    n_kept: int | None = None,
    lesson: tuple[str, str] | None = None,
):
    """The ``kept`` edges (rows source, target, score, strongest first; the tab's 60 at most)
    between the model's nodes, drawn wide and, for a phone, flowing down (``layout.meta.narrow``,
    taken below the wide layout's width). ``share``: the part of the tab's width its column
    takes on a wide page (``layout.meta.share``, read by viz.screen.lay_out); ``n_kept``: the
    circuit's size when it keeps more edges than are drawn; ``lesson``: (source, target) of the
    edge the tab's lesson names, drawn over the others."""
    kept = kept.reset_index(drop=True)
    n_kept = len(kept) if n_kept is None else n_kept
    wide, narrow = (
        _drawing(*_planned(kept, config, room, lesson), kept, config, lesson)
        for room in (WIDE, NARROW)
    )
    traces, phone_traces = _merged(wide, narrow, config, lesson)
    faithful = tr(
        "faithfulness {share:.2f}: the share of the answer these edges alone restore "
        "(every other edge carries the corrupt run)",
        share=faithfulness,
    )
    layout, phone = (
        _room_layout(d.plan, t, title_of(_heading(n_kept, d.count, total), faithful), config)
        for d, t in ((wide, traces), (narrow, phone_traces))
    )
    change = {
        "height": phone["height"],
        "margin.b": phone["margin"]["b"],
        "xaxis.range": phone["xaxis"]["range"],
        "yaxis.range": phone["yaxis"]["range"],
        "annotations": phone["annotations"],
        "title.text": phone["title"]["text"],
        "meta.grow": phone["meta"]["grow"],
    }
    below = math.ceil(wide.plan.across * WIDE.sx + 20)  # the wide layout's least width (px)
    changes = _changes(traces, phone_traces)
    layout["meta"] = {**layout["meta"], "share": share,
                      "narrow": {"below": below, "layout": change, "traces": changes}}  # fmt: skip
    return figure(traces, layout)


def _merged(wide: Drawing, narrow: Drawing, config, lesson) -> tuple[list[dict], list[dict]]:
    """Both layouts' traces in one order — the edges (the lesson's last, over its casing), the
    legend's entries, the nodes last (ui/js/circuits.js) — each layout's own: an edge or an
    entry one of them does not draw is hidden there."""
    keys = list(dict.fromkeys([*wide.edges, *narrow.edges]))
    if "casing" in keys:
        keys = [k for k in keys if k not in ("casing", tuple(lesson))] + ["casing", tuple(lesson)]
    crossed = len(stacks(config)) > 1
    legends = [_legend(d.kinds, d.negative, lesson if "casing" in d.edges else None, crossed)
               for d in (wide, narrow)]  # fmt: skip
    names = list(dict.fromkeys(t["name"] for legend in legends for t in legend))
    nodes = list(dict.fromkeys([*wide.plan.places, *narrow.plan.places]))
    out = []
    for drawing, legend in zip((wide, narrow), legends, strict=True):
        named = {t["name"]: t for t in legend}
        out.append(
            [
                *(drawing.edges.get(k) or _hidden() for k in keys),
                *(named.get(n) or {**_legend_trace(n, "#fff"), "visible": False} for n in names),
                _node_trace(config, drawing.plan, drawing.touched, nodes),
            ]
        )
    return out[0], out[1]


def _hidden() -> dict:
    """An edge one layout does not draw."""
    return {"type": "scatter", "mode": "lines", "x": [], "y": [], "visible": False,
            "hoverinfo": "skip", "showlegend": False}  # fmt: skip


def _changes(wide: list[dict], narrow: list[dict]) -> dict:
    """The phone's traces as changes of the wide ones (``layout.meta.narrow``'s restyle)."""
    changes = {}
    for i, (a, b) in enumerate(zip(wide, narrow, strict=True)):
        change = {k: v for k, v in b.items() if a.get(k) != v}
        if a.get("visible", True) is False and b.get("visible", True) is not False:
            change["visible"] = True
        if change:
            changes[str(i)] = change
    return changes


def _room_layout(plan_: Plan, traces: list[dict], title: str, config) -> dict:
    """One layout's plot: its ranges, a unit at its room's px down, the legend's rows under it,
    the end nodes' words, the inputs' letters, an encoder-decoder's stacks' names."""
    legend = [t for t in traces if t.get("showlegend") and t.get("visible", True)]
    bottom = BOTTOM + LEGEND_ROW * legend_rows([t["name"] for t in legend], plan_.room.width)
    layout = hung_layout(title, round(TOP + plan_.down * plan_.room.sy * SLACK + bottom))
    layout["margin"] = {"l": 10, "r": 10, "t": TOP, "b": bottom}
    layout["xaxis"] = {"visible": False, "range": list(plan_.x_range), "fixedrange": True}
    layout["yaxis"] = {"visible": False, "range": list(plan_.y_range), "fixedrange": True}
    # (a legend of several rows: Plotly aligns its entries in columns, viz.measure.legend_rows)
    # at the figure's foot: hung under the plot (paper y), Plotly 3 drew it over the nodes of its
    # last row once presented, the margin under the plot grown for it or not
    layout["legend"] = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom",
                        "x": 0, "traceorder": "normal", "font": {"size": 12}}  # fmt: skip
    layout["annotations"] = [*plan_.labels, *_letters(plan_), *_stack_names(config, plan_)]
    layout["hovermode"] = "closest"
    layout["meta"] = {"grow": grow_spec(plan_.room)}
    return layout


def grow_spec(room: Room) -> dict:
    """How a room larger than the page's (presented, a slide: viz.present.grown) may grow the
    nodes and their names: by as much as the room's text over the names' px, and no more than
    its px a unit over the least this layout was routed at (a line kept clear of a node there
    stays clear of the node grown by less than the scale did)."""
    return {"text": room.text, "sx": room.sx, "sy": room.sy}
