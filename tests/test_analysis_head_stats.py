"""head_stats equals Clark et al. 2019's averages by plain Python loops, padding excluded."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import analysis
from model import PRESETS, Transformer

PUNCT = {",", ".", ";", "!", "?", ":"}  # every punctuation token the texts below contain
SEPS = {"[SEP]", "</s>"}
COLUMNS = ["layer", "head", "entropy", "prev", "next", "self", "first", "sep", "punct", "distance"]
BERT_TEXTS = ["Time flies like an arrow; fruit flies like a banana.", "Hello, world!"]


def loop_stats(attn, q_real, k_real, key_tokens, cross=False) -> dict[tuple[int, int], dict]:
    """The statistics by hand: attn nested lists [L][H][T_q][T_k], masks lists of 0/1."""
    queries = [i for i, r in enumerate(q_real) if r]
    keys = [j for j, r in enumerate(k_real) if r]
    out = {}
    for layer, heads in enumerate(attn):
        for head, a in enumerate(heads):
            row = {name: 0.0 for name in ("entropy", "first", "sep", "punct", "distance")}
            pairs = {"prev": [], "next": [], "self": []}
            for i in queries:
                row["entropy"] -= sum(a[i][j] * math.log(a[i][j]) for j in keys if a[i][j] > 0)
                row["first"] += a[i][keys[0]]
                row["sep"] += sum(a[i][j] for j in keys if key_tokens[j] in SEPS)
                row["punct"] += sum(a[i][j] for j in keys if key_tokens[j] in PUNCT)
                row["distance"] += sum(a[i][j] * abs(i - j) for j in keys)
                for name, offset in (("prev", -1), ("next", 1), ("self", 0)):
                    if i + offset in keys:
                        pairs[name].append(a[i][i + offset])
            row = {name: value / len(queries) for name, value in row.items()}
            for name, values in pairs.items():
                row[name] = sum(values) / len(values) if values else math.nan
            if cross:
                row.update(prev=math.nan, next=math.nan, self=math.nan, distance=math.nan)
            out[layer, head] = row
    return out


def assert_matches_loops(df, reference):
    assert list(df.columns) == COLUMNS
    assert len(df) == len(reference)
    for record in df.to_dict("records"):
        expected = reference[record["layer"], record["head"]]
        for name, value in expected.items():
            if math.isnan(value):
                assert math.isnan(record[name]), (name, record)
            else:
                assert record[name] == pytest.approx(value, abs=1e-5), (name, record)


@pytest.mark.parametrize("item", [0, 1])
def test_bert_head_stats_equal_plain_loops_on_a_padded_batch(bert, item):
    net, tok = bert
    enc = tok(BERT_TEXTS, padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    real = enc["attention_mask"][item].tolist()
    assert item == 0 or 0 in real  # item 1 really is padded
    reference = loop_stats(tr.attentions["encoder"][item].tolist(), real, real, tr.tokens[item])
    df = analysis.head_stats(tr, "encoder", item)
    assert_matches_loops(df, reference)
    assert df["layer"].tolist()[:12] == [0] * 12 and df["head"].tolist()[:12] == list(range(12))
    assert (df["punct"] > 0).any() and (df["sep"] > 0).any()


def test_padding_changes_nothing_the_text_alone_gives(bert):
    net, tok = bert
    batch = tok(BERT_TEXTS, padding=True, return_tensors="pt")
    alone = tok(BERT_TEXTS[1:], return_tensors="pt")
    padded = analysis.head_stats(net.trace(batch["input_ids"], batch["attention_mask"]), item=1)
    single = analysis.head_stats(net.trace(alone["input_ids"], alone["attention_mask"]), item=0)
    diff = (padded.drop(columns=["layer", "head"]) - single.drop(columns=["layer", "head"])).abs()
    assert float(diff.max().max()) < 1e-5


def test_decoder_stack_is_causal_so_no_head_looks_at_the_next_token():
    net = Transformer(PRESETS["seed001-decoder"])
    enc = net.tokenizer(["ab, cd. ef", "xyz!"], padding=True)
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    for item in (0, 1):
        real = enc["attention_mask"][item].tolist()
        reference = loop_stats(tr.attentions["decoder"][item].tolist(), real, real, tr.tokens[item])
        df = analysis.head_stats(tr, "decoder", item)
        assert_matches_loops(df, reference)
        assert (df["next"] == 0).all()


def test_cross_attention_stats_leave_position_measures_undefined():
    net = Transformer(PRESETS["seed000-tiny"])
    src = net.tokenizer(["hi, you.", "a!"], padding=True, add_special_tokens=True)
    tgt = net.tokenizer(["ok.", "yes"], padding=True, add_special_tokens=True)
    tr = net.trace(
        src["input_ids"],
        attention_mask=src["attention_mask"],
        tgt_ids=tgt["input_ids"],
        tgt_attention_mask=tgt["attention_mask"],
    )
    for item in (0, 1):
        q_real, k_real = tgt["attention_mask"][item].tolist(), src["attention_mask"][item].tolist()
        attn = tr.attentions["cross"][item].tolist()
        reference = loop_stats(attn, q_real, k_real, tr.tokens[item], cross=True)
        df = analysis.head_stats(tr, "cross", item)
        assert_matches_loops(df, reference)
        assert df[["prev", "next", "self", "distance"]].isna().all().all()
        assert df[["entropy", "first", "sep", "punct"]].notna().all().all()
        assert (df["sep"] > 0).all()  # </s> closes every source text


def test_entropy_is_zero_for_one_hot_heads_and_ln_n_for_uniform_ones(bert):
    net, tok = bert
    enc = tok(["a b c d"], return_tensors="pt")
    tr = net.trace(enc["input_ids"])
    n = tr.attentions["encoder"].shape[-1]
    tr.attentions["encoder"] = torch.full_like(tr.attentions["encoder"], 1 / n)
    tr.attentions["encoder"][0, 0, 0] = torch.eye(n)
    df = analysis.head_stats(tr)
    assert df.loc[0, "entropy"] == pytest.approx(0.0, abs=1e-12)
    assert df.loc[0, "self"] == pytest.approx(1.0)
    assert df.loc[1:, "entropy"].to_numpy() == pytest.approx(math.log(n), abs=1e-6)


def test_unknown_stack_and_item_are_sentences(bert):
    net, tok = bert
    tr = net.trace(tok(["hi"], return_tensors="pt")["input_ids"])
    with pytest.raises(ValueError, match="no 'decoder' attention"):
        analysis.head_stats(tr, "decoder")
    with pytest.raises(ValueError, match="item 3"):
        analysis.head_stats(tr, item=3)


def clark_notebook_stats(tokens, attns) -> dict[str, np.ndarray]:
    """Clark et al.'s notebook definitions for one text, by loops over heads and queries: every
    average divides by all n queries; entropy of 0.9999·α + 0.0001/n; punct is "." and ","."""
    n_layers, n_heads, n = attns.shape[:3]
    out = {k: np.zeros((n_layers, n_heads)) for k in ("left", "right", "self", "punct", "entropy")}
    for layer in range(n_layers):
        for head in range(n_heads):
            a = attns[layer, head].tolist()
            sums = dict.fromkeys(out, 0.0)
            for i in range(n):
                sums["left"] += a[i][i - 1] if i >= 1 else 0.0
                sums["right"] += a[i][i + 1] if i + 1 < n else 0.0
                sums["self"] += a[i][i]
                sums["punct"] += sum(a[i][j] for j in range(n) if tokens[j] in (".", ","))
                smooth = [0.9999 * x + 0.0001 / n for x in a[i]]
                sums["entropy"] -= sum(x * math.log(x) for x in smooth)
            for key, value in sums.items():
                out[key][layer, head] = value / n
    return out


@pytest.mark.parametrize("item", [0, 1])
def test_clark_convention_equals_their_notebook(bert, item):
    net, tok = bert
    enc = tok(BERT_TEXTS, padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    real = enc["attention_mask"][item].bool()
    tokens = [t for t, r in zip(tr.tokens[item], real.tolist(), strict=True) if r]
    attns = tr.attentions["encoder"][item][:, :, real][:, :, :, real].double().numpy()
    theirs = clark_notebook_stats(tokens, attns)
    df = analysis.head_stats(tr, "encoder", item, convention="clark")
    for ours, key in (("prev", "left"), ("next", "right"), ("self", "self"), ("punct", "punct")):
        np.testing.assert_allclose(df[ours].to_numpy(), theirs[key].ravel(), atol=1e-6)
    np.testing.assert_allclose(df["entropy"].to_numpy(), theirs["entropy"].ravel(), atol=1e-6)
    default = analysis.head_stats(tr, "encoder", item)
    same = ["layer", "head", "first", "sep", "distance", "self"]
    assert (df[same] - default[same]).abs().max().max() < 1e-12
    assert not np.allclose(df["punct"], default["punct"])  # ";" and "!" count only in ours


def test_an_unknown_convention_gets_a_sentence(bert):
    net, tok = bert
    tr = net.trace(tok(["hi"], return_tensors="pt")["input_ids"])
    with pytest.raises(ValueError, match="convention must be 'ours' or 'clark'"):
        analysis.head_stats(tr, convention="bert")
