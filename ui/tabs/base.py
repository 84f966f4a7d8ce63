"""What a tab is: its layout (build), what it draws (makers) and what each drawing depends on."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import gradio as gr

from engine import Analysis
from ui.state import API, Client, Selection, as_int

SAVE_SVG = """() => { const id = %s;
  const gd = document.querySelector(`#${id} .js-plotly-plot`);
  if (!gd || !window.Plotly) return;
  const name = gd._context?.toImageButtonOptions?.filename || id;
  window.Plotly.downloadImage(gd, {format: 'svg', filename: name}); }"""


# Long figure titles on a narrow screen (a 390 px phone): Plotly never wraps a title, and the part
# beyond the figure's width is cut. After each draw, every title line wider than the figure is
# broken at its last space, "·" or Chinese punctuation that fits (inside <sup> too), and the top
# margin grows by a line per break. The unwrapped title stays on the figure (gd.__taTitle) for
# the head switch (SWITCH_HEAD), which replaces the head's part of it. The measuring waits for the
# frame after the draw: measured at once, it forced a layout of the whole page inside every draw
# (5 ms of a 128-token head switch's ~30).
WRAP_TITLES = r"""() => {
  const fits = (gd) => {
    const text = String(gd.layout?.title?.text ?? '');
    if (!text || text === gd.__taWrapped) return;
    gd.__taTitle = text;
    gd.__taBase = gd.__taBase ?? gd.layout.margin?.t ?? 48;
    const lines = [...gd.querySelectorAll('.gtitle tspan.line')];
    const room = gd.getBoundingClientRect().width * 0.98 - 12;
    const parts = text.split(/<br\s*\/?>/i);
    if (!lines.length || lines.length !== parts.length || room < 100) return;
    let added = 0;
    const out = parts.map((part, i) => {
      const width = lines[i].getComputedTextLength();
      if (width <= room) return part;
      const units = part.match(/<[^>]+>|&#?\w+;|[\s\S]/g) || [];
      const seen = units.filter((u) => !u.startsWith('<')).length;
      const budget = Math.max(8, Math.floor(seen * room / width));
      const pieces = []; let piece = [], count = 0, cut = -1, sup = false, supAtCut = false;
      for (const u of units) {
        piece.push(u);
        if (u.toLowerCase() === '<sup>') sup = true;
        if (u.toLowerCase() === '</sup>') sup = false;
        if (u.startsWith('<')) continue;
        count += 1;
        if (/[\s·，；：、—]/.test(u)) { cut = piece.length; supAtCut = sup; }
        if (count >= budget) {
          const at = cut > piece.length / 3 ? cut : piece.length;
          const inSup = at === cut ? supAtCut : sup;
          pieces.push(piece.slice(0, at).join('') + (inSup ? '</sup>' : ''));
          piece = (inSup ? ['<sup>'] : []).concat(piece.slice(at));
          count = piece.filter((v) => !v.startsWith('<')).length; cut = -1;
        }
      }
      pieces.push(piece.join(''));
      added += pieces.length - 1;
      return pieces.join('<br>');
    });
    if (!added) return;
    gd.__taWrapped = out.join('<br>');
    const top = gd.__taBase + 15 * added;
    window.Plotly.relayout(gd, {'title.text': gd.__taWrapped, 'margin.t': top});
  };
  const hook = () => {
    for (const gd of document.querySelectorAll('#tabs .js-plotly-plot')) {
      if (gd.__taWrap || !gd.on || !window.Plotly) continue;
      gd.__taWrap = true;
      gd.on('plotly_afterplot', () => requestAnimationFrame(() => setTimeout(() => fits(gd))));
      fits(gd);
    }
  };
  setInterval(hook, 300);
}"""


def plot(elem_id: str) -> gr.Plot:
    """A figure with Plotly's camera (a 3× PNG, see ui.render.slide_ready) and an SVG button."""
    svg = gr.Button("SVG", size="sm", elem_id=f"{elem_id}-svg")
    component = gr.Plot(elem_id=elem_id, show_label=False, buttons=[svg])
    svg.click(fn=None, js=SAVE_SVG % json.dumps(elem_id))
    return component


class Slider(gr.Slider):
    """A layer/head slider that accepts any number (the selection clamps it to the model).

    Gradio checks a slider's value against its build-time bounds and answers anything else with a
    bare "Error" and a server traceback; here the bounds follow the model (a 24-layer checkpoint
    after the 6-layer default), and an API client may send null or 1e300 — each becomes a valid
    selection instead (ui.state.Selection.clamp).
    """

    def preprocess(self, payload):
        return as_int(payload)


class Radio(gr.Radio):
    """A choice that passes any text through (the selection falls back to its default).

    Gradio refuses a value outside the choices it was built with, with a bare "Error" and a
    server traceback; an API client may send anything, and the view state makes it valid.
    """

    def preprocess(self, payload):
        return payload if isinstance(payload, str | bool | int | float) else None


@dataclass(frozen=True)
class View:
    """What a tab draws from: one analysis, the (clamped) selection, and the Masks view's batch;
    and for whom: what the asking page can do, and which outputs this response carries."""

    analysis: Analysis
    sel: Selection
    batch: Analysis | None = None
    client: Client = API
    drawing: frozenset[str] = frozenset()


@dataclass
class Built:
    """The components a tab made inside its gr.Tab."""

    outputs: dict  # output name -> component, in drawing order
    controls: dict = field(default_factory=dict)  # Selection field -> component (tab's own)
    inputs: dict = field(default_factory=dict)  # run input name -> component (e.g. "second")
    # Components whose value "layer,head[,…]" selects that head everywhere (a clicked overview
    # tile, a chosen row of the head table).
    picks: list = field(default_factory=list)
    row_picks: list = field(
        default_factory=list
    )  # tables whose clicked row (layer, head, …) selects
    actions: dict = field(default_factory=dict)  # action name -> button that draws the outputs
    # reading that name (see Tab.lazy)


@dataclass(frozen=True)
class Tab:
    """One view of the app. A new view is one module defining a Tab, plus one line in tabs/__init__.

    depends: output name -> the Selection fields it reads; changing a field redraws only the
    outputs that read it, from the cached trace (no forward pass).
    """

    id: str
    label: str
    build: Callable[[], Built]
    makers: Callable[[View], dict[str, Callable[[], object]]]
    depends: dict[str, tuple[str, ...]]
    needs_batch: bool = False  # draws from a two-text padded batch (the Masks view)
    lazy: tuple[str, ...] = ()  # outputs drawn only by their action button, not with the tab
    # output -> the selection fields whose change the browser redraws by itself (no request),
    # with ``switch``: an async JS function of the values named in ``switch_inputs`` (selection
    # fields or this tab's outputs) that redraws them and resolves false when it could not.
    in_browser: dict[str, tuple[str, ...]] = field(default_factory=dict)
    switch: str = ""
    switch_inputs: tuple[str, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self.depends)

    @property
    def eager(self) -> set[str]:
        """The outputs drawn whenever the tab is."""
        return set(self.depends) - set(self.lazy)

    def redrawn_by(self, field_name: str) -> set[str]:
        """The outputs a change of this selection field redraws."""
        return {name for name, fields_ in self.depends.items() if field_name in fields_}

    def server_redraws(self, field_name: str) -> bool:
        """Whether a change of this field needs the server here (some output reads it and the
        browser cannot redraw that output itself)."""
        return any(
            field_name not in self.in_browser.get(name, ()) for name in self.redrawn_by(field_name)
        )

    def browser_redraws(self, field_name: str) -> bool:
        return any(field_name in fields_ for fields_ in self.in_browser.values())
