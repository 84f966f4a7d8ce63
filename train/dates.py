"""Task "dates": a date written many ways, in Chinese and English -> ISO 8601 (issue 7, item 1).

An encoder-decoder (seed 000 / 003: post-norm, sinusoidal, ReLU) reads `二〇二六年十一月二十二日` or
`Nov 22, 2026` and writes `2026-11-22`. Each source format knows where its year, month and day are,
so cross-attention can be checked: does the head that writes a month digit look at the month?
"""

from __future__ import annotations

import datetime as dt
import random
import string
from collections.abc import Callable, Iterator

import torch

from model.config import PRESETS, TransformerConfig
from model.tokenizers import VocabTokenizer
from model.transformer import Transformer

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
HAN_DIGITS = "〇一二三四五六七八九"
FIRST, LAST = dt.date(1900, 1, 1).toordinal(), dt.date(2099, 12, 31).toordinal()
HELD_OUT = 7  # dates whose ordinal % 10 == 7 never appear in training: the held-out set
ALPHABET = "0123456789-/., " + HAN_DIGITS + "十年月日" + "".join(sorted(set("".join(MONTHS))))

Span = tuple[int, int]  # [start, end) character offsets in the source


def han_number(n: int) -> str:
    """1..31 in Chinese numerals: 5 -> 五, 10 -> 十, 11 -> 十一, 22 -> 二十二, 30 -> 三十."""
    tens, ones = divmod(n, 10)
    head = "" if tens == 0 else ("十" if tens == 1 else HAN_DIGITS[tens] + "十")
    return head + (HAN_DIGITS[ones] if ones else "")


# A format is a pattern of fields; each field knows which part of the date it writes.
FIELDS: dict[str, tuple[str, Callable[[dt.date], str]]] = {
    "Y": ("year", lambda d: f"{d.year}"),
    "hanY": ("year", lambda d: "".join(HAN_DIGITS[int(c)] for c in f"{d.year}")),  # 二〇二六
    "m": ("month", lambda d: f"{d.month}"),
    "mm": ("month", lambda d: f"{d.month:02d}"),
    "hanm": ("month", lambda d: han_number(d.month)),
    "Month": ("month", lambda d: MONTHS[d.month - 1]),
    "Mon": ("month", lambda d: MONTHS[d.month - 1][:3]),
    "d": ("day", lambda d: f"{d.day}"),
    "dd": ("day", lambda d: f"{d.day:02d}"),
    "hand": ("day", lambda d: han_number(d.day)),
}
FORMATS = {  # named by how they write 22 November 2026
    "2026年11月22日": "{Y}年{m}月{d}日",
    "二〇二六年十一月二十二日": "{hanY}年{hanm}月{hand}日",
    "22 November 2026": "{d} {Month} {Y}",
    "November 22, 2026": "{Month} {d}, {Y}",
    "Nov 22, 2026": "{Mon} {d}, {Y}",
    "22 Nov 2026": "{d} {Mon} {Y}",
    "22.11.2026": "{dd}.{mm}.{Y}",
    "2026/11/22": "{Y}/{m}/{d}",
}


def write(date: dt.date, pattern: str) -> tuple[str, dict[str, Span]]:
    """The date in a pattern, and the span of its year, month and day in the text."""
    text, spans = "", {}
    for literal, field, _, _ in string.Formatter().parse(pattern):
        text += literal
        if field:
            part, value = FIELDS[field][0], FIELDS[field][1](date)
            spans[part] = (len(text), len(text) + len(value))
            text += value
    return text, spans


TARGET_FIELDS = ("year",) * 4 + (None,) + ("month",) * 2 + (None,) + ("day",) * 2  # 2026-11-22


def render(date: dt.date, fmt: str) -> dict:
    """One example: {"source", "target", "spans", "format"}."""
    source, spans = write(date, FORMATS[fmt])
    return {"source": source, "target": date.isoformat(), "spans": spans, "format": fmt}


def random_date(rng: random.Random, held_out: bool) -> dt.date:
    """A uniform date of 1900-2099 from the training pool, or from the held-out pool."""
    while True:
        ordinal = rng.randint(FIRST, LAST)
        if (ordinal % 10 == HELD_OUT) == held_out:
            return dt.date.fromordinal(ordinal)


def examples(rng: random.Random, n: int, held_out: bool = False) -> list[dict]:
    formats = list(FORMATS)
    return [render(random_date(rng, held_out), rng.choice(formats)) for _ in range(n)]


def tokenizer() -> VocabTokenizer:
    return VocabTokenizer(ALPHABET, model_max_length=32)


def config(vocab_size: int) -> TransformerConfig:
    """seed 000 at 64/4/2/256 (post-norm, ReLU, sinusoidal, LM head with bias), no dropout."""
    return PRESETS["seed000-tiny"].replace(
        name="dates",
        vocab_size=vocab_size,
        max_len=32,
        dropout=0.0,  # the data never repeats: nothing to regularise
        source="trained: dates -> ISO, seed 000's post-norm encoder-decoder at 64/4/2/256",
    )


def encode(tok: VocabTokenizer, batch: list[dict]) -> dict[str, torch.Tensor]:
    """Source ids, decoder input (<s> + target) and labels (target + </s>)."""
    src = tok([ex["source"] for ex in batch])
    target = [tok.encode(ex["target"]) for ex in batch]  # all 10 characters long
    tgt_in = torch.tensor([[tok.bos_token_id, *t] for t in target])  # (B, 11)
    labels = torch.tensor([[*t, tok.eos_token_id] for t in target])  # (B, 11)
    return {
        "input_ids": src["input_ids"],
        "attention_mask": src["attention_mask"],
        "tgt_ids": tgt_in,
        "labels": labels,
    }


def batches(tok: VocabTokenizer, batch_size: int, seed: int) -> Iterator[dict]:
    rng = random.Random(seed)
    while True:
        yield encode(tok, examples(rng, batch_size))


def loss(net: Transformer, batch: dict) -> torch.Tensor:
    logits = net(batch["input_ids"], batch["attention_mask"], tgt_ids=batch["tgt_ids"])
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())


def held_out_set(per_format: int = 50, seed: int = 1234) -> list[dict]:
    """per_format held-out dates in every format (dates never seen in training)."""
    rng = random.Random(seed)
    return [render(random_date(rng, True), fmt) for fmt in FORMATS for _ in range(per_format)]


def evaluate(net: Transformer, per_format: int = 50) -> dict:
    """Held-out exact match (overall and per format) and cross-attention alignment.

    Alignment: for each generated year/month/day character, does the strongest cross-attention
    of a (layer, head), in the step that wrote it, fall inside that field's source span? The
    share over all such characters is computed per head; the best head is reported.
    """
    tok, data = net.tokenizer, held_out_set(per_format)
    enc = tok([ex["source"] for ex in data])
    ids, trace = net.generate(
        enc["input_ids"], max_new_tokens=11, attention_mask=enc["attention_mask"], return_trace=True
    )
    outputs = [tok.decode(row) for row in ids]
    correct = [out == ex["target"] for out, ex in zip(outputs, data, strict=True)]
    per_format_score = {
        fmt: sum(c for c, ex in zip(correct, data, strict=True) if ex["format"] == fmt) / per_format
        for fmt in FORMATS
    }
    # Row t of the trace wrote ids[:, t + 1] (model.generate): target character t of 2026-11-22.
    n_fields = min(len(TARGET_FIELDS), ids.shape[1] - 1)  # fewer if every text stopped early
    cross = trace.attentions["cross"][:, :, :, :n_fields]  # (B, L, H, 10, T_src)
    strongest = cross.argmax(dim=-1)  # (B, L, H, 10) the source position each head looks at most
    start = torch.full((len(data), n_fields), -1)  # (B, 10) the right span of each character
    end = torch.full((len(data), n_fields), -1)
    for b, ex in enumerate(data):
        for t, field in enumerate(TARGET_FIELDS[:n_fields]):
            if field is not None:
                start[b, t], end[b, t] = ex["spans"][field]
    written = ids[:, 1 : n_fields + 1]  # (B, 10)
    counted = (start >= 0) & (written != tok.eos_token_id) & (written != tok.pad_token_id)
    inside = (strongest >= start[:, None, None]) & (strongest < end[:, None, None])
    hits = (inside & counted[:, None, None]).sum(dim=(0, 3)).float()  # (L, H)
    share = hits / counted.sum().clamp(min=1)  # (L, H)
    n_heads = share.shape[1]
    best = int(share.argmax())
    layer, head = divmod(best, n_heads)
    return {
        "exact_match": sum(correct) / len(correct),
        "exact_match_per_format": per_format_score,
        "held_out_examples": len(data),
        "cross_alignment": float(share[layer, head]),
        "cross_alignment_head": {"layer": layer, "head": head},
        "cross_alignment_per_head": [[round(float(v), 4) for v in row] for row in share],
    }
