"""Attention: one head, every layer × head at once, and two heads compared."""

from __future__ import annotations

import copy
from dataclasses import replace

import gradio as gr

import analysis
from ui.i18n import t
from ui.tabs.base import Built, Radio, Slider, Tab, View, plot
from viz import attention
from viz.attention import CAPTIONS

# A click on an overview tile writes "layer,head,time" into a hidden HTML component, whose change
# event selects that head (gr.Plot itself has no click event). Plotly re-mounts on every new
# figure, so new plots are hooked as they appear.
PICK_TILE = r"""
const hook = () => {
  for (const gd of document.querySelectorAll('#overview-plot .js-plotly-plot')) {
    if (gd.__taPick || !gd.on) continue;
    gd.__taPick = true;
    gd.on('plotly_click', (ev) => {
      const p = ev && ev.points && ev.points[0];
      if (!p) return;
      const l = /^L(\d+)/.exec(String(p.y)), h = /^H(\d+)/.exec(String(p.x));
      if (l && h) props.value = `${l[1]},${h[1]},${Date.now()}`;
    });
  }
};
hook();
setInterval(hook, 300);
"""


def build() -> Built:
    gr.Markdown(t(CAPTIONS["head"]), elem_classes="ta-caption")
    scale = Radio(
        [(t("0–1, every head alike"), "fixed"), (t("0–this head's max"), "head")],
        value="fixed",
        label=t("Colour scale"),
        elem_id="scale",
    )
    measure = Radio(
        [(t("weights α"), "weights"), (t("norms ‖α·f(x)‖"), "norms")],
        value="weights",
        label=t("Show"),
        info=t("norms: how much each key actually moves the output (Kobayashi et al. 2020)"),
        elem_id="measure",
    )
    head_plot = plot("head-plot")
    gr.Markdown(t(CAPTIONS["overview"]), elem_classes="ta-caption")
    overview_plot = plot("overview-plot")
    gr.Markdown(t(CAPTIONS["compare"]), elem_classes="ta-caption")
    with gr.Row():
        controls = {
            "layer_a": Slider(0, 5, value=0, step=1, label=t("A: layer"), elem_id="layer-a"),
            "head_a": Slider(0, 11, value=0, step=1, label=t("A: head"), elem_id="head-a"),
            "layer_b": Slider(0, 5, value=0, step=1, label=t("B: layer"), elem_id="layer-b"),
            "head_b": Slider(0, 11, value=1, step=1, label=t("B: head"), elem_id="head-b"),
        }
    compare_plot = plot("compare-plot")
    picker = gr.HTML("", js_on_load=PICK_TILE, elem_id="overview-pick", elem_classes="ta-hidden")
    outputs = {"head_plot": head_plot, "overview_plot": overview_plot, "compare_plot": compare_plot}
    return Built(
        outputs=outputs, controls={**controls, "scale": scale, "measure": measure}, picks=[picker]
    )


RANDOM_NOTE = (
    "random weights, never trained: every head is near-uniform by construction "
    "(pick a trained model or BERT to see learned patterns)"
)


def untrained_note(fig, random_weights: bool):
    """Say on the figure itself when its attention comes from untrained random weights."""
    if random_weights:
        fig.layout.title.text = f"{fig.layout.title.text}<br><sup>⚠️ {RANDOM_NOTE}</sup>"
        fig.layout.margin.t = (fig.layout.margin.t or 48) + 16
    return fig


def norms_trace(trace, stack: str, net):
    """A shallow copy of the trace whose attention maps are ‖α_ij f_h(x_j)‖ instead of α_ij."""
    shown = copy.copy(trace)
    shown.attentions = {**trace.attentions, stack: analysis.norm_attention(trace, stack, net)}
    return shown


NORMS_NOTE = "‖α·f(x)‖ (Kobayashi et al. 2020): not a distribution, colours 0–this map's max"


def makers(view: View) -> dict:
    trace, sel = view.analysis.trace, view.sel
    if sel.measure == "norms":
        trace = norms_trace(trace, sel.stack, view.analysis.model.net)
        sel = replace(sel, scale="head")
    a, b = (sel.layer_a, sel.head_a), (sel.layer_b, sel.head_b)
    random = view.analysis.model.random_weights
    norms = view.sel.measure == "norms"

    def note(fig):
        if norms:
            fig.layout.title.text = f"{fig.layout.title.text}<br><sup>{NORMS_NOTE}</sup>"
            fig.layout.margin.t = (fig.layout.margin.t or 48) + 16
        return untrained_note(fig, random)

    return {
        "head_plot": lambda: note(
            attention.head_figure(trace, sel.stack, sel.layer, sel.head, scale=sel.scale)
        ),
        "overview_plot": lambda: note(attention.overview_figure(trace, sel.stack, scale=sel.scale)),
        "compare_plot": lambda: note(
            attention.compare_figure(trace, sel.stack, a, b, scale=sel.scale)
        ),
    }


TAB = Tab(
    "attention",
    "Attention",
    build,
    makers,
    depends={
        "head_plot": ("stack", "layer", "head", "scale", "measure"),
        "overview_plot": ("stack", "scale", "measure"),
        "compare_plot": ("stack", "layer_a", "head_a", "layer_b", "head_b", "scale", "measure"),
    },
)
