"""Inside a layer: the chosen layer and one token walked through, one card per step (issue 29).

The steps are analysis.layer_steps' (docs/layer-steps.md): every card holds the step's formula,
its shape, what it does and the seed tutorial's line that does it; the chosen step's numbers for
the chosen token are one figure (viz.layer_steps.step_figure's). Few components for every visitor:
two number controls, one figure, one HTML block for all the cards, one hidden box. Nothing runs
the model again: the steps are recomputed from the cached trace's residual stream (one layer, a
few ms at 128 tokens) and kept for the last few layers asked for.

A step change asks the server nothing: with the tab, the page gets every step's figure for the
chosen token (``layer_data``: viz.layer_steps.switch_data), each finished as the drawn figure is
(its slide's title, laid out for the page's screen: ``StepFigures``), and ta.switches.layer
(ui/js/layer_switch.js) draws the chosen one as it came and marks its card, as the Attention
tab's head switch does. A token, layer, head or stack change is drawn by the server.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import gradio as gr
import orjson

from analysis.layer_steps import Step, layer_steps, unsupported
from lang import LOCALE, Msg, tr
from serve.lru import LockedLRU
from ui.client import run_id
from ui.fields import Whole, declared
from ui.i18n import t
from ui.tabs.base import Built, Slider, Tab, View, plot
from viz.common import display_token, safe, stack_tokens
from viz.common import figure as plain_figure
from viz.layer_steps import step_name, switch_data
from viz.present import plain_copy

CAPTION = (
    "**Inside a layer**: the chosen layer (and stack) taken apart step by step, from its input to "
    "its output, for one token. Each card gives the step's formula, its shape, what it does and "
    "the seed tutorial's line of code that does it; the figure shows the chosen step's numbers "
    "for the chosen token (a per-head step: the chosen head). In presentation mode PageDown and "
    "PageUp go to the next and previous step."
)

# The last few layers taken apart, shared by the worker threads: a step or token change redraws
# from here. A 512-token BERT layer holds ~45 MB (its [H, T, T] scores three times).
_STEPS: LockedLRU[tuple, list[Step]] = LockedLRU(2)


def build() -> Built:
    gr.Markdown(t(CAPTION), elem_classes="ta-caption")
    with gr.Row():
        token = Slider(0, 511, value=0, step=1, label=t("Token"), elem_id="token")
        step = Slider(0, 29, value=0, step=1, label=t("Step"), elem_id="step")
    figure = plot("layer-step-plot")
    cards = gr.HTML("", elem_id="layer-cards")
    # every step's figure for the token, for ta.switches.layer (ui/js/layer_switch.js)
    data = gr.Textbox(visible=False, elem_id="layer-data")
    data.change(fn=None, js="(data) => ta.keepSteps(data)", inputs=[data])
    return Built(
        outputs={"layer_plot": figure, "layer_cards": cards, "layer_data": data},
        controls={"token": token, "step": step},
    )


def refusal(config) -> str | None:
    """What of this model the steps do not take apart, as a sentence; None when they do (every
    model the project loads; a hand-made RMSNorm post-norm config is not)."""
    if unsupported(config) is None:
        return None
    return tr("This tab does not take apart RMSNorm in a post-norm or encoder-decoder layer.")


def steps_of(view: View) -> list[Step] | str:
    """The layer's steps for the view's stack and layer (cached), or the refusal sentence."""
    trace, sel = view.analysis.trace, view.sel
    refused = refusal(trace.config)
    if refused:
        return refused
    key = (view.analysis.key, sel.stack, sel.layer)
    found = _STEPS.get(key)
    if found is None:
        found = layer_steps(trace, sel.stack, sel.layer)
        _STEPS.put(key, found)
    return found


def view_key(view: View) -> str:
    """The figures a payload holds: the run, the stack, the layer, the token and the head (the
    step switch draws only into a figure and cards of the same view)."""
    sel = view.sel
    return run_id((view.analysis.key, sel.stack, sel.layer, sel.token, sel.head))


def marked(fig: dict, view: View, step: int) -> dict:
    """A step's figure (plain JSON) as the tab sends it: its meta names the view and the step
    (the step switch draws only into a figure of the same view) and the run, as
    ui.render.stamp stamps the drawn one."""
    meta = {"step_view": view_key(view), "step": step, "run": run_id(view.analysis.key)}
    meta["present_below"] = list(CARD_MOST)  # presented, the step's card stands under it
    fig["layout"]["meta"] = meta
    return fig


SHARED = "shared"  # a layout's template, sent once: ui/js/layer_switch.js puts it back


def share_template(layout: dict, template) -> None:
    """A figure's layout, and those in its meta (presented, slide), marked SHARED where their
    template is ``template``, in place."""
    meta = layout.get("meta") or {}
    rooms = [(meta.get(room) or {}).get("layout") or {} for room in ("present", "slide")]
    for node in (layout, *rooms):
        if node.get("template") == template:
            node["template"] = SHARED


@dataclass(frozen=True)
class StepFigures:
    """Every step's figure for the view's token (``layer_data``), for the page's step switch.
    The handler that finishes the drawn figure finishes each of these the same way
    (``slides``: ui.render.slide_ready, with the slide's title and laid out for the page's
    screen), so a switched step is exactly the figure the server draws for it."""

    view: str  # view_key
    figures: tuple  # plain figures, one a step (left as they are: they are kept)

    def drawn(self, step: int):
        """The step's figure as the server draws it (a copy: the step figures are kept)."""
        plain = plain_copy(self.figures[step])
        return plain_figure(plain["data"], plain["layout"])

    def slides(self, finish) -> str:
        """The JSON the page gets: {"view", "template", "figures": [{"data", "layout"}, …]},
        each figure as ``finish`` (a plain figure -> a finished copy, as the drawn one is
        finished) makes it; the template, the same for every layout of every step, sent once
        (``share_template``)."""
        template, texts = None, []
        for fig in self.figures:
            plain = finish(fig)
            if template is None:
                template = plain["layout"].get("template")
            share_template(plain["layout"], template)
            # NaN as null, as Plotly writes it
            texts.append(orjson.dumps(plain, option=orjson.OPT_SERIALIZE_NUMPY).decode())
        head = json.dumps({"view": self.view, "template": template}, separators=(",", ":"))
        return head[:-1] + ',"figures":[' + ",".join(texts) + "]}"


# The last few tokens' step figures, shared by the worker threads (a page's screen and title
# are the handler's: ui.render.DRAWN keeps what it finished).
_SWITCH_DATA: LockedLRU[tuple, StepFigures] = LockedLRU(4)


def switch_payload(view: View, steps: list[Step], tokens, token, keys, group) -> StepFigures:
    """Every step's figure for the view's token (cached per view and language)."""
    key = (view_key(view), LOCALE.get())
    found = _SWITCH_DATA.get(key)
    if found is None:
        figures = switch_data(steps, tokens, token, view.sel.head, keys, group)
        found = StepFigures(key[0], tuple(marked(f, view, i) for i, f in enumerate(figures)))
        _SWITCH_DATA.put(key, found)
    return found


# A name the table's Chinese keeps in English is marked `so` (analysis/layer_notes.py).
CODE = re.compile(r"`([^`]+)`")


def note_html(step: Step) -> str:
    """What the step does, in the page's language, escaped, its marked names as code."""
    return CODE.sub(r"<code>\1</code>", safe(tr(step.note)))


def source(seed: str) -> str:
    """Where a step's line comes from, in the page's language: a tutorial ("seed 000") as it is,
    transformers' code as its file and line ("modeling_llama.py:297", "modeling_gemma3.py:394")."""
    if not seed.startswith("modeling_"):
        return seed
    file, lines = seed.split(":", 1)
    return tr("transformers' {file}, line {lines}", file=file, lines=lines)


def formula(step: Step) -> str:
    """A step's formula: symbols, the same in every language; words in it (what M holds) are a
    Msg, said in the page's language."""
    return tr(step.formula) if isinstance(step.formula, Msg) else step.formula


def cards_html(steps: list[Step], chosen: int, layer: int, token: str, view: str = "") -> str:
    """Every step as a card (number, name, formula, shape with its sizes, note, seed line); the
    chosen one marked, its number in the heading (both changed by the page's step switch)."""
    head = tr(
        "Layer {layer}, token {token}: {n} steps; step {step} is drawn above.",
        layer=layer,
        token=token,
        n=len(steps),
        step=STEP_MARK,
    )
    now = f'<b class="ta-step-now">{chosen}</b>'
    rows = [f'<p class="ta-layer-head">{safe(head).replace(STEP_MARK, now)}</p>']
    for i, s in enumerate(steps):
        sizes = " × ".join(str(n) for n in s.value.shape)
        mark = " ta-step-chosen" if i == chosen else ""
        rows.append(
            f'<div class="ta-step{mark}" data-step="{i}">'
            f'<div class="ta-step-title"><b>{i}</b> · {safe(step_name(s.name))}</div>'
            f'<div class="ta-step-formula"><code>{safe(formula(s))}</code></div>'
            f'<div class="ta-step-shape">{safe(tr("shape"))} <code>{safe(s.shape)}</code> = '
            f"{sizes}</div>"
            f'<div class="ta-step-note">{note_html(s)}</div>'
            f'<div class="ta-step-seed">{safe(source(s.seed))}:'
            f"<pre><code>{safe(s.seed_line)}</code></pre></div></div>"
        )
    steps_div = f'<div class="ta-steps" data-steps="{len(steps)}" data-view="{view}">'
    return f"{steps_div}{''.join(rows)}</div>{STYLE}"


def chosen_card(cards: str) -> str:
    """The chosen step's card alone, from the cards' HTML, with their style (a deck's slide of
    one step shows it under the figure); "" when there is none."""
    start = cards.find('<div class="ta-step ta-step-chosen"')
    if start < 0:
        return ""
    end = cards.find("</pre></div></div>", start)  # the card ends with its tutorial's line
    body = cards[start : end + len("</pre></div></div>")]
    one = (
        "<style>#layer-cards.ta-one .ta-steps{display:block}"
        "#layer-cards.ta-one .ta-step{font-size:18px}</style>"
    )
    card = f'<div id="layer-cards" class="ta-one"><div class="ta-steps">{body}</div></div>'
    return card + STYLE + one


STEP_MARK = "\u2063STEP\u2063"  # where the chosen step's number goes in the translated heading


# Presented, the chosen step's card stands under the figure, at most this tall (px, share of the
# window's height; it scrolls beyond): the server lays the figure out above it (viz.screen.under).
CARD_MOST = (110, 0.16)

STYLE = """<style>
#layer-cards .ta-steps{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));
gap:8px}
#layer-cards .ta-layer-head{grid-column:1/-1;margin:0}
#layer-cards .ta-step{border:1px solid #d1d5db;border-radius:6px;padding:6px 8px;font-size:13px;
min-width:0}
#layer-cards .ta-step-chosen{border:2px solid #dc2626;background:#fef2f2}
#layer-cards .ta-step-title{font-size:14px;margin-bottom:2px}
#layer-cards code{white-space:pre-wrap;word-break:break-word}
#layer-cards pre{margin:2px 0 0;padding:4px 6px;background:#f3f4f6;border-radius:4px;
white-space:pre-wrap;word-break:break-word}
#layer-cards .ta-step-note{margin:3px 0;color:#374151}
#layer-cards .ta-step-seed{color:#6b7280}
body.ta-present:not(.ta-paused) #layer-cards .ta-step-chosen{position:fixed;left:8px;right:8px;
bottom:60px;z-index:1001;max-height:CARD_MOST;overflow:auto;font-size:17px;box-shadow:0 2px
8px rgba(0,0,0,.15);display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1.2fr);
column-gap:18px;align-content:start}
body.ta-present:not(.ta-paused) #layer-cards .ta-step-chosen>div{grid-column:1}
body.ta-present:not(.ta-paused) #layer-cards .ta-step-chosen>.ta-step-note{grid-column:2;
grid-row:1/span 2;margin:0}
body.ta-present:not(.ta-paused) #layer-cards .ta-step-chosen>.ta-step-seed{grid-column:2;
grid-row:3/span 2;display:flex;gap:8px;align-items:baseline}
body.ta-present:not(.ta-paused) #layer-cards .ta-step-chosen>.ta-step-seed pre{flex:1;margin:0}
body.ta-present:not(.ta-paused) #layer-cards .ta-step-chosen .ta-step-title{font-size:19px}
@media (max-width:640px){body.ta-present:not(.ta-paused) #layer-cards .ta-step-chosen{
font-size:13px;max-height:26vh;bottom:62px;display:block}
body.ta-present:not(.ta-paused) #layer-cards .ta-step-chosen .ta-step-title{font-size:15px}}
</style>""".replace("CARD_MOST", f"min({CARD_MOST[0]}px,{round(100 * CARD_MOST[1])}vh)")


def makers(view: View) -> dict:
    trace, sel = view.analysis.trace, view.sel
    tokens, keys = stack_tokens(trace, sel.stack)
    token = min(sel.token, len(tokens) - 1)
    label = f"{token} “{display_token(tokens[token])}”"

    cross = keys if sel.stack == "cross" else None
    group = trace.config.n_heads // trace.config.kv_heads

    def figure():
        steps = steps_of(view)
        if isinstance(steps, str):
            return None
        chosen = min(sel.step, len(steps) - 1)
        return switch_payload(view, steps, tokens, token, cross, group).drawn(chosen)

    def cards():
        steps = steps_of(view)
        if isinstance(steps, str):
            return f'<p class="ta-refusal">{safe(steps)}</p>'
        chosen = min(sel.step, len(steps) - 1)
        return cards_html(steps, chosen, sel.layer, label, view_key(view))

    def data():
        steps = steps_of(view)
        if isinstance(steps, str):
            return ""
        return switch_payload(view, steps, tokens, token, cross, group)

    return {"layer_plot": figure, "layer_cards": cards, "layer_data": data}


TAB = Tab(
    "layer",
    "Inside a layer",
    build,
    makers,
    fields={"token": declared(0, Whole("token")), "step": declared(0, Whole("step"))},
    depends={
        "layer_plot": ("stack", "layer", "head", "token", "step"),
        "layer_cards": ("stack", "layer", "token", "step"),
        "layer_data": ("stack", "layer", "head", "token"),
    },
    # A step change is drawn by the page from layer_data (ui/js/layer_switch.js), no request.
    in_browser={"layer_plot": ("step",), "layer_cards": ("step",)},
    switch_inputs=("step", "layer_data"),
)
