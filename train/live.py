"""How each task trains live (train.fit): recipe, a quick held-out score, the probe text shown.

Small held-out sets keep a score under a second on one thread, so the page can show it while the
model trains; the card at the end carries that quick score too (the task's full evaluation, e.g.
train.dates.evaluate, takes seconds more).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import torch

from model.transformer import Transformer
from train import dates, induction, roles


@dataclass(frozen=True)
class LiveRecipe:
    """A time-bounded recipe: AdamW at lr after `warmup` steps, then constant or decayed by time."""

    data: ModuleType
    batch_size: int
    lr: float
    warmup: int
    decay: bool  # True: lr falls linearly to 5 % of its peak as the time budget runs out
    score_name: str
    score: Callable[[Transformer], float]
    probe: Callable[[Transformer], dict]  # trace inputs of the probe text, and its stack
    shape: tuple[tuple[str, int], ...] = ()  # config fields that differ from the shipped model's
    # The held-out score at which the model teaches its lesson, and the Train tab's default time
    # budget, which reaches it on a loaded 2-core machine (bench/bench_live_train.py: beside
    # another training induction took 47 s to 90 %, dates 102 s to 95 %).
    lesson: float = 0.9
    seconds: int = 30


def roles_score(net: Transformer) -> float:
    return roles.scores(net, roles.held_out_set()[::4])["sentence_accuracy"]


def induction_score(net: Transformer) -> float:
    hits, _ = induction.copy_hits(net, induction.held_out_set(100))
    flat = [h for row in hits for h in row]
    return sum(flat) / len(flat)


def dates_score(net: Transformer) -> float:
    data = dates.held_out_set(per_format=8)
    enc = net.tokenizer([ex["source"] for ex in data])
    ids = net.generate(enc["input_ids"], max_new_tokens=11, attention_mask=enc["attention_mask"])
    outputs = [net.tokenizer.decode(row) for row in ids]
    return sum(o == ex["target"] for o, ex in zip(outputs, data, strict=True)) / len(data)


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
    "roles": LiveRecipe(roles, 64, 2e-3, 30, True, "held-out sentences all tagged right",
                        roles_score, roles_probe, lesson=0.95, seconds=30),
    # Live, the induction model is smaller than the shipped one (2 layers at 32/4/64): its heads
    # form within a minute on one thread; the shipped one needs its third layer for "mississippi".
    "induction": LiveRecipe(induction, 32, 3e-3, 50, False, "second-copy tokens copied right",
                            induction_score, induction_probe,
                            (("n_layers", 2), ("d_model", 32), ("d_ff", 64)), seconds=75),
    "dates": LiveRecipe(dates, 64, 2e-3, 100, True, "held-out dates written exactly",
                        dates_score, dates_probe, seconds=120),
}
# fmt: on
HEAD_SCORES = {"induction": induction_head_score}  # other tasks show their sharpest head
