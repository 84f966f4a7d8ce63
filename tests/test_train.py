"""The training package: schedules, a few steps lower the loss, seeded runs, cards written."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from model import Transformer
from model.trained import build, load_weights, snapshot_path
from train import TASKS, reproduce
from train.loop import TrainSpec, lr_factor, train

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


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
