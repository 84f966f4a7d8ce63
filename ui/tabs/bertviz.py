"""bertviz: its own head view and model view of our trace, offline in a sandboxed frame."""

from __future__ import annotations

import gradio as gr

from lang import tr
from ui.i18n import t
from ui.tabs.base import Built, Radio, Tab, View
from viz.bertviz_embed import bertviz_iframe


def build() -> Built:
    gr.Markdown(
        t(
            "bertviz's own head view and model view of this trace, drawn from local scripts "
            "inside a sandboxed frame (works offline)."
        ),
        elem_classes="ta-caption",
    )
    view = Radio(
        [(t("Head view"), "head"), (t("Model view"), "model")],
        value="head",
        label=t("bertviz view"),
        elem_id="bertviz-view",
    )
    return Built(
        outputs={"bertviz_html": gr.HTML(elem_id="bertviz-html")}, controls={"bertviz_view": view}
    )


def makers(view: View) -> dict:
    trace, sel = view.analysis.trace, view.sel

    def bertviz_html() -> str:
        if sel.stack == "cross":
            return "<p>{}</p>".format(
                tr(
                    "bertviz's head and model views draw self-attention over one token list; "
                    "pick the encoder or decoder stack to see them."
                )
            )
        toks = trace.tokens_for(sel.stack)[0][0]
        weights = trace.attentions[sel.stack][0]  # (L, H, T, T)
        return bertviz_iframe(weights, toks, view=sel.bertviz_view, layer=sel.layer)

    return {"bertviz_html": bertviz_html}


TAB = Tab(
    "bertviz",
    "bertviz",
    build,
    makers,
    depends={"bertviz_html": ("stack", "layer", "bertviz_view")},
)
