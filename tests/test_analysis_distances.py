"""Head distances equal Clark et al.'s JS divergence by its formula; classical MDS recovers 2-D."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import analysis


def clark_distances(attns: np.ndarray, every: int = 1) -> np.ndarray:
    """Clark et al.'s divergence from its formula, pair by pair and row by row, in plain Python:
    rows smoothed 0.999·p + 0.001/n, JS = ½ KL(p‖m) + ½ KL(q‖m) in nats, mean over rows."""
    heads = [h for layer in attns.tolist() for h in layer]  # L·H lists of [rows][n]
    n, rows = len(heads[0][0]), len(heads[0])  # keys (the smoothing's n), query rows
    smooth = [[[0.999 * x + 0.001 / n for x in row] for row in h] for h in heads]
    out = np.full([len(heads), len(heads)], np.nan)
    for a in range(0, len(heads), every):
        for b in range(len(heads)):
            total = 0.0
            for p, q in zip(smooth[a], smooth[b], strict=True):
                m = [(x + y) / 2 for x, y in zip(p, q, strict=True)]
                total += 0.5 * sum(x * math.log(x / z) for x, z in zip(p, m, strict=True))
                total += 0.5 * sum(y * math.log(y / z) for y, z in zip(q, m, strict=True))
            out[a, b] = total / rows
    return out


@pytest.mark.parametrize("item", [0, 1])
def test_bert_head_distances_equal_clark_on_a_padded_batch(bert, item):
    net, tok = bert
    enc = tok(["the cat sat on the mat .", "a dog"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    real = enc["attention_mask"][item].bool()
    attn = tr.attentions["encoder"][item][:, :, real][:, :, :, real].double().numpy()
    ours = analysis.head_distances(tr, "encoder", item)
    assert ours.shape == (72, 72)
    expected = clark_distances(attn, every=5)  # rows 0, 5, 10, ... (plain Python is slow)
    np.testing.assert_allclose(ours.numpy()[::5], expected[::5], atol=1e-10)
    assert torch.all(ours.diagonal() == 0) and torch.allclose(ours, ours.T)
    assert float(ours.max()) <= np.log(2)  # a JS divergence in nats, not its square root


def test_fewer_query_rows_average_clarks_divergence_over_exactly_those_rows(bert):
    """queries=k: the same divergence, averaged over k evenly spaced real query rows (first and
    last included) — what the page's map uses past 64 tokens."""
    from analysis.distances import query_rows

    assert query_rows(5, None).tolist() == [0, 1, 2, 3, 4] == query_rows(5, 8).tolist()
    assert query_rows(10, 4).tolist() == [0, 3, 6, 9]
    net, tok = bert
    enc = tok(["the cat sat on the mat while a dog barked ."], return_tensors="pt")
    tr = net.trace(enc["input_ids"])
    attn = tr.attentions["encoder"][0].double()  # (L, H, n, n)
    rows = query_rows(attn.shape[-2], 4)
    ours = analysis.head_distances(tr, "encoder", queries=4)
    expected = clark_distances(attn[:, :, rows].numpy(), every=7)  # rows of heads 0, 7, 14, …
    np.testing.assert_allclose(ours.numpy()[::7], expected[::7], atol=1e-10)
    assert not torch.allclose(ours, analysis.head_distances(tr, "encoder"))  # fewer rows differ


def test_padding_changes_nothing_the_text_alone_gives(bert):
    net, tok = bert
    batch = tok(["the cat sat on the mat .", "a dog"], padding=True, return_tensors="pt")
    alone = tok(["a dog"], return_tensors="pt")
    padded = analysis.head_distances(net.trace(batch["input_ids"], batch["attention_mask"]), item=1)
    single = analysis.head_distances(net.trace(alone["input_ids"]), item=0)
    torch.testing.assert_close(padded, single, atol=1e-5, rtol=0)


def test_classical_mds_recovers_points_in_the_plane():
    points = torch.randn(30, 2, dtype=torch.float64)
    distances = torch.cdist(points, points)
    found = analysis.mds_2d(distances)
    assert found.shape == (30, 2)
    torch.testing.assert_close(torch.cdist(found, found), distances, atol=1e-6, rtol=0)
    torch.testing.assert_close(found.mean(0), torch.zeros(2, dtype=torch.float64))
    again = analysis.mds_2d(distances)
    assert torch.equal(found, again)


def test_mds_of_bert_heads_keeps_near_heads_near(bert):
    net, tok = bert
    tr = net.trace(tok(["the cat sat on the mat ."], return_tensors="pt")["input_ids"])
    distances = analysis.head_distances(tr)
    points = analysis.mds_2d(distances)
    d2 = torch.cdist(points, points)
    # The rank correlation between embedded and JS distances is high (Clark et al.'s Figure 6).
    iu = torch.triu_indices(72, 72, 1)
    a, b = distances[iu[0], iu[1]], d2[iu[0], iu[1]]
    ranks = [x.argsort().argsort().double() for x in (a, b)]
    rho = torch.corrcoef(torch.stack(ranks))[0, 1]
    assert rho > 0.7
