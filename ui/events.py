"""Every event of the page, registered by one helper (``Wiring.on``).

What every Python event needs is applied here once:

- **the tail**: after its own inputs, every event reads the selection controls, the visible tab,
  the page's language and the page's id (stamped by the browser, ta.stamp in ui/js/core.js); the
  handler gets them as one ``Ask``;
- **the page's turn** (serve.turns): one event at a time per page, and the caps per page and per
  client address (a sentence beyond them);
- **the language**: everything the server writes is said in the page's language (lang.speaking);
- **one sentence instead of a traceback**: a handler that raises answers with the status line;
- **a complete answer**: outputs a handler does not name are left as they are (``gr.skip()``),
  so no event ever fails with "didn't return enough output values"; a name it returns that is
  no output of the event is logged as an error (a misspelt name would otherwise do nothing);
- **the concurrency group** (``BOUND``) and, for runs, **the stale marker**.

Events that only the browser handles call ``ta.<name>`` (ui/js/). The handlers (``Handlers``: the
views and the Train tab's in ui/handlers.py, the corpus's in ui/corpus_handlers.py, the deck's in
ui/deck.py) are built by app.py.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import gradio as gr

from lang import Msg, speaking, tr
from serve.turns import PageBusy, Pages, client_address
from ui.corpus_handlers import Corpus
from ui.deck import Deck
from ui.handlers import RUN_INPUTS, Ask, Views, model_boxes, said
from ui.i18n import relabel_examples, wire_language
from ui.layout import Page
from ui.patching_handlers import Patching
from ui.patching_measures import PATCH_PROGRESS
from ui.state import CORPORA, SELECTION_FIELDS, Client, Selection
from ui.status import status_markdown
from ui.tabs import FIGURE_FIELDS, TAB_IDS, TABS
from ui.training_handlers import Training

LOG = logging.getLogger(__name__)

# One group for every event that can run a forward pass, with the same explicit limit on each
# member (a group's limit is the lowest among its members): deep links, tab clicks and sliders
# share it with Run. The group admits 12 requests at once, at most a few of them from one page
# or one address (serve.turns); what they may compute at once is bounded inside, by the CPU
# share's two lanes (serve.cpu: 2 heavy passes, loads or big draws, and 2 light ones), so a
# short text is not queued first-in-first-out behind 512-token passes or a checkpoint load.
BOUND = {"concurrency_id": "model", "concurrency_limit": 12}
TAIL = (*SELECTION_FIELDS, "tab_box", "language", "page")
API_TAIL = (*SELECTION_FIELDS, "tab", "lang", "page")  # the same, as the API names them
API_NAMES = [*RUN_INPUTS, *API_TAIL]  # the Run endpoint's parameters, in order
STAMP = "(...args) => ta.stamp(...args)"
# The on-demand actions a script may call by name (after /run: its session's last run); the
# others stay the page's own.
PUBLIC_ACTIONS = ("patch",)


@dataclass(frozen=True)
class Handlers:
    """The page's handlers, peers built by app.py: the views, the Train tab's, the Heads tab's
    corpus, the lecture deck's, Which heads matter's shipped pairs."""

    views: Views
    training: Training
    corpus: Corpus
    deck: Deck
    patching: Patching


@contextlib.contextmanager
def reporting(bar):
    """While a handler runs: its patched runs (ui.patching_measures.PATCH_PROGRESS) move
    Gradio's progress bar ``bar`` (None: nothing reported), with a sentence in the page's
    language. A real language model's Patch is ten to thirty seconds of runs; the bar says how
    far it is rather than leaving the page still."""
    if bar is None:
        yield
        return

    def report(done: int, total: int) -> None:
        bar(done / total, desc=tr(Msg("Patching: {done} of {total} runs", done=done, total=total)))

    token = PATCH_PROGRESS.set(report)
    try:
        yield
    finally:
        PATCH_PROGRESS.reset(token)


def ask_of(tail: Sequence, request: gr.Request | None) -> Ask:
    """The event's tail as the handlers take it."""
    *sel, tab, lang, page = tail
    tab = str(tab).partition("|")[0]
    stamp = page if isinstance(page, str) else ""
    page_id = stamp.partition("|")[0][:64]
    if not page_id and request is not None and request.session_hash:
        page_id = f"api:{request.session_hash}"  # a script's calls: in order, capped too
    return Ask(
        tab=tab if tab in TAB_IDS else "tokens",
        sel=Selection(*sel),
        lang=lang if lang in ("en", "zh-CN") else "en",
        page=page_id or None,
        client=Client.of(stamp),
    )


class Wiring:
    """Registers the page's events over its handlers."""

    def __init__(self, page: Page, turns: Pages) -> None:
        self.page, self.turns = page, turns

    def answer(
        self,
        handler: Callable,
        names: Sequence[str],
        outputs: Sequence[str],
        row,
        turn,
        progress: bool = False,
    ):
        """The function Gradio calls: the handler in the page's turn and language, its result
        as one value per output (named ones set, the rest left as they are). ``row``: the
        handler's first input is the clicked table row (Gradio's SelectData). ``turn=False``:
        capped like any event, but not waiting for the page's other events. ``progress``: the
        handler's patched runs are reported as Gradio's progress bar (PATCH_PROGRESS)."""
        turns, count = self.turns, len(names) + (1 if row else 0)

        def fn(*values):
            bar = values[-1] if progress else None  # Gradio's Progress, last in the signature
            *values, request = values[:-1] if progress else values
            if row:
                values[0] = getattr(values[0], "row_value", None)
            ask = ask_of(values[count:], request)
            with speaking(ask.lang):
                try:
                    mine = turns.turn(ask.page if turn else None, client_address(request))
                    with mine, reporting(bar):
                        result = handler(ask, *values[:count])
                except PageBusy as busy:
                    result = {"status": status_markdown(None, [busy.message], None)}
                except Exception as exc:  # one sentence; the server keeps serving
                    result = {"status": said(exc)}
                if stray := [name for name in result if name not in outputs]:
                    LOG.error(
                        "%s answered %s, which are not outputs of its event: dropped (a "
                        "misspelt output name, or an output missing from Wiring.on's list)",
                        getattr(handler, "__qualname__", fn.__name__),
                        ", ".join(map(repr, stray)),
                    )
                answer = [result.get(name, gr.skip()) for name in outputs]
                return answer if len(answer) > 1 else answer[0]  # one output: its value

        # Gradio names the API's parameters after the signature, and fills the parameters
        # annotated as a request or as event data itself.
        positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter(n, positional) for n in [*names, *API_TAIL, "request"]]
        fn.__annotations__ = {"request": gr.Request}
        if row:
            params.insert(0, inspect.Parameter("evt", positional))
            fn.__annotations__["evt"] = gr.SelectData
        if progress:  # Gradio passes its Progress to a parameter whose default is one
            params.append(inspect.Parameter("progress", positional, default=gr.Progress()))
        fn.__signature__ = inspect.Signature(params)
        fn.__name__ = getattr(handler, "__name__", "event")
        return fn

    def on(
        self,
        triggers: list,
        handler: Callable,
        inputs: Sequence[str] = (),
        outputs: Sequence[str] = (),
        *,
        stale: bool = False,
        js: str = STAMP,
        api_name: str | None = None,
        row: bool = False,
        turn: bool = True,
        progress: bool = False,
        **options,
    ):
        """Register one event: ``handler(ask, *inputs) -> {output name: value}``. The status
        line is always an output (the error sentence goes there)."""
        outputs = list(dict.fromkeys(["status", *outputs]))
        fn = self.answer(handler, list(inputs), outputs, row, turn, progress)
        page = self.page
        components = {
            "inputs": [page[n] for n in [*inputs, *TAIL]],
            "outputs": [page[n] for n in outputs],
        }
        visibility = {"api_name": api_name} if api_name else {"api_visibility": "private"}
        options = {"show_progress": "hidden", "js": js, **visibility, **BOUND, **options}
        if callable(triggers):  # one trigger that is no event of a component (a ``.then``)
            event = triggers(fn, **components, **options)
        else:
            event = gr.on(triggers, fn, **components, **options)
        if stale:  # the figures are the previous run's exactly when the stale note shows
            event.then(fn=None, js="() => ta.answered()")
        return event


def wire(page: Page, handlers: Handlers, turns: Pages) -> None:
    """Every event of the page."""
    w, p, views = Wiring(page, turns), page, handlers.views
    every = [*p.outputs, *SELECTION_FIELDS, "link_notes", "stale"]
    run_outputs = [*every, "model", "target", "checkpoint", "second", "snapshot", "positions"]
    run_outputs += ["tabs"]
    # The view in the address: read in the browser at once (its text straight into the box), then
    # opened in the queue like a run (not in the page's turn: every user action cancels a pending
    # one, and one that finishes after the user's own Run changes nothing).
    p.demo.load(
        fn=None,
        js=f"() => ta.openLink({json.dumps(TAB_IDS)}, {json.dumps(CORPORA)}, "
        f"{json.dumps(FIGURE_FIELDS)})",
        outputs=[p["text"], p["status"]],
    )
    deep = w.on(
        [p["deeplink"].click],
        views.deeplink,
        ["link"],
        run_outputs,
        stale=True,
        js="(...args) => ta.stampLink(...args)",
        turn=False,  # a user's Run may overtake it; then it changes nothing (Views.deeplink)
    )
    busy = {"show_progress_on": [p["status"]], "cancels": [deep], "stale": True}
    w.on([p["run"].click], views.run, RUN_INPUTS, every, api_name="run", **busy)
    # A snapshot or the positional-encoding switch is a new forward pass: it runs at once. (Enter
    # in a text box clicks Run itself, ui/js/core.js: Gradio's own submit never fires.)
    run_again = [p["snapshot"].input, p["positions"].input]
    w.on(run_again, views.run, RUN_INPUTS, every, **busy)
    w.on(p.examples.load_input_event.then, views.run, RUN_INPUTS, every, **busy)
    wire_typing(p, deep)
    wire_model_boxes(p)
    wire_deck(w, handlers.deck)
    wire_training(w, handlers.training)
    wire_corpus(w, handlers.corpus, deep)
    wire_patching(w, handlers.patching, run_outputs)
    wire_tabs(w, views)
    wire_selection(w, views)
    # The language switch (or a Chinese page opening with no view to open, #relang-go).
    relang = {"trigger_mode": "always_last", "show_progress_on": [p["status"]]}
    language = [*p.outputs, "snapshot"]
    w.on([p["language"].input], views.language, (), language, **relang)
    w.on(
        [p["relang"].click],
        views.language,
        (),
        language,
        js="(...args) => ta.stampLang(...args)",
        **relang,
    )
    wire_language(p.demo, p["language"])
    # ... and the examples table in the page's language (Gradio's table would show a marker).
    p.demo.load(fn=None, js=relabel_examples("examples", p.example_words))


def wire_typing(p: Page, deep) -> None:
    """Typing or picking another model marks the figures as the previous run's until Run (and
    cancels a pending deep link); another model starts with its positional encoding on: a
    switch left off from another model's lesson would make the new one look broken."""
    typing = [p[n].input for n in ("text", "target", "checkpoint", "second", "model")]
    gr.on(
        typing,
        fn=None,
        js="() => ta.markStale()",
        outputs=[p["stale"]],
        cancels=[deep],
        show_progress="hidden",
    )
    p["model"].input(fn=None, js="() => true", outputs=[p["positions"]])


def wire_model_boxes(p: Page) -> None:
    """Another model shows the boxes it reads; cheap, so outside the queue's group."""

    def on_model_pick(choice, lang="en"):
        with speaking(lang):
            found = model_boxes(choice)
        return [found["target"], found["checkpoint"], found["snapshot"]]

    p["model"].change(
        on_model_pick,
        [p["model"], p["language"]],
        [p["target"], p["checkpoint"], p["snapshot"]],
        api_visibility="private",
        show_progress="hidden",
    )

    # The positional-encoding switch: offered where it teaches, and while it is off (so it can
    # be turned on); after a model change or the switch itself, whichever lands last.
    def offer_positions(choice, positions=True, lang="en"):
        with speaking(lang):  # says nothing today; every event hears the page's language
            return model_boxes(choice, positions=positions is not False)["positions"]

    gr.on(
        [p["model"].change, p["positions"].change],
        offer_positions,
        [p["model"], p["positions"], p["language"]],
        [p["positions"]],
        api_visibility="private",
        show_progress="hidden",
        trigger_mode="always_last",
    )


def wire_tabs(w: Wiring, views: Views) -> None:
    """A tab click: the browser writes the tab box only when the visible tab really changes."""
    p = w.page
    for tab_id, block in p.tab_blocks.items():
        block.select(fn=None, js=f"() => ta.pickTab({json.dumps(tab_id)})", outputs=[p["tab_box"]])
    w.on([p["tab_box"].change], views.tab, ["tab_box"], p.outputs, trigger_mode="always_last")


def wire_training(w: Wiring, training: Training) -> None:
    """Live training (ui/tabs/train.py): start, a timer that redraws while the job works (and
    tells the server the page still watches), stop, download. Outside the page's turn: a Run
    never waits for a redraw of the training, nor the training's redraw for a Run."""
    p = w.page
    shown = ["train_status", "train_plot", "train_weights", "train_use", "train_timer"]
    free = {"turn": False, "trigger_mode": "always_last"}
    asked = ["train_task", "train_steps", "train_positions"]
    w.on([p["train_start"].click], training.start, asked, shown)
    w.on([p["train_timer"].tick], training.tick, (), shown, **free)
    w.on([p["train_stop"].click], training.stop, (), ["train_status"], turn=False)
    w.on([p["train_save"].click], training.save, (), ["train_weights"])
    # "Use this model": the page's model joins its model list and opens on the Output tab, as a
    # run would (then the browser's visible tab follows, as after a tab click).
    opened = [*p.outputs, *SELECTION_FIELDS, "link_notes", "stale", "model", "target"]
    opened += ["checkpoint", "snapshot", "positions", "tabs", "text"]
    used = w.on(
        [p["train_use"].click],
        training.use,
        (),
        opened,
        stale=True,
        show_progress_on=[p["status"]],
    )
    used.then(fn=None, js="() => ta.pickTab('output')", outputs=[p["tab_box"]])


def wire_corpus(w: Wiring, corpus: Corpus, deep) -> None:
    """The Heads tab's corpus (ui/tabs/heads.py build_corpus): measured for the page's last run
    model, in the page's turn like a run; the table shows Gradio's progress while it works. A
    deep link's corpus (``corpus=en``) is measured once the link's view is open."""
    p = w.page
    inputs = ["corpus_text", "corpus_sample", "corpus_upload"]
    outputs = ["corpus_said", "corpus_table", "corpus_csv", "corpus_npz", "corpus_distance_plot"]
    progress = {"show_progress": "full", "show_progress_on": [p["corpus_table"]]}
    ran = w.on([p["corpus_run"].click], corpus.run, inputs, outputs, **progress)
    linked = w.on(deep.then, corpus.link, (), [*outputs, "corpus_sample"], **progress)
    for event in (ran, linked):  # the address follows the status line's link (corpus=en)
        event.then(fn=None, js="() => ta.followLink()")


def wire_patching(w: Wiring, patching: Patching, run_outputs: list[str]) -> None:
    """Which heads matter (ui/tabs/patching.py): a shipped pair runs its clean text and fills
    the tab's boxes, then the page presses Patch (its own queue: ui.tabs.base.Tab.own_queue). A
    link that opens the tab with a pair is patched with its view (Views.deeplink)."""
    p = w.page
    outputs = [*run_outputs, "text", "pair", "answer", "wrong", "read_at"]
    picked = w.on(
        [p["pair_example"].input],
        patching.example,
        ["pair_example"],
        outputs,
        stale=True,
        show_progress_on=[p["status"]],
    )
    picked.then(fn=None, js="() => ta.clickPatch()")


def wire_deck(w: Wiring, deck: Deck) -> None:
    """The lecture deck (ui/js/deck.js, ui/deck.py): a slide's text goes into the box from the
    browser (no typing event fires), and the offline file is made on the server."""
    p = w.page
    p["deck_go"].click(fn=None, js="() => ta.deckText()", outputs=[p["text"]])
    made = w.on(
        [p["deck_export"].click],
        deck.deck_file,
        ["deck_box"],
        ["deck_file"],
        js="(...args) => ta.deckArgs(...args)",
        show_progress_on=[p["status"]],
    )
    made.then(fn=None, js="() => ta.deckSaved()")


def wire_selection(w: Wiring, views: Views) -> None:
    """Selection controls, head picks and action buttons redraw what reads them, from the cache."""
    p = w.page
    # a pick names a head, and an encoder-decoder circuit's head its stack too
    picked = {o for t in TABS for n in ("layer", "head", "stack") for o in t.redrawn_by(n)}
    pick_outputs = ["layer", "head", "stack", *sorted(picked)]
    always_last = {"trigger_mode": "always_last"}
    for name in p.picks:  # "layer,head[,stack]" written by the browser (a tile's click)
        w.on([p[name].change], views.pick, [name], pick_outputs, **always_last)
    for table in p.row_picks:  # a clicked row of a table whose rows are heads
        w.on([p[table].select], views.row_pick, [], pick_outputs, row=True)
    for name in SELECTION_FIELDS:
        redrawn = sorted({o for tab in TABS for o in tab.redrawn_by(name)})
        # The browser redraws first where it can (ta.gate); the server only when needed.
        trigger = p.gates[name].change if name in p.gates else p[name].input
        w.on([trigger], selecting(views, name), (), redrawn, **always_last)
    for action, button in p.actions.items():
        drawn_by = sorted({o for tab in TABS for o in tab.redrawn_by(action)})
        alone = any(action in tab.own_queue for tab in TABS)
        # One queue for every such action (Patch, and How the heads connect's comparison and
        # circuit, which patch too): two of them never hold the CPU share at once.
        queue = {"concurrency_id": "alone-patch", "concurrency_limit": 1} if alone else {}
        if action in PUBLIC_ACTIONS:  # an API client asks for it too, after /run
            queue["api_name"] = action
        if action == "patch":  # seconds on a real language model: its progress over the grid
            queue |= {"progress": True, "show_progress": "full"}
            queue["show_progress_on"] = [p["patch_heads_plot"]]
        w.on([button.click], selecting(views, action), (), drawn_by, **queue)
    wire_gates(p)


def costly_draws(p: Page) -> Callable:
    """``serve.idle.quiet_queue``'s ``costly``: a tab switch to a tab whose actions wait in a
    queue of their own (Which heads matter, How the heads connect): opened on a pair the server
    has not measured, it runs the pair and its attribution grids (~50 core-ms, several times a
    Run's draw). The queue lets the others' requests pass such switches beyond two at once."""
    box = p["tab_box"]
    tabs = {tab.id for tab in TABS if tab.own_queue}

    def costly(event) -> bool:
        fn, body = event.fn, event.data
        if body is None or not any(tuple(t) == (box._id, "change") for t in fn.targets or ()):
            return False
        at = [block._id for block in fn.inputs].index(box._id)
        # Any JSON may come in a field: a dict or a list is no tab (and no set key).
        value = body.data[at] if at < len(body.data) else None
        return isinstance(value, str) and value in tabs

    return costly


def selecting(views: Views, name: str) -> Callable:
    def handler(ask: Ask) -> dict:
        return views.selection(ask, name)

    handler.__name__ = f"select_{name}"
    return handler


def wire_gates(p: Page) -> None:
    """A selection change the browser can redraw by itself (a tab's ``in_browser`` outputs)
    goes through ta.gate, which writes the field's gate box only when the server must draw."""
    switching = [tab for tab in TABS if tab.in_browser]
    names = list(dict.fromkeys(n for tab in switching for n in tab.switch_inputs))
    for name, gate in p.gates.items():
        plan = {
            "field": name,
            "server": [tab.id for tab in TABS if tab.server_redraws(name)],
            "browser": {
                tab.id: [names.index(n) for n in tab.switch_inputs]
                for tab in switching
                if tab.browser_redraws(name)
            },
        }
        js = f"(...args) => ta.gate({json.dumps(plan)}, ...args)"
        p[name].input(fn=None, js=js, inputs=[p[n] for n in names], outputs=[gate])
