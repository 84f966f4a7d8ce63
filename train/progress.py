"""What a live training run reports while it trains: a Progress, and the head it shows."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from lang import tr


@dataclass(frozen=True)
class Progress:
    """One report of train.fit: how far it got, how good it is, and one head on the probe text."""

    name: str  # the task: "dates", "induction" or "roles"
    step: int  # optimizer steps taken
    elapsed: float  # seconds since training started
    seconds: float  # the time cap (train.live.time_cap)
    losses: list[float]  # every step's training loss so far
    score: float | None  # the latest held-out score (0..1), None before the first
    score_name: str  # what the score measures, a short phrase
    stack: str  # the stack of the head shown: "encoder", "decoder" or "cross"
    layer: int
    head: int
    queries: list[str]  # the probe text's tokens along the map's rows ...
    keys: list[str]  # ... and columns
    attention: torch.Tensor = field(repr=False)  # [T_q, T_k] that head's weights on the probe
    done: bool = False  # the last report: the budget ran out or training was stopped
    positions: bool = True  # False: trained without positional encoding (train.fit)
    lesson: float | None = None  # the held-out score at which it teaches its lesson
    steps: int = 0  # the steps it trains at most (0: not said)
    ended: str = ""  # the last report's why: "lesson", "steps", "time" (the cap) or "stopped"


# Why a finished live model has not reached its lesson, by how it ended (lang.tr patterns).
NOT_REACHED = {
    "time": "It has not reached its lesson: the server was busy and its {seconds} s ran out at "
    "step {step} of {steps}. Expect mistakes where the lesson needs it right; train it again "
    "when the server is less busy.",
    "stopped": "It has not reached its lesson: it was stopped at step {step} of {steps}. Expect "
    "mistakes where the lesson needs it right; train it to its end.",
    "steps": "It has not reached its lesson in {steps} steps: expect mistakes where the lesson "
    "needs it right; train it with more steps.",
}


def below_lesson(score: float | None, lesson: float | None, positions: bool = True) -> bool:
    """A finished live model whose held-out score never reached its lesson's. Without positional
    encoding a low score is the lesson itself (blind to order), so it is not flagged."""
    return positions and score is not None and lesson is not None and score < lesson


def reached_lesson(card: dict) -> bool:
    """Whether a model trained on the page reached its lesson on held-out data (its card's
    score, the shipped card's measure): only then is it offered to the lesson's pairs."""
    scores = card.get("scores") or {}
    score, lesson = scores.get("held_out"), scores.get("lesson")
    return score is not None and lesson is not None and score >= lesson


def percent(value: float) -> str:
    return f"{value:.0%}"


def toward_lesson(progress: Progress) -> str:
    """How far the held-out score is from the lesson, in the page's language ("copy accuracy
    56% of the 90% the lesson needs"); blind to order, the score alone (low is the lesson)."""
    if progress.score is None:
        return tr("no held-out score yet")
    fields = {"measure": tr(progress.score_name), "score": percent(progress.score)}
    if progress.lesson is None or not progress.positions:
        return tr("{measure} {score}", **fields)
    fields["lesson"] = percent(progress.lesson)
    if progress.score >= progress.lesson:
        return tr("{measure} {score}: it has reached its lesson ({lesson})", **fields)
    return tr("{measure} {score} of the {lesson} the lesson needs", **fields)


def not_reached(progress: Progress) -> str:
    """What a finished model that missed its lesson says of it ("" when it reached it, or when
    it trained blind to order): why, and what to do."""
    if not below_lesson(progress.score, progress.lesson, progress.positions):
        return ""
    why = NOT_REACHED.get(progress.ended, NOT_REACHED["steps"])
    steps = f"{progress.steps:,}" if progress.steps else f"{progress.step:,}"
    return tr(why, seconds=f"{progress.seconds:.0f}", step=f"{progress.step:,}", steps=steps)


def pick_head(attn: torch.Tensor, score: torch.Tensor | None = None) -> tuple[int, int]:
    """(layer, head) with the highest score [L, H]; by default the sharpest head: the highest
    mean over queries of its largest weight (attn [L, H, T_q, T_k])."""
    score = attn.max(dim=-1).values.mean(dim=-1) if score is None else score  # (L, H)
    layer, head = divmod(int(score.argmax()), score.shape[1])
    return layer, head
