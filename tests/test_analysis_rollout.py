"""Attention rollout (Abnar & Zuidema 2020) equals the recursion written as plain Python loops."""

from __future__ import annotations

import pytest
import torch

import analysis
from model import PRESETS, Transformer


def loop_rollout(attn, real) -> list:
    """attn nested lists [L][H][T][T], real list of 0/1: R_l = Ã_l R_{l-1} with lists and sums."""
    n = len(real)
    idx = [i for i in range(n) if real[i]]
    flow, out = None, []
    for heads in attn:
        mixed = [[0.0] * n for _ in range(n)]
        for i in idx:
            for j in idx:
                mean = sum(head[i][j] for head in heads) / len(heads)
                mixed[i][j] = 0.5 * mean + (0.5 if i == j else 0.0)
            total = sum(mixed[i])
            mixed[i] = [x / total for x in mixed[i]]
        if flow is None:
            flow = mixed
        else:
            flow = [
                [sum(mixed[i][m] * flow[m][j] for m in range(n)) for j in range(n)]
                for i in range(n)
            ]
        out.append(flow)
    return out


def test_bert_rollout_equals_loops_on_a_padded_batch(bert):
    net, tok = bert
    enc = tok(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    ours = analysis.rollout(tr, "encoder")  # (B, L, T, T)
    assert ours.shape == (2, 6, 8, 8)
    for item in (0, 1):
        real = enc["attention_mask"][item].tolist()
        expected = torch.tensor(loop_rollout(tr.attentions["encoder"][item].tolist(), real))
        torch.testing.assert_close(ours[item], expected, atol=1e-5, rtol=0)
    pad = enc["attention_mask"][1] == 0
    assert torch.all(ours[1][:, pad] == 0) and torch.all(ours[1][:, :, pad] == 0)
    real_rows = ours[1][:, ~pad].sum(-1)  # (L, n_real)
    torch.testing.assert_close(real_rows, torch.ones_like(real_rows), atol=1e-5, rtol=0)


def test_padding_does_not_change_the_real_tokens_rollout(bert):
    net, tok = bert
    batch = tok(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    alone = tok(["a dog"], return_tensors="pt")
    padded = analysis.rollout(net.trace(batch["input_ids"], batch["attention_mask"]))[1]
    single = analysis.rollout(net.trace(alone["input_ids"]))[0]
    n = single.shape[-1]
    torch.testing.assert_close(padded[:, :n, :n], single, atol=1e-5, rtol=0)


def test_decoder_rollout_stays_causal_and_matches_loops():
    net = Transformer(PRESETS["seed001-decoder"])
    enc = net.tokenizer(["hello", "hi"], padding=True)
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    ours = analysis.rollout(tr, "decoder")
    for item in (0, 1):
        real = enc["attention_mask"][item].tolist()
        expected = torch.tensor(loop_rollout(tr.attentions["decoder"][item].tolist(), real))
        torch.testing.assert_close(ours[item], expected, atol=1e-5, rtol=0)
    assert torch.all(ours.triu(1) == 0)  # no token receives from a later one


def test_first_layer_is_half_attention_half_identity(bert):
    net, tok = bert
    tr = net.trace(tok(["one two three"], return_tensors="pt")["input_ids"])
    first = analysis.rollout(tr)[0, 0]
    mean = tr.attentions["encoder"][0, 0].mean(0)
    torch.testing.assert_close(first, 0.5 * mean + 0.5 * torch.eye(len(mean)), atol=1e-6, rtol=0)


def test_cross_attention_cannot_be_rolled_out():
    net = Transformer(PRESETS["seed000-tiny"])
    ids = net.tokenizer(["hi"])["input_ids"]
    tr = net.trace(ids, tgt_ids=ids)
    with pytest.raises(ValueError, match="roll out 'encoder' or 'decoder'"):
        analysis.rollout(tr, "cross")
    assert analysis.rollout(tr, "decoder").shape == (1, 2, 2, 2)
