"""Transformer Anatomy: type a sentence, see what happens inside a Transformer.

This file only composes and launches. The page is built in ui/layout.py; its handlers are built
here (``handlers``: the views, the Train tab's, the corpus's, the deck's and the shipped minimal
pairs', peers each handed the engine, the pages' sessions or the trainings it needs;
ui/handlers.py, ui/corpus_handlers.py, ui/deck.py, ui/patching_handlers.py) and its events
registered over them in ui/events.py. The page's JavaScript is in ui/js/, the guards that keep
the server up are in serve/, models and the trace cache in engine.py, figures in viz/.
docs/architecture.md tells how they fit.
Run: ``python app.py [--port 7860] [--host 127.0.0.1] [--device auto] [--public] [--share]``.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import gradio as gr

import ui.js as ui_js
from engine import (
    BUNDLED,
    CUSTOM_PREFIX,
    DEFAULT_SECOND,
    MAX_CHARS,
    Engine,
    InputError,
    model_choices,
)
from lang import Msg, speaking, tr
from model import TRAINED
from serve.idle import quiet_queue
from serve.lean import lean
from serve.static import keep_page_files
from serve.training import Trainings
from serve.turns import Pages, share_queue
from serve.unread import bound_unread
from ui import events, layout
from ui.corpus_handlers import Corpus
from ui.deck import Deck
from ui.events import API_NAMES, BOUND, Handlers
from ui.handlers import CUSTOM, Sessions, Views, capped, position_bounds
from ui.patching_handlers import Patching
from ui.state import ViewState
from ui.status import sentence, status_markdown
from ui.training_handlers import Training
from viz.common import md_literal

__all__ = [  # what tests and scripts use from here
    "API_NAMES",
    "BOUND",
    "MAX_CHARS",
    "InputError",
    "build_demo",
    "capped",
    "handlers",
    "is_public",
    "launch_kwargs",
    "sentence",
    "status_markdown",
]
ASSETS = Path(__file__).resolve().parent / "assets"
DEFAULT_TEXT = "time flies like an arrow"
FALLBACK_MODEL = "seed004-encoder"  # the default when the bundled BERT cannot be loaded
# Events that may wait in the queue beyond the 12 admitted. A class of 200 opening the lecturer's
# link within a second queued up to ~100 at once; with 64, Gradio refused the rest ("busy").
QUEUE_WAITING = 128
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
CUSTOM_LABEL = "Custom checkpoint: BERT, GPT-2, LLaMA, Qwen2, Mistral (folder or hub id)…"


def is_public(flag: bool | None = None) -> bool:
    """Public mode hides custom checkpoints: on by default on Hugging Face Spaces."""
    if flag is not None:
        return flag
    env = os.environ.get("TA_PUBLIC")
    if env is None or not env.strip():
        return bool(os.environ.get("SPACE_ID"))
    # Only an explicit "off" turns public mode off: anything unrecognised fails closed (public).
    return env.strip().lower() not in ("0", "false", "no", "off")


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


def handlers(
    engine: Engine,
    default: ViewState,
    models: set[str],
    choices=(),
    trainings: Trainings | None = None,
) -> Handlers:
    """The page's handlers over this engine, each handed what it needs: one store of the pages'
    sessions and one line of trainings (server-wide: TA_MAX_TRAININGS at once) for all."""
    sessions, trainings = Sessions(), trainings or Trainings()
    views = Views(engine, sessions, trainings, default, models, choices)
    training = Training(trainings, views)
    engine.live = training.loaded  # the engine finds a page's trained model by its secret id
    corpus = Corpus(engine, sessions, views)
    return Handlers(
        views=views,
        training=training,
        corpus=corpus,
        deck=Deck(views),
        patching=Patching(engine, views),
    )


def setup(engine: Engine, public: bool) -> tuple[layout.Setup, Handlers]:
    """The page's models and first view, and the handlers over this engine."""
    bundled_error = engine.warm_up()
    choices, default_model = model_choices(), BUNDLED
    if bundled_error:  # the presets still work: say why BERT is missing and start with one
        choices = [c for c in choices if c[1] != BUNDLED]
        default_model = FALLBACK_MODEL
    if not public or engine.allowed:  # a public deployment: only the checkpoints it lists
        choices.append((CUSTOM_LABEL, CUSTOM))
    default = ViewState(DEFAULT_TEXT, default_model, second=DEFAULT_SECOND)
    models = {value for _, value in choices if value != CUSTOM}
    if public:  # a link may name a checkpoint the deployment lists (TA_MODELS), and no other
        models |= {CUSTOM_PREFIX + name for name in engine.allowed}
    models |= {f"{name}@{step}" for name, card in TRAINED.items() for step in card["snapshots"]}
    peers = handlers(engine, default, models, choices)
    views = peers.views
    # Every visitor's first view is the same: computed once here and sent as the components'
    # initial values, so opening the page waits on nobody's forward pass.
    analysis, first, _ = views.draw(default, {}, force=True)
    first = {**first, **position_bounds(analysis)}  # query and key end at this text's last token
    config = analysis.trace.config
    rows = [[row[0], default_model if row[1] == BUNDLED else row[1], *row[2:]] for row in EXAMPLES]
    return layout.Setup(
        choices=choices,
        default_model=default_model,
        default_text=DEFAULT_TEXT,
        examples=[row + [""] * (3 - len(row)) for row in rows],
        stacks=analysis.trace.stacks,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        status=views.status_of(analysis, default),
        first=first,
        bundled_error=bundled_error,
        banner_reason=in_both_languages(bundled_error or ""),
        public=public,
        allowed=engine.allowed if public else (),
    ), peers


def build_demo(engine: Engine | None = None, public: bool | None = None) -> gr.Blocks:
    """The whole app; ``engine`` may be shared by tests."""
    public = is_public(public)
    page_setup, peers = setup(engine or Engine(public=public), public)
    page = layout.build(page_setup)
    with page.demo:
        events.wire(page, peers, Pages(others_waiting=share_queue(page.demo)))
    page.demo.handlers = peers  # what the page's handlers keep (tests and benchmarks read it)
    page.demo.views = peers.views  # its sessions and trainings among them
    # QUEUE_WAITING: a lecture hall opening one link within a second (bench/lecture_link.py).
    page.demo.queue(
        default_concurrency_limit=BOUND["concurrency_limit"],
        max_size=QUEUE_WAITING,
        api_open=False,
    )
    bound_unread(page.demo)
    quiet_queue(page.demo, events.costly_draws(page))
    lean()
    keep_page_files()
    return page.demo


LAUNCH_KWARGS = {
    "css": (ASSETS / "app.css").read_text(encoding="utf-8"),
    # System fonts only: the default theme fetches Google Fonts, which an offline classroom lacks.
    "theme": gr.themes.Soft(
        font=["ui-sans-serif", "system-ui", "Segoe UI", "Roboto", "Noto Sans", "sans-serif"],
        font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"],
    ),
    "show_error": False,
    # The one file input is the Heads tab's corpus, closed in public mode: uploads are refused
    # beyond a token size there (launch_kwargs opens them up to a corpus's size elsewhere).
    "max_file_size": "1kb",
    # Gradio keeps a session's state for an hour after its page closes; here that is the
    # gr.State values only (serve.unread: no copy of the outputs), for at most this many sessions.
    "state_session_capacity": 200,
    # i18n: the page in the browser's language, English or 简体中文: ui.i18n.Blocks.launch hands
    # Gradio the words of the page it built.
    # The page's JavaScript (ui/js/), read once: events call its functions by name.
    "head": ui_js.HEAD,
}


CORPUS_FILE_SIZE = "64kb"  # a corpus of a few hundred sentences (the samples: 9-10 kB)


def launch_kwargs(public: bool) -> dict:
    """LAUNCH_KWARGS, with a corpus's upload size where uploads are open (not public)."""
    return LAUNCH_KWARGS if public else {**LAUNCH_KWARGS, "max_file_size": CORPUS_FILE_SIZE}


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
    demo.launch(
        server_name=args.host,
        server_port=args.port,
        share=args.share,
        **launch_kwargs(engine.public),
    )


if __name__ == "__main__":
    main()
