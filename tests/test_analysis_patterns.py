"""Head patterns equal TransformerLens's detect_head definitions written as plain loops."""

from __future__ import annotations

import math
import random
import string

import pytest
import torch

import analysis
from model import load_trained

TOL = 1e-9


def loop_scores(attn, tokens, custom=None) -> dict[tuple[int, int], dict]:
    """attn [L][H][n][n] over real tokens only; TransformerLens "mul" and prefix matching."""
    n = len(tokens)

    def pattern(name, i, j):
        if name == "previous_token":
            return j == i - 1
        if name == "duplicate_token":
            return j < i and tokens[j] == tokens[i]
        if name == "induction":  # key j follows an earlier occurrence of token i
            return 1 <= j <= i and j - 1 < i and tokens[j - 1] == tokens[i]
        return bool(custom[i][j])

    names = ["previous_token", "duplicate_token", "induction"] + (["custom"] if custom else [])
    out = {}
    for layer, heads in enumerate(attn):
        for head, a in enumerate(heads):
            total = sum(sum(row) for row in a)
            row = {
                name: sum(a[i][j] for i in range(n) for j in range(n) if pattern(name, i, j))
                / total
                for name in names
            }
            prefix = []
            for i in range(n):
                keys = [j for j in range(1, i + 1) if tokens[j - 1] == tokens[i]]
                if keys:
                    prefix.append(sum(a[i][j] for j in keys))
            row["prefix_matching"] = sum(prefix) / len(prefix) if prefix else math.nan
            out[layer, head] = row
    return out


def assert_equal(df, reference):
    for record in df.to_dict("records"):
        for name, value in reference[record["layer"], record["head"]].items():
            if math.isnan(value):
                assert math.isnan(record[name]), name
            else:
                assert record[name] == pytest.approx(value, abs=TOL), (name, record)


@pytest.mark.parametrize("item", [0, 1])
def test_bert_patterns_equal_loops_on_a_padded_batch(bert, item):
    net, tok = bert
    texts = ["the cat saw the cat and the dog saw the dog .", "a b a b"]
    enc = tok(texts, padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    real = enc["attention_mask"][item].bool()
    tokens = [t for t, r in zip(tr.tokens[item], real.tolist(), strict=True) if r]
    custom = analysis.pattern_mask(tr.tokens[item], "first")
    attn = tr.attentions["encoder"][item][:, :, real][:, :, :, real].double().tolist()
    sub = custom[real][:, real].tolist()
    df = analysis.head_patterns(tr, "encoder", item, custom=custom)
    assert list(df.columns) == [
        "layer",
        "head",
        "previous_token",
        "duplicate_token",
        "induction",
        "prefix_matching",
        "custom",
    ]
    assert len(df) == 72
    assert_equal(df, loop_scores(attn, tokens, sub))
    # "first" is the share of attention on [CLS], what head_stats calls "first".
    first = analysis.head_stats(tr, "encoder", item)["first"]
    assert (df["custom"] - first).abs().max() < 1e-5


def doubled(rng: random.Random) -> str:
    """Distinct random letters, twice: each second-copy query has exactly one earlier match."""
    half = "".join(rng.sample(string.ascii_lowercase, rng.randint(8, 14)))
    return half + half


def card_heads(kind: str) -> list[tuple[int, int]]:
    from model import TRAINED

    return [(h["layer"], h["head"]) for h in TRAINED["induction"]["scores"]["heads"][kind]]


def test_the_induction_models_induction_heads_and_previous_token_head_are_the_cards():
    net = load_trained("induction")
    texts = [doubled(random.Random(seed)) for seed in (5, 6)]
    enc = net.tokenizer(texts, padding=True)
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    induction_heads = card_heads("induction")
    assert len(induction_heads) >= 3
    for item, text in enumerate(texts):
        df = analysis.head_patterns(tr, "decoder", item).set_index(["layer", "head"])
        n = int(enc["attention_mask"][item].sum())
        tokens = tr.tokens_for("decoder")[0][item][:n]  # the text as the model read it
        attn = tr.attentions["decoder"][item][:, :, :n, :n]
        assert_equal(df.reset_index(), loop_scores(attn.double().tolist(), tokens))
        assert (df.loc[induction_heads, "prefix_matching"] > 0.6).all()
        others = df.drop(index=induction_heads)
        assert (others["prefix_matching"] < 0.3).all()
        # Only the second copy has an earlier occurrence: "mul" divides by every query row.
        share = (len(text) // 2) / len(tokens)
        expected = df["prefix_matching"] * share
        assert (df["induction"] - expected).abs().max() < 1e-6
        previous = card_heads("previous_token")[0]
        assert df["previous_token"].idxmax() == previous
        assert df.loc[previous, "previous_token"] > 0.4


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("first", [[1, 0, 0], [1, 0, 0], [1, 0, 0]]),
        ("Self", [[1, 0, 0], [0, 1, 0], [0, 0, 1]]),
        ("previous", [[0, 0, 0], [1, 0, 0], [0, 1, 0]]),
        ("next", [[0, 1, 0], [0, 0, 1], [0, 0, 0]]),
        ("same word", [[0, 0, 1], [0, 0, 0], [1, 0, 0]]),
        ("same_token", [[0, 0, 1], [0, 0, 0], [1, 0, 0]]),
        ("attend to the previous token", [[0, 0, 0], [1, 0, 0], [0, 1, 0]]),
        ("Attend to  itself", [[1, 0, 0], [0, 1, 0], [0, 0, 1]]),
        ("first-token", [[1, 0, 0], [1, 0, 0], [1, 0, 0]]),
    ],
)
def test_pattern_mask_names(name, expected):
    mask = analysis.pattern_mask(["a", "b", "a"], name)
    assert mask.dtype == torch.bool
    assert mask.int().tolist() == expected


def test_bad_patterns_get_a_sentence(bert):
    net, tok = bert
    tr = net.trace(tok(["hi there"], return_tensors="pt")["input_ids"])
    with pytest.raises(ValueError, match="no attention pattern called 'diagonal'"):
        analysis.pattern_mask(tr.tokens[0], "diagonal")
    with pytest.raises(ValueError, match="draw a 4×4 pattern"):
        analysis.head_patterns(tr, custom=torch.ones(3, 3, dtype=torch.bool))


def test_prefix_matching_pooled_over_doubled_strings_is_the_cards_induction_score():
    """The card's per-head induction score (second-copy queries on the token after the first
    copy's match, on its held-out strings) is what prefix matching measures: pooled over strings
    of distinct letters typed twice (where the two definitions count the same queries) it agrees
    with the card's to 0.05 for every head."""
    from model import TRAINED

    net = load_trained("induction")
    rng = random.Random(0)
    texts = [doubled(rng) for _ in range(50)]
    enc = net.tokenizer(texts, padding=True)
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    total, queries = 0.0, 0
    for item, text in enumerate(texts):
        half = len(text) // 2  # queries with an earlier occurrence: the second copy
        total = total + analysis.head_patterns(tr, "decoder", item)["prefix_matching"] * half
        queries += half
    card = TRAINED["induction"]["scores"]["induction_score_per_head"]  # [L][H], 4 decimals
    expected = [score for layer in card for score in layer]
    assert (total / queries).tolist() == pytest.approx(expected, abs=0.05)
