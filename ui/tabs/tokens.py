"""Tokens: how the text becomes tokens and ids, and the shapes that follow."""

from __future__ import annotations

import gradio as gr

from lang import tr
from ui.i18n import t
from ui.tabs.base import Built, Tab, View
from viz import tokens
from viz.tokens import CAPTIONS


def build() -> Built:
    gr.Markdown(t(CAPTIONS["chips"]), elem_classes="ta-caption")
    return Built(
        outputs={
            "token_chips": gr.HTML(elem_id="token-chips"),
            "shapes": gr.Markdown(elem_id="shapes"),
            "token_table": gr.Dataframe(elem_id="token-table", interactive=False),
        }
    )


def makers(view: View) -> dict:
    trace, tokenizer = view.analysis.trace, view.analysis.model.tokenizer
    special = set(getattr(tokenizer, "all_special_tokens", []))
    unk = getattr(tokenizer, "unk_token", "[UNK]")

    def chips() -> str:
        html = tokens.token_chips_html(trace.tokens[0], trace.input_ids[0].tolist(), special, unk)
        if trace.tgt_tokens is not None:
            html += f"<p><b>{tr('Target (decoder input)')}</b></p>" + tokens.token_chips_html(
                trace.tgt_tokens[0], trace.tgt_ids[0].tolist(), special, unk
            )
        return html

    return {
        "token_chips": chips,
        "shapes": lambda: tokens.shapes_markdown(trace),
        "token_table": lambda: tokens.tokens_table(
            trace.tokens[0], trace.input_ids[0].tolist(), special, unk
        ),
    }


TAB = Tab(
    "tokens",
    "Tokens",
    build,
    makers,
    depends={"token_chips": (), "shapes": (), "token_table": ()},
)
