"""Which heads matter: activation patching on a minimal pair, for the model the page has open.

The page's text is the clean run; the tab's own box holds the corrupt one (the same number of
tokens). The Patch button runs analysis.patch_pair: every head's output and every position's
residual stream taken from the clean run into the corrupt one, one batched forward pass per
layer, and shows the shares restored, direct logit attribution (decoders), how much each
head's attention moves, and the chosen head on both texts. On demand only: its button is an
action in a queue of its own (one pair at a time for the whole server, ui/events.py), so a class
asking at once never holds the slots the other tabs draw in; the same pair asked again is
answered from a small cache, and one being measured is waited for, not measured twice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import gradio as gr

import analysis
import analysis.export
from engine import BUNDLED, InputError
from lang import Msg, message_of, tr
from serve import exports
from serve.lru import LockedLRU
from ui.i18n import t
from ui.patching_inputs import (
    PATCH_TOKENS,
    check_lengths,
    check_readable,
    corrupt_inputs,
    position_label,
    position_of,
    read_position,
    stale_boxes,
    token_of,
    unknown_note,
)
from ui.tabs.base import Attempt, Built, Dropdown, Tab, View, downloads, plot, tile_picker
from viz.common import display_token, head_label, md_literal
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


@dataclass(frozen=True)
class Pair:
    """A shipped minimal pair: its model ("lm": any language model the page opens), the clean
    and corrupt texts, the answer and wrong tokens as text ("" = picked from the runs), the
    word read by an encoder, what it teaches and in which stack's heads. Every text is read by
    its model without [UNK] (tests/test_new_users_42.py)."""

    id: str
    label: str
    model: str
    clean: str
    corrupt: str
    answer: str = ""
    wrong: str = ""
    read: str = ""
    lesson: str = ""
    stack: str = ""  # the stack whose heads the lesson names ("" = the model's first)


PAIRS = (
    Pair(
        "trophy",
        "Winograd: the trophy … too big / too small",
        BUNDLED,
        "The trophy didn't fit in the suitcase because it was too big.",
        "The trophy didn't fit in the suitcase because it was too small.",
        read="it",
        lesson=(
            "Which heads carry “big” or “small” back to “it”? BERT has no answer head here: "
            "the measure is how close the final vector of “it” comes back to the clean run's."
        ),
    ),
    Pair(
        "animal",
        "Winograd: the animal … too tired / too wide",
        BUNDLED,
        "The animal didn't cross the street because it was too tired.",
        "The animal didn't cross the street because it was too wide.",
        read="it",
        lesson=(
            "“tired” makes “it” the animal, “wide” the street: which heads bring the difference "
            "to “it”, and in which layer does it arrive?"
        ),
    ),
    Pair(
        "dates-zh",
        "Dates in Chinese: 二〇二六年十一月二十二日 / 二十三日",
        "dates",
        "二〇二六年十一月二十二日",
        "二〇二六年十一月二十三日",
        stack="cross",
        lesson=(
            "The dates model reads Chinese dates: which cross-attention heads carry the day's "
            "二 or 三 to the last digit the decoder writes (“2” against “3”)? Two heads of "
            "layer 1 bring back most of it."
        ),
    ),
    Pair(
        "copy",
        "Copy: qzxwv qzxw → v",
        "induction",
        "qzxwv qzxw",
        "bhmtk qzxw",
        answer="v",
        lesson=(
            "The induction circuit: a previous-token head in layer 0 and induction heads in "
            "layer 1 restore the copy — the heads the Heads table's previous_token and "
            "induction columns name (Olsson et al. 2022)."
        ),
    ),
    Pair(
        "ioi",
        "Indirect object: Mary and John … gave a drink to",
        "lm",
        "When Mary and John went to the store, John gave a drink to",
        "When Mary and John went to the store, Mary gave a drink to",
        answer=" Mary",
        wrong=" John",
        lesson=(
            "Indirect-object identification (Wang et al. 2022): with a trained GPT-2, name "
            "mover heads in the late layers restore “Mary”."
        ),
    ),
    Pair(
        "ioi-zh",
        "Indirect object in Chinese: 小明和小红……把书递给了",
        "lm",
        "小明和小红去了书店，小明把书递给了",
        "小明和小红去了书店，小红把书递给了",
        lesson=(
            "The indirect-object pair in Chinese, for a model that reads Chinese (Qwen2): the "
            "answer is the model's own top token for the clean text."
        ),
    ),
)
PAIRS_BY_ID = {pair.id: pair for pair in PAIRS}


def pairs_for(loaded) -> list[Pair]:
    """The shipped pairs this model reads: its own, or the language models' for any LM."""
    name = str(loaded.model_id).partition("@")[0]
    return [p for p in PAIRS if p.model == name or (p.model == "lm" and loaded.is_lm)]


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
    said = gr.Markdown(elem_id="patch-said")
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
            "patch_heads_plot": heads_plot,
            "patch_resid_plot": resid_plot,
            "patch_dla_box": dla_box,
            "patch_dla_plot": dla_plot,
            "patch_shift_plot": shift_plot,
            "patch_pair_plot": pair_plot,
            "patch_csv": csv,
            "patch_npz": npz,
        },
        controls={"pair": pair, "answer": answer, "wrong": wrong, "read_at": read_at},
        picks=[picker],
        actions={"patch": patch},
    )


# ---- the measurement, once per pair for the whole server ----------------------------------------
MEASURED: LockedLRU = LockedLRU(8)  # key -> PairResult (texts of ≤ 64 tokens: a few MB each)


def clean_inputs(found) -> dict:
    """The page's own run as patching reads it: the first text's ids as the user typed them (a
    trained decoder's greedy continuation cut off; an encoder-decoder's target kept whole)."""
    trace = found.trace
    cfg = trace.config
    ids, mask = trace.input_ids[:1], trace.attention_mask[:1]
    real = int(mask[0].sum())
    if cfg.arch == "decoder" and found.typed is not None:
        real = min(real, found.typed)
    inputs = {"input_ids": ids[:, :real].cpu(), "attention_mask": mask[:, :real].cpu()}
    if cfg.arch == "encoder-decoder":
        tgt_real = int(trace.tgt_attention_mask[0].sum())
        inputs["tgt_ids"] = trace.tgt_ids[:1, :tgt_real].cpu()
        inputs["tgt_attention_mask"] = trace.tgt_attention_mask[:1, :tgt_real].cpu()
    return inputs


def pieces(loaded, ids) -> list[str]:
    """Token ids (or a classifier's label ids) as the table shows them."""
    labels = loaded.net.config.token_labels
    if loaded.net.lm_head is None and labels:
        return [str(labels[i]) for i in ids]
    return list(loaded.tokenizer.convert_ids_to_tokens(list(ids)))


@dataclass(frozen=True)
class Asked:
    """The tab's boxes read for the page's run, checked: the pair's inputs, the answer, wrong
    answer and position as far as the boxes say (None: the measure's default), the stack."""

    clean: dict
    corrupt: dict
    answer: int | None
    wrong: int | None
    position: int | None
    stack: str

    @property
    def key(self) -> tuple:
        """What a measure of this pair is kept by, server-wide (with the model's id)."""
        return (
            *(tuple(v.flatten().tolist()) for v in self.clean.values()),
            tuple(self.corrupt["input_ids"].flatten().tolist()),
            self.answer,
            self.wrong,
            self.position,
            self.stack,
        )


def asked(loaded, clean: dict, sel, text: str = "") -> Asked:
    """The tab's boxes for the page's run (``text``: as typed), as this tab and How the heads
    connect read them."""
    corrupt = corrupt_inputs(loaded, clean, sel.pair)
    check_lengths(loaded, clean, corrupt)
    check_readable(loaded, text, sel.pair, clean, corrupt)
    answer = token_of(loaded, sel.answer, "The answer")
    wrong = token_of(loaded, sel.wrong, "The wrong answer")
    position = position_of(sel.read_at)
    if stale_boxes(loaded, clean, sel.read_at):  # another text's measure: this pair's own
        answer = wrong = position = None
    pair = shipped(loaded, text, sel.pair)
    if position is None and pair is not None:  # a link to the pair reads where its lesson does
        position = read_position(loaded, pair.clean, pair.read)
    stacks = loaded.net.config.stacks
    stack = sel.stack if sel.stack in stacks else stacks[0]
    return Asked(clean, corrupt, answer, wrong, position, stack)


def measure(loaded, clean: dict, sel, text: str = "") -> analysis.patching.PairResult:
    """patch_pair for the page's run (``text``: as typed) and the tab's boxes, once per pair
    server-wide (a pair being measured for another page is waited for, not measured again)."""
    pair = asked(loaded, clean, sel, text)

    def make():
        try:
            return analysis.patch_pair(
                loaded.net, clean, pair.corrupt, pair.answer, pair.wrong, pair.position, pair.stack
            )
        except ValueError as exc:  # the texts give one answer: a sentence, not a failure
            raise InputError(Msg(message_of(exc))) from None

    return MEASURED.once((loaded.model_id, *pair.key), make)


# ---- what the tab shows ---------------------------------------------------------------------
def marked(piece: str) -> str:
    """A token between ‹ and ›, once: a byte piece that is no whole character reads "‹\\xEC›"
    already (model.pieces), and is not marked again."""
    shown = display_token(piece)
    return shown if shown.startswith("‹") and shown.endswith("›") else f"‹{shown}›"


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


def what_measured(loaded, result) -> str:
    """The metric in words, for the figures' second line."""
    if result.metric == "cosine":
        return tr("cosine to the clean output at position {position}", position=result.position)
    answer, wrong = pieces(loaded, [result.answer, result.wrong])
    return tr(
        "logit({answer}) − logit({wrong}) at position {position}",
        answer=marked(answer),
        wrong=marked(wrong),
        position=result.position,
    )


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


def shipped(loaded, clean: str, corrupt: str) -> Pair | None:
    """The shipped pair of this model whose texts these are; None for the user's own."""
    for pair in pairs_for(loaded):
        if pair.clean == clean and pair.corrupt == corrupt:
            return pair
    return None


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
    return "  \n" + tr("**The lesson:** {lesson}", lesson=tr(pair.lesson))


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

    def said() -> str:
        result, problem = outcome()
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

    def box_choices(which: str):
        result, _ = outcome()
        if result is None:
            return gr.skip()
        # Each box shows what was measured (the defaults picked from the runs included), so the
        # figures' measure can be read off the boxes and changed from there.
        if which == "read_at":
            tokens = result.clean.tokens_for(read_stream(cfg, result))[0][0]
            # the value names its token too ("10·w"): a later Run of another text is told by it
            labels = [position_label(i, tok) for i, tok in enumerate(tokens)]
            return gr.update(choices=labels, value=labels[result.position])
        top = result.top_clean if which == "answer" else result.top_corrupt + result.top_clean
        value = ""
        if result.metric != "cosine":
            value = pieces(loaded, [result.answer if which == "answer" else result.wrong])[0]
        return gr.update(choices=list(dict.fromkeys(choices(loaded, top))), value=value)

    def what() -> str:
        return what_measured(loaded, outcome()[0])

    def csv():
        result = outcome()[0]
        if result is None:
            return None
        data = analysis.export.patching_csv(result, meta(result))
        return exports.EXPORTS.write(export_name(loaded, result, "csv"), data)

    def npz():
        result = outcome()[0]
        if result is None:
            return None
        data = analysis.export.patching_npz(result, meta(result))
        return exports.EXPORTS.write(export_name(loaded, result, "npz"), data)

    def meta(result) -> dict:
        return {
            "model": exports.model_part(loaded.model_id),
            "measure": what_measured(loaded, result),
        }

    decoder_dla = cfg.arch == "decoder" and cfg.norm == "pre" and loaded.net.lm_head is not None

    def pair_plot():
        if not sel.pair.strip():
            return None
        try:
            clean, corrupt = pair_runs(loaded, found, sel)
        except InputError:
            return None  # the sentence above says why
        stack = sel.stack if sel.stack in cfg.stacks else cfg.stacks[0]
        return pair_head_figure(clean, corrupt, stack, sel.layer, sel.head)

    return {
        "pair_example": lambda: gr.update(
            choices=[(tr(p.label), p.id) for p in pairs_for(loaded)], value=None
        ),
        "patch_said": said,
        "patch_answer": lambda: box_choices("answer"),
        "patch_wrong": lambda: box_choices("wrong"),
        "patch_read_at": lambda: box_choices("read_at"),
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
        "patch_pair_plot": pair_plot,
        "patch_csv": csv,
        "patch_npz": npz,
    }


# (model, ids of the inputs) -> their trace; bounded by bytes too, beside the engine's own cache
RUNS: LockedLRU = LockedLRU(16, max_bytes=64 * 2**20, weigh=lambda trace: trace.nbytes())


def pair_runs(loaded, found, sel):
    """The clean and corrupt runs of the pair (traces), for the chosen head on both texts: the
    page's own trace where it is the clean text's exactly (no padding, no continuation), else a
    forward pass of it; a forward pass of the corrupt text. Passes are cached."""
    import torch

    clean = clean_inputs(found)
    corrupt = corrupt_inputs(loaded, clean, sel.pair)
    own = found.trace
    same = own.input_ids.shape[0] == 1 and all(
        getattr(own, name) is not None and torch.equal(getattr(own, name).cpu(), value)
        for name, value in clean.items()
    )
    return (own if same else traced(loaded, clean)), traced(loaded, corrupt)


def traced(loaded, inputs: dict):
    """The model's trace of ``inputs``, one pass per inputs (RUNS)."""
    import torch

    key = (loaded.model_id, *(tuple(v.flatten().tolist()) for v in inputs.values()))
    found = RUNS.get(key)
    if found is None:
        with torch.no_grad():
            found = RUNS.put(key, loaded.net.trace(**inputs))
    return found


TAB = Tab(
    "patching",
    "Which heads matter",
    build,
    makers,
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
)
