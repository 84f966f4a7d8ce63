"""The training package: schedules, a few steps lower the loss, seeded runs, cards written."""

from __future__ import annotations

import dataclasses
import importlib
import json

import pytest
import torch

from model import Transformer
from model.trained import build, load_weights, snapshot_path
from train import TASKS, fit, reproduce
from train.loop import TrainSpec, lr_factor, train

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
FITTING = importlib.import_module("train.fit")  # the module (train.fit is also the function)


def few_steps(name: str, steps: int = 25, batch_size: int = 16) -> tuple[Transformer, dict]:
    task = TASKS[name]
    spec = dataclasses.replace(
        task.spec, steps=steps, batch_size=batch_size, warmup=5, snapshots=()
    )
    tok = task.data.tokenizer()
    net = Transformer(task.data.config(tok.vocab_size), tok)
    batches = task.data.batches(tok, spec.batch_size, spec.seed)
    return net, train(net, batches, task.data.loss, spec, progress=False)


def test_warm_up_rises_linearly_to_the_peak_then_decays():
    noam = TrainSpec(steps=1000, batch_size=1, lr=1.0, warmup=100, schedule="noam")
    linear = dataclasses.replace(noam, schedule="linear")
    assert lr_factor(1, noam) == pytest.approx(0.01)
    assert lr_factor(50, noam) == pytest.approx(0.5)
    assert lr_factor(100, noam) == lr_factor(100, linear) == pytest.approx(1.0)
    assert lr_factor(400, noam) == pytest.approx(0.5)  # the paper's step^-0.5 decay
    assert lr_factor(550, linear) == pytest.approx(0.5)
    assert lr_factor(1000, linear) == 0.0


@pytest.mark.parametrize("name", list(TASKS))
def test_a_few_steps_lower_the_loss(name):
    net, result = few_steps(name)
    losses = result["losses"]
    assert len(losses) == 25 and not net.training
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.1  # nats; starts near ln(vocab)


def test_training_is_seeded():
    a, _ = few_steps("roles", steps=3, batch_size=4)
    b, _ = few_steps("roles", steps=3, batch_size=4)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def test_reproduce_writes_snapshots_and_a_card_that_load_back(tmp_path):
    card = reproduce("roles", out_dir=tmp_path, steps=4, progress=False)
    on_disk = json.loads((tmp_path / "card.json").read_text(encoding="utf-8"))
    assert on_disk == json.loads(json.dumps(card))  # tuples come back as lists
    assert card["snapshots"] == [0, 4] and card["reproduce"] == "python -m train roles"
    for key in ("task", "architecture", "config", "steps", "wall_time_s", "final_loss", "scores"):
        assert key in card
    first = load_weights(build(card), snapshot_path(tmp_path, 0))
    last = load_weights(build(card), snapshot_path(tmp_path, 4))
    assert not torch.equal(first.token_classifier.weight, last.token_classifier.weight)
    assert last.token_classifier.weight.dtype == torch.float32  # float16 on disk only


class SlowClock:
    """time for train.fit on a busy server: every look at the clock finds `per_look` seconds more
    gone (a step and its report take seconds, where a quiet server takes milliseconds)."""

    def __init__(self, per_look: float) -> None:
        self.now, self.per_look = 0.0, per_look

    def perf_counter(self) -> float:
        self.now += self.per_look
        return self.now


def lesson_at(check: int, monkeypatch, name: str = "roles", every: int = 4) -> list[int]:
    """Stub the task's held-out scores (the lesson check is what is tested, not the model):
    below the lesson until the `check`-th check, then at it; returns the steps scored at."""
    import train.live

    recipe = train.live.LIVE[name]
    seen: list[int] = []

    def quick(net) -> float:
        seen.append(len(seen) + 1)
        return recipe.lesson if len(seen) >= check else recipe.lesson / 2

    stub = dataclasses.replace(recipe, score=quick, card_score=quick, check_every=every)
    monkeypatch.setitem(train.live.LIVE, name, stub)
    return seen


def test_live_training_goes_by_steps_so_a_slow_server_trains_the_same_model(monkeypatch):
    """The issue's student: by seconds, a server at a load of 6-8 made 1,380 induction steps and
    ended below the lesson. By steps, a server 100x slower makes the same model, only later."""

    lesson_at(10**6, monkeypatch)  # never reached: all 12 steps
    quiet = fit("roles", steps=12, seconds=1e6)
    monkeypatch.setattr(FITTING, "time", SlowClock(per_look=0.5))
    slow_reports: list = []
    slow = fit("roles", steps=12, seconds=1e6, on_progress=slow_reports.append)
    assert quiet.card["steps"] == slow.card["steps"] == 12
    assert slow.card["ended"] == "steps" and slow.card["wall_time_s"] > 5  # "slow": many s
    for (key, a), b in zip(quiet.state_dict().items(), slow.state_dict().values(), strict=True):
        assert torch.equal(a, b), key
    assert len(slow_reports) > 3 and slow_reports[-1].done  # reported about every "second"


def test_it_stops_once_its_lesson_is_reached_and_its_card_says_so(monkeypatch):
    seen = lesson_at(2, monkeypatch, every=4)
    net = fit("roles", steps=40, seconds=1e6)
    assert net.card["steps"] == 8 and net.card["ended"] == "lesson"  # the 2nd check, step 8
    assert net.card["scores"]["reached"] and net.card["scores"]["held_out"] == 0.95
    assert net.card["train"]["steps"] == 40 and not net.card["stopped_early"]
    assert len(seen) == 3  # quick, then the card's measure to confirm: no further score


def test_a_server_too_busy_for_its_steps_says_the_model_missed_its_lesson(monkeypatch):
    """The time cap ends it; the card, the page's last line and its figure say so plainly, in
    both languages."""
    from lang import speaking
    from train.progress import not_reached, toward_lesson
    from viz.training import progress_sentence

    lesson_at(10**6, monkeypatch)
    monkeypatch.setattr(FITTING, "time", SlowClock(per_look=1.0))
    reports: list = []
    net = fit("roles", steps=40, seconds=6.0, on_progress=reports.append)
    assert net.card["ended"] == "time" and 0 < net.card["steps"] < 40
    assert net.card["scores"]["reached"] is False
    last = reports[-1]
    assert last.done and last.ended == "time" and last.steps == 40
    assert toward_lesson(last) == "sentence accuracy 48% of the 95% the lesson needs"
    said = not_reached(last)
    assert said.startswith("It has not reached its lesson: the server was busy and its 6 s ran")
    assert f"at step {last.step} of 40" in said and said in progress_sentence(last)
    with speaking("zh-CN"):
        assert "还没有达到" in not_reached(last) and "课需要 95%" in toward_lesson(last)


def test_the_time_cap_leaves_a_busy_server_room_for_the_lesson():
    """Seed 0 (the page's) reached each lesson on held-out data, measured by train.fit on the
    shared 2-core machine: roles at step 100, induction 2,000, dates 700. The issue's busy
    server (load 6-8) made 18 induction steps a second; its cap allows for half that."""
    from train.live import LIVE, MAX_SECONDS, time_cap

    reached = {"roles": 100, "induction": 2000, "dates": 700}
    for name, recipe in LIVE.items():
        assert recipe.steps >= 1.4 * reached[name], name  # room for another seed, another CPU
        assert time_cap(recipe, recipe.steps) >= reached[name] / 9.0, name
        assert time_cap(recipe, recipe.steps) <= MAX_SECONDS
        assert reached[name] % recipe.check_every == 0  # the lesson is checked where it comes
