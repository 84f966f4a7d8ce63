"""Embeddings: token embeddings, positional encodings and their sum; the PE table and curves."""

from __future__ import annotations

import re

import gradio as gr

from lang import tr
from ui.fields import Text, declared
from ui.i18n import t
from ui.tabs.base import Built, Tab, View, plot
from viz import embeddings, rope
from viz.embeddings import CAPTIONS

DEFAULT_DIMS = "0, 1, 2, 3"


def parse_dims(text: str, d_model: int) -> tuple[tuple[int, ...], str | None]:
    """ "0, 1, 2, 3" -> (0, 1, 2, 3); a note when something was out of range or unreadable."""
    found = [int(x) for x in re.findall(r"\d{1,6}", str(text or "")[:200])][:8]
    dims = tuple(dict.fromkeys(d for d in found if d < d_model))
    if not dims:
        note = tr("Dimensions must be numbers from 0 to {last}; showing 0–3.", last=d_model - 1)
        return (0, 1, 2, 3)[: min(4, d_model)], note
    if len(dims) < len(found):
        return dims, tr("Dimensions above {last} were left out.", last=d_model - 1)
    return dims, None


def build() -> Built:
    gr.Markdown(t(CAPTIONS["embeddings"]), elem_classes="ta-caption")
    embedding_plot = plot("embedding-plot")
    gr.Markdown(t(CAPTIONS["positions"]), elem_classes="ta-caption")
    table_plot = plot("position-table-plot")
    gr.Markdown(t(CAPTIONS["position_curves"]), elem_classes="ta-caption")
    dims = gr.Textbox(
        DEFAULT_DIMS, label=t("Dimensions to plot (up to 8)"), elem_id="dims", max_lines=1
    )
    curves_plot = plot("position-curves-plot")
    return Built(
        outputs={
            "embedding_plot": embedding_plot,
            "position_table_plot": table_plot,
            "position_curves_plot": curves_plot,
        },
        controls={"dims": dims},
    )


def makers(view: View) -> dict:
    trace = view.analysis.trace
    first_stack = trace.config.first_stack
    dims, note = parse_dims(view.sel.dims, trace.config.d_model)

    def curves():
        fig = embeddings.position_curves_figure(trace, first_stack, dims=dims)
        if note:  # an unreadable or out-of-range dimension is said on the figure, not dropped
            fig.layout.title.text = f"{fig.layout.title.text}<br>⚠️ {note}"
        return fig

    if trace.config.positions == "rotary":  # no table is added: RoPE's own two views
        n_tokens = int(trace.attention_mask[0].sum())
        return {
            "embedding_plot": lambda: embeddings.embedding_figure(trace, first_stack),
            "position_table_plot": lambda: rope.frequency_figure(trace.config, n_tokens),
            "position_curves_plot": lambda: rope.distance_figure(trace, first_stack),
        }
    return {
        "embedding_plot": lambda: embeddings.embedding_figure(trace, first_stack),
        "position_table_plot": lambda: embeddings.position_table_figure(trace, first_stack),
        "position_curves_plot": curves,
    }


TAB = Tab(
    "embeddings",
    "Embeddings",
    build,
    makers,
    fields={"dims": declared(DEFAULT_DIMS, Text(200))},  # the position curves' dimensions
    depends={"embedding_plot": (), "position_table_plot": (), "position_curves_plot": ("dims",)},
)
