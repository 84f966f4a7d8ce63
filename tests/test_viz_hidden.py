"""viz.hidden: ‖h‖₂ per token and layer, as a heatmap and as lines."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from model import PRESETS, Transformer
from viz.hidden import (
    BINS,
    CAPTIONS,
    LEGEND_MAX_TOKENS,
    hidden_norms,
    layer_names,
    norms_heatmap,
    norms_lines,
)

HOSTILE = "<img src=x onerror=alert(1)>"
TEXT = "The cat sat on the mat because the mat was warm and the cat was tired. " * 40


@pytest.fixture(scope="module")
def bert_trace(bert):
    net, tok = bert
    enc = tok(["the cat and the dog", "a bird"], padding=True, return_tensors="pt")
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])


def _bert_trace_of(bert, n_tokens: int):
    net, tok = bert
    enc = tok([TEXT], truncation=True, max_length=n_tokens, return_tensors="pt")
    assert enc["input_ids"].shape[1] == n_tokens
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])


def test_norms_equal_vector_norm_of_hidden_states(bert_trace):
    fig = norms_heatmap(bert_trace, "encoder", batch=0)
    expected = torch.linalg.vector_norm(bert_trace.hidden_states["encoder"][0], dim=-1)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), expected.numpy(), rtol=1e-6)
    assert list(fig.data[0].y) == ["embeddings"] + [f"after layer {i}" for i in range(6)]
    assert fig.layout.height and fig.layout.height > 200


def test_padding_is_left_out(bert_trace):
    norms, tokens = hidden_norms(bert_trace, "encoder", batch=1)  # "a bird" is padded
    assert tokens == ["[CLS]", "a", "bird", "[SEP]"]
    assert norms.shape == (7, 4) and norms.dtype == np.float32
    fig = norms_lines(bert_trace, "encoder", batch=1)
    assert len(fig.data) == 4 + 1  # one line per real token + the mean


def test_repeated_tokens_get_distinct_labels(bert_trace):
    fig = norms_heatmap(bert_trace, "encoder")
    labels = list(fig.data[0].x)
    assert labels.count("1·the") == 1 and "4·the" in labels
    assert len(set(labels)) == len(labels)


def test_lines_mean_and_hover(bert_trace):
    fig = norms_lines(bert_trace, "encoder")
    norms, tokens = hidden_norms(bert_trace, "encoder")
    *lines, mean = fig.data
    assert len(lines) == len(tokens)
    np.testing.assert_allclose(np.asarray(mean.y), norms.mean(axis=1), rtol=1e-6)
    assert mean.line.width > lines[0].line.width
    assert list(lines[0].x) == layer_names(6)
    # the token is named through fullData, so a token "%{y}" is never parsed as a template
    assert "%{fullData.name}" in lines[0].hovertemplate
    assert [line.name for line in lines] == list(norms_heatmap(bert_trace).data[0].x)


def test_many_tokens_share_a_trace_per_position_block(bert):
    tr = _bert_trace_of(bert, 128)
    tr.tokens[0][40] = HOSTILE
    lines = norms_lines(tr, "encoder")
    payload = lines.to_json()
    assert "<img" not in json.dumps(json.loads(payload)) and "40·&lt;img" in payload
    *blocks, mean = lines.data
    assert len(blocks) == BINS and LEGEND_MAX_TOKENS < 128
    assert [b.name for b in blocks][:2] == ["tokens 0–15", "tokens 16–31"]
    norms, tokens = hidden_norms(tr, "encoder")
    first = np.asarray(blocks[0].y).reshape(16, 8)  # 16 tokens × (7 layers + a NaN break)
    np.testing.assert_allclose(first[:, :7], norms[:, :16].T, rtol=1e-6)
    assert np.isnan(first[:, 7]).all()
    assert list(blocks[0].text[:8]) == ["0·[CLS]"] * 8 and blocks[0].text[8] == "1·the"
    np.testing.assert_allclose(np.asarray(mean.y), norms.mean(axis=1), rtol=1e-6)
    for fig in (lines, norms_heatmap(tr, "encoder")):
        assert len(fig.to_json()) < 80_000


def test_hostile_token_is_escaped(bert_trace):
    bert_trace.tokens[0][2] = HOSTILE  # as if the tokenizer had kept it whole
    try:
        for fig in (norms_heatmap(bert_trace, "encoder"), norms_lines(bert_trace, "encoder")):
            payload = fig.to_json()
            assert "<img" not in json.dumps(json.loads(payload)) and "&lt;img" in payload
    finally:
        bert_trace.tokens[0][2] = "and"


def test_every_family_and_stack():
    ed = Transformer(PRESETS["seed003-encdec"])
    src, tgt = ed.tokenizer(["hello", "hi"]), ed.tokenizer(["bonjour", "salut"])
    tr = ed.trace(
        src["input_ids"],
        attention_mask=src["attention_mask"],
        tgt_ids=tgt["input_ids"],
        tgt_attention_mask=tgt["attention_mask"],
    )
    assert norms_heatmap(tr, "decoder", batch=1).data[0].z.shape == (3, 5)  # "salut"
    assert len(norms_lines(tr, "encoder", batch=1).data) == 2 + 1  # "hi"
    with pytest.raises(ValueError, match="pick 'decoder'"):
        norms_heatmap(tr, "cross")

    dec = Transformer(PRESETS["seed001-decoder"])  # pre-norm: the stream before the final LN
    tr = dec.trace(dec.tokenizer(["我喜欢你"])["input_ids"])
    fig = norms_heatmap(tr)  # default stack: the decoder
    assert fig.data[0].z.shape == (5, 4) and "before the final LayerNorm" in fig.layout.title.text


def test_captions_explain_the_pre_norm_stream():
    assert set(CAPTIONS) == {"norms", "norms_lines"}
    assert all("before the final norm" in c for c in CAPTIONS.values())  # LayerNorm or RMSNorm
