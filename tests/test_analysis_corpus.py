"""Corpus statistics equal the per-sentence measures of each sentence traced alone, averaged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import analysis
from analysis.corpus import corpus_key, corpus_stats, parse_corpus
from model import load_trained

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = [
    "The cat sat on the mat.",
    "A dog barked, and the cat ran up the tree.",
    "Rain again today.",
    "The old man the boats.",
    "She said that she would come, and she came.",
]


def test_batched_corpus_equals_each_sentence_alone(bert):
    net, tok = bert
    progress = []
    result = corpus_stats(
        net, tok, SENTENCES, batch_size=2, max_tokens=12, on_progress=lambda *a: progress.append(a)
    )
    assert progress == [(2, 5), (4, 5), (5, 5)]
    assert result.sentences == 5 and result.stats.shape[0] == 72
    columns = {}
    distances = []
    for sentence in SENTENCES:
        enc = tok([sentence], truncation=True, max_length=12, return_tensors="pt")
        tr = net.trace(enc["input_ids"])
        stats = analysis.head_stats(tr).merge(analysis.head_patterns(tr), on=["layer", "head"])
        per_head = analysis.norm_attention(tr, net=net)[0].sum(-1).double()  # (L, H, T)
        stats["norm"] = per_head.mean(-1).flatten().numpy()
        share = per_head / per_head.sum(1, keepdim=True)
        stats["norm_share"] = share.mean(-1).flatten().numpy()
        for name in stats.columns[2:]:
            columns.setdefault(name, []).append(stats[name].to_numpy())
        distances.append(analysis.head_distances(tr))
    for name, values in columns.items():
        stacked = np.stack(values)  # (S, L·H)
        np.testing.assert_allclose(result.stats[f"{name}_mean"], np.nanmean(stacked, 0), atol=1e-5)
        np.testing.assert_allclose(
            result.stats[f"{name}_std"], np.nanstd(stacked, 0, ddof=1), atol=1e-5
        )
    torch.testing.assert_close(result.distances, torch.stack(distances).mean(0), atol=1e-6, rtol=0)
    assert result.mean("first").index.names == ["layer", "head"]
    # analysis/ keeps nothing: the same corpus is measured again (its owner caches it by the
    # key, ui/corpus_handlers.py), and the key tells the options apart.
    assert corpus_stats(net, tok, SENTENCES, batch_size=2, max_tokens=12) is not result
    assert corpus_key(net, SENTENCES, max_tokens=12) == corpus_key(net, SENTENCES, max_tokens=12)
    other = corpus_stats(net, tok, SENTENCES, max_tokens=12, measures=("head_patterns",))
    assert corpus_key(net, SENTENCES, max_tokens=12, measures=("head_patterns",)) != corpus_key(
        net, SENTENCES, max_tokens=12
    )
    assert other.distances is None
    assert [c for c in other.stats.columns if c.endswith("_mean")] == [
        "previous_token_mean",
        "duplicate_token_mean",
        "induction_mean",
        "prefix_matching_mean",
    ]


def test_a_decoder_corpus():
    net = load_trained("induction")
    result = corpus_stats(net, net.tokenizer, ["abcabc", "xyzxyz", "qwq"], stack="decoder")
    heads = net.config.n_layers * net.config.n_heads
    assert result.stats.shape[0] == heads and result.distances.shape == (heads, heads)
    assert result.stats["prev_mean"].notna().all()


def test_parse_corpus_sentences():
    assert parse_corpus("one\n\n  two  \r\nthree\n") == ["one", "two", "three"]
    with pytest.raises(ValueError, match="The corpus has 4 sentences; at most 3"):
        parse_corpus("a\nb\nc\nd", max_sentences=3)
    with pytest.raises(ValueError, match="Sentence 2 has 12 characters; a sentence may have at"):
        parse_corpus("short\nfar too long", max_chars=10)
    with pytest.raises(ValueError, match="The corpus is empty"):
        parse_corpus("\n \n")


def test_unknown_measures_get_a_sentence(bert):
    net, tok = bert
    with pytest.raises(ValueError, match="Unknown measures"):
        corpus_stats(net, tok, ["hi"], measures=("entropy",))


@pytest.mark.parametrize("name", ["en", "zh"])
def test_the_shipped_corpora_parse(name):
    text = (ROOT / "assets" / "corpus" / f"{name}.txt").read_text(encoding="utf-8")
    sentences = parse_corpus(text)
    assert 190 <= len(sentences) <= 300
    assert len(set(sentences)) == len(sentences)


def test_measures_and_corpus_exports_name_their_papers(bert):
    import io
    import json

    import pandas as pd

    from analysis.export import corpus_csv, corpus_npz

    net, tok = bert
    enc = tok(["time flies like an arrow", "a dog"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    data = np.load(io.BytesIO(analysis.measures_npz(tr, "encoder", 1, {"text": "a dog"})))
    manifest = json.loads(bytes(data["manifest.json"]))
    assert manifest["text"] == "a dog" and manifest["tokens"][:3] == ["[CLS]", "a", "dog"]
    for name in ("rollout", "attention_flow", "head_distances", "mds_2d", "mixing_ratio"):
        assert name in manifest["measures"] and "paper" in manifest["measures"][name]
    flow = analysis.attention_flow(tr, "encoder", 1)
    np.testing.assert_allclose(data["attention_flow"], flow.numpy())
    assert data["head_table/induction"].shape == (6, 12)
    assert data["norm_attention_block"].shape == (6, 7, 7)
    table = analysis.head_table(tr, "encoder", 1)
    assert {"entropy", "previous_token", "prefix_matching"} <= set(table.columns)

    result = corpus_stats(net, tok, SENTENCES[:2], max_tokens=12)
    back = pd.read_csv(io.StringIO(corpus_csv(result, {"corpus": "two"})))
    assert (back["sentences"] == 2).all() and (back["corpus"] == "two").all()
    np.testing.assert_allclose(back["entropy_mean"], result.stats["entropy_mean"], rtol=1e-5)
    npz = np.load(io.BytesIO(corpus_npz(result)))
    assert npz["stats/entropy_mean"].shape == (6, 12) and npz["head_distances"].shape == (72, 72)
    assert "head_distances" in json.loads(bytes(npz["manifest.json"]))["measures"]
