"""A figure laid out for a room: presented on a projector, or saved as a slide.

The page's layout (viz.fit, viz.screen) is for a figure in a card; presented, the same figure
fills a window, its text at a size the back row reads. This module decides that layout, on the
server, for every figure that is not a square map (square maps: ``viz.screen.presented``):

- presentation mode (``layout.meta.present``: for the window the page reported), and
- the slide the PNG / SVG buttons save and the lecture deck's offline file shows
  (``layout.meta.slide``: ``SLIDE``, 1600 × 900 px at 22 px text, 16:9).

The page draws either layout as it came. What it keeps of its own: the title and colour bars'
words the head switch changed in the browser.
"""

from __future__ import annotations

import math
import re

from viz.fit import thin_axes
from viz.measure import legend_rows, text_px, wrap
from viz.panels import axis_keys

SLIDE = (1600, 900, 22)  # px: a slide's width, height and text
EDGE = 16  # px: the margins the axes' labels push out from (Plotly's automargin)
# px: the least text a room shows, 1/45 of a 720p window's height (a title's second lines, the
# <sup> of viz.circuits.title_of and ui.render.slide_figure, are SUP of its size in Plotly)
LEAST_TEXT, SUP = 16, 0.7
BR = re.compile(r"<br\s*/?>", re.I)
NESTED = (dict, list, tuple)


def plain_copy(value):
    """A copy of plain JSON (dicts, lists and scalars): copy.deepcopy's result at a fraction of
    its cost (no memo; a layout holds no shared or cyclic parts)."""
    # (a scalar is not passed down: the call per label was most of the copy's time)
    if isinstance(value, dict):
        return {k: plain_copy(v) if isinstance(v, NESTED) else v for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_copy(v) if isinstance(v, NESTED) else v for v in value]
    return value


def lines_of(text: str) -> int:
    return len(BR.split(text)) if text else 0


def _title(layout: dict, width: float, height: float, font: float) -> int:
    """The title at 1.2 × the text (and its second lines, which Plotly draws at 70 % of it, at
    ``LEAST_TEXT`` at least), wrapped to the room, hung from the top; its lines."""
    title = layout.get("title") or {}
    if isinstance(title, str):
        title = {"text": title}
    size = max(round(font * 1.2), math.ceil(LEAST_TEXT / SUP))
    text = wrap(str(title.get("text") or ""), width - 2 * EDGE - 12, size)
    # Plotly sets a multi-line title's first baseline (not its top) at y: one line lower. The
    # page's padding above the title (its toolbar band) is not the room's.
    layout["title"] = {
        **title,
        "text": text,
        "font": {**(title.get("font") or {}), "size": size},
        "yref": "container",
        "y": 1 - (8 + size) / height,
        "yanchor": "top",
        "pad": {"t": 0},
    }
    return lines_of(text)


def _axes(layout: dict, font: float, lines: int) -> float:
    """Every axis's labels and title at the room's size, its margin pushed out by its labels;
    the top margin the title's lines and any labels over the plot take."""
    top = font * 1.45 * lines + 14
    for key in axis_keys(layout):
        axis = layout[key]
        if not axis:
            continue
        axis["tickfont"] = {**(axis.get("tickfont") or {}), "size": font}
        axis["automargin"] = True
        if key[0] == "x" and axis.get("tickangle") != -90:
            axis.pop("tickangle", None)  # Plotly's "auto": flat where the labels fit
        if key[0] == "x" and axis.get("side") == "top":
            # labels over the plot ("H0<br>kv0" under grouped-query attention: two lines)
            rows = max([1, *(lines_of(str(t)) for t in axis.get("ticktext") or [])])
            top = max(top, font * 1.45 * lines + 14 + font * (0.6 + 1.4 * rows))
        if isinstance(axis.get("title"), dict):
            axis["title"]["font"] = {**(axis["title"].get("font") or {}), "size": font}
    for note in layout.get("annotations") or []:
        note["font"] = {**(note.get("font") or {}), "size": font}
        # panel titles over the top row: 2.4 lines of room under the title's
        if note.get("yref", "paper") == "paper" and float(note.get("y", 0)) >= 1:
            top = max(top, lines * font * 1.45 + 14 + font * 2.4)
    if layout.get("legend") is not None:
        layout["legend"]["font"] = {**(layout["legend"].get("font") or {}), "size": font}
    return top


def _one_row(
    data: list[dict], layout: dict, width: float, height: float, top: float, font: float
) -> float:
    """Maps of square tiles in rows (the padding masks of two texts: 2 × 2) put side by side,
    in one row, where the room is wide enough that each map grows so: in a card the rows suit
    the page's width, on a projector's 16:9 they leave each map a few tokens' height. Each map
    stands at the top of its column under its title, wrapped to the column; returns the px the
    titles' further lines take above the row."""
    keys = axis_keys(layout, "y")
    rows = {tuple((layout[k] or {}).get("domain") or (0, 1)) for k in keys}
    if len(rows) < 2 or not all((layout[k] or {}).get("scaleanchor") for k in keys):
        return 0.0
    n, cols = len(keys), math.ceil(len(keys) / len(rows))
    labels = max(
        [1, *(len(str(v)) for t in data for v in [*(t.get("x") or ()), *(t.get("y") or ())])]
    )
    reach = (labels * 0.62 + 1) * font  # a panel's row labels, and its column labels under it

    def side(n_rows: int, n_cols: int) -> float:
        across = (width - 2 * EDGE) / n_cols - reach
        down = (height - top - EDGE) / n_rows - reach - (n_rows - 1) * 2.4 * font
        return min(across, down)

    if side(1, n) <= side(len(rows), cols):
        return 0.0
    gap = min(0.5 / n, (reach + font) / (width - 2 * EDGE))
    span = (1 - gap * (n - 1)) / n
    room, lines = span * (width - 2 * EDGE), 1  # the column: the last one ends at the edge
    for i, key in enumerate(keys):
        x_key = "x" + key[1:]
        old_x, old_y = layout[x_key].get("domain") or [0, 1], layout[key].get("domain") or [0, 1]
        x0 = i * (span + gap)
        layout[x_key]["domain"] = [round(x0, 6), round(min(1.0, x0 + span), 6)]
        layout[key].update(domain=[0.0, 1.0], constraintoward="top")
        for note in layout.get("annotations") or []:  # the panel's title rides on its top
            if (
                note.get("yref", "paper") == "paper"
                and abs(float(note.get("y", -1)) - old_y[1]) < 1e-6
                and abs(float(note.get("x", -1)) - (old_x[0] + old_x[1]) / 2) < 1e-6
            ):
                text = wrap(str(note.get("text") or ""), room, font)
                note.update(x=x0 + span / 2, y=1.0, text=text)
                lines = max(lines, lines_of(text))
    return (lines - 1) * 1.45 * font


def _rows_apart(data: list[dict], layout: dict, height: float, top: float, font: float) -> None:
    """Panels in several rows (the padding masks of two texts): the gap between two rows holds
    the upper row's key labels, upright at the room's size, and the lower row's panel titles.
    Rows keep their order and share of the height; only gaps that are too small grow."""
    rows: dict[tuple, list[str]] = {}
    for key in axis_keys(layout, "y"):
        domain = (layout[key] or {}).get("domain")
        if domain:
            rows.setdefault(tuple(domain), []).append(key)
    if len(rows) < 2:
        return
    ordered = sorted(rows.items(), key=lambda row: -row[0][1])

    def chars(keys: list[str]) -> int:
        names = {"y" + k[5:] for k in keys}
        return max(
            [
                0,
                *(
                    len(str(v))
                    for t in data
                    if (t.get("yaxis") or "y") in names
                    for v in t.get("x") or []
                ),
            ]
        )

    plot = max(100.0, height - top - font * 6)
    need = [(chars(keys) * 0.62 + 3.4) * font / plot for _, keys in ordered[:-1]]
    gaps = [ordered[i][0][0] - ordered[i + 1][0][1] for i in range(len(ordered) - 1)]
    if all(g >= n for g, n in zip(gaps, need, strict=True)):
        return
    want = [max(g, n) for g, n in zip(gaps, need, strict=True)]
    spans = [d[1] - d[0] for d, _ in ordered]
    scale = (1 - sum(want)) / sum(spans)
    if scale <= 0.2:  # no room: the page's layout stays
        return
    at = 1.0
    for i, (domain, keys) in enumerate(ordered):
        new = [max(0.0, round(at - spans[i] * scale, 6)), min(1.0, round(at, 6))]
        for key in keys:
            layout[key]["domain"] = new
        for note in layout.get("annotations") or []:  # the row's panel titles ride on its top
            if (
                note.get("yref", "paper") == "paper"
                and abs(float(note.get("y", -1)) - domain[1]) < 1e-6
            ):
                note["y"] = new[1]
        at = new[0] - (want[i] if i < len(want) else 0)


def _cells(trace: dict) -> tuple[int, int]:
    """(columns, rows) of a heatmap's cells: its z's shape (a typed array's, or nested lists)."""
    z = trace.get("z")
    if isinstance(z, dict) and z.get("shape"):
        rows, cols = (int(v) for v in str(z["shape"]).split(",")[:2])
        return cols, rows
    if isinstance(z, list) and z and isinstance(z[0], list):
        return len(z[0]), len(z)
    return len(trace.get("x") or []) or 1, len(trace.get("y") or []) or 1


def _labels_px(axis: dict, values, font: float) -> float:
    """How far an axis's shown labels reach out from the plot, and its title."""
    shown = axis.get("showticklabels") is not False
    texts = [str(v) for v in (axis.get("ticktext") or values or [])] if shown else []
    title = (axis.get("title") or {}).get("text") if isinstance(axis.get("title"), dict) else ""
    return max([0.0, *(text_px(v, font) for v in texts)]) + 6 + (1.6 * font if title else 0)


def _square_tiles(data: list[dict], layout: dict, width: float, height: float, font: float) -> None:
    """A map of square tiles (``scaleanchor``: the overview of heads, a layer step's folded
    vector) narrows to its height: the figure's sides take the width it leaves, so that the
    plot stands in the middle with its colour bar beside it."""
    x, y = layout.get("xaxis") or {}, layout.get("yaxis") or {}
    square = y.get("scaleanchor") == "x" or x.get("scaleanchor") == "y"
    if not square or "xaxis2" in layout or not data:
        return
    trace = data[0]
    n_x, n_y = _cells(trace)
    m = layout["margin"]
    left = m["l"] + _labels_px(y, trace.get("y"), font)
    under = 1.6 * font if x.get("showticklabels") is not False else 0
    under += 1.6 * font if isinstance(x.get("title"), dict) and x["title"].get("text") else 0
    shows_bar = trace.get("showscale") is not False and "heatmap" in (trace.get("type") or "")
    bar = trace.get("colorbar") or {}
    ticks = [str(t) for t in bar.get("ticktext") or ["−0.00"]]  # Plotly's own: a few digits
    bar_title = (bar.get("title") or {}).get("text") and bar["title"].get("side") == "right"
    bar_px = 40 + max(text_px(t, font) for t in ticks) + (1.6 * font if bar_title else 0)
    right = m["r"] + (bar_px if shows_bar else 0)
    plot_h = height - m["t"] - m["b"] - under
    plot_w = min(width - left - right, plot_h * n_x / n_y)
    spare = max(0.0, width - left - right - plot_w)
    m["l"], m["r"] = round(m["l"] + spare / 2), round(m["r"] + spare / 2)


def _thin_placed(layout: dict, width: float, height: float, font: float) -> None:
    """Labels an axis places itself (``tickvals``: every k-th token a figure chose for the
    page's small text) thinned where, at the room's size, they would touch."""
    m = layout["margin"]
    for key in axis_keys(layout):
        axis = layout[key] or {}
        vals, texts = axis.get("tickvals"), axis.get("ticktext")
        if axis.get("tickmode") != "array" or not vals or len(vals) < 3:
            continue
        d0, d1 = axis.get("domain") or [0, 1]
        # the plot's extent less what the other axis's labels take (estimated: 8 characters)
        across = width - 2 * EDGE - 8 * 0.62 * font if key[0] == "x" else height - m["t"] - 5 * font
        span = across * (d1 - d0)
        step = span / len(vals)
        need = 1.08 * font if key[0] == "y" or axis.get("tickangle") == -90 else 0
        if key[0] == "x" and not need:  # flat labels: their width
            need = max(text_px(str(t), font) for t in texts or vals) + font
        if step < need:
            every = math.ceil(need / step)
            axis["tickvals"] = vals[::every]
            if texts:
                axis["ticktext"] = texts[::every]


def _bars(data: list[dict], font: float) -> list:
    """Each trace's colour bar with its text at the room's size (None: the trace has none)."""
    out = []
    for trace in data:
        bar = trace.get("colorbar")
        if bar is None and "heatmap" not in (trace.get("type") or ""):
            out.append(None)
            continue
        bar = plain_copy(bar or {})
        bar["tickfont"] = {**(bar.get("tickfont") or {}), "size": font}
        if isinstance(bar.get("title"), dict):
            bar["title"]["font"] = {**(bar["title"].get("font") or {}), "size": font}
        out.append(bar)
    return out


def in_room(data: list[dict], layout: dict, width: float, height: float, font: float) -> dict:
    """``{"layout", "colorbars"}``: the figure (not a square map) drawn ``width`` × ``height`` px
    with text of ``font`` px — title, axes, panel titles, legends and colour bars; the traces'
    other properties are the page's. ``layout`` is the figure as viz/ built it (before the
    page's layout: a copy is changed)."""
    # the template is the page's (the page puts it back: not sent three times)
    big = plain_copy({k: v for k, v in layout.items() if k not in ("meta", "template")})
    big.update(width=round(width), height=round(height), autosize=False)
    big["font"] = {**(big.get("font") or {}), "size": font}
    lines = _title(big, width, height, font)
    top = _axes(big, font, lines)
    top += _one_row(data, big, width, height, top, font)
    _rows_apart(data, big, height, top, font)
    big["margin"] = {"t": round(top), "l": EDGE, "r": EDGE, "b": EDGE, "pad": 0}
    _square_tiles(data, big, width, height, font)
    thin_axes(data, big, width)  # crowded categories at the room's size: every k-th shown
    _thin_placed(big, width, height, font)
    room = {"layout": big, "colorbars": _bars(data, font)}
    grown = _grown(data, layout, big, width, height, font)
    return {**room, "traces": grown} if grown else room


def _grown(data: list[dict], layout: dict, big: dict, width: float, height: float, font: float):
    """Named markers grown with the room's text (``layout.meta.grow``: a circuit graph's nodes,
    whose names are the traces' own text, which the room's font does not reach): their sizes and
    names by the room's text over the names' px, bounded by how much larger a unit is drawn in
    the room than the least the figure was laid out for (``sx``, ``sy``: px a unit across and
    down), so that what kept clear of a node there keeps clear of it grown; the arrowheads that
    stand on their rims move out with them. {trace index: its changed properties} (the page
    applies them over its traces: ui/js/slides.js ``ta.restyled``), or {} where nothing grows."""
    spec = (layout.get("meta") or {}).get("grow")
    x, y = big.get("xaxis") or {}, big.get("yaxis") or {}
    if not spec or not x.get("range") or not y.get("range"):
        return {}
    named = [str(t.get("name")) for t in data if t.get("showlegend") and t.get("visible", True)]
    across = width - big["margin"]["l"] - big["margin"]["r"]
    legend = legend_rows(named, across, font) * font * 1.5 + 10 if named else 0
    down = height - big["margin"]["t"] - big["margin"]["b"] - legend
    # (the room's layout, ``big``: its words beside the nodes move out with them, in place)
    scale = min(
        across / abs(x["range"][1] - x["range"][0]) / spec["sx"],
        down / abs(y["range"][1] - y["range"][0]) / spec["sy"],
    )
    grow = min(font / spec["text"], scale)
    if grow <= 1:
        return {}
    for note in big.get("annotations") or []:  # words a px gap beside a node: beside it grown
        for key in ("xshift", "yshift"):
            if note.get(key):
                note[key] = round(note[key] * grow, 1)
    changes = {}
    for i, trace in enumerate(data):
        marker = trace.get("marker") or {}
        if not isinstance(marker.get("size"), list) or not trace.get("visible", True):
            continue
        marker = {**marker, "size": [round(size * grow, 1) for size in marker["size"]]}
        if "standoff" in marker:  # an arrowhead's tip on a node's rim (and a px beyond it)
            marker["standoff"] = round((marker["standoff"] - 1) * grow + 1, 1)
        changes[str(i)] = {"marker": marker}
        if "text" in (trace.get("mode") or "") and trace.get("textfont"):
            size = trace["textfont"].get("size") or spec["text"]
            changes[str(i)]["textfont"] = {**trace["textfont"], "size": round(size * grow, 1)}
    return changes
