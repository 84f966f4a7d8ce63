"""Masks: a padded two-text batch, the causal and cross masks, and a score's path through them."""

from __future__ import annotations

import gradio as gr

from engine import DEFAULT_SECOND
from ui.i18n import t
from ui.tabs.base import Built, Tab, View, plot
from viz import masks
from viz.masks import CAPTIONS


def build() -> Built:
    gr.Markdown(t(CAPTIONS["padding"]), elem_classes="ta-caption")
    second = gr.Textbox(
        DEFAULT_SECOND,
        label=t("Second sentence of the padded batch"),
        elem_id="second",
        max_lines=2,
    )
    padding_plot = plot("padding-mask-plot")
    gr.Markdown(t(CAPTIONS["causal"]), elem_classes="ta-caption")
    causal_plot = plot("causal-mask-plot")
    with gr.Column(visible=False) as cross_box:
        gr.Markdown(t(CAPTIONS["cross"]), elem_classes="ta-caption")
        cross_plot = plot("cross-mask-plot")
    gr.Markdown(t(CAPTIONS["score_steps"]), elem_classes="ta-caption")
    steps_plot = plot("score-steps-plot")
    return Built(
        outputs={
            "padding_mask_plot": padding_plot,
            "causal_mask_plot": causal_plot,
            "cross_box": cross_box,
            "cross_mask_plot": cross_plot,
            "score_steps_plot": steps_plot,
        },
        inputs={"second": second},
    )


def padded_item(trace, stack: str) -> int:
    """The batch item whose mask hides most for this stack: the padded (shorter) text of the pair,
    so the score steps show the mask at work; the user's own text (0) when nothing is padded."""
    mask = trace.attention_mask if stack in ("encoder", "cross") else trace.tgt_attention_mask
    if mask is None:
        mask = trace.attention_mask
    lengths = mask.sum(dim=1).tolist()
    return min(range(len(lengths)), key=lambda i: (lengths[i], i)) if len(set(lengths)) > 1 else 0


def makers(view: View) -> dict:
    trace, sel = view.analysis.trace, view.sel
    cfg = trace.config
    batch = view.batch.trace if view.batch is not None else trace
    first_stack = cfg.first_stack
    # The causal mask belongs to the decoder: draw it over the decoder's tokens (the target of an
    # encoder-decoder model), never over the source.
    causal_tokens = trace.tokens_for("decoder")[0][0] if cfg.has_decoder else trace.tokens[0]
    has_cross = "cross" in batch.stacks
    return {
        "padding_mask_plot": lambda: masks.padding_masks_figure(batch, first_stack),
        "causal_mask_plot": lambda: masks.causal_mask_figure(causal_tokens, arch=cfg.arch),
        "cross_box": lambda: gr.update(visible=has_cross),
        "cross_mask_plot": lambda: masks.cross_mask_figure(batch) if has_cross else None,
        "score_steps_plot": lambda: masks.score_steps_figure(
            batch, sel.stack, sel.layer, sel.head, batch=padded_item(batch, sel.stack)
        ),
    }


TAB = Tab(
    "masks",
    "Masks",
    build,
    makers,
    depends={
        "padding_mask_plot": (),
        "causal_mask_plot": (),
        "cross_box": (),
        "cross_mask_plot": (),
        "score_steps_plot": ("stack", "layer", "head"),
    },
    needs_batch=True,
)
