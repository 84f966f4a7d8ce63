"""Word-level attention from sub-word tokens, Clark et al. 2019, "What does BERT look at?" (§4.1).

Their bpe_utils.get_word_word_attention: attention *to* a split word is the sum of the weights on
its pieces (so every row still sums to 1), attention *from* a split word is the mean of its
pieces' rows (mode "mean", the one the paper uses).
"""

from __future__ import annotations

import torch

from analysis.tokens import SEPARATORS

SPECIAL = frozenset({"[CLS]", "[SEP]", "[PAD]", "[MASK]", "<s>", "</s>", "<pad>", *SEPARATORS})
SPECIAL |= {"<|endoftext|>", "<unk>"}  # GPT-2's start, end and padding; LLaMA 2's unknown
# Byte-level BPE and SentencePiece mark a word's first piece; the page reads those pieces as
# text (model/pieces.py), where the mark is the space itself.
WORD_STARTS = ("Ġ", "▁", " ")


def word_spans(tokens: list[str]) -> tuple[list[str], list[int]]:
    """(words, word index of every token): which tokens make one word.

    WordPiece: a "##" piece continues the word before it. Byte-level BPE / SentencePiece (some
    token starts with "Ġ", "▁" or, read as text, a space): a piece without that mark continues
    the word before it.
    Special tokens ([CLS], [SEP], <s>, padding) are words of their own, as in Clark et al.
    """
    marked = any(t.startswith(WORD_STARTS) for t in tokens)
    words: list[str] = []
    owner: list[int] = []
    previous_special = True
    for token in tokens:
        special = token in SPECIAL
        if marked:
            joins = not token.startswith(WORD_STARTS)
            piece = token.lstrip("Ġ▁ ")
        else:
            joins = token.startswith("##")
            piece = token.removeprefix("##")
        if special or previous_special or not joins or not words:
            words.append(token if special else piece)
        else:
            words[-1] += piece
        owner.append(len(words) - 1)
        previous_special = special
    return words, owner


def word_attention(attention: torch.Tensor, tokens: list[str]) -> tuple[list[str], torch.Tensor]:
    """(words, word-to-word attention [..., W, W]) from token attention [..., T, T].

    Clark et al. 2019 (bpe_utils, mode "mean"): the key pieces of a word are summed, its query
    pieces averaged; rows still sum to 1. Words as in word_spans.
    """
    if attention.shape[-2:] != (len(tokens), len(tokens)):
        raise ValueError(
            f"The attention is {tuple(attention.shape[-2:])} over tokens, but {len(tokens)} "
            "tokens were given: pass the tokens the attention was computed over."
        )
    words, owner = word_spans(tokens)
    member = torch.zeros(len(tokens), len(words), dtype=attention.dtype, device=attention.device)
    member[torch.arange(len(tokens)), torch.tensor(owner)] = 1  # (T, W) token -> its word
    to_words = attention @ member  # (..., T, W): key pieces summed
    mean = (member / member.sum(0, keepdim=True)).T  # (W, T): query pieces averaged
    return words, mean @ to_words  # (..., W, W)
