"""Task "induction": any text typed twice, read by a 3-layer decoder (issue 7 item 2, issue 21).

`<s> mississippi mississippi`: the first copy cannot be predicted, the second can, by copying what
followed the current token's earlier occurrence. Olsson et al. (2022) show how attention models do
it: a previous-token head writes "my predecessor was q" into each position, and an induction head
finds the earlier position whose predecessor matches the current token and copies what is there.
Text drawn with repeats needs more than one token of context (in "mississippi" an "s" follows
"i" four times), so layer 0 has heads at offsets 1 and 2 and the later layers match longer runs.

Vocabulary: lowercase letters, digits and space; any other character is [UNK]. The loss counts
the second copy only (from its second token on): the first copy is text no model can predict.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator

import torch

from model.config import PRESETS, TransformerConfig
from model.tokenizers import VocabTokenizer
from model.transformer import Transformer
from train.induction_data import MAX_GAP, MAX_LEN, example, random_text

ALPHABET = string.ascii_lowercase + string.digits + " "
PROBES = (
    "hello hello",
    "the cat sat the cat sat",
    "mississippi mississippi",
    "qzvkmwx qzvkmwx",
    "abcabd abcabd",
)  # not put in the training data (see DATA for what chance put there)
MAX_TEXT = 2 * MAX_LEN + MAX_GAP  # two copies and what separates them
DATA = (
    "made by train/induction.py, seeded, no downloads: a copy of 3-20 characters typed twice, "
    "the copies apart by nothing, one space (mostly) or a few characters; half the copies random "
    "strings drawn with repeats from letters, digits and spaces, half word-like strings of "
    "syllables and words drawn with repeats; no probe text is put in on purpose (by chance "
    "'hello' occurs inside 3 of the 320,000 training texts and 'abcabd' inside 10)"
)


def tokenizer() -> VocabTokenizer:
    return VocabTokenizer(ALPHABET, model_max_length=MAX_TEXT + 1)


def config(vocab_size: int) -> TransformerConfig:
    """seed 001's pre-norm decoder at 64/4/3/128 (ReLU, sinusoidal positions), no dropout."""
    return PRESETS["seed001-decoder"].replace(
        name="induction",
        vocab_size=vocab_size,
        d_model=64,
        n_heads=4,
        n_layers=3,  # previous-token heads, then induction heads that can match two tokens back
        d_ff=128,
        max_len=MAX_TEXT + 1,
        dropout=0.0,
        source="trained: text typed twice, seed 001's pre-norm decoder at 64/4/3/128",
    )


def copy_span(text: str) -> tuple[int, int]:
    """(n, start): the text ends with a copy of its first n characters, starting at `start`
    ("abc abc" -> (3, 4), "abcabc" -> (3, 3)); the longest such copy, (0, len) when none."""
    for n in range(len(text) // 2, 0, -1):
        if text[:n] == text[-n:]:
            return n, len(text) - n
    return 0, len(text)


def encode(tok: VocabTokenizer, texts: list[str]) -> dict[str, torch.Tensor]:
    """<s> + text, right-padded; labels: the next token where it is predictable, else -100.

    With <s> at 0 the first copy fills 1..n and the second start+1..start+n; position p
    predicts p + 1, so positions start+1..start+n-1 (predicting the second copy's tokens 2..n)
    carry labels.
    """
    enc = tok(texts)
    bos = torch.full((len(texts), 1), tok.bos_token_id)
    ids = torch.cat([bos, enc["input_ids"]], dim=1)  # (B, 1 + T)
    mask = torch.cat([torch.ones_like(bos), enc["attention_mask"]], dim=1)
    labels = torch.full_like(ids[:, 1:], -100)  # (B, T)
    for b, text in enumerate(texts):
        n, start = copy_span(text)
        labels[b, start + 1 : start + n] = ids[b, start + 2 : start + n + 1]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def batches(tok: VocabTokenizer, batch_size: int, seed: int) -> Iterator[dict]:
    rng = random.Random(seed)
    while True:
        yield encode(tok, [example(rng) for _ in range(batch_size)])


def loss(net: Transformer, batch: dict) -> torch.Tensor:
    logits = net(batch["input_ids"], batch["attention_mask"])[:, :-1]  # (B, T, vocab)
    return torch.nn.functional.cross_entropy(
        logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100
    )


def held_out_set(n: int = 400, seed: int = 1234) -> list[str]:
    """Random strings of 8-20 characters drawn with repeats, spaces included, each typed twice."""
    rng = random.Random(seed)
    return [random_text(rng, 8, 20, " ") for _ in range(n)]


def copy_hits(net: Transformer, texts: list[str]) -> tuple[list[list[bool]], object]:
    """Per text, whether each of the second copy's tokens 2..n is the model's top guess."""
    batch = encode(net.tokenizer, texts)
    trace = net.trace(batch["input_ids"], batch["attention_mask"], with_logits=True)
    predicted = trace.logits[:, :-1].argmax(-1)  # (B, T): the guess for position p + 1
    right = predicted == batch["input_ids"][:, 1:]  # (B, T)
    spans = [copy_span(text) for text in texts]
    hits = [right[b, start + 1 : start + n].tolist() for b, (n, start) in enumerate(spans)]
    return hits, trace


def head_scores(trace, texts: list[str]) -> dict[str, torch.Tensor]:
    """Mean attention [L, H] on the token 1 and 2 back (all positions) and on the induction
    target (Olsson et al. 2022): a second-copy position i looks at the token after its own earlier
    copy, i - start + 1."""
    attn = trace.attentions["decoder"]  # (B, L, H, T, T)
    prev1, prev2, induct = [], [], []
    for b, text in enumerate(texts):
        n, start = copy_span(text)
        i = torch.arange(2, len(text) + 1)
        prev1.append(attn[b, :, :, i, i - 1])  # (L, H, T - 1)
        prev2.append(attn[b, :, :, i, i - 2])
        j = torch.arange(start + 1, start + n)
        induct.append(attn[b, :, :, j, j - start + 1])  # (L, H, n - 1)
    return {
        name: torch.cat(parts, dim=-1).mean(-1)  # (L, H)
        for name, parts in (("previous_1", prev1), ("previous_2", prev2), ("induction", induct))
    }


def best_head(score: torch.Tensor) -> dict:
    layer, head = divmod(int(score.argmax()), score.shape[1])
    return {"layer": layer, "head": head, "score": round(float(score[layer, head]), 4)}


def heads_doing(score: torch.Tensor, at_least: float) -> list[dict]:
    """Every head whose score [L, H] reaches at_least, best first: which heads do this job."""
    found = [
        {"layer": layer, "head": head, "score": round(float(score[layer, head]), 4)}
        for layer in range(score.shape[0])
        for head in range(score.shape[1])
        if score[layer, head] >= at_least
    ]
    return sorted(found, key=lambda h: -h["score"])


def evaluate(net: Transformer, n: int = 400) -> dict:
    """In-context copy accuracy, the probe texts and the heads' scores (Olsson et al. 2022)."""
    texts = held_out_set(n)
    hits, trace = copy_hits(net, texts)
    scores = head_scores(trace, texts)
    probe_hits, _ = copy_hits(net, list(PROBES))
    # The first copy is unpredictable but for luck: its accuracy is the baseline.
    first = encode(net.tokenizer, texts)
    guess = trace.logits[:, :-1].argmax(-1) == first["input_ids"][:, 1:]  # (B, T)
    first_hits = [guess[b, 1 : copy_span(text)[0]].tolist() for b, text in enumerate(texts)]
    flat = [h for row in hits for h in row]
    first_flat = [h for row in first_hits for h in row]
    return {
        "in_context_accuracy": sum(flat) / len(flat),
        "first_copy_accuracy": sum(first_flat) / len(first_flat),
        "held_out_strings": n,
        "held_out": "random strings of 8-20 characters (letters, digits, spaces) drawn with "
        "repeats, each typed twice",
        "probes": {text: all(row) for text, row in zip(PROBES, probe_hits, strict=True)},
        "previous_token_head": best_head(scores["previous_1"]),
        "previous_token_2_head": best_head(scores["previous_2"]),
        "induction_head": best_head(scores["induction"]),
        "heads": {  # a head whose mean weight on that target is at least 0.15 (0.5: induction)
            "previous_token": heads_doing(scores["previous_1"], 0.15),
            "previous_token_2": heads_doing(scores["previous_2"], 0.15),
            "induction": heads_doing(scores["induction"], 0.5),
        },
        "previous_token_score": float(scores["previous_1"].max()),
        "induction_score": float(scores["induction"].max()),
        **{
            f"{name}_score_per_head": [[round(float(v), 4) for v in row] for row in score]
            for name, score in scores.items()
        },
    }
