"""Panels side by side laid out again for a phone (viz.fit.lay_out_general): in one column,
maps of tokens as the head view is, other panels with their colour bars beside them; a figure's
own narrow layout; a map of square tiles as tall as its tiles."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from viz.measure import Ticks, shorten, step_for, text_px, title_px

STACK_BELOW = 560  # px: panels side by side go into one column on a narrower figure


PHONE_TITLE = 12  # px: a phone's figure titles


PHONE_FONT = 10  # px: a phone's tick labels


DEFAULT_MARGIN = {"l": 80, "r": 80, "t": 100, "b": 80}  # Plotly's own


AXIS_KEY = {letter: re.compile(rf"[{letter or 'xy'}]axis\d*") for letter in ("", "x", "y")}


def axis_keys(layout: dict, letter: str = "") -> list[str]:
    match = AXIS_KEY[letter].fullmatch
    return sorted((k for k in layout if match(k)), key=lambda k: (k[0], len(k), k))


def short_name(key: str) -> str:
    """ "xaxis3" -> "x3" (a trace's or an anchor's name of an axis)."""
    return key.replace("axis", "")


def long_name(name: str) -> str:
    """ "x3" -> "xaxis3"."""
    return name[0] + "axis" + name[1:]


def margin_of(layout: dict) -> dict:
    return {
        **DEFAULT_MARGIN,
        **{k: v for k, v in layout.get("margin", {}).items() if v is not None},
    }


def _set(target: dict, dotted: str, value) -> None:
    """A Plotly.relayout / restyle update's "a.b[2].c": value, written into plain JSON."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", dotted)
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part.startswith("["):
            index = int(part[1:-1])
            if last:
                target[index] = value
            else:
                target = target[index]
        elif last:
            target[part] = value
        else:
            target = target.setdefault(part, {})


def narrow(data: list[dict], layout: dict, spec: dict) -> None:
    """The figure's own narrow layout (``layout.meta.narrow``: a relayout update and restyle
    updates by trace), taken in place."""
    for key, value in (spec.get("layout") or {}).items():
        _set(layout, key, value)
    for index, change in (spec.get("traces") or {}).items():
        for key, value in change.items():
            _set(data[int(index)], key, value)


def _near(a: float, b: float) -> bool:
    return abs(a - b) < 0.02


def _panels(layout: dict) -> list[dict]:
    """The panels (an x axis with a domain and its y axis), in reading order."""
    cells = []
    for key in axis_keys(layout, "x"):
        axis = layout[key] or {}
        if not axis.get("domain"):
            continue
        y = long_name(axis.get("anchor") or "y")
        cells.append(
            {
                "x": key,
                "y": y,
                "xd": axis["domain"],
                "yd": layout.get(y, {}).get("domain") or [0, 1],
            }
        )
    cells.sort(key=lambda c: (-round(c["yd"][1], 2), c["xd"][0]))
    return cells


def _stack_heights(data, layout, cells, width: float, room: float) -> tuple[list[float], int]:
    """Each panel's height in one column (as tall as its shape asks, within 120 px and 1.3 of
    its width) and the gap between two: the panel above's key labels (upright: about their
    length), its axis title, and this panel's title."""
    m = margin_of(layout)
    plot_w = max(1.0, width - m["l"] - m["r"])
    plot_h = max(1.0, (layout.get("height") or 450) - m["t"] - m["b"])
    new_w = max(80.0, plot_w * room)
    xs = [t.get("x") for t in data if isinstance(t.get("x"), list)]
    chars = max([1] + [len(str(v)) for values in xs for v in values[:400]])
    titled = any((layout[c["x"]].get("title") or {}).get("text") for c in cells)
    gap = round(min(130, 7 * chars + 14) + (26 if titled else 0) + 26)
    given_w = layout.get("width") or 640
    heights = []
    for c in cells:
        w, h = given_w * (c["xd"][1] - c["xd"][0]), plot_h * (c["yd"][1] - c["yd"][0])
        heights.append(min(1.3 * new_w, max(120.0, h * new_w / max(w * 0.8, 1))))
    return heights, gap


def stack(data: list[dict], layout: dict, width: float) -> bool:
    """Panels side by side laid out again in one column, in reading order, in place: each panel
    as wide as the plot and as tall as its shape asks (square cells stay square), its title
    above it at the left, its colour bar beside it, the figure as tall as it needs. A panel at
    a third of a phone's width could not be drawn (Plotly: "Something went wrong with axis
    scaling"). Returns whether it stacked."""
    cells = _panels(layout)
    if len(cells) < 2 or len({round(c["xd"][0], 2) for c in cells}) < 2:
        return False
    m = margin_of(layout)
    room = 0.86  # the colour bars' strip at the right
    heights, gap = _stack_heights(data, layout, cells, width, room)
    inner = sum(heights) + gap * (len(cells) - 1)
    layout["height"] = math.ceil(m["t"] + m["b"] + inner)
    # Panels that shared one y axis get a copy each, so that each can have its own row.
    numbers = [int(k[5:] or 1) for k in layout if re.match(r"^[xy]axis\d*$", k)]
    free, seen, moved = max(numbers, default=1) + 1, set(), {}
    for c in cells:
        if c["y"] not in seen:
            seen.add(c["y"])
            continue
        name = f"yaxis{free}"
        free += 1
        layout[name] = {**_copy(layout.get(c["y"], {})), "anchor": short_name(c["x"])}
        if layout[name].get("scaleanchor"):
            layout[name]["scaleanchor"] = short_name(c["x"])
        layout[c["x"]]["anchor"] = short_name(name)
        moved[short_name(c["x"])] = short_name(name)
        c["y"] = name
    top, spans = inner, []
    for c, h in zip(cells, heights, strict=True):
        span = [(top - h) / inner, top / inner]
        top -= h + gap
        layout[c["x"]]["domain"] = [0, room]
        layout[c["y"]] = {**layout.get(c["y"], {}), "domain": span, "showticklabels": True}
        spans.append(span)
    for note in layout.get("annotations", []):  # a panel's title sits on its top edge
        if note.get("xref") != "paper" or note.get("yref") != "paper":
            continue
        for c, span in zip(cells, spans, strict=True):
            x, y = note.get("x", 0.5), note.get("y", 0.5)
            if _on_panel(c, x, y):
                note.update(x=0, xanchor="left", y=span[1], yanchor="bottom")
                break
    _bars_beside(data, layout, cells, spans, moved, room)
    return True


def _bars_beside(data, layout, cells, spans, moved, room) -> None:
    """Each colour bar upright beside its panels: a trace's own, or a colour axis's beside all
    it colours."""

    def upright(bar: dict | None, lo: float, hi: float) -> dict:
        return {
            **(bar or {}),
            **dict(y=(lo + hi) / 2, len=hi - lo, yanchor="middle", orientation="v", x=room + 0.02),
            **dict(xanchor="left", lenmode="fraction", yref="paper", thickness=10),
        }

    spans_of_axis = {}
    for trace in data:
        key = long_name(trace.get("xaxis") or "x")
        index = next((i for i, c in enumerate(cells) if c["x"] == key), None)
        if index is None:
            continue
        if short_name(key) in moved:
            trace["yaxis"] = moved[short_name(key)]
        lo, hi = spans[index]
        if trace.get("coloraxis"):
            was = spans_of_axis.get(trace["coloraxis"], (1.0, 0.0))
            spans_of_axis[trace["coloraxis"]] = (min(was[0], lo), max(was[1], hi))
        elif "heatmap" in (trace.get("type") or ""):
            trace["colorbar"] = upright(trace.get("colorbar"), lo, hi)
    for name, (lo, hi) in spans_of_axis.items():
        axis = layout.setdefault(name, {})
        axis["colorbar"] = upright(axis.get("colorbar"), lo, hi)


def _copy(value):
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def bar_px(trace: dict, font: float) -> float:
    """The width an upright colour bar takes at the plot's right: its thickness, its pad, its
    longest tick label and, standing at its side, its title."""
    bar = trace.get("colorbar") or {}
    if trace.get("showscale") is False or bar.get("orientation") == "h":
        return 0.0
    size = (bar.get("tickfont") or {}).get("size") or font
    labels = max((text_px(str(t), size) for t in bar.get("ticktext") or ["0.00"]), default=0)
    title = bar.get("title") or {}
    side = 1.6 * size if title.get("text") and title.get("side") == "right" else 0
    return (bar.get("thickness") or 30) + (bar.get("xpad") or 10) + 4 + labels + side


def fit_height(data: list[dict], layout: dict, width: float, pad: float) -> None:
    """A map of square cells as tall as its plot and margins: on a phone its plot shrinks with
    the width and left most of its height empty, with a colour bar as tall as the figure. The
    margins are made what the colour bar and labels standing upright over the plot take (they
    are no longer Plotly's to grow), so that the plot's height is known."""
    trace, m = data[0], margin_of(layout)
    n_x, n_y = len(trace.get("x") or []), len(trace.get("y") or [])
    if not n_x or not n_y:
        return
    font = (layout.get("font") or {}).get("size") or 12
    m["r"] = max(m["r"], math.ceil(bar_px(trace, font)))
    x = layout.get("xaxis") or {}
    if x.get("side") == "top" and x.get("tickangle") == -90 and x.get("automargin"):
        size = (x.get("tickfont") or {}).get("size") or font
        labels = max((text_px(str(t), size) for t in x.get("ticktext") or []), default=0)
        m["t"] += math.ceil(labels + 6)
        x["automargin"] = False
    layout["margin"] = {**layout.get("margin", {}), "t": m["t"], "r": m["r"]}
    height = layout.get("height") or 450
    cell = min((width - m["l"] - m["r"]) / n_x, (height - m["t"] - m["b"]) / n_y)
    want = math.ceil(m["t"] + m["b"] + cell * n_y + pad)
    if height - want > 2 * pad:
        layout["height"] = want


def _token_maps(data: list[dict], layout: dict, cells: list[dict]) -> list[tuple] | None:
    """(heatmap, its x labels, its y labels) of each panel when every panel is a map of tokens
    against tokens, else None. A figure whose numbers come packed names its labels on its first
    trace only (``layout.meta.packed.same_xy``: the attention block)."""
    same = ((layout.get("meta") or {}).get("packed") or {}).get("same_xy")
    first = data[0] if data else {}
    maps = []
    for c in cells:
        found = [t for t in data if long_name(t.get("xaxis") or "x") == c["x"]]
        if len(found) != 1 or "heatmap" not in (found[0].get("type") or ""):
            return None
        t = found[0]
        xs, ys = (t.get(k) if t.get(k) is not None or not same else first.get(k) for k in "xy")
        if not all(
            isinstance(v, list) and v and all(isinstance(w, str) for w in v) for v in (xs, ys)
        ):
            return None
        maps.append((t, xs, ys))
    return maps


@dataclass
class MapRow:
    """One map of a phone's column: its panel, heatmap and labels, every how many cells a label
    stands, whether the x labels lie flat, and in px from the top of the plot area where it
    starts, how tall it is and what stands under it (labels, the axes' names, a colour bar)."""

    cell: dict
    trace: dict
    xs: list
    ys: list
    step: int
    flat: bool
    top: float
    height: float
    under: float
    bar: bool


def _axes_names(layout: dict, cell: dict) -> str:
    """ "query ↓ · key →": both axes named in one line under each map, or nothing."""
    names = [(layout.get(cell[k], {}).get("title") or {}).get("text") or "" for k in "yx"]
    return "{} ↓ · {} →".format(*names) if all(names) else ""


def _map_rows(maps, cells, plot_w: float, wide, both: str, hidden=()) -> list[MapRow]:
    """The column's rows, top to bottom: square cells as wide as the plot; the last map each
    colour axis (or its own bar) colours carries the bar under it. A colour axis shows its bar
    unless it is in ``hidden`` (its own showscale false): its maps' own showscale is not read
    (the attention block's maps, one axis for every layer, show it on the first map only)."""
    f = PHONE_FONT
    group = [t.get("coloraxis") or f"own{i}" for i, (t, _, _) in enumerate(maps)]
    rows, at = [], 0.0
    for i, (c, (t, xs, ys)) in enumerate(zip(cells, maps, strict=True)):
        shown = group[i] not in hidden if t.get("coloraxis") else t.get("showscale") is not False
        bar = group[i] not in group[i + 1 :] and shown
        cell = plot_w / len(xs)
        step, x_px = step_for(cell, f), wide(xs)
        flat = x_px + 6 <= cell * step
        labels = 1.6 * f if flat else x_px + 6
        under = labels + (1.6 * f if both else 0) + (14 + 2.8 * f if bar else 0)
        top = at + 1.4 * f + 6  # the panel's title above it
        rows.append(MapRow(c, t, xs, ys, step, flat, top, cell * len(ys), under, bar))
        at = top + cell * len(ys) + under + 12
    return rows


def _hang_title(layout: dict, inner: float, left: float) -> None:
    """The margins, the figure's height, and the title where the head view's stands on a
    phone (viz.screen.square: Plotly stands its first line's baseline on y); the first map's
    title follows it (the room a page left for panel titles is not needed)."""
    title = layout.setdefault("title", {})
    top = round(title_px(str(title.get("text") or ""), PHONE_TITLE) + 14)
    layout["margin"] = {**layout.get("margin", {}), "l": left, "r": 6, "b": 4, "t": top}
    layout["height"] = math.ceil(top + 4 + inner)
    title.update(yref="container", y=1 - (6 + PHONE_TITLE) / layout["height"], yanchor="top")
    title["pad"] = {"t": 0}


def _lay_map(layout: dict, row: MapRow, y: str, y_of, chars: int, both: str) -> None:
    """One map's axes, its panel title on its top edge at the left, and its colour bar."""
    f, c = PHONE_FONT, row.cell
    layout[c["x"]] = {
        **layout[c["x"]],
        **Ticks(row.step, 0 if row.flat else -90).props(list(row.xs), chars, f),
        "domain": [0, 1],
        "title": {"text": both, "font": {"size": f}, "standoff": 4},
        "ticklabelstandoff": 2,
    }
    layout[y] = {
        **layout[y],
        **Ticks(row.step, 0).props(list(row.ys), chars, f),
        "domain": [y_of(row.top + row.height), y_of(row.top)],
        "anchor": short_name(c["x"]),
        "title": {"text": ""},
        "showticklabels": True,
    }
    layout[y].pop("scaleanchor", None)
    for note in layout.get("annotations", []):
        x, ny = note.get("x", 0.5), note.get("y", 0.5)
        if note.get("yref") == "paper" and _on_panel(c, x, ny):
            font = {**(note.get("font") or {}), "size": f + 1}
            note.update(x=0, xanchor="left", y=y_of(row.top), yanchor="bottom", font=font)
    if row.bar:
        bar = {
            **dict(orientation="h", x=0.5, xanchor="center", len=0.92, lenmode="fraction"),
            **dict(y=y_of(row.top + row.height + row.under), yanchor="bottom", yref="paper"),
            **dict(thickness=10, xpad=0, ypad=2, tickfont={"size": f}),
        }
        t = row.trace
        owner = layout.setdefault(t["coloraxis"], {}) if t.get("coloraxis") else t
        was = owner.get("colorbar") or {}
        title = {**(was.get("title") or {}), "side": "top", "font": {"size": f}}
        owner["colorbar"] = {**was, **bar, "title": title}


def _on_panel(cell: dict, x: float, y: float) -> bool:
    """Whether a paper point stands on a panel's top edge (its title)."""
    return cell["xd"][0] - 0.01 <= x <= cell["xd"][1] + 0.01 and _near(y, cell["yd"][1])


def stack_maps(data: list[dict], layout: dict, width: float) -> bool:
    """Maps of tokens side by side (two heads and their difference, the masking steps, the
    padding masks, the attention block) laid out on a phone as the head view is: one column,
    each map as wide as the figure (square cells), its labels cut to what a sixth of the width
    holds and thinned to what fits, the axes named under it, its colour bar across under the
    last map it colours. Returns whether the figure is such a figure."""
    cells = _panels(layout)
    maps = _token_maps(data, layout, cells) if len(cells) >= 2 else None
    if not maps:
        return False
    f = PHONE_FONT
    chars = max(4, int((0.16 * width - 8) / (0.62 * f)))
    wide = lambda labels: max(text_px(shorten(v, chars), f) for v in labels)  # noqa: E731
    left = round(max(wide(ys) for _, _, ys in maps) + 8)
    both = _axes_names(layout, cells[0])
    hidden = {
        k for k, v in layout.items() if k.startswith("coloraxis") and v.get("showscale") is False
    }
    rows = _map_rows(maps, cells, width - left - 6, wide, both, hidden)
    inner = rows[-1].top + rows[-1].height + rows[-1].under
    _hang_title(layout, inner, left)
    y_of = lambda px: 1 - px / inner  # noqa: E731  (paper fraction from px below the top)
    numbers = [int(k[5:] or 1) for k in layout if re.match(r"^[xy]axis\d*$", k)]
    free, used = max(numbers, default=1) + 1, set()
    for row in rows:
        y = row.cell["y"]
        if y in used:  # maps that shared one y axis get one each (each has its own row)
            y, free = f"yaxis{free}", free + 1
            layout[y] = _copy(layout[row.cell["y"]])
            layout[row.cell["x"]]["anchor"] = row.trace["yaxis"] = short_name(y)
        used.add(y)
        _lay_map(layout, row, y, y_of, chars, both)
    return True
