"""viz.training: a live run's loss curve, head map and sentence."""

from __future__ import annotations

import numpy as np
import torch

from lang import speaking
from train import Progress
from viz.training import BAR, progress_bar, progress_figure, progress_sentence, smoothed


def progress(**changes) -> Progress:
    fields = dict(
        name="roles", step=3, elapsed=2.4, seconds=30.0, losses=[3.0, 2.0, 1.0], score=0.5,
        score_name="sentence accuracy", stack="encoder", layer=1, head=2,
        queries=["<b>", "a"], keys=["<b>", "a"], attention=torch.tensor([[1.0, 0.0], [0.5, 0.5]]),
        lesson=0.95, steps=6,
    )  # fmt: skip
    fields.update(changes)
    return Progress(**fields)


def test_the_moving_mean_starts_short():
    assert smoothed([3.0, 1.0, 2.0], window=2).tolist() == [3.0, 2.0, 1.5]
    assert smoothed([]).size == 0


def test_the_sentence_says_where_the_run_stands_and_how_far_from_its_lesson():
    said = progress_sentence(progress())
    assert said == (
        "Training: roles, step 3 of 6, 2 s; loss 2.000; sentence accuracy 50% of the 95% the "
        "lesson needs."
    )
    with speaking("zh-CN"):
        assert "整句准确率 50%，课需要 95%" in progress_sentence(progress())
    assert "no held-out score yet" in progress_sentence(progress(score=None))
    assert progress_sentence(progress(done=True, losses=[])).startswith("Done")
    reached = progress_sentence(progress(done=True, score=0.97, ended="lesson"))
    assert "sentence accuracy 97%: it has reached its lesson (95%)" in reached
    assert "not reached" not in reached


def test_the_bar_shows_the_share_of_the_steps_done():
    assert progress_bar(progress(step=3)) == "▰" * (BAR // 2) + "▱" * (BAR // 2) + " 50%"
    assert progress_bar(progress(step=0)) == "▱" * BAR + " 0%"
    assert progress_bar(progress(step=6)) == "▰" * BAR + " 100%"
    # it reached its lesson before its last step: done, the bar full
    assert progress_bar(progress(done=True, ended="lesson")) == "▰" * BAR + " 100%"
    assert progress_bar(progress(done=True, ended="stopped")).endswith(" 50%")  # where it stopped
    assert progress_bar(progress(steps=0, elapsed=15.0)).endswith(" 50%")  # no steps: the time
    assert progress_bar(progress(steps=0, seconds=0.0)).endswith(" 0%")


def test_the_figure_holds_the_loss_and_the_escaped_head_map():
    fig = progress_figure(progress())
    loss, mean, head = fig.data
    assert list(loss.y) == [3.0, 2.0, 1.0] and np.allclose(mean.y, [3.0, 2.5, 2.0])
    assert head.x[0] == "0·&lt;b&gt;" and np.asarray(head.z).shape == (2, 2)
    assert "layer 1, head 2" in fig.layout.annotations[1].text
