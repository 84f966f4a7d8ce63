"""A model trained on the Train tab opens in every other tab (issue 21): under a secret id that
only its page holds, new for every training; the Output tab says what the model read of the text
and opens at the lesson's step."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest

from app import DEFAULT_TEXT, handlers
from engine import Engine, is_live, model_choices, task_of
from lang import speaking
from model import TRAINED, load_trained
from serve.exports import model_part
from serve.training import Trainings
from tests.test_serve_training import wait_for
from ui.events import Handlers
from ui.handlers import RUN_INPUTS, Ask
from ui.patching_measures import pairs_for
from ui.state import ViewState
from ui.tabs import output
from viz.output_facts import LESSON, step_marks

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class ShippedFit:
    """train.fit's stand-in: the shipped weights under a live run's card, at once (its held-out
    score as ``scores`` says, where given: no training in CI)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.scores: dict | None = None

    def __call__(self, name, seconds, seed, on_progress, stop, positions=True, **asked):
        self.release.wait(20)
        net = load_trained(name)
        net.card = {**TRAINED[name], "train": {"live": True}, "steps": 321, "wall_time_s": 4.2}
        if self.scores is not None:
            net.card["scores"] = self.scores
        return net


@pytest.fixture(scope="module")
def peers():
    """The page's handlers (app.handlers), its trainings finishing at once with shipped weights."""
    default = ViewState(DEFAULT_TEXT, "bert")
    trainings = Trainings(fit=ShippedFit())
    models = {"bert", "induction"}
    return handlers(Engine(device="cpu"), default, models, model_choices(), trainings=trainings)


def trained(
    peers: Handlers,
    page: str,
    task: str = "induction",
    positions: bool = True,
    score: float | None = None,
) -> str:
    """The page's model id once its (stand-in) training has ended, at held-out `score` against
    the lesson's 90 % where given."""
    fit = peers.views.trainings._fit
    fit.scores = None if score is None else {"held_out": score, "lesson": 0.9}
    fit.release.clear()
    peers.views.trainings.start(page, task, 10, positions=positions)
    assert peers.views.trainings.model_id(page) is None  # not before the training has ended
    fit.release.set()
    wait_for(lambda: peers.views.trainings.model_id(page) is not None)
    return peers.views.trainings.model_id(page)


def run(peers: Handlers, page: str, text: str, model: str, tab: str = "output") -> dict:
    values = dict(zip(RUN_INPUTS, (text, model, "", "", "", "final", True), strict=True))
    return peers.views.run(Ask(tab=tab, page=page), **values)


def test_use_opens_the_pages_model_on_the_output_tab_under_a_secret_id(peers):
    model_id = trained(peers, "page-a")
    assert is_live(model_id) and task_of(model_id) == "induction"
    assert len(model_id) > len("page:induction:") + 12  # the secret part

    out = peers.training.use(Ask(tab="train", page="page-a"))
    assert out["model"]["value"] == model_id
    labels = {value: label for label, value in out["model"]["choices"]}
    assert labels[model_id] == "induction — trained on this page" and "bert" in labels
    assert out["text"] == "hello hello"  # the last run was BERT's: the task's own text
    assert out["tabs"].selected == "output" and out["target"]["visible"] is False
    assert r"induction \(trained on this page, 321 steps\)" in out["status"]  # Markdown
    assert "Trained from scratch" in out["prediction"] and "4 s" in out["prediction"]
    steps = out["steps_table"]
    assert steps.iloc[7, 0] == f"{LESSON} 7"  # "hello hello": step 7 reads the second h
    # titles and file names never carry the secret
    plot = out["steps_plot"].plot  # the figure's JSON, its download name in its config
    assert model_id not in plot and model_id.rsplit(":", 1)[1] not in plot
    assert "trained on this page" in json.loads(plot)["layout"]["title"]["text"]
    assert '"filename": "steps_induction-trained-here' in plot
    assert model_part(model_id) == "induction-trained-here"

    # every other tab draws it, from the page's run
    drawn = peers.views.tab(Ask(tab="attention", page="page-a"), "attention")
    assert "head_plot" in drawn and "error" not in drawn["status"].lower()


def test_another_page_and_a_link_cannot_open_it(peers):
    model_id = trained(peers, "page-b")
    said = run(peers, "page-c", "abcabc", model_id)["status"]
    assert "trained on this page is gone" in said
    link = peers.views.deeplink(Ask(page="page-c"), f"?model={model_id}&text=abc")
    assert "trained on another page" in link["link_notes"]
    assert link["model"] == "bert"  # the link's view opens with the default model
    assert "gone" not in run(peers, "page-b", "abcabc", model_id)["status"]


def test_training_again_retires_the_old_id(peers):
    first = trained(peers, "page-d")
    run(peers, "page-d", "abab", first)
    second = trained(peers, "page-d", "roles")
    assert second != first and task_of(second) == "roles"
    assert "gone" in run(peers, "page-d", "abab", first)["status"]
    out = peers.training.use(Ask(tab="train", page="page-d"))
    assert out["text"] == "我喜欢你" and "agent" in out["prediction"]


def test_a_model_trained_without_positions_says_so_everywhere(peers):
    trained(peers, "page-e", "roles", positions=False)
    out = peers.training.use(Ask(tab="train", page="page-e"))
    labels = {value: label for label, value in out["model"]["choices"]}
    said = "roles — trained on this page without positional encoding"
    assert labels[out["model"]["value"]] == said
    assert "without positional encoding, 321 steps" in out["status"]


def test_use_before_training_says_so(peers):
    with pytest.raises(ValueError, match="Train a model first"):
        peers.training.use(Ask(tab="train", page="page-nothing"))


def test_steps_after_the_typed_text_carry_no_mark(peers):
    """The continuation the model wrote itself is no answer to check it against."""
    assert step_marks([1, 2, 3, 4], [0, 1, 2, 3], typed=2) == ["✓", "", "", ""]
    engine = peers.views.engine
    analysis = engine.analyse("hello hello", "induction")
    assert analysis.typed == 12  # <s> and 11 characters; the rest was written by the model
    trace = analysis.trace
    table = output.steps_table(trace, "decoder", analysis.model.net.tokenizer, typed=12)
    marks = list(table["✓/✗"])
    assert marks[7:11] == ["✓"] * 4 and set(marks[11:]) == {""}
    assert set(table["next in text"][11:]) == {"—"}
    # the same stream typed to another length is another analysis
    longer = engine.analyse("hello hello hello", "induction")
    assert longer.key != analysis.key and longer.typed == 18
    dates = engine.analyse("2026年11月22日", "dates")
    assert dates.typed == 1  # the decoder reads its own translation
    table = output.steps_table(dates.trace, "cross", dates.model.net.tokenizer, typed=1)
    assert set(table["✓/✗"]) == {""} and table.iloc[0, 0] == f"{LESSON} 0"


def test_a_model_short_of_its_lesson_opens_marked_so_in_both_languages(peers):
    """ "Use this model" still opens it, but the model list and every tab's status line say that
    it has not reached its lesson."""
    model_id = trained(peers, "page-f", score=0.56)
    out = peers.training.use(Ask(tab="train", page="page-f"))
    labels = {value: label for label, value in out["model"]["choices"]}
    short = "it has not reached its lesson: 56% of 90%"
    assert labels[model_id] == f"induction — trained on this page; {short}"
    assert short in out["status"]
    assert "has not reached its lesson" in out["prediction"]  # the Output tab's facts
    with speaking("zh-CN"):
        out = peers.training.use(Ask(tab="train", page="page-f"))
        labels = {value: label for label, value in out["model"]["choices"]}
        assert "未达到它的课所需的分数：56%，课需要 90%" in labels[model_id]
        assert "还没有达到" in out["prediction"]
    assert pairs_for(peers.views.engine.model(model_id)) == []  # no lesson pair for it


def test_a_page_trained_model_that_reached_its_lesson_gets_its_tasks_shipped_pairs(peers):
    engine = peers.views.engine
    shipped = [pair.id for pair in pairs_for(engine.model("induction"))]
    assert shipped == ["copy"]
    model_id = trained(peers, "page-g", score=0.93)
    assert [pair.id for pair in pairs_for(engine.model(model_id))] == shipped
    out = peers.training.use(Ask(tab="train", page="page-g"))
    assert "lesson" not in {value: label for label, value in out["model"]["choices"]}[model_id]
    # Which heads matter lists them for the page's model, and a pick runs it on that model
    drawn = peers.views.tab(Ask(tab="patching", page="page-g"), "patching")
    assert [value for _, value in drawn["pair_example"]["choices"]] == shipped
    picked = peers.patching.example(Ask(tab="patching", page="page-g"), "copy")
    assert picked["model"] == model_id and picked["text"] == "qzxwv qzxw"
    # the lesson's numbers are the shipped model's, and the page says so under this model's grid
    from ui.tabs.patching import pair_lesson

    ran = SimpleNamespace(position=None, stack=None)
    said = pair_lesson(engine.model(model_id), ran, "qzxwv qzxw", "bhmtk qzxw")
    assert "The lesson:" in said and "Measured on the shipped induction model" in said
    said = pair_lesson(engine.model("induction"), ran, "qzxwv qzxw", "bhmtk qzxw")
    assert "The lesson:" in said and "Measured on the shipped" not in said
    assert picked["answer"] == "v"
