"""Model: the architecture, parameters per component, and the config."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from lang import tr
from ui.i18n import empty_table
from ui.tabs.base import Built, Tab, View
from viz import model_info


def empty(*columns: str) -> pd.DataFrame:
    """A table with no rows, its headers in the request's language (as viz.model_info's)."""
    return pd.DataFrame(columns=[tr(column) for column in columns])


def build() -> Built:
    return Built(
        outputs={
            "architecture": gr.Markdown(elem_id="architecture"),
            # their own headers before the tab is drawn, not Gradio's "1 | 2 | 3"
            "param_table": gr.Dataframe(
                empty_table(lambda: empty("component", "parameters", "share %")),
                elem_id="param-table",
                interactive=False,
                # every column inside a phone's 324 px box: the share beside its component
                column_widths=["40%", "32%", "28%"],
                wrap=True,
            ),
            "config_table": gr.Dataframe(
                empty_table(lambda: empty("field", "value", "meaning")),
                elem_id="config-table",
                interactive=False,
                column_widths=["30%", "25%", "45%"],  # each meaning wraps, on screen
                wrap=True,
            ),
        }
    )


def makers(view: View) -> dict:
    trace, net = view.analysis.trace, view.analysis.model.net
    cfg = trace.config
    return {
        "architecture": lambda: model_info.architecture_markdown(
            cfg, trace.device, net.get_num_params()
        ),
        "param_table": lambda: model_info.param_table(net.param_counts(), cfg),
        "config_table": lambda: model_info.config_table(cfg),
    }


TAB = Tab(
    "model",
    "Model",
    build,
    makers,
    depends={"architecture": (), "param_table": (), "config_table": ()},
)
