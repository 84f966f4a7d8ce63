"""Task "roles": who did what to whom, in Chinese and English (issue 7, item 3).

Subject-verb-object sentences from a small grammar (我喜欢你, She helps him, Tom sees Anna), each
character tagged agent / action / patient / other by an encoder (seed 004's BERT-style pre-norm
encoder with learned positions) with a per-token classifier. 我喜欢你 and 你喜欢我 hold the same
characters: only word order tells them apart, so without positional encoding an encoder sees the
same set and must give both the same answer (seed 001's example, the seeds' reason for PE).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator

import torch

from model.config import PRESETS, TransformerConfig
from model.tokenizers import VocabTokenizer
from model.trained import OTHER
from model.transformer import Transformer

LABELS = (OTHER, "agent", "action", "patient")
ZH_NOUNS = ("我", "你", "他", "她", "我们", "他们", "小明", "小红", "老师", "妈妈")
ZH_VERBS = ("喜欢", "讨厌", "帮助", "看见")
ZH_ADVERBS = ("", "", "很", "也", "不")  # 我很喜欢你: a word before the verb moves every position
# English marks case on pronouns (I / me), so (subject, object) forms; names keep one form.
EN_NOUNS = (
    ("I", "me"), ("you", "you"), ("he", "him"), ("she", "her"), ("we", "us"), ("they", "them"),
    ("Tom", "Tom"), ("Anna", "Anna"),
)  # fmt: skip
EN_THIRD_SINGULAR = {"he", "she", "Tom", "Anna"}
EN_VERBS = ("like", "hate", "help", "see")
EN_ADVERBS = ("", "", "really ", "also ")
HELD_OUT_PERCENT = 20  # of the (language, agent, verb, patient) triples, never seen in training


def tokenizer() -> VocabTokenizer:
    """Every character the grammar can write, Chinese first, in a fixed order."""
    texts = [sentence(t, adverb, True)["text"] for t in triples() for adverb in range(5)]
    chars = set("".join(texts))
    return VocabTokenizer(sorted(chars, key=lambda c: (c.isascii(), c)), model_max_length=32)


def config(vocab_size: int) -> TransformerConfig:
    """seed 004's encoder at 64/4/2/256 (pre-norm, GELU, learned positions, embedding LayerNorm,
    no final LayerNorm) plus a per-token classifier over LABELS; no dropout."""
    return PRESETS["seed004-encoder"].replace(
        name="roles",
        vocab_size=vocab_size,
        d_model=64,
        d_ff=256,
        max_len=32,
        dropout=0.0,
        token_labels=LABELS,
        source="trained: who did what to whom, seed 004's BERT-style encoder at 64/4/2/256 "
        "with a per-token role classifier",
    )


def _join(parts: list[tuple[str, str]]) -> dict:
    """(text, label) pieces -> {"text", "labels" per character, "spans" of agent and patient}."""
    text, labels, spans = "", [], {}
    for piece, label in parts:
        if label in ("agent", "patient"):
            spans[label] = (len(text), len(text) + len(piece))
        text += piece
        labels += [label] * len(piece)
    return {"text": text, "labels": labels, "spans": spans}


def chinese(agent: str, verb: str, patient: str, adverb: str = "", stop: str = "") -> dict:
    parts = [(agent, "agent"), (adverb, OTHER), (verb, "action"), (patient, "patient")]
    return _join([*parts, (stop, OTHER)])


def english(agent: int, verb: str, patient: int, adverb: str = "", stop: str = "") -> dict:
    """agent, patient index EN_NOUNS; the verb agrees with the subject (he likes, I like)."""
    subject, obj = EN_NOUNS[agent][0], EN_NOUNS[patient][1]
    verb = verb + ("s" if subject in EN_THIRD_SINGULAR else "")
    subject = subject[0].upper() + subject[1:]
    parts = [(subject, "agent"), (" " + adverb, OTHER), (verb, "action"), (" ", OTHER)]
    return _join([*parts, (obj, "patient"), (stop, OTHER)])


def triples() -> list[tuple[str, int, str, int]]:
    """Every (language, agent, verb, patient) with two different people."""
    out = []
    for lang, n_nouns, verbs in (("zh", len(ZH_NOUNS), ZH_VERBS), ("en", len(EN_NOUNS), EN_VERBS)):
        for a in range(n_nouns):
            for p in range(n_nouns):
                if a != p:
                    out += [(lang, a, v, p) for v in verbs]
    return out


def is_held_out(triple: tuple) -> bool:
    """A fixed, seed-free split: the CRC of the triple picks HELD_OUT_PERCENT of them."""
    return zlib.crc32(repr(triple).encode()) % 100 < HELD_OUT_PERCENT


def sentence(triple: tuple, adverb: int = 0, stop: bool = False) -> dict:
    lang, a, verb, p = triple
    if lang == "zh":
        return chinese(ZH_NOUNS[a], verb, ZH_NOUNS[p], ZH_ADVERBS[adverb % 5], "。" * stop)
    return english(a, verb, p, EN_ADVERBS[adverb % 4], "." * stop)


def encode(tok: VocabTokenizer, data: list[dict]) -> dict[str, torch.Tensor]:
    enc = tok([ex["text"] for ex in data])
    labels = torch.full_like(enc["input_ids"], -100)  # (B, T); -100 = padding, no loss
    for b, ex in enumerate(data):
        labels[b, : len(ex["labels"])] = torch.tensor([LABELS.index(x) for x in ex["labels"]])
    return {**enc, "labels": labels}


def batches(tok: VocabTokenizer, batch_size: int, seed: int) -> Iterator[dict]:
    rng = random.Random(seed)
    pool = [t for t in triples() if not is_held_out(t)]
    while True:
        data = [
            sentence(rng.choice(pool), rng.randrange(5), rng.random() < 0.5)
            for _ in range(batch_size)
        ]
        yield encode(tok, data)


def loss(net: Transformer, batch: dict) -> torch.Tensor:
    logits = net(batch["input_ids"], batch["attention_mask"])  # (B, T, n_labels)
    return torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100
    )


def held_out_set() -> list[dict]:
    """Every held-out triple with every adverb, with and without a full stop."""
    return [
        sentence(t, adverb, stop)
        for t in triples()
        if is_held_out(t)
        for adverb in range(5 if t[0] == "zh" else 4)
        for stop in (False, True)
    ]


def swapped_pairs() -> list[dict]:
    """Sentences whose swapped twin has exactly the same characters (我喜欢你 / 你喜欢我,
    Tom sees Anna / Anna sees Tom): a model blind to order must answer both the same."""
    out = []
    for t in triples():
        lang, a, verb, p = t
        one, two = sentence(t), sentence((lang, p, verb, a))
        if sorted(one["text"]) == sorted(two["text"]):
            out.append(one)
    return out


def scores(net: Transformer, data: list[dict], positions: bool = True) -> dict:
    """Token and sentence accuracy, and agent choice: of the sentence's two people, the one whose
    characters have the higher mean logit(agent) - logit(patient) is called the agent (chance =
    50 %; logits, not probabilities, which saturate to exact ties in a confident model)."""
    batch = encode(net.tokenizer, data)
    with torch.no_grad():
        logits = net(batch["input_ids"], batch["attention_mask"], positions=positions)
    labels = batch["labels"]  # (B, T)
    real = labels != -100
    right = (logits.argmax(-1) == labels) | ~real  # (B, T)
    lean = logits[..., LABELS.index("agent")] - logits[..., LABELS.index("patient")]  # (B, T)
    chosen = 0
    for b, ex in enumerate(data):
        (a0, a1), (p0, p1) = ex["spans"]["agent"], ex["spans"]["patient"]
        chosen += int(lean[b, a0:a1].mean() > lean[b, p0:p1].mean())
    return {
        "token_accuracy": float(right[real].float().mean()),
        "sentence_accuracy": float(right.all(dim=1).float().mean()),
        "agent_choice_accuracy": chosen / len(data),
        "sentences": len(data),
    }


def evaluate(net: Transformer) -> dict:
    """Held-out sentences with positions; the swapped-pair set with and without positions."""
    held_out, pairs = held_out_set(), swapped_pairs()
    return {
        "held_out": scores(net, held_out),
        "swapped_pairs": scores(net, pairs),
        "swapped_pairs_positions_off": scores(net, pairs, positions=False),
    }
