"""viz.tokens: chips, table and shapes text; every token escaped on its way into HTML."""

from __future__ import annotations

import re

import pytest
import torch

from model import PRESETS, CharTokenizer, Transformer
from viz.tokens import CAPTIONS, KINDS, shapes_markdown, token_chips_html, token_kind, tokens_table

HOSTILE = "<img src=x onerror=alert(1)>"
BERT_SPECIAL = {"[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"}


@pytest.fixture(scope="module")
def bert_trace(bert):
    net, tok = bert
    enc = tok(["time flies like an arrow, unbelievably 🦜"], return_tensors="pt")
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"]), tok


def test_token_kinds_mark_special_continuation_and_unknown():
    assert token_kind("[CLS]", BERT_SPECIAL, "[UNK]") == "special"
    assert token_kind("[UNK]", BERT_SPECIAL, "[UNK]") == "unknown"
    assert token_kind("##ing", BERT_SPECIAL, "[UNK]") == "continuation"
    assert token_kind("##", BERT_SPECIAL, "[UNK]") == "word"  # a literal "##" is no piece
    assert token_kind("time", BERT_SPECIAL, "[UNK]") == "word"
    chars = set(CharTokenizer.all_special_tokens)
    assert token_kind("</s>", chars, CharTokenizer.unk_token) == "special"
    assert token_kind("<", chars, CharTokenizer.unk_token) == "word"


def test_chips_one_per_token_with_position_and_id(bert_trace):
    tr, tok = bert_trace
    tokens, ids = tr.tokens[0], tr.input_ids[0]
    html = token_chips_html(tokens, ids, tok.all_special_tokens, tok.unk_token)
    chips = re.findall(r'<span class="ta-chip ta-(\w+)" title="([^"]*)">', html)
    assert len(chips) == len(tokens)
    kinds = [kind for kind, _ in chips]
    assert kinds[0] == kinds[-1] == "special"  # [CLS] ... [SEP]
    assert "continuation" in kinds and "unknown" in kinds  # ##bel..., 🦜 -> [UNK]
    for i, (_, title) in enumerate(chips):
        assert title.startswith(f"position {i} · id {int(ids[i])} ·")
    assert '<span class="ta-meta">1 · 2051</span>' in html  # "time" at position 1, id 2051
    for kind in ("special", "continuation", "unknown"):  # the legend names every kind shown
        assert KINDS[kind] in html


def test_chip_style_is_scoped_under_the_wrapper():
    html = token_chips_html(["a"], [5])
    style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    selectors = [s.strip() for s in re.findall(r"([^{}]+)\{", style)]
    assert selectors and all(s.startswith(".ta-tokens") for s in selectors)
    assert html.startswith('<div class="ta-tokens">')


def test_hostile_tokens_are_escaped_in_chips_and_titles():
    tokens = [HOSTILE, 'x" onmouseover="alert(1)', "##<b>", "&amp;"]
    html = token_chips_html(tokens, [1, 2, 3, 4], {"[PAD]"}, "[UNK]")
    assert "<img" not in html and "<b>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert 'onmouseover="' not in html  # the quote cannot close the title attribute
    assert "&amp;amp;" in html  # an entity-looking token is shown as typed, not decoded


def test_whitespace_tokens_are_visible():
    html = token_chips_html([" ", "\n"], [36, 14])
    assert "␣" in html and "⏎" in html


def test_table_columns_kinds_and_plain_text(bert_trace):
    tr, tok = bert_trace
    df = tokens_table(tr.tokens[0], tr.input_ids[0].tolist(), tok.all_special_tokens, tok.unk_token)
    assert list(df.columns) == ["position", "token", "id", "kind"]
    assert df["position"].tolist() == list(range(len(tr.tokens[0])))
    assert df["id"].tolist() == tr.input_ids[0].tolist()
    assert df.loc[df["token"] == "##bel", "kind"].item() == "continuation"
    hostile = tokens_table([HOSTILE], torch.tensor([[7]]))
    assert hostile["token"].item().startswith("<img")  # plain text: gr.Dataframe shows it as text
    assert "<img" not in hostile.to_html()  # pandas escapes when someone renders it as HTML


def test_mismatched_lengths_are_an_actionable_error():
    with pytest.raises(ValueError, match="one id per token"):
        token_chips_html(["a", "b"], [1])


def test_shapes_text_for_bert(bert_trace):
    tr, _ = bert_trace
    t = tr.input_ids.shape[1]
    text = shapes_markdown(tr)
    assert (
        f"input_ids [B, T] = [1, {t}]` → `token embedding [B, T, d_model] = [1, {t}, 384]`" in text
    )
    assert f"position [T, d_model] = [{t}, 384]" in text
    assert "token type" in text and "LayerNorm" in text
    assert f"hidden states [B, L+1, T, d_model] = [1, 7, {t}, 384]" in text


def test_shapes_text_for_encoder_decoder_and_decoder_only():
    net = Transformer(PRESETS["seed003-encdec"])
    src, tgt = net.tokenizer(["hello", "hi"]), net.tokenizer(["bonjour", "salut!"])
    tr = net.trace(
        src["input_ids"],
        attention_mask=src["attention_mask"],
        tgt_ids=tgt["input_ids"],
        tgt_attention_mask=tgt["attention_mask"],
    )
    text = shapes_markdown(tr)
    assert "`input_ids [B, T] = [2, 5]`" in text
    assert (
        "`tgt_ids [B, T_tgt] = [2, 7]` → `target embedding [B, T_tgt, d_model] = [2, 7, 128]`"
        in (text)
    )
    assert "decoder hidden states [B, L+1, T_tgt, d_model] = [2, 3, 7, 128]" in text

    dec = Transformer(PRESETS["seed001-decoder"])
    tr = dec.trace(dec.tokenizer(["我喜欢你"])["input_ids"])
    text = shapes_markdown(tr)
    assert "`input_ids [B, T] = [1, 4]`" in text and "decoder hidden states" in text
    assert "tgt_ids" not in text


def test_captions_present():
    assert set(CAPTIONS) == {"chips", "table", "shapes"}
    assert all(isinstance(c, str) and len(c) > 20 and "$" not in c for c in CAPTIONS.values())
