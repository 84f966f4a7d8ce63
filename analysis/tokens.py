"""Which positions of a stack are real tokens, and which are [CLS], [SEP] or punctuation.

Shared by every measure: padding is excluded as a query and as a key (Clark et al. 2019 average
over real tokens only).
"""

from __future__ import annotations

import unicodedata

import torch

from model.trace import Trace

SEPARATORS = frozenset({"[SEP]", "</s>"})  # BERT's separator, RoBERTa/BART's (and our <s>...</s>)
# WordPiece continuation, byte-level BPE and SentencePiece marks, and the space a byte-level piece
# read as text starts with (model/pieces.py)
WORD_PREFIXES = ("##", "Ġ", "▁", " ")


def check_stack(trace: Trace, stack: str) -> None:
    """Raise one actionable sentence when the trace has no such attention stack."""
    if stack not in trace.attentions:
        have = ", ".join(repr(s) for s in trace.stacks) or "none"
        raise ValueError(f"This trace has no {stack!r} attention; its stacks are {have}.")


def real_tokens(trace: Trace, stack: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(query mask [B, T_q], key mask [B, T_k]) as bool, True = a real (non-padding) token."""
    check_stack(trace, stack)
    src = trace.attention_mask.bool()  # (B, T_src)
    tgt = trace.tgt_attention_mask.bool() if trace.tgt_attention_mask is not None else src
    if stack == "encoder":
        return src, src
    if stack == "decoder":
        return tgt, tgt
    return tgt, src  # cross: target queries over source keys


def is_punctuation(token: str) -> bool:
    """A token made only of Unicode punctuation (P*), once its sub-word mark is stripped.

    Clark et al. 2019 count "." and ","; every punctuation character is counted here, so that
    "?", ";", "，" and "。" (Chinese) are too.
    """
    for prefix in WORD_PREFIXES:
        token = token.removeprefix(prefix)
    return bool(token) and all(unicodedata.category(c).startswith("P") for c in token)


def token_classes(tokens: list[str], real: torch.Tensor) -> dict[str, torch.Tensor]:
    """Bool masks [T] of the first real token, the separators and the punctuation of one text."""
    real = real.bool().cpu()
    first = torch.zeros(len(tokens), dtype=torch.bool)
    if real.any():
        first[int(real.nonzero()[0])] = True
    sep = torch.tensor([t in SEPARATORS for t in tokens], dtype=torch.bool) & real
    punct = torch.tensor([is_punctuation(t) for t in tokens], dtype=torch.bool) & real
    return {"first": first, "sep": sep, "punct": punct}
