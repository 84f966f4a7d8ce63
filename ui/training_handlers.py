"""The Train tab's handlers (ui/tabs/train.py): start, tick, stop, save, and ``use``, which
opens the page's trained model in every tab through ``Views``. Handlers as in ui/handlers.py:
``(ask, *inputs) -> {output name: value}``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gradio as gr

from engine import InputError, LoadedModel, task_of
from lang import Msg, tr
from serve.training import Trainings
from train.progress import below_lesson, percent
from ui.handlers import Ask, Views, as_float, model_boxes
from ui.render import laid_out
from ui.state import ViewState
from viz.training import progress_bar, progress_figure

# What a model trained on the page reads first in the other tabs, unless the page's last run was
# on a model of the same task (then its text: the same text, shipped model against this one).
TRY_TEXT = {"induction": "hello hello", "dates": "2026年11月22日", "roles": "我喜欢你"}


def short_of_lesson(card: dict) -> Msg | None:
    """How a model trained on the page falls short of its lesson ("it has not reached its
    lesson: 56% of 90%"), or None where it reached it (or trained blind to order, where a low
    score is the lesson)."""
    scores = card.get("scores") or {}
    positions = card.get("train", {}).get("positions") is not False
    if not below_lesson(scores.get("held_out"), scores.get("lesson"), positions):
        return None
    score, lesson = percent(scores["held_out"]), percent(scores["lesson"])
    return Msg("it has not reached its lesson: {score} of {lesson}", score=score, lesson=lesson)


class Training:
    """The Train tab's handlers (ui/tabs/train.py) over the server's one line of trainings
    (serve/training.py): each page starts, watches, stops, saves and uses its own job only.
    ``views`` opens a trained model in every tab (``use``: a run); app.py makes the engine find
    a page's model through ``loaded``."""

    def __init__(self, trainings: Trainings, views: Views) -> None:
        self.trainings, self.views = trainings, views

    def loaded(self, model_id: str) -> LoadedModel | None:
        """A page's trained model as the engine serves it (None once it is gone)."""
        job = self.trainings.by_id(model_id)
        if job is None:
            return None
        said = (
            "{name} (trained on this page, {steps} steps)"
            if job.positions
            else "{name} (trained on this page without positional encoding, {steps} steps)"
        )
        label = Msg(said, name=job.name, steps=f"{job.net.card['steps']:,}")
        short = short_of_lesson(job.net.card)
        if short:  # in every tab's status line: not the lesson's model
            label = Msg("{model}; {short}", model=label, short=short)
        return LoadedModel(model_id, label, job.net, job.net.tokenizer, False, trained=job.name)

    def use(self, ask: Ask) -> dict:
        """Open the page's trained model in every other tab: it joins the model list (this
        page's only) and its Output tab opens on the task's text."""
        model_id = self.trainings.model_id(ask.page or "")
        if model_id is None:
            raise InputError(Msg("Train a model first: this page has no trained model yet."))
        last, task = self.views.latest(ask), task_of(model_id)
        text = last.text if task_of(last.model) == task else TRY_TEXT[task]
        state = ViewState(text, model_id, "", last.second, "output", ask.sel)
        result = self.views.run_state(replace(ask, tab="output"), state)
        if "link_notes" not in result:  # it did not run: stay, the status line says why
            return result
        job = self.trainings.by_id(model_id)
        label = (
            tr("{name} — trained on this page", name=task)
            if job is None or job.positions
            else tr("{name} — trained on this page without positional encoding", name=task)
        )
        short = short_of_lesson(job.net.card) if job is not None else None
        if short:  # the model list says so too: it is offered, but not as the lesson's
            label = tr("{model}; {short}", model=label, short=tr(short))
        choices = [*self.views.choices, (label, model_id)]
        boxes = model_boxes(model_id)
        boxes["target"]["value"] = ""
        boxes["positions"]["value"] = True
        return {
            **result,
            **boxes,
            "model": gr.update(choices=choices, value=model_id),
            "text": text,
            "tabs": gr.Tabs(selected="output"),
        }

    def start(self, ask: Ask, task, steps, positions=True) -> dict:
        """Start (or queue) this page's training of at most `steps` (until its lesson); the timer
        then redraws it every second."""
        if not ask.page:
            raise InputError(Msg("Training needs the page open in a browser."))
        steps, positions = as_float(steps, 0.0), positions is not False  # 0: the task's own
        said = self.trainings.start(ask.page, str(task), steps, positions=positions)
        return {
            "train_status": said,
            "train_plot": None,
            "train_weights": gr.update(value=None, visible=False),
            "train_use": gr.update(visible=False),
            "train_timer": gr.Timer(active=True),
        }

    def tick(self, ask: Ask) -> dict:
        """How this page's training stands: the sentence and the figure; the timer stops when
        it has ended."""
        if not ask.page:
            return {"train_timer": gr.Timer(active=False)}
        self.trainings.touch(ask.page)
        progress = self.trainings.progress(ask.page)
        result = {"train_status": self.trainings.status(ask.page)}
        if progress is not None:  # the bar of the time spent above the sentence
            result["train_status"] = f"{progress_bar(progress)}  \n{result['train_status']}"
            result["train_plot"] = laid_out(progress_figure(progress), ask.client.screen)
        if not self.trainings.working(ask.page):
            result["train_timer"] = gr.Timer(active=False)
            ready = self.trainings.model_id(ask.page) is not None
            result["train_use"] = gr.update(visible=ready)
        return result

    def stop(self, ask: Ask) -> dict:
        if ask.page:
            self.trainings.stop(ask.page)
        return {"train_status": self.trainings.status(ask.page or "")}

    def save(self, ask: Ask) -> dict:
        """This page's trained weights and card, as two downloads (bounded like every export)."""
        import tempfile

        from serve import exports

        with tempfile.TemporaryDirectory() as folder:
            weights, card = self.trainings.save(ask.page or "", Path(folder))
            paths = [exports.EXPORTS.write(f.name, f.read_bytes()) for f in (weights, card)]
        return {"train_weights": gr.update(value=paths, visible=True)}
