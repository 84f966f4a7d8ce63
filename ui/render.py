"""Draw one tab: call its makers, isolate a failing view, stamp every output."""

from __future__ import annotations

import copy
import json
import re

from engine import Analysis
from lang import message_of, tr
from serve.lru import LockedLRU
from serve.unread import size_of
from ui.state import API, Client, Selection, run_id
from ui.tabs import BY_ID, View
from viz.common import compact_json, layout_of, safe, template_json
from viz.common import figure as plain_figure
from viz.fit import fixed_margins
from viz.present import plain_copy
from viz.screen import Screen, lay_out

# The last views drawn, finished, by everything that decides them (the analysis, the selection,
# the tab, the language, what the asking page fills itself and its screen): the same view asked by
# another page costs nothing. Bounded by bytes as well as views: a long text's Attention tab is
# megabytes (an API client's, with every number in it, more).
DRAWN: LockedLRU = LockedLRU(16, max_bytes=16 * 2**20, weigh=size_of)
PANEL_TITLE_GAP = 6  # px between a figure's title and the panel titles under it
TITLE_TOP, TITLE_LINE, SUP_LINE = 32, 21, 20  # px: above the title (the toolbar), its lines


def own_copy(values: dict) -> dict:
    """A kept view's outputs for one answer: Gradio changes update dicts while it sends them;
    figures (JSON text), tables and HTML are only read."""
    return {k: copy.deepcopy(v) if isinstance(v, dict) else v for k, v in values.items()}


def failed_view(name: str, exc: Exception):
    """What a view shows when it raised: a sentence, so the other views keep working."""
    message = tr(
        "This view could not be drawn ({kind}: {detail}).",
        kind=type(exc).__name__,
        detail=message_of(exc).rstrip(".。"),  # our own errors in the page's language too
    )[:300]
    if name.endswith(("_csv", "_npz")):  # a download: nothing to offer (the status says why)
        return None
    if name.endswith("_plot") or name.startswith("norms"):
        note = {"text": safe(message), "showarrow": False, "x": 0.5, "y": 0.5}
        layout = {
            **layout_of("", 160),
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "annotations": [{**note, "xref": "paper", "yref": "paper"}],
        }
        return plain_figure([], layout)
    if name.endswith("_table"):
        import pandas as pd

        return pd.DataFrame({tr("error"): [message]})
    return f"<p class='ta-error'>{safe(message)}</p>"


def title_above_panels(layout: dict) -> None:
    """A figure with panel titles over its top row ("A = L3 H0"): its title hangs from the top of
    the figure and the top margin is made tall enough for all its lines (the slide caption
    included) and a gap above the panel titles. (Plotly anchors only a title's first line, so a
    title stood on the panels would run its later lines into them.) ``layout``: the figure's
    layout as plain JSON, changed in place."""
    panel_titles = [
        a
        for a in layout.get("annotations", ())
        if a.get("yref") == "paper" and a.get("yanchor") == "bottom" and (a.get("y") or 0) >= 0.999
    ]
    if not panel_titles:
        return
    font = layout.get("font", {}).get("size") or 12
    size = max(a.get("font", {}).get("size") or font for a in panel_titles)
    room = round(1.4 * size) + PANEL_TITLE_GAP  # a panel title's box is about 1.4 of its font
    title = layout.setdefault("title", {})
    lines = (title.get("text") or "").count("<br>")  # each further line: a <sup> line
    need = TITLE_TOP + TITLE_LINE + SUP_LINE * lines + room
    title.update(yref="container", y=1, yanchor="top")
    title.setdefault("pad", {})["t"] = TITLE_TOP
    margin = layout.setdefault("margin", {})
    margin["t"] = max(margin.get("t") or 48, need)


def slide_ready(
    fig,
    name: str,
    model: str,
    text: str,
    label: str | None = None,
    what: str | None = None,
    screen: Screen | None = None,
):
    """A figure a lecturer can put on a slide: its title names the model (``label``: the model
    and any non-default switch) and the text, and the camera button saves a 3× PNG named after
    the view (the SVG button beside it saves the same). A figure that declares its kind is laid
    out for the asking page's ``screen`` (viz.screen).

    The changes are made on the figure's plain JSON (``slide_figure``), which is then written
    once: Plotly's validated setters cost more than the figure's serialisation."""
    from gradio.components.plot import PlotData

    figure = slide_figure(fig, label or model, text, screen)
    stem = f"{name.removesuffix('_plot')}_{model}" + (f"_{what}" if what else "")
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem)[:80]
    config = {  # the PNG and SVG buttons save it cropped for a slide (ui/js/exports.js)
        "displaylogo": False,
        "modeBarButtonsToRemove": ["toImage"],
        "toImageButtonOptions": {"format": "png", "filename": stem, "scale": 3},
    }
    # gr.Plot hands a top-level "config" to Plotly (its toImageButtonOptions name the download);
    # the figure JSON is reused as is.
    plot = '{"config":' + json.dumps(config) + "," + compact_json(figure)[1:]
    return PlotData(type="plotly", plot=plot)


def plain_of(fig) -> dict:
    """A figure's plain JSON ({"data", "layout"}), a copy to change: a Plotly figure's
    ``to_plotly_json``, or a plain figure copied with the template that puts in (shared: a
    template is never changed)."""
    if not isinstance(fig, dict):
        return fig.to_plotly_json()
    layout = plain_copy({k: v for k, v in fig["layout"].items() if k != "template"})
    layout["template"] = fig["layout"].get("template") or template_json()
    return {"data": plain_copy(fig["data"]), "layout": layout}


def slide_figure(fig, source: str, text: str, screen: Screen | None = None) -> dict:
    """slide_ready's figure as plain JSON, before its config: a Plotly figure or a plain one
    (ui.tabs.layer finishes its twenty step figures so), left as it was; ``source``: the model,
    or what the caption names for it."""
    figure = fixed_margins(plain_of(fig))
    layout = figure["layout"]
    short = text if len(text) <= 60 else text[:59] + "…"
    title = layout.setdefault("title", {})
    title["text"] = f"{title.get('text') or ''}<br><sup>{safe(source)} · “{safe(short)}”</sup>"
    margin = layout.setdefault("margin", {})
    margin["t"] = (margin.get("t") or 48) + 26
    title_above_panels(layout)
    return lay_out(figure, screen)  # last: the title has all its lines


def laid_out(fig, screen: Screen | None):
    """A figure that is not a slide (the live training's) laid out for the asking page's
    ``screen`` (viz.screen), as gr.Plot takes it."""
    from gradio.components.plot import PlotData

    figure = fig.to_plotly_json()
    lay_out(figure, screen)
    return PlotData(type="plotly", plot=compact_json(figure))


def stamp(value, run: str):
    """Mark an output with its run id: figures in layout.meta, HTML with a hidden span."""
    if hasattr(value, "layout"):
        value.layout.meta = {**(value.layout.meta or {}), "run": run}
    elif isinstance(value, str) and value.lstrip().startswith("<"):
        value = f'<span class="ta-run" data-run="{run}" hidden></span>' + value
    return value


def render(
    tab: str,
    analysis: Analysis,
    sel: Selection,
    batch: Analysis | None = None,
    only: set[str] | None = None,
    client: Client = API,
) -> dict:
    """The outputs of one tab (or just those named in ``only``), keyed by output name, for the
    page ``client`` (a page that fills figures from the head switch data gets them without it).
    By default the on-demand ("lazy") outputs are cleared rather than drawn.

    A view that raises is replaced by a sentence saying so; the other views are still drawn.
    """
    lazy, cleared = (), {}
    if only is None:  # the whole tab: its on-demand outputs are cleared (they showed older input)
        only, lazy, cleared = BY_ID[tab].eager, BY_ID[tab].lazy, BY_ID[tab].cleared
    view = View(analysis, sel.clamp(analysis), batch, client, frozenset(only))
    makers = BY_ID[tab].makers(view)
    run = run_id(analysis.key)
    out = {}
    for name, make in makers.items():
        if only is not None and name not in only:
            continue
        try:
            out[name] = stamp(make(), run)
        except Exception as exc:  # one broken view must not take the others down
            out[name] = failed_view(name, exc)
    return {**out, **{name: cleared[name]() if name in cleared else None for name in lazy}}
