"""Attention flow (Abnar & Zuidema 2020) equals networkx's Edmonds–Karp max-flow on their graph."""

from __future__ import annotations

import networkx as nx
import pytest
import torch

import analysis
from model import load_trained

TOL = 1e-6  # capacities are rounded to 2^-28: far below this


def networkx_flow(attn, real, layer) -> torch.Tensor:
    """Their compute_flows, by hand: attn [L, H, T, T] as nested lists, real a list of 0/1."""
    n_layers, t = len(attn), len(real)
    idx = [i for i in range(t) if real[i]]
    graph = nx.DiGraph()
    for level in range(n_layers):
        heads = attn[level]
        for i in idx:
            mixed = {j: sum(h[i][j] for h in heads) / len(heads) + (i == j) for j in idx}
            total = sum(mixed.values())
            for j in idx:  # node (level+1, i) reads node (level, j)
                graph.add_edge((level + 1, i), (level, j), capacity=mixed[j] / total)
    out = torch.zeros(t, t, dtype=torch.float64)
    for i in idx:
        for j in idx:
            out[i, j] = nx.maximum_flow_value(
                graph, (layer + 1, i), (0, j), flow_func=nx.algorithms.flow.edmonds_karp
            )
        out[i] /= out[i].sum()
    return out


def test_the_issue_sentence_reproduces_the_published_numbers(bert):
    net, tok = bert
    tr = net.trace(tok(["time flies like an arrow"], return_tensors="pt")["input_ids"])
    flow = analysis.attention_flow_row(tr, "encoder", 0, -1, 0)
    expected = [0.285, 0.111, 0.113, 0.113, 0.114, 0.112, 0.152]
    assert flow.tolist() == pytest.approx(expected, abs=2e-3)
    assert analysis.rollout(tr)[0, -1, 0, 0] == pytest.approx(0.748, abs=2e-3)


@pytest.mark.parametrize(("item", "layer"), [(0, -1), (1, 2), (1, 0)])
def test_bert_flow_equals_networkx_on_a_padded_batch(bert, item, layer):
    net, tok = bert
    enc = tok(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    real = enc["attention_mask"][item].tolist()
    expected = networkx_flow(tr.attentions["encoder"][item].tolist(), real, layer % 6)
    ours = analysis.attention_flow(tr, "encoder", item, layer)  # (T, T)
    torch.testing.assert_close(ours.double(), expected, atol=TOL, rtol=0)
    row = analysis.attention_flow_row(tr, "encoder", item, layer, 1)
    torch.testing.assert_close(row.double(), expected[1], atol=TOL, rtol=0)
    if 0 in real:  # padded rows and columns are 0
        pad = torch.tensor(real) == 0
        assert torch.all(ours[pad] == 0) and torch.all(ours[:, pad] == 0)


def test_layer_zero_flow_is_the_first_rollout_layer(bert):
    net, tok = bert
    tr = net.trace(tok(["one two three"], return_tensors="pt")["input_ids"])
    torch.testing.assert_close(analysis.attention_flow(tr, layer=0), analysis.rollout(tr)[0, 0])


def test_decoder_flow_is_causal_and_equals_networkx():
    net = load_trained("induction")
    enc = net.tokenizer(["qzvkdmqzvkdm", "abcab"], padding=True)
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    for item in (0, 1):
        real = enc["attention_mask"][item].tolist()
        last = tr.config.n_layers - 1
        expected = networkx_flow(tr.attentions["decoder"][item].tolist(), real, last)
        ours = analysis.attention_flow(tr, "decoder", item)
        torch.testing.assert_close(ours.double(), expected, atol=TOL, rtol=0)
        assert torch.all(ours.triu(1) == 0)


def test_bad_arguments_get_a_sentence(bert):
    net, tok = bert
    tr = net.trace(tok(["hi"], return_tensors="pt")["input_ids"])
    with pytest.raises(ValueError, match="outside this stack's 6 layers"):
        analysis.attention_flow(tr, layer=6)
    with pytest.raises(ValueError, match="outside this batch"):
        analysis.attention_flow(tr, item=1)
    with pytest.raises(ValueError, match="row 9 is outside"):
        analysis.attention_flow_row(tr, row=9)
