"""How each task trains live (train.fit): recipe, held-out scores, the probe text shown.

A live model trains by steps, not seconds: the same steps give the same model on a quiet server
and on a busy one, which only takes longer. Every ``check_every`` steps a quick held-out score
(a small held-out set: under a second on one thread) says how far the model is from its lesson;
once it reaches the lesson, the card's measure on the card's whole held-out set (the shipped
cards' ``scores``) confirms it, and the card at the end carries that score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch

from model.transformer import Transformer
from train import dates, induction, roles

MAX_SECONDS = 300.0  # the longest a live training may take: others wait in line behind it


@dataclass(frozen=True)
class LiveRecipe:
    """A recipe by steps: AdamW at lr after `warmup` steps, then constant or decayed by step."""

    data: ModuleType
    batch_size: int
    lr: float
    warmup: int
    decay: bool  # True: lr falls linearly to 5 % of its peak at the last step
    score_name: str  # what the score measures, short ("copy accuracy"): said on the page
    score: Callable[[Transformer], float]  # quick: a small held-out set, every check_every steps
    card_score: Callable[[Transformer], float]  # the shipped card's measure and held-out set
    probe: Callable[[Transformer], dict]  # trace inputs of the probe text, and its stack
    shape: tuple[tuple[str, int], ...] = ()  # config fields that differ from the shipped model's
    lesson: float = 0.9  # the held-out score at which the model teaches its lesson
    # The Train tab's default steps: seed 0 (the page's) reaches the lesson well within them.
    steps: int = 1000
    check_every: int = 100  # steps between quick held-out scores
    # Steps per second the time cap allows for: below what one training made at a load of 6-8
    # on the 2-core server, so a busy server still finishes (time_cap).
    slowest: float = 10.0


def time_cap(recipe: LiveRecipe, steps: int) -> float:
    """The seconds a training of `steps` may take: those steps at the recipe's slowest rate, at
    least a minute (a fresh process and the scores take seconds) and at most MAX_SECONDS."""
    return min(MAX_SECONDS, max(60.0, steps / recipe.slowest))


def roles_score(net: Transformer, every: int = 4) -> float:
    """Sentences all tagged right, on every `every`-th held-out sentence (1: the card's 916)."""
    return roles.scores(net, roles.held_out_set()[::every])["sentence_accuracy"]


def roles_card_score(net: Transformer) -> float:
    return roles_score(net, every=1)


def induction_score(net: Transformer, n: int = 100) -> float:
    """Second-copy tokens copied right on the first n held-out strings (400: the card's)."""
    hits, _ = induction.copy_hits(net, induction.held_out_set(n))
    flat = [h for row in hits for h in row]
    return sum(flat) / len(flat)


def induction_card_score(net: Transformer) -> float:
    return induction_score(net, n=400)


def dates_score(net: Transformer, per_format: int = 8) -> float:
    """Held-out dates written exactly, `per_format` of each format (50: the card's 400)."""
    data = dates.held_out_set(per_format=per_format)
    enc = net.tokenizer([ex["source"] for ex in data])
    ids = net.generate(enc["input_ids"], max_new_tokens=11, attention_mask=enc["attention_mask"])
    outputs = [net.tokenizer.decode(row) for row in ids]
    return sum(o == ex["target"] for o, ex in zip(outputs, data, strict=True)) / len(data)


def dates_card_score(net: Transformer) -> float:
    return dates_score(net, per_format=50)


def roles_probe(net: Transformer) -> dict:
    enc = net.tokenizer(["Tom sees Anna"])
    return {"stack": "encoder", "args": (enc["input_ids"], enc["attention_mask"]), "kw": {}}


def induction_probe(net: Transformer) -> dict:
    text = induction.PROBES[3]  # qzvkmwx qzvkmwx: an induction head draws an off-diagonal
    ids = induction.encode(net.tokenizer, [text])["input_ids"]
    return {"stack": "decoder", "args": (ids,), "kw": {}, "text": text}


def dates_probe(net: Transformer) -> dict:
    tok = net.tokenizer
    enc = tok(["22 November 2026"])
    tgt = torch.tensor([[tok.bos_token_id, *tok.encode("2026-11-22")]])  # (1, 11)
    return {
        "stack": "cross",
        "args": (enc["input_ids"], enc["attention_mask"]),
        "kw": {"tgt_ids": tgt},
    }


def induction_head_score(attn: torch.Tensor, probe: dict) -> torch.Tensor:
    """Mean weight [L, H] of the probe's second copy on the token after its earlier copy."""
    n, start = induction.copy_span(probe["text"])
    j = torch.arange(start + 1, start + n)
    return attn[:, :, j, j - start + 1].mean(-1)  # (L, H)


# fmt: off
LIVE: dict[str, LiveRecipe] = {
    "roles": LiveRecipe(roles, 64, 2e-3, 30, True, "sentence accuracy", roles_score,
                        roles_card_score, roles_probe, lesson=0.95, steps=300, check_every=25,
                        slowest=10.0),
    # Live, the induction model is smaller than the shipped one (2 layers at 32/4/64): its heads
    # form within a few thousand steps on one thread; the shipped one needs its third layer for
    # "mississippi".
    "induction": LiveRecipe(induction, 32, 3e-3, 50, False, "copy accuracy", induction_score,
                            induction_card_score, induction_probe,
                            (("n_layers", 2), ("d_model", 32), ("d_ff", 64)), steps=3000,
                            slowest=10.0),
    "dates": LiveRecipe(dates, 64, 2e-3, 100, True, "exact match", dates_score, dates_card_score,
                        dates_probe, steps=1500, slowest=5.0),
}
# fmt: on
HEAD_SCORES = {"induction": induction_head_score}  # other tasks show their sharpest head
