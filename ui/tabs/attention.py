"""Attention: one head, every layer × head at once, and two heads compared."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import gradio as gr
import torch

import analysis
from engine import InputError
from lang import LOCALE, tr
from serve.lru import LockedLRU
from ui.client import run_id
from ui.fields import HEAD, LAYER, Choice, declared
from ui.i18n import t
from ui.patching_measures import pair_runs
from ui.tabs.base import Built, Radio, Slider, Tab, View, plot, tile_picker
from viz import attention, wire
from viz.attention import CAPTIONS
from viz.block import BLOCK_TOKENS, block_figure
from viz.common import stack_tokens
from viz.patching import pair_head_figure
from viz.screen import PHONE_BELOW

# The head switch's two sides: here, the data every head is drawn from (switch_data) and the
# figures; in the browser, ta.switchHead (ui/js/head_switch.js), which redraws the head view from
# that data with no request, and ta.tilePicker, which turns an overview tile's click into a pick.

SCALES = ("auto", "fixed", "head")  # attention colours: 0–1 unless faint, 0–1, 0–head max
MEASURES = ("weights", "norms")  # attention maps: α, or ‖α f(x)‖ (Kobayashi et al. 2020)
UNITS = ("tokens", "words")  # attention views over tokens, or words (Clark et al.'s convention)
# The heads A and B compared; the attention views' colour scale, measure and units (read by the
# Heads tab's views of attention too).
FIELDS = {
    "layer_a": declared(0, LAYER),
    "head_a": declared(0, HEAD),
    "layer_b": declared(0, LAYER),
    "head_b": declared(1, HEAD),
    "scale": declared("auto", Choice(SCALES)),
    "measure": declared("weights", Choice(MEASURES)),
    "units": declared("tokens", Choice(UNITS)),
}


def build() -> Built:
    gr.Markdown(t(CAPTIONS["head"]), elem_classes="ta-caption")
    shown = head_controls()
    head_steps()
    head_plot = plot("head-plot")
    with gr.Column(visible=False) as pair_box:  # a minimal pair from Which heads matter
        gr.Markdown(t(PAIR_CAPTION), elem_classes="ta-caption")
        pair_plot = plot("attention-pair-plot")
    gr.Markdown(t(CAPTIONS["overview"]), elem_classes="ta-caption")
    overview_plot = plot("overview-plot")
    gr.Markdown(t(BLOCK_CAPTION.format(limit=BLOCK_TOKENS)), elem_classes="ta-caption")
    block_plot = plot("block-plot")
    block_picker = tile_picker("block-pick", "block")  # a tile's layer, the shown head
    gr.Markdown(t(CAPTIONS["compare"]), elem_classes="ta-caption")
    controls = compare_sliders()
    compare_plot = plot("compare-plot")
    picker = tile_picker("overview-pick", "overview")
    head_data = gr.Textbox(visible=False, elem_id="head-data")  # every head, for ta.switchHead
    head_data.change(fn=None, js="(data) => ta.keepData(data)", inputs=[head_data])
    outputs = {
        "head_plot": head_plot,
        "head_data": head_data,
        "overview_plot": overview_plot,
        "block_plot": block_plot,
        "compare_plot": compare_plot,
        "pair_box": pair_box,
        "pair_plot": pair_plot,
    }
    return Built(outputs=outputs, controls={**controls, **shown}, picks=[picker, block_picker])


def head_controls() -> dict:
    """The row above the head view: its colour scale, weights or norms, tokens or words."""
    with gr.Row(equal_height=False, elem_id="head-controls"):  # one row on a wide screen
        scale = Radio(
            [
                (t("auto: 0–1, or the head's max when it is faint"), "auto"),
                (t("0–1, every head alike"), "fixed"),
                (t("0–this head's max"), "head"),
            ],
            value="auto",
            label=t("Colour scale"),
            elem_id="scale",
            scale=2,
        )
        measure = Radio(
            [(t("weights α"), "weights"), (t("norms ‖α·f(x)‖"), "norms")],
            value="weights",
            label=t("Show"),
            info=t("norms: how much each key actually moves the output (Kobayashi et al. 2020)"),
            elem_id="measure",
        )
        units = Radio(
            [(t("tokens"), "tokens"), (t("words"), "words")],
            value="tokens",
            label=t("Over"),
            info=t(
                "words: a word's key pieces summed, its query pieces averaged (Clark et al. 2019)"
            ),
            elem_id="units",
        )
    return {"scale": scale, "measure": measure, "units": units}


def head_steps() -> None:
    """On a phone the layer and head sliders lie a screen above the head view: these buttons,
    right over it (shown on narrow screens only, assets/app.css), step those sliders, so the
    head view redraws in the browser as for a slider (ui/js/phone.js)."""
    steps = [("layer", -1, "◀ layer"), ("layer", 1, "layer ▶"), ("head", -1, "◀ head"),
             ("head", 1, "head ▶")]  # fmt: skip
    with gr.Row(elem_id="head-steps"):
        for field, delta, label in steps:
            button = gr.Button(t(label), size="sm", min_width=60)
            button.click(fn=None, js=f"() => ta.stepSlider('{field}', {delta})")


def compare_sliders() -> dict:
    """Heads A and B of the comparison, a layer and a head each."""
    with gr.Row():
        return {
            "layer_a": Slider(0, 5, value=0, step=1, label=t("A: layer"), elem_id="layer-a"),
            "head_a": Slider(0, 11, value=0, step=1, label=t("A: head"), elem_id="head-a"),
            "layer_b": Slider(0, 5, value=0, step=1, label=t("B: layer"), elem_id="layer-b"),
            "head_b": Slider(0, 11, value=1, step=1, label=t("B: head"), elem_id="head-b"),
        }


PAIR_CAPTION = (
    "**Both texts of the minimal pair** (from Which heads matter): the head that was chosen "
    "there, on the clean and the corrupt text side by side, and their difference. It stays on "
    "that head while the head view above follows the sliders."
)
BLOCK_CAPTION = (
    "**Attention with the residual and the LayerNorm, every layer** (Kobayashi et al. 2021, "
    "*Incorporating Residual and Normalization Layers into Analysis of Masked Language Models*): "
    "how much key j contributes to token i after the whole attention block, all heads together "
    "— ‖Σ_h α_ij f_h(x_j) + δ_ij x_i‖ through the LayerNorm that follows, i.e. the norm of key "
    "j's share of LN(Σ_j α_ij f(x_j) + x_i) (b_O and LN's β left out, as in their code). Each "
    "tile's title gives the layer's **mixing ratio**: mean over the tokens of ‖mix_i‖ / (‖mix_i‖ "
    "+ ‖keep_i‖), where keep_i is what token i keeps from itself (its own attention and the "
    "residual) and mix_i what comes from the other tokens — low: the residual dominates, and "
    "the weights α alone overstate how much tokens mix. Over tokens, for texts of up to {limit} "
    "tokens (longer: the mixing ratios alone); click a tile to open that layer."
)


RANDOM_NOTE = (
    "random weights, never trained: every head is near-uniform by construction "
    "(pick a trained model or BERT to see learned patterns)"
)


def untrained_note(fig, random_weights: bool):
    """Say on the figure itself when its attention comes from untrained random weights."""
    if random_weights:
        fig.layout.title.text = f"{fig.layout.title.text}<br><sup>⚠️ {tr(RANDOM_NOTE)}</sup>"
        fig.layout.margin.t = (fig.layout.margin.t or 48) + 16
    return fig


def norms_trace(trace, stack: str, net):
    """A shallow copy of the trace whose attention maps are ‖α_ij f_h(x_j)‖ instead of α_ij."""
    shown = copy.copy(trace)
    shown.attentions = {**trace.attentions, stack: analysis.norm_attention(trace, stack, net)}
    return shown


def words_trace(trace, stack: str):
    """A shallow copy of the trace whose ``stack`` is over words: Clark et al.'s word-level
    attention (analysis.word_attention) of its one text, its mask and tokens to match. None for
    cross-attention (its queries and keys are two texts)."""
    if stack == "cross":
        return None
    tokens, _ = stack_tokens(trace, stack)
    n = len(tokens)
    words, attention_ = analysis.word_attention(trace.attentions[stack][:1, :, :, :n, :n], tokens)
    _, allowed = analysis.word_attention(trace.masks[stack][:1, :n, :n].float(), tokens)
    shown = copy.copy(trace)
    shown.attentions = {**trace.attentions, stack: attention_}  # (1, L, H, W, W)
    shown.masks = {**trace.masks, stack: allowed > 0}  # (1, W, W)
    if stack == "decoder" and trace.tgt_tokens is not None:
        shown.tgt_tokens = [words]
        shown.tgt_attention_mask = torch.ones(1, len(words), dtype=torch.long)
    else:
        shown.tokens = [words]
        shown.attention_mask = torch.ones(1, len(words), dtype=torch.long)
    return shown


WORDS_NOTE = "over words: a word's key pieces summed, its query pieces averaged (Clark et al. 2019)"
CROSS_WORDS_NOTE = "over tokens: words are drawn for self-attention (one text on both axes)"
NORMS_NOTE = "‖α·f(x)‖ (Kobayashi et al. 2020): not a distribution, colours 0–this map's max"


# The last few runs' payloads, shared by the worker threads (serve.lru).
_SWITCH_DATA: LockedLRU[tuple, str] = LockedLRU(8, max_bytes=8 * 2**20, weigh=len)


def data_key(view: View, sel) -> tuple:
    """What a payload shows: the run, the stack, the colour scale, the measure and the language
    (its titles)."""
    return (view.analysis.key, sel.stack, sel.scale, view.sel.measure, sel.units, LOCALE.get())


def switch_data(view: View, trace, sel) -> str:
    """The head switch's payload (JSON) for this run, stack and scale; "" when there is none."""
    key = data_key(view, sel)
    found = _SWITCH_DATA.get(key)
    if found is None:
        data = attention.head_switch_data(trace, sel.stack, scale=sel.scale)
        run = run_id(view.analysis.key)
        found = json.dumps({**data, "run": run, "id": run_id(key)}) if data else ""
        _SWITCH_DATA.put(key, found)
    return found


def fill_id(view: View, trace, sel) -> str:
    """The payload's id when the asking page will hold it as this response lands (it holds it
    already, or this response brings it) and can fill figures from it; "" otherwise."""
    if not view.client.fills:
        return ""
    data_id = run_id(data_key(view, sel))
    if view.client.holds == data_id:
        return data_id
    if "head_data" in view.drawing and switch_data(view, trace, sel):
        return data_id
    return ""


def tiling(view: View, trace) -> dict:
    """How the overview sets its layers out for the asking page's screen (viz.screen): a tall
    grid in side-by-side blocks on a landscape page (attention.overview_blocks), heads in groups
    one under another on a phone (attention.overview_phone), one grid for a page that did not
    say (an API client)."""
    screen = view.client.screen
    if screen is None:
        return {}
    if screen.width < PHONE_BELOW:  # heads in groups under each other, tiles a finger's size
        return {"phone": True, "width": screen.width}
    n_layers, n_heads = trace.attentions[view.sel.stack].shape[1:3]
    height = min(900, screen.window_height - 60)
    blocks = attention.overview_blocks(n_layers, n_heads, screen.width, height)
    return {"blocks": blocks, "width": screen.width}


def makers(view: View) -> dict:
    trace, sel = view.analysis.trace, view.sel
    if sel.measure == "norms":
        trace = norms_trace(trace, sel.stack, view.analysis.model.net)
        sel = replace(sel, scale="head")
    over_words = sel.units == "words" and sel.stack != "cross"
    if over_words:
        trace = words_trace(trace, sel.stack)
    a, b = (sel.layer_a, sel.head_a), (sel.layer_b, sel.head_b)
    random = view.analysis.model.random_weights
    norms = view.sel.measure == "norms"

    def note(fig):
        said = tr(WORDS_NOTE) if over_words else None
        if sel.units == "words" and sel.stack == "cross":
            said = tr(CROSS_WORDS_NOTE)
        if said:
            fig.layout.title.text = f"{fig.layout.title.text}<br><sup>{said}</sup>"
            fig.layout.margin.t = (fig.layout.margin.t or 48) + 16
        if norms:
            fig.layout.title.text = f"{fig.layout.title.text}<br><sup>{tr(NORMS_NOTE)}</sup>"
            fig.layout.margin.t = (fig.layout.margin.t or 48) + 16
        return untrained_note(fig, random)

    # A page that holds the payload gets the head and compare figures without their numbers,
    # which it has already (ui/js/fill.js): the same numbers are not sent twice.
    def head_plot():
        fig = attention.head_figure(trace, sel.stack, sel.layer, sel.head, scale=sel.scale)
        if data_id := fill_id(view, trace, sel):
            fig = wire.without_z(fig, data_id, [[sel.layer, sel.head]], hidden=None)
        return note(fig)

    def compare_plot():
        fig = attention.compare_figure(trace, sel.stack, a, b, scale=sel.scale)
        data_id = fill_id(view, trace, sel)
        if data_id and attention.compare_in_switch_data(trace, sel.stack, a, b):
            fig = wire.without_z(fig, data_id, [[*a], [*b], [*a, *b]], hidden=0)
        return note(fig)

    def overview_plot():
        tiled = tiling(view, trace)
        fig = note(attention.overview_figure(trace, sel.stack, scale=sel.scale, **tiled))
        return wire.packed(fig, "byte") if view.client.fills else fig

    return {
        "head_plot": head_plot,
        "head_data": lambda: switch_data(view, trace, sel),
        "overview_plot": overview_plot,
        "block_plot": lambda: block_view(view),
        "compare_plot": compare_plot,
        "pair_box": lambda: gr.update(visible=bool(sel.pair.strip())),
        "pair_plot": lambda: pair_view(view),
    }


def pair_view(view: View):
    """The chosen head on both texts of the page's minimal pair (Which heads matter), or
    nothing when the page has none (or its texts cannot be run)."""
    sel = view.sel
    if not sel.pair.strip() or sel.stack not in view.analysis.trace.stacks:
        return None
    try:
        clean, corrupt = pair_runs(view.analysis.model, view.analysis, sel)
    except InputError:
        return None
    return pair_head_figure(clean, corrupt, sel.stack, sel.layer, sel.head)


def block_view(view: View):
    """Kobayashi et al. 2021's block for every layer, from the trace itself (not the norms or
    words the other views may show), in a compact grid on a phone; a decoder's cross block is
    not drawn."""
    sel = view.sel
    if sel.stack == "cross":
        return None
    screen = view.client.screen
    phone = screen.width if screen is not None and screen.width < PHONE_BELOW else None
    net = view.analysis.model.net
    fig = block_figure(view.analysis.trace, sel.stack, net, scale=sel.scale, phone=phone)
    fig = untrained_note(fig, view.analysis.model.random_weights)
    return wire.packed(fig, "milli") if view.client.fills else fig


TAB = Tab(
    "attention",
    "Attention",
    build,
    makers,
    fields=FIELDS,
    depends={
        "head_plot": ("stack", "layer", "head", "scale", "measure", "units"),
        "head_data": ("stack", "scale", "measure", "units"),
        "overview_plot": ("stack", "scale", "measure", "units"),
        # every layer at once, over tokens: no layer, head, measure or units redraws it
        "block_plot": ("stack", "scale"),
        # the pair's head as it was chosen: drawn with the tab, not by the head switch (which stays
        # in the browser for everyone); its title names its head
        "pair_box": ("pair",),
        "pair_plot": ("pair",),
        "compare_plot": (
            "stack",
            "layer_a",
            "head_a",
            "layer_b",
            "head_b",
            "scale",
            "measure",
            "units",
        ),
    },
    in_browser={"head_plot": ("layer", "head")},
    switch_inputs=("layer", "head", "head_data"),
)
