"""serve.training: a server-wide bound on live trainings, each job owned by one page."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from model.trained import build, load_weights
from serve.training import MAX_TRAININGS, Trainings
from train.progress import Progress

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def wait_for(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class FakeFit:
    """Reports one step, then trains until stopped; returns a stand-in model."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def __call__(self, name, seconds, seed, on_progress, stop, positions=True, **asked):
        self.started.append(name)
        attn = torch.ones(1, 1)
        on_progress(Progress(name, 1, 0.1, seconds, [1.0], 0.5, "sentence accuracy", "encoder",
                             0, 0, ["a"], ["a"], attn, lesson=0.95))  # fmt: skip
        stop.wait(20)
        return torch.nn.Linear(1, 1)


def test_one_training_at_a_time_and_the_others_told_their_place():
    fake = FakeFit()
    trainings = Trainings(limit=1, fit=fake)
    trainings.start("page-a", "roles")
    wait_for(lambda: trainings.progress("page-a") is not None)
    trainings.start("page-b", "dates")
    said = trainings.start("page-c", "induction")
    assert [trainings.place(p) for p in ("page-a", "page-b", "page-c")] == [0, 1, 2]
    assert "1 waiting ahead of it" in said and "trains at most 1 at once" in said
    assert "first in line" in trainings.status("page-b")
    assert "is training: step 1 of 300," in trainings.status("page-a")  # roles' own steps
    assert "sentence accuracy 50% of the 95% the lesson needs" in trainings.status("page-a")
    assert fake.started == ["roles"]
    trainings.stop("page-a")  # the next in line starts
    wait_for(lambda: trainings.place("page-b") == 0)
    assert trainings.place("page-c") == 1 and fake.started == ["roles", "dates"]
    assert "was stopped" in trainings.status("page-a")
    trainings.close("page-b")
    wait_for(lambda: trainings.place("page-c") == 0)
    trainings.close("page-c")


def test_weights_belong_to_the_page_that_trained_them():
    trainings = Trainings(limit=2, fit=FakeFit())
    trainings.start("page-a", "roles")
    wait_for(lambda: trainings.progress("page-a") is not None)
    assert trainings.model("page-a") is None  # still training
    trainings.stop("page-a")
    wait_for(lambda: trainings.model("page-a") is not None)
    assert trainings.model("page-b") is None and trainings.progress("page-b") is None
    assert trainings.status("page-b") == "No training has been started on this page."
    trainings.close("page-a")  # the page closed: its weights are gone
    assert trainings.model("page-a") is None


def test_a_waiting_training_leaves_the_line_when_its_page_closes():
    trainings = Trainings(limit=1, fit=FakeFit())
    trainings.start("page-a", "roles")
    trainings.start("page-b", "roles")
    trainings.close("page-b")
    assert trainings.place("page-b") is None
    trainings.start("page-c", "roles")
    assert trainings.place("page-c") == 1
    for page in ("page-a", "page-c"):
        trainings.close(page)


def test_a_real_training_reports_and_saves_weights_and_card(tmp_path):
    trainings = Trainings(limit=1)
    trainings.start("page-a", "roles", steps=6)  # CI trains a few steps only

    def watched() -> bool:  # the page's timer asks every second: a page that stops is closed
        trainings.touch("page-a")
        return trainings.model("page-a") is not None

    wait_for(watched, timeout=60)  # (beside a busy suite the held-out check outlasts 15 s)
    progress = trainings.progress("page-a")
    assert progress.done and progress.step == 6 and progress.ended == "steps"
    said = trainings.status("page-a")
    assert "is done: step 6 of 6" in said and "has not reached its lesson in 6 steps" in said
    weights, card_path = trainings.save("page-a", tmp_path)
    net = trainings.model("page-a")
    loaded = load_weights(build(net.card), weights)
    assert torch.allclose(loaded.token_classifier.weight, net.token_classifier.weight, atol=1e-3)
    assert card_path.read_text(encoding="utf-8").startswith("{")
    with pytest.raises(ValueError, match="no trained model"):
        trainings.save("page-b", tmp_path)


def test_the_bound_defaults_to_one_and_unknown_tasks_are_refused():
    assert Trainings().limit == MAX_TRAININGS
    assert threading.active_count() < 50
    with pytest.raises(ValueError, match="the tasks are"):
        Trainings().start("page-a", "chess")


def test_asked_steps_and_seconds_are_bounded_and_ended_jobs_do_not_pile_up(monkeypatch):
    import serve.training as training
    from train.live import LIVE, time_cap

    monkeypatch.setattr(training, "KEPT", 2)
    seen = []

    def quick(name, seconds, seed, on_progress, stop, positions=True, steps=None, **asked):
        seen.append((steps, seconds))
        return torch.nn.Linear(1, 1)

    trainings = Trainings(limit=1, fit=quick)
    asked = ((1e9, None), (float("nan"), 1e9), (-5, float("nan")), (20, 30.0), (None, -1))
    for i, (steps, seconds) in enumerate(asked):
        trainings.start(f"page-{i}", "dates", steps, seconds=seconds)
        wait_for(lambda i=i: trainings.model(f"page-{i}") is not None)
    own, cap = LIVE["dates"].steps, time_cap(LIVE["dates"], LIVE["dates"].steps)
    assert seen == [
        (training.MAX_STEPS, training.MAX_SECONDS),
        (own, training.MAX_SECONDS),
        (own, cap),
        (20, 30.0),
        (own, cap),
    ]
    assert trainings.model("page-0") is None and trainings.model("page-4") is not None


class ReportingFit:
    """Reports every 20 ms until stopped (a page's abandoned training must stop itself)."""

    def __call__(self, name, seconds, seed, on_progress, stop, positions=True, **asked):
        attn = torch.ones(1, 1)
        while not stop.is_set():
            report = Progress(name, 1, 0.1, seconds, [1.0], 0.5, "score", "encoder", 0, 0,
                              ["a"], ["a"], attn)  # fmt: skip
            if on_progress(report) is False:
                break
            time.sleep(0.02)
        return torch.nn.Linear(1, 1)


def test_a_training_whose_page_stops_asking_stops(monkeypatch):
    """The page's timer asks every second (touch); a page closed stops asking, and its job stops
    after ABANDONED seconds instead of taking the server's one training place for minutes."""
    import serve.training as training

    monkeypatch.setattr(training, "ABANDONED", 0.3)
    trainings = Trainings(limit=1, fit=ReportingFit())
    trainings.start("watched", "roles")
    for _ in range(20):  # 0.6 s, watched
        trainings.touch("watched")
        time.sleep(0.03)
    assert trainings.working("watched")
    wait_for(lambda: not trainings.working("watched"), timeout=5)  # then nobody asks
    assert "stopped" in trainings.status("watched")
