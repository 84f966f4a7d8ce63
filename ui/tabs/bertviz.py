"""bertviz: its own head view and model view of our trace, offline in a sandboxed frame."""

from __future__ import annotations

import gradio as gr

from analysis.tokens import SEPARATORS
from analysis.words import SPECIAL
from lang import tr
from ui.fields import Choice, declared
from ui.i18n import t
from ui.tabs.base import Built, Radio, Tab, View
from viz.bertviz_embed import bertviz_iframe

BERTVIZ_VIEWS = ("head", "model")


def build() -> Built:
    gr.Markdown(
        t(
            "bertviz's own head view and model view of this trace, drawn from local scripts "
            "inside a sandboxed frame (works offline). Type `[SEP]` between two sentences "
            "(e.g. `the cat sat [SEP] it was tired`) to get bertviz's sentence-pair filter: "
            "All, A → A, B → B, A → B and B → A."
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


def sentence_b_start(tokens: list[str]) -> int | None:
    """Where sentence B starts when the user typed a separator between two sentences, else None.

    BERT's tokenizer keeps a typed ``[SEP]`` as its special token, so ``the cat sat [SEP] it was
    tired`` is ``[CLS] the cat sat [SEP] it was tired [SEP]``: sentence B starts just after the
    first separator, provided a real (non-special) token follows it before the last separator.
    A text with no typed separator (only the closing one), or a trailing one, is one sentence.
    """
    seps = [i for i, tok in enumerate(tokens) if tok in SEPARATORS]
    if len(seps) < 2:
        return None
    first, last = seps[0], seps[-1]
    if any(tok not in SPECIAL for tok in tokens[first + 1 : last]):
        return first + 1
    return None


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
        return bertviz_iframe(
            weights,
            toks,
            view=sel.bertviz_view,
            sentence_b_start=sentence_b_start(toks),
            layer=sel.layer,
        )

    return {"bertviz_html": bertviz_html}


TAB = Tab(
    "bertviz",
    "bertviz",
    build,
    makers,
    fields={"bertviz_view": declared("head", Choice(BERTVIZ_VIEWS))},
    depends={"bertviz_html": ("stack", "layer", "bertviz_view")},
)
