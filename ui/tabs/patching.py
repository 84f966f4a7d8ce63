"""Which heads matter: activation patching on a minimal pair, for the model the page has open.

The page's text is the clean run; the tab's own box holds the corrupt one (the same number of
tokens). The Patch button runs analysis.patch_pair: every head's output and every position's
residual stream taken from the clean run into the corrupt one, one batched forward pass per
layer, and shows the shares restored, direct logit attribution (decoders), how much each
head's attention moves, and the chosen head on both texts. On demand only: its button is an
action in a queue of its own (one pair at a time for the whole server, ui/events.py), so a class
asking at once never holds the slots the other tabs draw in. What it measures and keeps is
ui/patching_measures.py; this module builds the tab and draws what was measured.
"""

from __future__ import annotations

import hashlib

import gradio as gr

import analysis
import analysis.export
from engine import InputError, is_live
from lang import tr
from serve import exports
from ui.fields import Text, declared
from ui.i18n import t
from ui.pair_words import marked, pieces, what_measured
from ui.patching_inputs import (
    PATCH_TOKENS,
    position_label,
    read_position,
    stale_boxes,
    unknown_note,
)
from ui.patching_measures import (  # noqa: F401
    PAIRS,  # re-exported: tests/test_new_users_42.py reads it here
    clean_inputs,
    measure,
    pair_runs,
    pairs_for,
    shipped,
)
from ui.tabs.base import Attempt, Built, Dropdown, Tab, View, downloads, plot, tile_picker
from viz.common import head_label, md_literal
from viz.patching import (
    attention_shift_figure,
    attribution_figure,
    pair_head_figure,
    restored_heads_figure,
    restored_positions_figure,
)

CAPTION = (
    "**Which heads matter** (activation patching: Meng et al. 2022, Wang et al. 2022, "
    "Heimersheim & Nanda 2024). Attention weights are not importance; a counterfactual is. "
    "The page's text is the **clean** run; write a **corrupt** text beside it that differs in "
    "as little as possible (the same number of tokens), or pick a shipped pair. **Patch** runs "
    "the corrupt text again once per head (and once per layer and position) with that head's "
    "output z = softmax(QKᵀ/√d)·V, before W_O, taken from the clean run, and measures how much "
    "of the clean answer comes back: **0** = nothing (the corrupt answer), **1** = all of it. "
    "The answer is a logit difference (the answer minus a wrong token, from the model's top 5) "
    "where the model has an output head; without one (BERT's encoder) it is how close the "
    "output at the chosen position comes back to the clean run's (cosine). Click a head to see "
    "it on both texts. Texts of up to {limit} tokens."
)
SHIFT_CAPTION = (
    "**Attention that moves is not attention that matters**: how far each head's pattern moves "
    "between the two texts, beside the grid above, and the chosen head on both texts (click a "
    "head in any grid, or use the layer and head sliders)."
)

# The minimal pair's other text (kept as long as the page's own, engine.MAX_CHARS, so that the
# tab can say how long a text it will not read was; a link carries its first 2,000 characters),
# the answer and the wrong token whose logit difference is measured (empty: picked from the
# runs), and the position read ("": the last, or an encoder's first that differs).
PAIR_CHARS = 20_000
FIELDS = {
    "pair": declared("", Text(PAIR_CHARS, linked=2_000)),
    "answer": declared("", Text(80)),
    "wrong": declared("", Text(80)),
    "read_at": declared("", Text(8)),
}


def build() -> Built:
    gr.Markdown(t(CAPTION.format(limit=PATCH_TOKENS)), elem_classes="ta-caption")
    example = Dropdown(
        [],
        value=None,
        label=t("A shipped minimal pair for this model (picking one runs it and patches)"),
        elem_id="pair-example",
        allow_custom_value=True,
    )
    pair = gr.Textbox(
        "",
        label=t("Corrupt text: the page's text, minimally changed (the same number of tokens)"),
        elem_id="pair",
        max_lines=2,
    )
    answer, wrong, read_at, patch = measure_row()
    said = gr.Markdown(elem_id="patch-said")
    figures = patch_figures()
    picker = figures.pop("picker")
    csv, npz = downloads(
        (t("Patching results (CSV)"), "patch-csv"),
        (t("Patching results and both runs' attention (NPZ)"), "patch-npz"),
    )
    return Built(
        outputs={
            "pair_example": example,
            "patch_said": said,
            "patch_answer": answer,
            "patch_wrong": wrong,
            "patch_read_at": read_at,
            **figures,
            "patch_csv": csv,
            "patch_npz": npz,
        },
        controls={"pair": pair, "answer": answer, "wrong": wrong, "read_at": read_at},
        picks=[picker],
        actions={"patch": patch},
    )


def measure_row() -> tuple:
    """The boxes of what is measured (answer, wrong answer, position read) and Patch."""
    with gr.Row(elem_id="patch-row"):
        answer = Dropdown(
            [], value="", label=t("Answer"), elem_id="answer", allow_custom_value=True
        )
        wrong = Dropdown(
            [], value="", label=t("Wrong answer"), elem_id="wrong", allow_custom_value=True
        )
        read_at = Dropdown(
            [], value="", label=t("Position read"), elem_id="read-at", allow_custom_value=True
        )
        patch = gr.Button(t("Patch"), variant="primary", size="sm", elem_id="patch-run")
    return answer, wrong, read_at, patch


def patch_figures() -> dict:
    """The measure's figures by output name, the heads grid's picker as ``picker``, and the
    button that opens the chosen head on the Attention tab."""
    heads_plot = plot("patch-heads-plot")
    picker = tile_picker("patch-pick", "patch")
    resid_plot = plot("patch-resid-plot")
    with gr.Column(visible=False) as dla_box:
        dla_plot = plot("patch-dla-plot")
    gr.Markdown(t(SHIFT_CAPTION), elem_classes="ta-caption")
    shift_plot = plot("patch-shift-plot")
    pair_plot = plot("patch-pair-plot")
    opener = gr.Button(
        t("Open the chosen head on the Attention tab"), size="sm", elem_id="patch-open"
    )
    # the head is the page's selection already: the Attention tab shows it in its head view,
    # and on both texts of the pair under it
    opener.click(fn=None, js="() => ta.openTab('attention')")
    return {
        "patch_heads_plot": heads_plot,
        "patch_resid_plot": resid_plot,
        "patch_dla_box": dla_box,
        "patch_dla_plot": dla_plot,
        "patch_shift_plot": shift_plot,
        "patch_pair_plot": pair_plot,
        "picker": picker,
    }


def choices(loaded, top: list[tuple[int, float]]) -> list[tuple[str, str]]:
    """A top-5 list as a dropdown's choices: "‹ Mary› 41 %" -> the piece."""
    names = pieces(loaded, [i for i, _ in top])
    return [(f"{marked(n)} {p:.0%}", n) for n, (_, p) in zip(names, top, strict=True)]


def read_stream(cfg, result) -> str:
    """Whose positions the metric is read at: the output head's (a decoder's, else the
    encoder's), or the patched stream's for the cosine."""
    if result.metric == "cosine":
        return result.stream
    return "decoder" if cfg.has_decoder else "encoder"


def said_markdown(loaded, result) -> str:
    """One paragraph: the metric on both texts, the heads that restore most, the lesson."""
    heads = result.heads
    flat = sorted(
        (
            (float(heads[layer, h]), layer, h)
            for layer in range(heads.shape[0])
            for h in range(heads.shape[1])
        ),
        reverse=True,
    )[:3]
    cfg = loaded.net.config
    best = ", ".join(f"L{layer} H{head_label(cfg, h)} {share:.0%}" for share, layer, h in flat)
    text = tr(
        "**{what}**: {clean:+.3f} on the clean text, {corrupt:+.3f} on the corrupt one. The "
        "heads that restore most: {best}.",
        what=md_literal(what_measured(loaded, result)),
        clean=result.m_clean,
        corrupt=result.m_corrupt,
        best=best,
    )
    unstable = unstable_note(result)
    return text + ("  \n⚠️ " + unstable if unstable else "")


# A share is (m_patched − m_corrupt) / (m_clean − m_corrupt): past ±2, one head would move the
# measure twice the whole difference between the texts, the mark of a denominator too small
# for the shares to mean anything (a logit difference under a tenth, likewise).
UNSTABLE_SHARE, SMALL_LOGIT_DIFF = 2.0, 0.1


def unstable_note(result) -> str:
    """A sentence when m_clean − m_corrupt is too small for the shares to mean anything."""
    diff = result.m_clean - result.m_corrupt
    extreme = max(
        (float(v) for grid in (result.heads, result.positions) for v in grid.flatten()), key=abs
    )
    small = result.metric == "logit_diff" and abs(diff) < SMALL_LOGIT_DIFF
    if abs(extreme) <= UNSTABLE_SHARE and not small:
        return ""
    return tr(
        "The two texts' measures differ by only {diff:.3f}, so every share is that difference "
        "magnified ({extreme:+.2f} at most here) and means little: pick a pair whose answers "
        "differ more.",
        diff=diff,
        extreme=extreme,
    )


def pair_lesson(loaded, result, clean: str, corrupt: str) -> str:
    """The lesson of a shipped pair whose texts these are, where the measure is the one it
    speaks of (its word's position for an encoder); nothing for the user's own pair."""
    pair = shipped(loaded, clean, corrupt)
    if pair is None:
        return ""
    if pair.read and result.position != read_position(loaded, pair.clean, pair.read):
        return ""  # the lesson speaks of its word's vector, and another position was read
    if pair.stack and result.stack != pair.stack:
        return ""  # the lesson names heads of another stack
    lesson = tr("**The lesson:** {lesson}", lesson=tr(pair.lesson))
    if is_live(loaded.model_id):  # trained on the page: the lesson's numbers are another model's
        lesson += " " + tr(
            "(Measured on the shipped {model} model. This model was trained on this page: the "
            "grid above is its own and may name other heads.)",
            model=pair.model,
        )
    return "  \n" + lesson


def export_name(loaded, result, kind: str) -> str:
    digest = hashlib.sha256(
        repr(
            (
                result.clean.input_ids.tolist(),
                result.corrupt.input_ids.tolist(),
                result.answer,
                result.wrong,
                result.position,
                result.stack,
            )
        ).encode()
    ).hexdigest()[:10]
    return f"patching_{exports.model_part(loaded.model_id)}_{result.stack}_{digest}.{kind}"


def makers(view: View) -> dict:
    found, sel = view.analysis, view.sel
    loaded = found.model
    cfg = loaded.net.config
    attempt = Attempt(lambda: measure(loaded, clean_inputs(found), sel, found.text))
    outcome, shown = (lambda: attempt.outcome), attempt.drawn

    def what() -> str:
        return what_measured(loaded, outcome()[0])

    decoder_dla = cfg.arch == "decoder" and cfg.norm == "pre" and loaded.net.lm_head is not None
    return {
        "pair_example": lambda: gr.update(
            choices=[(tr(p.label), p.id) for p in pairs_for(loaded)], value=None
        ),
        "patch_said": lambda: said_of(loaded, found, sel, outcome()),
        "patch_answer": lambda: box_choices(loaded, outcome()[0], "answer"),
        "patch_wrong": lambda: box_choices(loaded, outcome()[0], "wrong"),
        "patch_read_at": lambda: box_choices(loaded, outcome()[0], "read_at"),
        "patch_heads_plot": shown(lambda r: restored_heads_figure(r.heads, cfg, r.stack, what())),
        "patch_resid_plot": shown(
            lambda r: restored_positions_figure(
                r.positions,
                r.clean.tokens_for(r.stream)[0][0],
                r.corrupt.tokens_for(r.stream)[0][0],
                r.stream,
                what(),
            )
        ),
        "patch_dla_box": lambda: gr.update(visible=decoder_dla),
        "patch_dla_plot": shown(
            lambda r: attribution_figure(r.attribution, cfg, what()) if r.attribution else None
        ),
        "patch_shift_plot": shown(lambda r: attention_shift_figure(r.shift, cfg, r.stack)),
        "patch_pair_plot": lambda: pair_plot(loaded, found, sel),
        "patch_csv": lambda: download(loaded, outcome()[0], "csv"),
        "patch_npz": lambda: download(loaded, outcome()[0], "npz"),
    }


def said_of(loaded, found, sel, outcome) -> str:
    """The sentence above the figures: what was measured and what it says, or why nothing was."""
    result, problem = outcome
    if result is None:
        return "⚠️ " + md_literal(problem)
    note = unknown_note(loaded, found.text, sel.pair)
    warned = "  \n⚠️ " + md_literal(tr(note)) if note else ""
    stale = stale_boxes(loaded, clean_inputs(found), sel.read_at)
    return (
        said_markdown(loaded, result)
        + ("  \n" + md_literal(tr(stale)) if stale else "")
        + warned
        + pair_lesson(loaded, result, found.text, sel.pair)
    )


def box_choices(loaded, result, which: str):
    """A box's choices and value: what was measured (the defaults picked from the runs
    included), so the figures' measure can be read off the boxes and changed from there."""
    if result is None:
        return gr.skip()
    if which == "read_at":
        tokens = result.clean.tokens_for(read_stream(loaded.net.config, result))[0][0]
        # the value names its token too ("10·w"): a later Run of another text is told by it
        labels = [position_label(i, tok) for i, tok in enumerate(tokens)]
        return gr.update(choices=labels, value=labels[result.position])
    top = result.top_clean if which == "answer" else result.top_corrupt + result.top_clean
    value = ""
    if result.metric != "cosine":
        value = pieces(loaded, [result.answer if which == "answer" else result.wrong])[0]
    return gr.update(choices=list(dict.fromkeys(choices(loaded, top))), value=value)


def download(loaded, result, kind: str):
    """The measure as a CSV or an NPZ file (``kind``), or nothing when there is none."""
    if result is None:
        return None
    meta = {"model": exports.model_part(loaded.model_id), "measure": what_measured(loaded, result)}
    write = analysis.export.patching_csv if kind == "csv" else analysis.export.patching_npz
    return exports.EXPORTS.write(export_name(loaded, result, kind), write(result, meta))


def pair_plot(loaded, found, sel):
    """The chosen head on both texts of the pair, or nothing (the sentence above says why)."""
    if not sel.pair.strip():
        return None
    try:
        clean, corrupt = pair_runs(loaded, found, sel)
    except InputError:
        return None
    stacks = loaded.net.config.stacks
    stack = sel.stack if sel.stack in stacks else stacks[0]
    return pair_head_figure(clean, corrupt, stack, sel.layer, sel.head)


TAB = Tab(
    "patching",
    "Which heads matter",
    build,
    makers,
    fields=FIELDS,
    depends={
        "pair_example": (),
        "patch_said": ("patch",),
        "patch_answer": ("patch",),
        "patch_wrong": ("patch",),
        "patch_read_at": ("patch",),
        "patch_heads_plot": ("patch",),
        "patch_resid_plot": ("patch",),
        "patch_dla_box": (),
        "patch_dla_plot": ("patch",),
        "patch_shift_plot": ("patch",),
        "patch_pair_plot": ("patch", "stack", "layer", "head"),
        "patch_csv": ("patch",),
        "patch_npz": ("patch",),
    },
    lazy=(
        "patch_said",
        "patch_answer",
        "patch_wrong",
        "patch_read_at",
        "patch_heads_plot",
        "patch_resid_plot",
        "patch_dla_plot",
        "patch_shift_plot",
        "patch_pair_plot",
        "patch_csv",
        "patch_npz",
    ),
    cleared={
        "patch_answer": gr.skip,
        "patch_wrong": gr.skip,
        "patch_read_at": gr.skip,
    },
    own_queue=("patch",),
    linked="patch",
    fills={"patch_answer": "answer", "patch_wrong": "wrong", "patch_read_at": "read_at"},
)
