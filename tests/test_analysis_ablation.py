"""ablation_effects equals a copy of the model whose W_O ignores the heads, measured by hand."""

from __future__ import annotations

import copy

import pytest
import torch

import analysis
from model import PRESETS, Transformer, TransformerConfig

SMALL = TransformerConfig(name="small", d_model=32, n_heads=4, n_layers=2, d_ff=64, seed=3)


def without_heads(net, stack: str, heads, mean_context=None):
    """A copy whose W_O reads zeros from the heads (HF's zero head_mask done by hand); with
    mean_context {(layer, head): [d_head]} the copy's W_O bias adds that head's mean instead."""
    clone = copy.deepcopy(net)
    d_head = clone.config.d_head
    for layer, head in heads:
        block = (clone.encoder if stack == "encoder" else clone.decoder).layers[layer]
        w_o = (block.cross_attn if stack == "cross" else block.self_attn).w_o
        cols = slice(head * d_head, (head + 1) * d_head)
        with torch.no_grad():
            if mean_context is not None:
                w_o.bias += mean_context[layer, head] @ w_o.weight[:, cols].T
            w_o.weight[:, cols] = 0.0
    return clone


def by_hand(base, ablated, real):
    """hidden_change by loops over the real tokens of each text."""
    changes = []
    for b in range(base.shape[0]):
        for t in range(base.shape[1]):
            if real[b][t]:
                changes.append(float((ablated[b, t] - base[b, t]).norm() / base[b, t].norm()))
    return sum(changes) / len(changes)


def test_single_heads_and_the_set_equal_hand_zeroed_copies(bert):
    net, tok = bert
    enc = tok(["the cat sat on the mat", "a dog"], padding=True, return_tensors="pt")
    inputs = dict(enc)
    heads = [(0, 2), (3, 5), (5, 11)]
    df = analysis.ablation_effects(net, inputs, "encoder", heads)
    assert df["kind"].tolist() == ["single"] * 3 + ["set", "sum of singles"]
    assert "kl" not in df.columns  # BERT without a task head: hidden states only
    with torch.no_grad():
        base = net(**inputs)
        real = enc["attention_mask"].tolist()
        for row, head in zip(df.itertuples(), heads, strict=False):
            ablated = without_heads(net, "encoder", [head])(**inputs)
            assert (row.layer, row.head) == head
            assert row.hidden_change == pytest.approx(by_hand(base, ablated, real), abs=1e-5)
        together = without_heads(net, "encoder", heads)(**inputs)
    set_row, sum_row = df.iloc[3], df.iloc[4]
    assert set_row["hidden_change"] == pytest.approx(by_hand(base, together, real), abs=1e-5)
    assert sum_row["hidden_change"] == pytest.approx(df["hidden_change"][:3].sum(), abs=1e-9)
    assert abs(set_row["hidden_change"] - sum_row["hidden_change"]) > 1e-3  # they do not add up
    assert df.attrs["forward_passes"] == 5 and df.attrs["mode"] == "zero"


def test_mean_ablation_equals_the_head_replaced_by_its_mean_context(bert):
    net, tok = bert
    enc = tok(["time flies like an arrow"], return_tensors="pt")
    tr = net.trace(enc["input_ids"])
    layer, head = 2, 4
    z = tr.attentions["encoder"][0, layer, head] @ tr.values["encoder"][0, layer, head]  # (T, d)
    clone = without_heads(net, "encoder", [(layer, head)], {(layer, head): z.mean(0)})
    df = analysis.ablation_effects(net, dict(enc), heads=[(layer, head)], mode="mean")
    with torch.no_grad():
        expected = by_hand(net(**enc), clone(**enc), [[1] * z.shape[0]])
    assert df.loc[0, "hidden_change"] == pytest.approx(expected, abs=1e-5)
    zero = analysis.ablation_effects(net, dict(enc), heads=[(layer, head)])
    assert zero.loc[0, "hidden_change"] != pytest.approx(expected, abs=1e-4)


def test_a_language_model_reports_how_its_predictions_move():
    net = Transformer(PRESETS["seed001-decoder"])
    enc = net.tokenizer(["hello world", "hi"], padding=True)
    df = analysis.ablation_effects(net, enc, "decoder", [(1, 0), (3, 2)])
    real = enc["attention_mask"].bool()
    with torch.no_grad():
        base = net(**enc).log_softmax(-1)[real]  # (n, vocab)
        ablated = without_heads(net, "decoder", [(1, 0)])(**enc).log_softmax(-1)[real]
    kl = (base.exp() * (base - ablated)).sum(-1).mean()
    changed = (base.argmax(-1) != ablated.argmax(-1)).double().mean()
    assert df.loc[0, "kl"] == pytest.approx(float(kl), abs=1e-6) and df.loc[0, "kl"] >= 0
    assert df.loc[0, "argmax_changed"] == pytest.approx(float(changed))
    assert df["kl"].notna().all() and df["argmax_changed"].between(0, 1).all()


def test_cross_attention_heads_of_an_encoder_decoder():
    net = Transformer(PRESETS["seed000-tiny"])
    src = net.tokenizer(["bonjour", "salut"], padding=True)
    tgt = net.tokenizer(["hello", "hi"], padding=True)
    inputs = {**src, "tgt_ids": tgt["input_ids"], "tgt_attention_mask": tgt["attention_mask"]}
    df = analysis.ablation_effects(net, inputs, "cross", [(1, 2)])
    clone = without_heads(net, "cross", [(1, 2)])
    with torch.no_grad():
        tr, tr_ablated = net.trace(**inputs), clone.trace(**inputs)
    expected = by_hand(
        tr.outputs["decoder"], tr_ablated.outputs["decoder"], tgt["attention_mask"].tolist()
    )
    assert df.loc[0, "hidden_change"] == pytest.approx(expected, abs=1e-5)


def test_all_heads_by_default_and_actionable_errors():
    net = Transformer(SMALL)
    enc = net.tokenizer(["abc"])
    df = analysis.ablation_effects(net, enc)
    assert len(df) == SMALL.n_layers * SMALL.n_heads + 2
    assert df["layer"].dtype == "Int64" and df["layer"].isna().sum() == 2
    with pytest.raises(ValueError, match=r"Head \(2, 0\) does not exist"):
        analysis.ablation_effects(net, enc, heads=[(2, 0)])
    with pytest.raises(ValueError, match="labels"):
        analysis.ablation_effects(net, {**enc, "labels": enc["input_ids"]})
