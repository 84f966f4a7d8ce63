"""Word attention equals Clark et al.'s bpe_utils rule (mode "mean") written as plain loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import analysis
from analysis.words import word_spans


def clark_word_attention(attn: list, groups: list[list[int]]) -> np.ndarray:
    """Clark et al.'s rule (mode "mean") by loops: from word u to word v = the mean over u's
    pieces of the summed attention on v's pieces."""
    out = np.zeros([len(groups), len(groups)])
    for u, queries in enumerate(groups):
        for v, keys in enumerate(groups):
            out[u, v] = sum(sum(attn[q][k] for k in keys) for q in queries) / len(queries)
    return out


def test_bert_word_attention_equals_clark_on_every_head(bert):
    net, tok = bert
    tr = net.trace(tok(["Tokenization of unaffable words"], return_tensors="pt")["input_ids"])
    tokens = tr.tokens[0]
    words, owner = word_spans(tokens)
    assert words == ["[CLS]", "tokenization", "of", "unaffable", "words", "[SEP]"]
    assert len(tokens) > len(words)  # some words really are split
    groups = [[t for t, w in enumerate(owner) if w == k] for k in range(len(words))]
    attn = tr.attentions["encoder"][0]  # (L, H, T, T)
    got_words, ours = analysis.word_attention(attn, tokens)  # (L, H, W, W)
    assert got_words == words and ours.shape == (6, 12, len(words), len(words))
    for layer in (0, 5):
        for head in range(12):
            expected = clark_word_attention(attn[layer, head].double().tolist(), groups)
            np.testing.assert_allclose(ours[layer, head].double().numpy(), expected, atol=1e-6)
    torch.testing.assert_close(ours.sum(-1), torch.ones(6, 12, len(words)))
    one_words, one = analysis.word_attention(attn[2, 3], tokens)  # a single [T, T] map
    assert one_words == words
    torch.testing.assert_close(one, ours[2, 3])


@pytest.mark.parametrize(
    ("tokens", "words"),
    [
        (["[CLS]", "play", "##ing", "[SEP]", "[PAD]"], ["[CLS]", "playing", "[SEP]", "[PAD]"]),
        (["<s>", "Ġthe", "Ġplay", "ing", "</s>"], ["<s>", "the", "playing", "</s>"]),
        (["▁un", "believ", "able", "▁yes"], ["unbelievable", "yes"]),
        (["[CLS]", "##x", "[SEP]", "##y"], ["[CLS]", "x", "[SEP]", "y"]),
    ],
)
def test_word_spans(tokens, words):
    assert word_spans(tokens)[0] == words


def test_a_wrong_token_list_gets_a_sentence():
    with pytest.raises(ValueError, match="pass the tokens the attention was computed over"):
        analysis.word_attention(torch.ones(3, 3) / 3, ["a", "b"])
