"""Any figure that is not a square map, laid out for the page's screen (viz.screen.lay_out), and
every figure's margins sized to its tick labels (``fixed_margins``, before it is laid out).

What a phone or a wide page changes in such a figure, decided here for the width the asking
page gives its figures:
- panels side by side go into one column on a phone (``stack``), or the figure's own narrow
  layout (``layout.meta.narrow``) is taken below the width it names (``take_narrow``);
- a figure of square cells gives back the height a phone's width leaves empty
  (``layout.meta.fit_height``);
- a title or a panel title wider than the figure is broken over lines, and the top margin grows;
- a category axis whose labels would touch stands them upright and shows every k-th (every
  label stays on hover).

The page draws the result as it came (``layout.meta.laid_out``).
"""

from __future__ import annotations

import html
import math
import re
import unicodedata

from viz.measure import WIDE, text_px, title_px, wrap
from viz.panels import (
    PHONE_TITLE,
    STACK_BELOW,
    axis_keys,
    fit_height,
    long_name,
    margin_of,
    narrow,
    short_name,
    stack,
    stack_maps,
)

LABEL = 13  # px a tick label needs across its direction (at least: 1.08 of its size)


def _columns(text: str) -> int:
    """A label's width in Latin characters: a Chinese character is as wide as two (the hidden
    states' Chinese row names, "layer N" said in Chinese, lost their first character at the
    figure's left edge when one counted as one)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _label_chars(values) -> int:
    """Longest label, in Latin characters, among an axis's category values or tick texts."""
    if values is None or isinstance(values, dict):  # none, or numbers as a typed array
        return 0
    texts = [v for v in values if isinstance(v, str)]
    return max((_columns(html.unescape(t)) for t in texts), default=0)


def _own_ticks(axis: dict) -> bool:
    """Whether an axis shows its own tick texts rather than its categories."""
    return axis.get("tickmode") == "array" and axis.get("ticktext") is not None


def fixed_margins(figure: dict) -> dict:
    """A figure's plain JSON ({"data", "layout"}) with its left and bottom margins sized to its
    tick labels and Plotly's axis automargin off, changed in place.

    Plotly 7 turns automargin on, and an automargin figure is laid out and drawn twice: half the
    time a tab takes to appear. Labels here are short and known, so their space is estimated
    (about 6.5 px a character, rotated x labels 5.5 px) and reserved once; a margin the figure
    set larger stays. ``lay_out_general`` and viz.screen lay the figure out from these margins.
    """
    data, layout = figure["data"], figure["layout"]
    xs = ["xaxis", *sorted(k for k in layout if k.startswith("xaxis") and k != "xaxis")]
    ys = ["yaxis", *sorted(k for k in layout if k.startswith("yaxis") and k != "yaxis")]
    x_axes, y_axes = [layout.get(k, {}) for k in xs], [layout.get(k, {}) for k in ys]
    y_chars = x_chars = 0
    for trace in data:  # an axis that names its own ticks (ticktext) shows no trace's labels
        if trace.get("yaxis") in (None, "y") and not _own_ticks(layout.get("yaxis", {})):
            y_chars = max(y_chars, _label_chars(trace.get("y")))
        if not _own_ticks(layout.get(long_name(trace.get("xaxis") or "x"), {})):
            x_chars = max(x_chars, _label_chars(trace.get("x")))
    y_chars = max([y_chars, *(_label_chars(a.get("ticktext")) for a in y_axes)])
    x_chars = max([x_chars, *(_label_chars(a.get("ticktext")) for a in x_axes)])
    y_title = any(a.get("title", {}).get("text") for a in y_axes)
    x_title = any(a.get("title", {}).get("text") for a in x_axes)
    rotated = any((a.get("tickangle") or 0) != 0 for a in x_axes)
    left = 16 + 6.5 * max(y_chars, 3) + (22 if y_title else 0)
    bottom = 16 + (5.5 * max(x_chars, 3) if rotated else 16) + (22 if x_title else 0)
    margin = layout.setdefault("margin", {})
    margin["l"] = int(max(margin.get("l") or 0, min(left, 220)))
    margin["b"] = int(max(margin.get("b") or 0, min(bottom, 200)))
    for key in xs + ys:
        layout.setdefault(key, {})["automargin"] = False
    return figure


def title_size(layout: dict, phone: bool) -> float:
    if phone:
        return PHONE_TITLE
    title = layout.get("title") or {}
    return (title.get("font") or {}).get("size") or 1.4 * (
        (layout.get("font") or {}).get("size") or 12
    )


def wrap_title(layout: dict, width: float, phone: bool) -> None:
    """The title broken over lines where it is wider than the figure; the top margin and the
    figure grow by the lines it gained. On a phone the title is 12 px."""
    title = layout.get("title") or {}
    text = str(title.get("text") or "")
    if not text:
        return
    size = title_size(layout, phone)
    if phone:
        title["font"] = {**(title.get("font") or {}), "size": size}
    out = wrap(text, 0.98 * width - 12, size)
    if out == text:
        return
    margin = layout.setdefault("margin", {})
    grown = title_px(out, size) - title_px(text, size)
    margin["t"] = round((margin.get("t") or 100) + grown)
    if layout.get("height"):  # the plot keeps its height
        layout["height"] = round(layout["height"] + grown)
    layout["title"] = {**title, "text": out}


def _units_wrap(text: str, room: float, size: float) -> str:
    """A panel title's lines broken to ``room`` px: Latin words whole, Chinese characters one
    by one; the breaks the server wrote stay."""
    lines = []
    for part in re.split(r"<br\s*/?>", text, flags=re.I):
        line = ""
        for unit in re.findall(rf"[{WIDE}]|[^\s{WIDE}]+|\s+", part):
            if line.strip() and unit.strip() and text_px(line + unit, size) > room:
                lines.append(line.strip())
                line = unit
            else:
                line += unit
        lines.append(line.strip())
    return "<br>".join(lines)


def wrap_notes(data: list[dict], layout: dict, width: float) -> None:
    """Panel titles (annotations placed on the figure) that would reach past the plot's right
    edge broken over lines (the colour bars stand to its right); a title standing on a panel
    gets the room its new lines take above that panel (``make_room``)."""
    m = margin_of(layout)
    plot_w = max(1.0, width - m["l"] - m["r"])
    font = (layout.get("font") or {}).get("size") or 12
    room_at = []
    for note in layout.get("annotations", []):
        text = note.get("text")
        if not isinstance(text, str) or note.get("xref", "paper") != "paper":
            continue
        size = (note.get("font") or {}).get("size") or font
        wide = max(text_px(line, size) for line in re.split(r"<br\s*/?>", text, flags=re.I))
        x = m["l"] + float(note.get("x", 0.5)) * plot_w
        anchor = note.get("xanchor", "auto")
        if anchor == "auto":
            place = float(note.get("x", 0.5))
            anchor = "left" if place <= 1 / 3 else "right" if place >= 2 / 3 else "center"
        left = {"left": x, "right": x - wide, "center": x - wide / 2}[anchor]
        room = m["l"] + plot_w - left
        if left + wide <= m["l"] + plot_w + 1 or room < 60:
            continue
        note["text"] = _units_wrap(text, room, size)
        added = note["text"].count("<br>") - text.count("<br>")
        if added and note.get("yref", "paper") == "paper" and note.get("yanchor") == "bottom":
            room_at.append((float(note.get("y", 1)), added * 1.3 * size))
    if room_at:
        make_room(data, layout, room_at)


def make_room(data: list[dict], layout: dict, inserts: list[tuple[float, float]]) -> None:
    """``px`` more room above each paper height ``y`` of ``inserts`` [(y, px)], in place: the
    figure grows by their sum and everything placed on the paper (panels, their titles, colour
    bars) keeps its size and moves down by the room opened above it."""
    m = margin_of(layout)
    plot_h = (layout.get("height") or 450) - m["t"] - m["b"]
    if plot_h <= 0:
        return
    total = sum(px for _, px in inserts)
    new_h = plot_h + total

    def moved(y: float) -> float:  # a paper height, after the room above it is opened
        below = plot_h * (1 - y) + sum(px for at, px in inserts if at >= y - 1e-6)
        return 1 - below / new_h

    for key in axis_keys(layout):
        domain = layout[key].get("domain") if layout[key] else None
        if domain and key[0] == "y":
            layout[key]["domain"] = [moved(domain[0]), moved(domain[1])]
    for note in layout.get("annotations", []):
        if note.get("yref", "paper") == "paper" and "y" in note:
            note["y"] = moved(float(note["y"]))
    bars = [t.get("colorbar") for t in data]
    bars += [v.get("colorbar") for k, v in layout.items() if k.startswith("coloraxis")]
    for bar in filter(None, bars):
        if bar.get("yref", "paper") == "paper" and bar.get("lenmode", "fraction") == "fraction":
            y, length = bar.get("y", 0.5), bar.get("len", 1)
            anchor = bar.get("yanchor", "middle")
            lo = {"middle": y - length / 2, "bottom": y, "top": y - length}[anchor]
            hi = lo + length
            bar["len"] = moved(hi) - moved(lo)
            bar["y"] = {"middle": (moved(lo) + moved(hi)) / 2, "bottom": moved(lo)}.get(
                anchor, moved(hi)
            )
    layout["height"] = math.ceil((layout.get("height") or 450) + total)


def _category(axis: dict, values: list) -> bool:
    if axis.get("type") == "category":
        return True
    return axis.get("type") is None and bool(values) and all(isinstance(v, str) for v in values)


def _values(data: list[dict], key: str) -> list:
    """The longest list of values any trace puts on the axis ``key``."""
    letter, name = key[0], short_name(key)
    lists = [t.get(letter) for t in data if (t.get(f"{letter}axis") or letter) == name]
    return max((v for v in lists if isinstance(v, list)), key=len, default=[])


def thin_axes(data: list[dict], layout: dict, width: float) -> None:
    """A category axis whose labels would touch at this width: x labels stood upright, and
    every k-th shown where even upright ones would touch (an axis placing its own few labels,
    ``tickvals``, keeps them all). Axes of square cells share the smaller step."""
    m = margin_of(layout)
    bar = m["r"] < 100 and any(
        t.get("showscale") is not False
        and ("heatmap" in (t.get("type") or "") or t.get("colorbar"))
        for t in data
    )
    steps = {}
    for key in axis_keys(layout):
        axis = layout[key] or {}
        values = _values(data, key)
        if not _category(axis, values) or axis.get("showticklabels") is False:
            continue
        x, placed = key[0] == "x", axis.get("tickmode") == "array"
        n = len(axis.get("tickvals") or []) if placed else len(values)
        if n < 2:
            continue
        d0, d1 = axis.get("domain") or [0, 1]
        span = (
            width - m["l"] - m["r"] - (60 if bar else 0)
            if x
            else (layout.get("height") or 450) - m["t"] - m["b"]
        )
        if span > 0:
            steps[key] = {
                "n": n,
                "placed": placed,
                "x": x,
                "step": 0.9 * span * (d1 - d0) / n,
                "values": values,
            }
    for key, s in steps.items():
        other = (layout[key] or {}).get("scaleanchor")
        partner = steps.get(long_name(other)) if other else None
        if partner:
            s["step"] = partner["step"] = min(s["step"], partner["step"])
    font = (layout.get("font") or {}).get("size") or 12
    for key, s in steps.items():
        axis = layout[key]
        size = (axis.get("tickfont") or {}).get("size") or font
        longest = max(  # a label of two lines ("H5<br>kv1") is as wide as its longer line
            (
                text_px(line, size)
                for v in (axis.get("ticktext") or s["values"])
                for line in str(v).split("<br>")
            ),
            default=0,
        )
        need = max(LABEL, 1.08 * size)  # a presented figure's labels are larger
        every = math.ceil(need / s["step"]) if s["step"] < need and not s["placed"] else 1
        stacked = any("<br>" in str(v) for v in axis.get("ticktext") or [])
        flat = longest + 4 <= s["step"] * every and (stacked or s["step"] * every >= 2 * need)
        if s["x"] and not flat and axis.get("tickangle") != -90:
            axis.update(tickangle=-90, automargin=True)
            if axis.get("ticktext"):  # upright, a label of two lines ("H3<br>kv1") is two
                # labels wide: SmolLM2's 9 heads on a phone lay over each other
                axis["ticktext"] = [str(t).replace("<br>", " ") for t in axis["ticktext"]]
            y = long_name(axis.get("anchor") or "y")
            if y in layout:
                layout[y]["ticklabelstandoff"] = 6
        if every > 1 and not (axis.get("dtick") or 0) >= every:
            axis.update(dtick=every, tick0=0)


def take_narrow(data: list[dict], layout: dict, width: float, presented: bool) -> bool:
    """The figure's own narrow layout (``layout.meta.narrow``) taken, in place, where the figure
    is drawn narrower than its ``below`` px (a phone's, or a column narrower than its wide
    layout needs) and not presented (a presented figure keeps the page's traces, laid out for
    the room: viz.present); whether it was. The spec leaves the figure either way (the page
    never reads it)."""
    meta = layout.get("meta") or {}
    spec = meta.pop("narrow", None)
    if not spec or presented or width >= spec.get("below", STACK_BELOW):
        return False
    narrow(data, layout, spec)
    return True


def lay_out_general(
    data: list[dict], layout: dict, width: float, phone: bool, narrowed: bool = False
) -> None:
    """Any figure but a square map laid out, in place, for a figure ``width`` px wide (its own
    narrow layout already taken: ``narrowed``): its title first (the panels are laid out under
    the lines it takes)."""
    meta = layout.get("meta") or {}
    wrap_title(layout, width, phone)
    maps = False
    if not narrowed and width < STACK_BELOW:
        maps = phone and stack_maps(data, layout, width)
        if not maps:
            stack(data, layout, width)
    if not maps:  # the maps' labels are thinned already
        thin_axes(data, layout, width)
    if meta.get("fit_height") and width < meta["fit_height"].get("below", STACK_BELOW):
        fit_height(data, layout, width, meta["fit_height"].get("pad", 16))
    wrap_notes(data, layout, width)
    if meta.get("plot_px"):  # a plot laid out to the px: the figure grows with its margins
        m = margin_of(layout)
        layout["height"] = math.ceil(m["t"] + m["b"] + meta["plot_px"])
    if phone:
        pin_title(layout, title_size(layout, phone))


def pin_title(layout: dict, size: float, pad: float = 6) -> None:
    """The title hung from the figure's top, ``pad`` px under it. Plotly's own place for it is
    the middle of the top margin: a title of many lines (a phone's, wrapped) then reached down
    onto labels standing over the plot (the overview's heads). Plotly stands a title's first
    baseline, not its top, on y: one line of ``size`` px lower."""
    title = layout.get("title") or {}
    height = layout.get("height")
    if not title.get("text") or not height or title.get("yref") == "container":
        return
    y = 1 - (pad + size) / height
    layout["title"] = {**title, "yref": "container", "y": y, "yanchor": "top"}
