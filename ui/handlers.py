"""What each event does: plain functions from the view state to ``{output name: value}``.

No Gradio component appears here (values may be ``gr.update(...)``): a handler is called with an
``Ask`` (the visible tab, the selection, the page's language and id) and the event's own inputs
by name, and returns the outputs it changes by name (ui/layout.py names them). ui/events.py
registers them, so a handler can be tested by calling it.

The page's last run and what each of its tabs already shows live in ``Sessions`` (one owner,
server side, keyed by the page's id): a redraw reads the latest run even when the browser's
event left before that run was answered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import gradio as gr

from engine import (
    CUSTOM_PREFIX,
    MAX_CHARS,
    Analysis,
    Engine,
    InputError,
    cpu_share,
    is_live,
    n_params,
    positions_of,
    task_of,
    well_formed,
)
from lang import LOCALE, Msg, tr
from model import PRESETS, TRAINED
from serve.lru import LockedLRU
from serve.memory import release_freed_memory, release_when_settled
from serve.training import Trainings
from ui.fields import Whole, as_int
from ui.i18n import t
from ui.layout import FINAL, STACK_LABELS
from ui.render import DRAWN, own_copy, render, slide_figure, slide_ready
from ui.state import (
    API,
    RULES,
    SELECTION_FIELDS,
    Client,
    Selection,
    ViewState,
    parse_link,
    share_link,
)
from ui.status import sentence, status_markdown
from ui.tabs import BY_ID, TAB_IDS
from viz.common import md_literal, stack_tokens

CUSTOM = "custom"
# Token positions from which a tab's drawing frees enough (figures, replayed fields and norms grow
# with the text's square) to be worth handing back to the OS at once; a trim is cheap beside it.
BIG_DRAW = 256
RUN_INPUTS = ("text", "model", "checkpoint", "target", "second", "snapshot", "positions")


@dataclass(frozen=True)
class Ask:
    """Who asks and what they see: the visible tab, the selection, the language, the page."""

    tab: str = "tokens"
    sel: Selection = Selection()
    lang: str = "en"
    page: str | None = None  # the page's id (or an API session's); None: nobody to remember
    client: Client = API


@dataclass
class Session:
    run: ViewState | None = None
    # tab -> the signature of what it shows; (ON_DEMAND, tab) -> its on-demand outputs shown
    seen: dict = field(default_factory=dict)
    corpus: tuple[str, str] | None = None  # (model, sample): the shipped corpus last measured
    linked_corpus: str = ""  # the sample a deep link names, measured once its view is open


class Sessions:
    """Each page's last run and what its tabs show, for at most ``size`` pages (LRU)."""

    def __init__(self, size: int = 1_000) -> None:
        self.size = size
        self._items: LockedLRU[str, Session] = LockedLRU(size)

    def of(self, page: str | None) -> Session:
        if not page:
            return Session()
        return self._items.setdefault(page, Session())

    def __len__(self) -> int:
        return len(self._items)


def capped(value, what: str, limit: int = MAX_CHARS) -> tuple[str, list]:
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


def snapshot_choices(choice: str, step: int | None = None) -> dict:
    """The snapshot picker for a model: its steps in the page's language, and the value."""
    name = str(choice).partition("@")[0]
    snapshots = TRAINED[name]["snapshots"] if name in TRAINED else []
    steps = [(tr("step {step}", step=s), str(s)) for s in snapshots[:-1]]
    steps.append((tr("final (step {step})", step=snapshots[-1]) if snapshots else FINAL, FINAL))
    value = FINAL if step is None or not snapshots or step == snapshots[-1] else str(step)
    return gr.update(choices=steps, value=value, visible=bool(snapshots))


def positions_teach(name: str) -> bool:
    """Whether switching the positional encoding off teaches something with this model: word
    order in BERT and the seeds' architectures, who-did-what in the roles model. The trained
    decoders (dates, induction) only break without it, confidently (a screen full of "2020…"
    looks like a broken model, not a lesson), so the switch is not offered there."""
    return name not in TRAINED or name == "roles"


def model_boxes(choice, step: int | None = None, positions: bool = True) -> dict:
    """Another model was picked: show the boxes it reads (target, checkpoint, snapshots) and the
    positional-encoding switch where it teaches (or while it is off, so it can be turned on)."""
    name = task_of(choice)  # a model trained on this page: its task's architecture
    arch = PRESETS[name].arch if name in PRESETS else None
    if name in TRAINED:
        arch = TRAINED[name]["config"]["arch"]
    return {
        "target": gr.update(visible=arch == "encoder-decoder"),
        "checkpoint": gr.update(visible=choice == CUSTOM),
        "snapshot": snapshot_choices("" if is_live(choice) else name, step),
        "positions": gr.update(visible=positions_teach(name) or not positions),
    }


# session.seen's key for the on-demand outputs a tab shows: (ON_DEMAND, tab) -> (what they were
# drawn for: on_demand_mark, the outputs drawn).
ON_DEMAND = "on demand"


def on_demand_mark(analysis, tab: str, sel: Selection, second: str) -> str:
    """The run and the tab's fields that on-demand outputs were drawn for (the language apart;
    the selection as the page shows it, clamped to the model: a link's stack may name none)."""
    return repr((analysis.key, BY_ID[tab].read_of(sel.clamp(analysis.bounds)), second))


def signature_of(state: ViewState, analysis, sel: Selection, only=None) -> str:
    """What a page shows of the state's tab drawn with ``sel`` (``only``: those outputs): the
    run, the fields the tab reads, the measures it reads beside them (Tab.measured), the second
    text, the outputs, the language."""
    tab = BY_ID[state.tab]
    measured = tab.measured_of(analysis, sel.clamp(analysis.bounds))
    shown = tab.read_of(sel)  # the fields a tab reads (a change of others leaves it)
    return repr((analysis.key, shown, measured, state.second, sorted(only or []), LOCALE.get()))


def shown_now(seen: dict, state: ViewState, analysis, signature: str, only, values) -> dict:
    """A page's ``seen`` after the state's tab was drawn (``only``: those outputs) as ``values``."""
    tab, demand = BY_ID[state.tab], (ON_DEMAND, state.tab)
    if only is None:  # the whole tab: its on-demand outputs were cleared
        return {**{k: v for k, v in seen.items() if k != demand}, state.tab: signature}
    if (
        tab.own_queue
        and set(only) <= tab.on_demand
        and str(seen.get(state.tab)).startswith(f"({analysis.key!r}, ")
    ):
        # A patched pair (on-demand outputs of a tab whose action waits in a queue of its own)
        # over a tab that shows this run: it still does, with them and the boxes they filled,
        # and coming back to the tab keeps them. Which of them show is kept too: the tab drawn
        # again in another language or for another window draws them again (Views.language).
        filled = tab.filled(state.sel, values)
        whole = signature_of(state, analysis, filled)  # as measured now
        mark = on_demand_mark(analysis, state.tab, filled, state.second)
        before, drawn = seen.get(demand, ("", frozenset()))
        drawn = frozenset(only) | (drawn if before == mark else frozenset())
        return {**seen, state.tab: whole, demand: (mark, drawn)}
    return {k: v for k, v in seen.items() if k != state.tab}


class Views:
    """The view handlers (run, tab, selection, pick, language, deep link) over one engine, the
    pages' sessions and the page's defaults. ``trainings``: whose page a model trained on the
    page is (a run names it). app.py builds it and its peers (``Training``, the corpus's
    ``Corpus``, the deck's ``Deck``), and hands each what it needs."""

    def __init__(
        self,
        engine: Engine,
        sessions: Sessions,
        trainings: Trainings,
        default: ViewState,
        models: set[str],
        choices=(),
    ) -> None:
        self.engine, self.sessions, self.trainings = engine, sessions, trainings
        self.default, self.models = default, models
        # The model list as the page shows it ((label, id), labels translated in the browser).
        self.choices = [(t(label), value) for label, value in choices]

    # ---- drawing ---------------------------------------------------------------------------
    def draw(self, state: ViewState, seen: dict, only=None, force=False, client=API):
        """(analysis, {output: value}, seen) for the state's tab; skips what the page shows."""
        tab = BY_ID[state.tab]
        engine = self.engine
        analysis = engine.analyse(state.text, state.model, state.target, positions=state.positions)
        batch = None
        if tab.needs_batch:
            batch = engine.analyse(
                state.text, state.model, state.target, state.second, positions=state.positions
            )
        # The language is part of what was drawn: a tab drawn in English is drawn again in Chinese.
        signature = signature_of(state, analysis, state.sel, only)
        if (not force and seen.get(state.tab) == signature) or (only is not None and not only):
            return analysis, {}, seen
        trace = analysis.trace
        positions = positions_of({"input_ids": trace.input_ids, "tgt_ids": trace.tgt_ids})
        # Drawing a big trace's views is work like its forward pass (norms, replayed Q/K/V, a
        # 512-token figure): it takes a pass's slot and CPU share too (serve.cpu). Half the
        # trace's size is reserved for what drawing adds (replayed Q/K/V: up to 50 %).
        # Every page that opens the same view (a lecture hall opening the lecturer's link) gets
        # the outputs the first one drew (ui.render.DRAWN).
        key = (signature, state.tab, state.model, state.text, state.positions, client)
        values = DRAWN.get(key)
        if values is None:
            sel = state.sel.clamp(analysis.bounds)
            with cpu_share(positions, n_params(analysis.model.net), trace.nbytes() // 2):
                values = render(state.tab, analysis, sel, batch, only, client)
            values = DRAWN.put(key, self.finished(values, state, sel, client.screen))
            if positions >= BIG_DRAW:  # its temporaries go back to the OS now, not at the next
                release_freed_memory()  # trace, which may be long in coming
                release_when_settled()  # and what its results free later
        seen = shown_now(seen, state, analysis, signature, only, values)
        return analysis, own_copy(values), seen

    @staticmethod
    def finished(values: dict, state: ViewState, sel: Selection, screen=None) -> dict:
        """Figures leave slide-ready (model and text in the title, 3× PNG), laid out for the
        asking page's ``screen`` (viz.screen), and say on the figure itself what is not the
        model's default: a snapshot before the end of training, or the positional encoding
        switched off."""
        model = state.model.removeprefix(CUSTOM_PREFIX).rstrip("/").rsplit("/", 1)[-1]
        name, _, step = model.partition("@")
        notes = [tr("training step {step}", step=step)] if step else []
        if is_live(state.model):  # its secret id stays out of titles and file names
            name, model = task_of(state.model), f"{task_of(state.model)}-trained-here"
            notes = [tr("trained on this page")]
        if not state.positions:
            notes.append(tr("positional encoding off"))
        label = " · ".join([name, *notes])
        heads = {  # a download's name says which head it holds
            "head_plot": f"L{sel.layer}H{sel.head}",
            "compare_plot": f"L{sel.layer_a}H{sel.head_a}-L{sel.layer_b}H{sel.head_b}",
        }

        def finish(out: str, value):
            def slide(fig):
                return slide_ready(fig, out, model, state.text, label, heads.get(out), screen)

            if hasattr(value, "layout"):
                return slide(value)
            if hasattr(value, "slides"):  # figures the page draws itself (ui.tabs.layer)
                return value.slides(lambda fig: slide_figure(fig, label, state.text, screen))
            return value

        return {out: finish(out, value) for out, value in values.items()}

    def status_of(self, analysis: Analysis, state: ViewState, notices=(), page=None) -> str:
        """The status line; its link names the shipped corpus the page measured last, while the
        view's model is the one it was measured with (a pasted corpus never goes into a link)."""
        measured = self.sessions.of(page).corpus if page else None
        corpus = measured[1] if measured and measured[0] == state.model else ""
        link = share_link(replace(state, sel=state.sel.clamp(analysis.bounds), corpus=corpus))
        if LOCALE.get() != "en":  # a shared link opens in the language it was made in
            link += "&lang=" + LOCALE.get()
        return status_markdown(analysis, [*notices, *analysis.notices], link)

    @staticmethod
    def selector_updates(analysis: Analysis, sel: Selection) -> dict:
        """New bounds for the model; a value only where it had to be clamped, so a control the
        user moved while this run was working keeps its new value."""
        bounds = analysis.bounds
        clamped = sel.clamp(bounds)
        stacks = [(STACK_LABELS[s], s) for s in bounds.stacks]
        updates = {"stack": gr.update(choices=stacks, value=clamped.stack)}
        for name, rule in RULES.items():
            if not isinstance(rule, Whole) or rule.bound is None:
                continue
            last = rule.top(bounds.last[clamped.stack])
            if rule.bound not in ("layer", "head"):  # one token or step: a slider still, 0–1
                last = max(last, 1)
            value = getattr(clamped, name)
            changed = value != getattr(sel, name)
            updates[name] = gr.update(maximum=last, **({"value": value} if changed else {}))
        return {**updates, **position_bounds(analysis, sel)}

    def latest(self, ask: Ask) -> ViewState:
        """The page's last run on the visible tab with the selection the page sent."""
        run = self.sessions.of(ask.page).run or self.default
        return replace(run, tab=ask.tab, sel=ask.sel)

    def redraw(self, ask: Ask, state: ViewState, only=None, fixed: dict | None = None):
        """(analysis or None, outputs) for a redraw of the state's tab from the cache, with the
        ``fixed`` outputs sent either way; an error is one sentence in the status line."""
        fixed = dict(fixed or {})
        session = self.sessions.of(ask.page)
        try:
            analysis, values, seen = self.draw(state, session.seen, only=only, client=ask.client)
        except Exception as exc:
            return None, {**fixed, "status": status_markdown(None, [sentence(exc)], None)}
        session.seen = seen
        status = self.status_of(analysis, state, page=ask.page)
        return analysis, {**fixed, "status": status, **values}

    # ---- the events ------------------------------------------------------------------------
    def run(self, ask: Ask, text, model, checkpoint, target, second, snapshot, positions) -> dict:
        """Run (or re-use) the forward pass for these inputs and draw the visible tab."""
        try:
            text, notices = capped(text, "Text")
            text = text.rstrip("\r\n")  # a trailing new line is never a token
            target, more = capped(target, "Target text")
            second, more2 = capped(second, "The second sentence")
            checkpoint, _ = capped(checkpoint, "The checkpoint", 1_000)
            if not isinstance(model, str):
                raise InputError(Msg("Model must be one of the listed model names."))
        except InputError as exc:
            return {"status": status_markdown(None, [sentence(exc)], None)}
        model_id = CUSTOM_PREFIX + checkpoint.strip() if model == CUSTOM else model
        if is_live(model_id) and model_id != self.trainings.model_id(ask.page or ""):
            said = tr(
                "The model trained on this page is gone (trained again, or the page was "
                "closed a while): train it again on the Train tab."
            )
            return {"status": status_markdown(None, [said], None)}
        step = str(snapshot)
        if model_id in TRAINED and step in map(str, TRAINED[model_id]["snapshots"][:-1]):
            model_id = f"{model_id}@{step}"  # a step of another model means: final
        positions = positions is not False  # only an explicit False turns it off
        state = ViewState(text, model_id, target, second, ask.tab, ask.sel, positions)
        return self.run_state(ask, state, [*notices, *more, *more2])

    def run_state(self, ask: Ask, state: ViewState, notices=(), unless_newer=False) -> dict:
        """Draw ``state`` as the page's new run. ``unless_newer``: nothing, when the page ran
        something else meanwhile (a late deep link never replaces what the user ran)."""
        session = self.sessions.of(ask.page)
        before = session.run
        try:
            analysis, values, seen = self.draw(state, {}, force=True, client=ask.client)
        except Exception as exc:  # the old figures stay, marked as the previous run's
            notes = [*notices, sentence(exc)]
            return {"status": status_markdown(None, notes, None), "stale": gr.update(visible=True)}
        if unless_newer and session.run is not before:
            return {}
        session.run, session.seen = state, seen
        return {
            "status": self.status_of(analysis, state, notices, ask.page),
            "link_notes": "",
            "stale": gr.update(visible=False),
            **self.selector_updates(analysis, state.sel),
            **values,
        }

    def tab(self, ask: Ask, tab_box) -> dict:
        """Another tab is visible: draw it (nothing when it already shows this run and what it
        reads was not measured since: a pair patched on Which heads matter draws How the heads
        connect again, with what its actions drew for that pair)."""
        tab = str(tab_box).partition("|")[0]
        if tab not in TAB_IDS:
            said = tr("There is no tab {tab}.", tab=repr(tab[:40]))
            return {"status": status_markdown(None, [said], None)}
        ask = replace(ask, tab=tab)
        latest = self.latest(ask)
        demand = self.sessions.of(ask.page).seen.get((ON_DEMAND, tab), ("", frozenset()))
        analysis, result = self.redraw(ask, latest)
        if BY_ID[tab].eager & result.keys():  # drawn anew
            result.update(self.demanded_again(ask, latest, analysis, *demand))
        return result

    def selection(self, ask: Ask, name: str) -> dict:
        """A selection control changed (or an action button): redraw what reads it."""
        only = BY_ID[ask.tab].redrawn_by(name)
        if not only:
            return {}
        return self.redraw(ask, self.latest(ask), only=only)[1]

    def pick(self, ask: Ask, picked) -> dict:
        """A head was picked (an overview tile, a table row, a circuit's node: "layer,head", an
        encoder-decoder's "layer,head,stack"): select it and redraw what shows it."""
        match = re.match(
            r"\s*(\d{1,4})\s*,\s*(\d{1,4})(?:\s*,\s*(encoder|decoder|cross)\b)?", str(picked or "")
        )
        if match is None:
            return {}
        sel = replace(ask.sel, layer=int(match[1]), head=int(match[2]))
        tab = BY_ID[ask.tab]
        only = tab.redrawn_by("layer") | tab.redrawn_by("head")
        if match[3]:  # a head of an encoder-decoder's circuit names its stack
            sel, only = replace(sel, stack=match[3]), only | tab.redrawn_by("stack")
        analysis, result = self.redraw(ask, self.latest(replace(ask, sel=sel)), only=only)
        if analysis is not None:  # the sliders show the head, clamped to this model
            clamped = sel.clamp(analysis.bounds)
            result.update({"layer": clamped.layer, "head": clamped.head})
            if match[3]:
                result["stack"] = clamped.stack
        return result

    def row_pick(self, ask: Ask, row) -> dict:
        """A table row (layer, head, …) was clicked: select that head everywhere."""
        row = list(row or [])
        return self.pick(ask, f"{row[0]},{row[1]}") if len(row) >= 2 else {}

    def language(self, ask: Ask) -> dict:
        """The page's language changed, or a presenting page's window (ui/js/present.js): draw the
        visible tab and the status line again in it, for the page's screen."""
        latest = self.latest(ask)
        name = latest.model.partition("@")[0]
        steps = snapshot_choices(name)["choices"]  # relabelled, the value kept
        session = self.sessions.of(ask.page)
        demand = session.seen.get((ON_DEMAND, ask.tab), ("", frozenset()))
        session.seen = {}
        fixed = {"snapshot": gr.update(choices=steps)}
        analysis, result = self.redraw(ask, latest, fixed=fixed)
        result.update(self.demanded_again(ask, latest, analysis, *demand))
        return result

    def demanded_again(self, ask: Ask, latest: ViewState, analysis, mark, demanded) -> dict:
        """What the tab's action drew for the pair still in its boxes (a circuit found, heads
        patched), drawn again from the measures kept after the whole tab was: present.js asks for
        the tab laid out for a new window that way (a lecturer's F11 must not lose the circuit),
        and a tab whose measures changed meanwhile is drawn again on its return."""
        same = analysis and mark == on_demand_mark(analysis, ask.tab, latest.sel, latest.second)
        if not (demanded and same):
            return {}
        return self.redraw(ask, latest, only=set(demanded))[1]

    def deeplink(self, ask: Ask, query) -> dict:
        """Open the view a link describes; change nothing when the address holds none."""
        if not isinstance(query, str) or not query.strip("?"):
            return {}
        self.sessions.of(ask.page).linked_corpus = ""  # an older link's, never measured now
        state, invalid = parse_link(query, self.models, TAB_IDS, self.default)
        state = replace(state, text=well_formed(state.text)[:MAX_CHARS])
        result = self.run_state(
            replace(ask, tab=state.tab, sel=state.sel), state, unless_newer=True
        )
        if not result:
            return {}
        # The link's corpus is measured next (ui.corpus_handlers.Corpus.link), once this view shows.
        self.sessions.of(ask.page).linked_corpus = state.corpus
        action = BY_ID[state.tab].linked
        if action and state.sel.pair.strip():  # a link's pair, patched (or its circuit found)
            linked = replace(ask, tab=state.tab, sel=state.sel)
            only = BY_ID[state.tab].redrawn_by(action)
            result.update(self.redraw(linked, self.latest(linked), only=only)[1])
        result["link_notes"] = "  \n".join(
            tr("⚠️ Link parameter ignored: {reason}.", reason=md_literal(reason))
            for reason in invalid
        )
        name, _, step = state.model.partition("@")
        if name.startswith(CUSTOM_PREFIX):  # a listed checkpoint: the box holds its name
            name, step, source = CUSTOM, "", name.removeprefix(CUSTOM_PREFIX)
        boxes = model_boxes(name, int(step) if step else None, state.positions)
        if name == CUSTOM:
            boxes["checkpoint"]["value"] = source
        boxes["target"]["value"] = state.target
        boxes["positions"]["value"] = state.positions
        result.update(boxes)
        result.update(  # the text: already in the box (the browser read the address)
            model=name,
            second=state.second,
            tabs=gr.Tabs(selected=state.tab),
        )
        for name in SELECTION_FIELDS:  # the link's selection (clamped values are already there)
            update = result.get(name)
            if isinstance(update, dict):
                update.setdefault("value", getattr(state.sel, name))
            else:
                result[name] = getattr(state.sel, name)
        return result


def position_bounds(analysis: Analysis, sel: Selection | None = None) -> dict:
    """The score breakdown's query and key sliders (the Heads tab) end at this text's last
    position: the longest of the trace's stacks (a view clamps to its own stack's), at least 1.
    A value only where it had to be lowered."""
    trace, updates = analysis.trace, {}
    lengths = [tuple(map(len, stack_tokens(trace, stack))) for stack in trace.stacks]
    for name, last in zip(("query", "key"), map(max, zip(*lengths, strict=True)), strict=True):
        last = max(last - 1, 1)
        value = as_int(getattr(sel, name, 0)) if sel is not None else 0
        updates[name] = gr.update(maximum=last, **({"value": last} if value > last else {}))
    return updates


def as_float(value, default: float) -> float:
    """A number from any input (the seconds slider); ``default`` for anything else."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return number if number == number else default  # NaN: the default


def said(exc: Exception) -> str:
    """The status line for an exception no handler expected (ui/events.py)."""
    return status_markdown(None, [sentence(exc)], None)
