"""The lecture deck's offline file: every slide's figure in one HTML page that needs no network.

The browser keeps the deck (ui/js/deck.js) and sends it as JSON: a list of ``[query, figure]``,
each query a "Link to this view" and each figure the presented one's name (``head`` for the
head view's ``head_plot``; empty: the tab's first figure). Each slide is drawn here as the page
draws it (the same handlers, from the trace cache, nothing remembered for the page), then
written with Plotly's own bundled library into one file, each figure with the slide layout the
server made for it (viz/present.py), which the player (ui/js/deck_player.js) scales to the
window: PageDown/PageUp, the arrow keys, space and the on-screen buttons step; the slide number
is kept in the address's #fragment, so a reload stays on it.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import plotly

from engine import MAX_CHARS, InputError, well_formed
from lang import LOCALE, Msg, tr
from serve import exports
from ui.state import Client, parse_link
from ui.tabs import BY_ID, TAB_IDS
from ui.tabs.layer import chosen_card
from viz.screen import Screen

MAX_SLIDES = 40
MAX_DECK_CHARS = 200_000  # the JSON the browser sends
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PLAYER_JS = Path(__file__).parent / "js" / "deck_player.js"  # steps through the slides
CSS = Path(__file__).resolve().parents[1] / "assets" / "app.css"
# The deck's figures are laid out as slides (16:9, viz.present.SLIDE); a page of that width.
SLIDE_CLIENT = Client(screen=Screen(1600, 1600, 900))


@dataclass(frozen=True)
class Slide:
    """One slide: its heading, and a figure (Plotly JSON) or HTML (chips, tables), or both (a
    layer's step: its figure and its card)."""

    heading: str
    figure: dict | None = None
    html: str = ""


def parse_deck(deck) -> list[tuple[str, str]]:
    """The browser's deck as ``(query, figure)`` pairs; a sentence for anything else."""
    if not isinstance(deck, str) or len(deck) > MAX_DECK_CHARS:
        raise InputError(Msg("The deck could not be read; add its views again."))
    try:
        items = json.loads(deck)
    except ValueError:
        raise InputError(Msg("The deck could not be read; add its views again.")) from None
    if not isinstance(items, list) or not items:
        raise InputError(Msg("The deck is empty: add a view first."))
    slides = []
    for item in items[:MAX_SLIDES]:
        pair = isinstance(item, list) and len(item) == 2
        if not (pair and all(isinstance(v, str) for v in item)):
            raise InputError(Msg("The deck could not be read; add its views again."))
        slides.append((item[0][:4_000], item[1][:40]))
    return slides


def output_of(tab_id: str, figure: str) -> str | None:
    """The tab's output a figure name means (``head`` -> ``head_plot``), else its first figure."""
    outputs = BY_ID[tab_id].outputs
    name = figure.replace("-", "_")
    for candidate in (f"{name}_plot", name):
        if name and candidate in outputs:
            return candidate
    return next((o for o in outputs if o.endswith(("_plot", "_heatmap", "_lines"))), None)


def slide_of(views, query: str, figure: str) -> Slide:
    """One view drawn as the page draws it (a complete figure: no browser fills it)."""
    state, _ = parse_link(query, views.models, TAB_IDS, views.default)
    state = replace(state, text=well_formed(state.text)[:MAX_CHARS])
    analysis, values, _ = views.draw(state, {}, force=True, client=SLIDE_CLIENT)
    sel = state.sel.clamp(analysis)
    tab = BY_ID[state.tab]
    label = tr(tab.label)
    where = f"L{sel.layer} H{sel.head}"
    card = ""
    if state.tab == "layer":  # one step of a layer: its figure, and its card under it
        where += " · " + tr("step {step}", step=sel.step)
        card = chosen_card(values.get("layer_cards") or "")
    heading = f"{label} · {state.model} · {where} · “{state.text[:60]}”"
    name = output_of(state.tab, figure)
    if name in tab.lazy:  # drawn on demand in the page (a patched pair): drawn for the slide
        values = {
            **values,
            **views.draw(state, {}, only={name}, force=True, client=SLIDE_CLIENT)[1],
        }
    value = values.get(name) if name else None
    if value is not None and hasattr(value, "plot"):  # gr.Plot's PlotData: config + figure JSON
        return Slide(heading, figure=as_slide(json.loads(value.plot)), html=card)
    parts = []
    for out in tab.outputs:  # a tab without figures: its HTML and tables as the page shows them
        value = values.get(out)
        if isinstance(value, str) and value.lstrip().startswith("<"):
            parts.append(value)
        elif isinstance(value, pd.DataFrame):
            parts.append(value.to_html(index=False, border=0, classes="ta-table"))
    return Slide(heading, html="\n".join(parts))


def as_slide(figure: dict) -> dict:
    """A figure with the slide layout the server made for it (``layout.meta.slide``,
    viz/present.py): the deck's player draws it at the slide's size, scaled to the window."""
    slide = (figure["layout"].get("meta") or {}).get("slide")
    if not slide:
        return figure
    bars, grown = slide["colorbars"], slide.get("traces") or {}  # (viz.present._grown)
    data = [{**t, **grown.get(str(i), {})} for i, t in enumerate(figure["data"])]
    data = [
        {**t, "colorbar": bars[i]} if i < len(bars) and bars[i] else t for i, t in enumerate(data)
    ]
    layout = dict(slide["layout"])
    if figure["layout"].get("template"):  # the page's: the server sends it once
        layout["template"] = figure["layout"]["template"]
    return {"data": data, "layout": layout}


def script_safe(text: str) -> str:
    """Text inside a <script> element: nothing in it may close the element."""
    return text.replace("</", "<\\/")


def deck_html(slides: list[Slide], lang: str, made: dt.date) -> str:
    """One self-contained HTML file (Plotly inline, no network) that steps through ``slides``."""
    title = tr("Lecture deck, {date}", date=made.isoformat())
    sections = "\n".join(
        f'<section class="slide" id="s{i}" aria-label="{html.escape(s.heading)}">'
        f"<h2>{html.escape(s.heading)}</h2>"
        + (f'<div class="fig" id="f{i}"></div>' if s.figure else "")
        + (f'<div class="html">{s.html}</div>' if s.html else "")
        + "</section>"
        for i, s in enumerate(slides)
    )
    figures = [s.figure for s in slides]
    keys = tr("PageDown / PageUp, ← / →, space: next and previous slide")
    return f"""<!doctype html>
<html lang="{html.escape(lang)}"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{CSS.read_text(encoding="utf-8")}
html, body {{ margin: 0; height: 100%; font-family: system-ui, "Noto Sans CJK SC", sans-serif; }}
.slide {{ display: none; position: fixed; inset: 0 0 48px 0; padding: 8px 16px; overflow: auto; }}
.slide.on {{ display: block; }}
.slide h2 {{ margin: 0; font-size: 14px; font-weight: 500; opacity: 0.6; }}
.slide .html {{ font-size: 150%; }}
#bar {{ position: fixed; left: 0; right: 0; bottom: 0; height: 48px; display: flex; gap: 16px;
  align-items: center; padding: 0 16px; background: #f3f4f6; border-top: 1px solid #ddd; }}
#bar button {{ font-size: 16px; padding: 4px 14px; }}
#bar .keys {{ margin-left: auto; opacity: 0.7; }}
</style>
<script>{script_safe(PLOTLY_JS.read_text(encoding="utf-8"))}</script>
</head><body>
{sections}
<div id="bar"><button id="prev" type="button" aria-label="previous">◀</button>
<span id="count"></span><button id="next" type="button" aria-label="next">▶</button>
<span>{html.escape(title)}</span><span class="keys">{html.escape(keys)}</span></div>
<script type="application/json" id="figures">{script_safe(json.dumps(figures))}</script>
<script>{script_safe(PLAYER_JS.read_text(encoding="utf-8"))}</script>
</body></html>
"""


class Deck:
    """The deck's handler (ui/events.py ``wire_deck``): its slides drawn by the page's views."""

    def __init__(self, views) -> None:
        self.views = views

    def deck_file(self, ask, deck) -> dict:
        """The lecture deck as one offline HTML file."""
        return deck_file(self.views, deck)


def deck_file(views, deck) -> dict:
    """The ``deck_<date>.html`` download for the browser's deck (bounded like every export)."""
    slides = [slide_of(views, query, figure) for query, figure in parse_deck(deck)]
    made = dt.date.today()
    page = deck_html(slides, LOCALE.get(), made)
    path = exports.EXPORTS.write(f"deck_{made.isoformat()}.html", page)
    return {"deck_file": {"__type__": "update", "value": path, "visible": True}}
