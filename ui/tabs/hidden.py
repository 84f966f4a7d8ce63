"""Hidden states: the norm of every token's residual stream after every layer."""

from __future__ import annotations

import gradio as gr

from ui.i18n import t
from ui.tabs.base import Built, Tab, View, plot
from viz import hidden
from viz.hidden import CAPTIONS


def build() -> Built:
    gr.Markdown(t(CAPTIONS["norms"]), elem_classes="ta-caption")
    heatmap = plot("norms-heatmap")
    gr.Markdown(t(CAPTIONS["norms_lines"]), elem_classes="ta-caption")
    lines = plot("norms-lines")
    return Built(outputs={"norms_heatmap": heatmap, "norms_lines": lines})


def makers(view: View) -> dict:
    trace = view.analysis.trace
    first_stack = trace.config.first_stack
    stack = view.sel.stack if view.sel.stack in trace.hidden_states else first_stack
    return {
        "norms_heatmap": lambda: hidden.norms_heatmap(trace, stack),
        "norms_lines": lambda: hidden.norms_lines(trace, stack),
    }


TAB = Tab(
    "hidden",
    "Hidden states",
    build,
    makers,
    depends={"norms_heatmap": ("stack",), "norms_lines": ("stack",)},
)
