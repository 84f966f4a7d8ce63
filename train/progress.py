"""What a live training run reports while it trains: a Progress, and the head it shows."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Progress:
    """One report of train.fit: how far it got, how good it is, and one head on the probe text."""

    name: str  # the task: "dates", "induction" or "roles"
    step: int  # optimizer steps taken
    elapsed: float  # seconds since training started
    seconds: float  # the time budget
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


# What a finished live model says when its held-out score missed its lesson's (lang.tr pattern).
BELOW_LESSON = (
    "That is below its lesson ({lesson} or more): it will make mistakes where the lesson needs "
    "it right. Train it longer (more seconds) before using it."
)


def below_lesson(score: float | None, lesson: float | None, positions: bool = True) -> bool:
    """A finished live model whose held-out score never reached its lesson's. Without positional
    encoding a low score is the lesson itself (blind to order), so it is not flagged."""
    return positions and score is not None and lesson is not None and score < lesson


def pick_head(attn: torch.Tensor, score: torch.Tensor | None = None) -> tuple[int, int]:
    """(layer, head) with the highest score [L, H]; by default the sharpest head: the highest
    mean over queries of its largest weight (attn [L, H, T_q, T_k])."""
    score = attn.max(dim=-1).values.mean(dim=-1) if score is None else score  # (L, H)
    layer, head = divmod(int(score.argmax()), score.shape[1])
    return layer, head
