"""Task "induction": random letter strings, repeated, read by a 2-layer decoder (issue 7, item 2).

`<s> qzvkdm qzvkdm`: the first copy cannot be predicted, the second can, by copying what followed
the token's earlier occurrence. Olsson et al. (2022) show how 2-layer attention models do it: a
previous-token head (layer 0) writes "my predecessor was q" into each position, and an induction
head (layer 1) finds the earlier position whose predecessor matches the current token and copies
it. The model is seed 001's pre-norm decoder with its MLP(dim, dim): d_ff = d_model, ReLU.

The loss counts the second copy only (from its second letter on): the first copy is random letters
no model can predict, and its noise only delays the heads' forming.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator

import torch

from model.config import PRESETS, TransformerConfig
from model.tokenizers import VocabTokenizer
from model.transformer import Transformer

ALPHABET = string.ascii_lowercase
MIN_LEN, MAX_LEN = 6, 20  # length of the repeated string


def tokenizer() -> VocabTokenizer:
    return VocabTokenizer(ALPHABET, model_max_length=2 * MAX_LEN + 1)


def config(vocab_size: int) -> TransformerConfig:
    """seed 001's pre-norm decoder at 64/4/2, FFN MLP(dim, dim) with ReLU, no dropout."""
    return PRESETS["seed001-decoder"].replace(
        name="induction",
        vocab_size=vocab_size,
        d_model=64,
        n_heads=4,
        n_layers=2,  # one layer cannot compose a previous-token head with an induction head
        d_ff=64,
        max_len=2 * MAX_LEN + 1,
        dropout=0.0,
        source="trained: repeated random strings, seed 001's pre-norm decoder at 64/4/2/64",
    )


def example(rng: random.Random) -> str:
    """A string of distinct random letters, twice: every repeated letter has one earlier match."""
    half = "".join(rng.sample(ALPHABET, rng.randint(MIN_LEN, MAX_LEN)))
    return half + half


def encode(tok: VocabTokenizer, texts: list[str]) -> dict[str, torch.Tensor]:
    """<s> + text, right-padded; labels: the next token where it is predictable, else -100.

    With <s> at 0, the first copy fills 1..L and the second L+1..2L; position p predicts p + 1,
    so positions L+1..2L-1 (the second copy's letters 2..L) carry labels.
    """
    enc = tok(texts)
    bos = torch.full((len(texts), 1), tok.bos_token_id)
    ids = torch.cat([bos, enc["input_ids"]], dim=1)  # (B, 1 + T)
    mask = torch.cat([torch.ones_like(bos), enc["attention_mask"]], dim=1)
    labels = torch.full_like(ids[:, 1:], -100)  # (B, T)
    for b, text in enumerate(texts):
        half = len(text) // 2
        labels[b, half + 1 : 2 * half] = ids[b, half + 2 : 2 * half + 1]
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
    rng = random.Random(seed)
    return [example(rng) for _ in range(n)]


def evaluate(net: Transformer, n: int = 400) -> dict:
    """In-context accuracy and the two heads' scores (Olsson et al. 2022) on held-out strings.

    With <s> at 0, the first copy fills 1..L and the second L+1..2L. previous-token score of a
    head: mean weight of position i on i-1 (i >= 1). induction score: mean weight of a second-copy
    position i on i-L+1, the token after the earlier occurrence of its own token.
    """
    texts = held_out_set(n)
    batch = encode(net.tokenizer, texts)
    trace = net.trace(batch["input_ids"], batch["attention_mask"], with_logits=True)
    attn = trace.attentions["decoder"]  # (B, L, H, T, T)
    predicted = trace.logits[:, :-1].argmax(-1)  # (B, T): the guess for position i + 1
    prev, induct = [], []
    hits = {"first": [0, 0], "second": [0, 0]}
    for b, text in enumerate(texts):
        half = len(text) // 2
        i = torch.arange(1, 2 * half + 1)
        prev.append(attn[b, :, :, i, i - 1])  # (L, H, 2·half)
        j = torch.arange(half + 1, 2 * half + 1)
        induct.append(attn[b, :, :, j, j - half + 1])  # (L, H, half)
        right = (predicted[b] == batch["input_ids"][b, 1:]).tolist()
        # position p predicts p + 1: the second copy's tokens 2..L are positions half+1..2·half-1
        second = right[half + 1 : 2 * half]
        first = right[1:half]  # the first copy's tokens 2..L: unpredictable but for elimination
        hits["second"][0] += sum(second)
        hits["second"][1] += len(second)
        hits["first"][0] += sum(first)
        hits["first"][1] += len(first)
    prev_score = torch.cat(prev, dim=-1).mean(-1)  # (L, H)
    induct_score = torch.cat(induct, dim=-1).mean(-1)  # (L, H)
    n_heads = prev_score.shape[1]
    p_layer, p_head = divmod(int(prev_score.argmax()), n_heads)
    i_layer, i_head = divmod(int(induct_score.argmax()), n_heads)
    return {
        "in_context_accuracy": hits["second"][0] / hits["second"][1],
        "first_copy_accuracy": hits["first"][0] / hits["first"][1],
        "held_out_strings": n,
        "previous_token_score": float(prev_score[p_layer, p_head]),
        "previous_token_head": {"layer": p_layer, "head": p_head},
        "induction_score": float(induct_score[i_layer, i_head]),
        "induction_head": {"layer": i_layer, "head": i_head},
        "previous_token_score_per_head": [[round(float(v), 4) for v in r] for r in prev_score],
        "induction_score_per_head": [[round(float(v), 4) for v in r] for r in induct_score],
    }
