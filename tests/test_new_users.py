"""What new users met (issue 27): a first training that must not let them down."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lang import speaking
from tests.apphost import CHROMIUM
from train.live import LIVE
from train.progress import Progress
from viz.output_facts import trained_on
from viz.training import progress_sentence


def live_card(score: float | None, lesson: float = 0.9, positions: bool = True) -> dict:
    return {
        "task": "Copy a repeated string.",
        "steps": 900,
        "wall_time_s": 30.0,
        "train": {"live": True, "positions": positions},
        "scores": {"held_out": score, "measures": "second-copy tokens", "lesson": lesson},
    }


def progress(score: float | None, done: bool = True, positions: bool = True) -> Progress:
    return Progress(
        name="induction",
        step=900,
        elapsed=30.0,
        seconds=30.0,
        losses=[1.0, 0.5],
        score=score,
        score_name="second-copy tokens copied right",
        stack="decoder",
        layer=0,
        head=0,
        queries=["a"],
        keys=["a"],
        attention=torch.ones(1, 1),
        done=done,
        positions=positions,
        lesson=0.9,
    )


def test_every_task_starts_with_the_time_its_lesson_needs_on_a_busy_server():
    """30 s gave a first induction model that copied "hello hello" as "lo lo ko lo" on a busy
    server; the live bench reached 90 % beside another training at 47 s (induction) and 95 % at
    102 s (dates)."""
    assert LIVE["roles"].seconds >= 30
    assert LIVE["induction"].seconds >= 60
    assert LIVE["dates"].seconds >= 105
    assert all(recipe.seconds <= 120 for recipe in LIVE.values())  # the slider's maximum


def test_a_model_below_its_lesson_says_so_where_it_is_used():
    said = trained_on(live_card(0.31))
    assert "31%" in said and "90%" in said and "train it longer" in said
    with speaking("zh-CN"):
        assert "低于" in trained_on(live_card(0.31))
    assert "lesson" not in trained_on(live_card(0.95))
    # Blind to order, a low score is the lesson itself (roles without positional encoding).
    assert "lesson" not in trained_on(live_card(0.08, 0.95, positions=False))
    assert "lesson" not in trained_on({**live_card(None), "scores": {}})  # a shipped card


def test_the_train_tab_says_when_a_finished_model_missed_its_lesson():
    assert "below its lesson" in progress_sentence(progress(0.31))
    assert "below its lesson" not in progress_sentence(progress(0.93))
    assert "below its lesson" not in progress_sentence(progress(0.31, done=False))
    assert "below its lesson" not in progress_sentence(progress(0.31, positions=False))


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_picking_a_task_sets_its_seconds(page):
    from tests.apphost import serve_app

    with serve_app() as (url, _):
        page.goto(f"{url}?tab=train")
        page.wait_for_selector("#train-start")
        seconds = "#train-seconds input[type=number]"
        assert page.input_value(seconds) == str(LIVE["roles"].seconds)
        for task in ("induction", "dates", "roles"):
            page.locator("#train-task label", has_text=task).first.click()
            page.wait_for_function(
                f"() => document.querySelector('{seconds}').value === '{LIVE[task].seconds}'"
            )
