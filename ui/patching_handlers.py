"""Which heads matter's shipped pairs (``ui.patching_measures.PAIRS``): picking one runs its
clean text on its model (or on the language model the page has open) with the corrupt text, answer
and position in the tab's boxes; the page then presses Patch (ui/js/patching.js). Handlers as in
ui/handlers.py: ``(ask, *inputs) -> {output name: value}``."""

from __future__ import annotations

from dataclasses import replace

from engine import CUSTOM_PREFIX, Engine, InputError, is_live, task_of
from lang import Msg
from ui.handlers import CUSTOM, Ask, Views, model_boxes
from ui.patching_inputs import read_position
from ui.patching_measures import PAIRS_BY_ID, Pair, pairs_for
from ui.state import ViewState
from ui.tabs.patching import TAB


class Patching:
    """The shipped pairs' handler, over the engine and the views (the page's last run)."""

    def __init__(self, engine: Engine, views: Views) -> None:
        self.engine, self.views = engine, views

    def model_for(self, pair: Pair, latest: str) -> str:
        """The model a pair runs on: the page's language model for an LM pair; the page's own
        model trained on the Train tab where it has the pair (its task's, its lesson reached);
        else the pair's shipped model."""
        if pair.model == "lm":
            return latest
        if is_live(latest) and task_of(latest) == pair.model:
            try:
                if pair in pairs_for(self.engine.model(latest)):
                    return latest
            except InputError:  # the page's model is gone: the shipped one
                pass
        return pair.model

    def example(self, ask: Ask, choice) -> dict:
        """Run a shipped pair's clean text and fill the tab's boxes with the rest of it."""
        pair = PAIRS_BY_ID.get(choice) if isinstance(choice, str) else None
        if pair is None:
            return {}
        latest = self.views.latest(ask)
        model_id = self.model_for(pair, latest.model)
        loaded = self.engine.model(model_id)
        if pair not in pairs_for(loaded):
            raise InputError(Msg("This pair is for another model: open that model first."))
        position = read_position(loaded, pair.clean, pair.read)  # an encoder's word: "it"
        read = "" if position is None else str(position)
        sel = replace(ask.sel, pair=pair.corrupt, answer=pair.answer, wrong=pair.wrong)
        sel = replace(sel, read_at=read, stack=pair.stack or sel.stack)
        state = ViewState(pair.clean, model_id, "", latest.second, TAB.id, sel, positions=True)
        result = self.views.run_state(replace(ask, tab=TAB.id, sel=sel), state)
        name = CUSTOM if model_id.startswith(CUSTOM_PREFIX) else model_id
        boxes = model_boxes(name)
        if name == CUSTOM:
            boxes["checkpoint"]["value"] = model_id.removeprefix(CUSTOM_PREFIX)
        return {
            **result,
            **boxes,
            "text": pair.clean,
            "model": name,
            "pair": pair.corrupt,
            "answer": pair.answer,
            "wrong": pair.wrong,
            "read_at": read,
        }
