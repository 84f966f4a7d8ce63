"""A live training in a process of its own (train/process.py): the same answer as train.fit,
its reports in the caller's thread, Stop obeyed, a refusal said as train.fit says it."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from model.transformer import Transformer
from train.process import fit_in_process
from train.progress import Progress


def test_a_training_in_its_own_process_reports_and_returns_the_trained_model():
    reports: list[Progress] = []
    caller = threading.get_ident()
    threads: set[int] = set()

    def seen(progress: Progress) -> None:
        reports.append(progress)
        threads.add(threading.get_ident())

    net = fit_in_process("roles", 60.0, 0, seen, steps=8)  # CI trains a few steps only
    assert isinstance(net, Transformer) and not net.training
    assert net.card["name"] == "roles" and net.card["steps"] == 8
    ids = net.tokenizer("我喜欢你")["input_ids"]  # its tokenizer came along
    assert torch.as_tensor(ids).numel() >= 4
    assert reports and reports[-1].done and reports[-1].step == net.card["steps"]
    assert [p.step for p in reports] == sorted(p.step for p in reports)
    assert threads == {caller}  # on_progress runs where the caller runs it
    assert reports[-1].attention.shape[-1] == len(reports[-1].keys)


def test_stop_ends_the_childs_training_early_and_keeps_what_it_learned():
    stop = threading.Event()

    def seen(progress: Progress) -> None:
        stop.set()  # Stop pressed after the first report

    start = time.monotonic()
    net = fit_in_process("induction", 60.0, 0, seen, stop=stop)
    assert time.monotonic() - start < 40  # not the 60 s asked for
    assert net.card["stopped_early"] is True


def test_on_progress_returning_false_stops_it_too():
    net = fit_in_process("roles", 60.0, 0, lambda p: False, steps=10**4, until_lesson=False)
    assert net.card["stopped_early"] is True and net.card["ended"] == "stopped"


def test_a_refusal_in_the_child_is_raised_in_the_caller_as_train_fit_raises_it():
    with pytest.raises(ValueError, match="No task 'chess' to train"):
        fit_in_process("chess", 1.0)
