"""train.fit: a live training by steps under a time cap, that reports and stops on request (a few
steps: what trains the lesson is measured by bench/bench_live_train.py, not in CI)."""

from __future__ import annotations

import importlib
import threading

import pytest
import torch

from model.trained import build
from train import Progress, fit
from train.fit import lr_now
from train.live import LIVE
from train.progress import pick_head

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
FITTING = importlib.import_module("train.fit")  # the module (train.fit is also the function)


@pytest.fixture
def every_step(monkeypatch):
    """A report after every step (not every second): a few steps make several reports."""
    monkeypatch.setattr(FITTING, "REPORT_EVERY", 0.0)


def test_fit_reports_progress_and_returns_the_model_with_its_card(every_step):
    seen: list[Progress] = []
    net = fit("roles", seed=1, on_progress=seen.append, steps=6, until_lesson=False)
    assert len(seen) >= 2 and seen[-1].done and not any(p.done for p in seen[:-1])
    last = seen[-1]
    assert last.step == len(last.losses) == net.card["steps"] == 6 and last.steps == 6
    assert 0.0 <= last.score <= 1.0 and last.score_name == LIVE["roles"].score_name
    assert last.stack == "encoder" and last.attention.shape == (len(last.queries), len(last.keys))
    assert torch.allclose(last.attention.sum(-1), torch.ones(len(last.queries)), atol=1e-5)
    assert [p.step for p in seen] == sorted(p.step for p in seen)
    assert not net.training and net.tokenizer.vocab_size == net.config.vocab_size
    card = net.card
    assert card["name"] == "roles" and card["train"]["seed"] == 1 and not card["stopped_early"]
    assert card["ended"] == "steps" and card["train"]["steps"] == 6
    assert card["scores"]["held_out"] == last.score  # the card's measure, on its 916 sentences
    assert build(card).config == net.config  # the card rebuilds the architecture


def test_returning_false_stops_early_and_still_returns_the_model(every_step):
    calls = []

    def once(progress: Progress) -> bool:
        calls.append(progress)
        return False

    net = fit("induction", on_progress=once)
    assert net.card["stopped_early"] and net.card["steps"] == 1
    assert [p.done for p in calls] == [False, True]  # the stopping report, then the last one
    assert calls[-1].stack == "decoder" and calls[-1].ended == "stopped"


def test_a_stop_event_stops_training():
    stop = threading.Event()
    stop.set()
    net = fit("dates", stop=stop)
    assert net.card["steps"] == 0 and net.card["stopped_early"]


def test_warm_up_then_constant_or_decayed_by_step():
    roles, induction = LIVE["roles"], LIVE["induction"]
    assert lr_now(roles, 1, 100) == pytest.approx(roles.lr / roles.warmup)
    assert lr_now(roles, 500, 1000) == pytest.approx(roles.lr / 2)
    assert lr_now(roles, 1000, 1000) == pytest.approx(roles.lr * 0.05)
    assert lr_now(induction, 1000, 1100) == induction.lr


def test_the_sharpest_head_is_picked_unless_a_score_says_otherwise():
    attn = torch.full((2, 2, 3, 3), 1 / 3)  # (L, H, T, T) uniform ...
    attn[1, 0] = torch.eye(3)  # ... but layer 1 head 0
    assert pick_head(attn) == (1, 0)
    assert pick_head(attn, torch.tensor([[0.0, 0.9], [0.1, 0.2]])) == (0, 1)


def test_an_unknown_task_is_refused_in_a_sentence():
    with pytest.raises(ValueError, match="the tasks are"):
        fit("chess", steps=1)


def test_without_positional_encoding_the_roles_model_cannot_tell_the_order():
    """positions=False: the encodings are zero and stay zero, the card and the progress say so,
    and the model gives 我 the same role in 我喜欢你 and 你喜欢我 (it never saw the order)."""
    from model.trained import predict_roles
    from viz.training import progress_sentence

    seen: list[Progress] = []
    net = fit("roles", seed=0, on_progress=seen.append, positions=False, steps=20)
    zeroed = [t for n, t in net.state_dict().items() if "pos_emb" in n]
    assert zeroed and all(not t.any() for t in zeroed)
    assert net.card["train"]["positions"] is False and not seen[-1].positions
    assert "roles without positional encoding" in progress_sentence(seen[-1])
    a, b = predict_roles(net, "我喜欢你"), predict_roles(net, "你喜欢我")
    role = {text: dict(zip(r["tokens"], r["labels"], strict=True)) for text, r in
            (("a", a), ("b", b))}  # fmt: skip
    assert role["a"]["我"] == role["b"]["我"] and role["a"]["你"] == role["b"]["你"]
    with_pe = fit("roles", seed=0, steps=3)
    assert with_pe.card["train"]["positions"] is True
    assert any(t.any() for n, t in with_pe.state_dict().items() if "pos_emb" in n)
