"""viz.training: a live run's loss curve, head map and sentence."""

from __future__ import annotations

import numpy as np
import torch

from train import Progress
from viz.training import BAR, progress_bar, progress_figure, progress_sentence, smoothed


def progress(**changes) -> Progress:
    fields = dict(
        name="roles", step=3, elapsed=2.4, seconds=30.0, losses=[3.0, 2.0, 1.0], score=0.5,
        score_name="held-out sentences all tagged right", stack="encoder", layer=1, head=2,
        queries=["<b>", "a"], keys=["<b>", "a"], attention=torch.tensor([[1.0, 0.0], [0.5, 0.5]]),
    )  # fmt: skip
    fields.update(changes)
    return Progress(**fields)


def test_the_moving_mean_starts_short():
    assert smoothed([3.0, 1.0, 2.0], window=2).tolist() == [3.0, 2.0, 1.5]
    assert smoothed([]).size == 0


def test_the_sentence_says_where_the_run_stands():
    said = progress_sentence(progress())
    assert said == ("Training: roles, step 3, 2 s of 30; loss 2.000; held-out score 50%.")
    assert "no held-out score yet" in progress_sentence(progress(score=None))
    assert progress_sentence(progress(done=True, losses=[])).startswith("Done")


def test_the_bar_shows_the_share_of_the_time_spent():
    assert progress_bar(progress(elapsed=15.0)) == "▰" * (BAR // 2) + "▱" * (BAR // 2) + " 50%"
    assert progress_bar(progress(elapsed=0.0)) == "▱" * BAR + " 0%"
    assert progress_bar(progress(elapsed=31.2)) == "▰" * BAR + " 100%"  # past the budget: full
    assert progress_bar(progress(seconds=0.0)).endswith(" 0%")


def test_the_figure_holds_the_loss_and_the_escaped_head_map():
    fig = progress_figure(progress())
    loss, mean, head = fig.data
    assert list(loss.y) == [3.0, 2.0, 1.0] and np.allclose(mean.y, [3.0, 2.5, 2.0])
    assert head.x[0] == "0·&lt;b&gt;" and np.asarray(head.z).shape == (2, 2)
    assert "layer 1, head 2" in fig.layout.annotations[1].text
