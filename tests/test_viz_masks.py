"""viz.masks: padding (a, b), causal and cross masks, and scores → mask → softmax for one head —
masks match model.masks, tokens are escaped, every family works, and Chromium draws them."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import pytest

from model.masks import causal_mask, padding_mask, padding_mask_query_key
from tests.test_viz_attention import (
    HOSTILE,
    SCREENSHOTS,
    STACKS,
    assert_escaped,
    bert_trace,
    char_trace,
    draw_in_chromium,
    with_hostile_token,
    z_of,
)
from viz import masks as M


@pytest.fixture(scope="module")
def families(bert):
    """One padded two-text trace per family: BERT encoder, decoder-only, encoder-decoder."""
    return {
        "bert": bert_trace(bert, ["the cat and the dog", "time flies"]),
        "seed001-decoder": char_trace("seed001-decoder", ["abcab", "ab"]),
        "seed003-encdec": char_trace("seed003-encdec", ["hello", "hi"], ["bonjour", "ok"]),
    }


# ---------------------------------------------------------------- padding masks


def test_padding_figure_shows_variant_b_and_a_for_both_texts(families):
    tr = families["bert"]
    fig = M.padding_masks_figure(tr)
    assert len(fig.data) == 4  # 2 texts × 2 variants, not a big grid
    b_masks = padding_mask(tr.attention_mask, tr.attention_mask.shape[1]).numpy()
    a_masks = padding_mask_query_key(tr.attention_mask, tr.attention_mask).numpy()
    for text in (0, 1):
        np.testing.assert_array_equal(z_of(fig.data[2 * text]), b_masks[text])
        np.testing.assert_array_equal(z_of(fig.data[2 * text + 1]), a_masks[text])
    # variant (b) is the mask the model used
    np.testing.assert_array_equal(b_masks, tr.masks["encoder"].numpy())
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [
        "text 1 · (b) keys only — used",
        "text 1 · (a) query and key",
        "text 2 · (b) keys only — used",
        "text 2 · (a) query and key",
    ]


def test_padding_figure_labels_the_pad_tokens(families):
    fig = M.padding_masks_figure(families["bert"])
    short = list(fig.data[2].x)  # text 2, "time flies", is the padded one
    assert short[-1].endswith("·[PAD]") and len(set(short)) == len(short)
    z = z_of(fig.data[2])
    assert (z[:, -1] == 0).all() and (z[-1, :4] == 1).all()  # (b): padded query rows still see
    assert (z_of(fig.data[3])[-1] == 0).all()  # (a): padded query rows see nothing


def test_padding_figure_works_on_decoder_and_cross_sides(families):
    tr = families["seed003-encdec"]
    for stack in ("decoder", "cross"):
        fig = M.padding_masks_figure(tr, stack)
        q_mask = tr.tgt_attention_mask
        k_mask = tr.attention_mask if stack == "cross" else tr.tgt_attention_mask
        want = padding_mask_query_key(q_mask, k_mask).numpy()
        np.testing.assert_array_equal(z_of(fig.data[3]), want[1])


def test_padding_figure_asks_for_two_texts(bert):
    with pytest.raises(ValueError, match="two texts"):
        M.padding_masks_figure(bert_trace(bert, ["only one text"]))


def test_padding_figure_says_when_nothing_is_padded(bert):
    fig = M.padding_masks_figure(bert_trace(bert, ["same length", "equal size"]))
    assert "nothing is padded" in fig.layout.title.text


def test_long_masks_are_pooled_to_a_share_of_allowed_pairs(bert):
    tr = bert_trace(bert, ["word " * 600, "short"], max_length=512)
    fig = M.padding_masks_figure(tr)
    z = z_of(fig.data[2])  # text 2, variant (b): 3 real keys of 512
    assert z.shape == (128, 128) and z.max() == 75  # first cell: 3 of 4 keys are real
    assert (z[:, 1:] == 0).all()
    assert "mean-pooled" in fig.layout.title.text
    assert len(fig.to_json()) < 300_000
    causal = M.causal_mask_figure(tr.tokens[0])
    assert z_of(causal.data[0]).shape == (128, 128) and len(causal.to_json()) < 150_000


# ---------------------------------------------------------------- causal and cross masks


def test_causal_mask_hides_future_tokens():
    tokens = ["the", "cat", "and", "the", "dog"]
    fig = M.causal_mask_figure(tokens)
    z = z_of(fig.data[0])
    np.testing.assert_array_equal(z, causal_mask(5).numpy())
    assert z[0, 1] == 0 and z[4, 0] == 1
    assert len(set(fig.data[0].x)) == 5  # the repeated "the" stays two labels


def test_causal_mask_title_says_an_encoder_does_not_use_it():
    encoder = M.causal_mask_figure(["a", "b"], arch="encoder").layout.title.text
    decoder = M.causal_mask_figure(["a", "b"], arch="decoder").layout.title.text
    assert "an encoder does not use it" in encoder and "a decoder would" in encoder
    assert "does not use" not in decoder


def test_cross_mask_hides_padded_source_keys(families):
    tr = families["seed003-encdec"]
    fig = M.cross_mask_figure(tr, batch=1)  # source "hi" is padded to "hello"'s length
    z = z_of(fig.data[0])
    np.testing.assert_array_equal(z, tr.masks["cross"][1].numpy())
    assert z.shape == (len("bonjour"), len("hello"))
    assert (z[:, 2:] == 0).all() and (z[:, :2] == 1).all()
    assert list(fig.data[0].x)[-1].endswith("[PAD]")
    assert fig.layout.yaxis.title.text == "query (target)"


def test_cross_mask_needs_an_encoder_decoder(families):
    with pytest.raises(ValueError, match="no cross-attention"):
        M.cross_mask_figure(families["bert"])


# ---------------------------------------------------------------- scores → mask → softmax


def test_score_steps_show_scores_masked_scores_and_softmax(families):
    tr = families["seed001-decoder"]  # causal and padded: both masks at work
    fig = M.score_steps_figure(tr, "decoder", 2, 1, batch=1)
    raw, masked, weights = (z_of(t) for t in fig.data)
    scores = tr.scores["decoder"][1, 2, 1].numpy()
    allowed = tr.masks["decoder"][1].numpy()
    np.testing.assert_allclose(raw, scores, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(masked[allowed], scores[allowed], rtol=1e-5, atol=1e-6)
    assert np.isnan(masked[~allowed]).all()  # −∞ drawn as blank (grey)
    assert np.isnan(masked[0, 1:]).all()  # the causal mask hides the future
    np.testing.assert_allclose(weights, tr.attentions["decoder"][1, 2, 1].numpy(), rtol=1e-6)
    assert (weights[~allowed] == 0).all()
    assert "hidden pairs become −∞" in fig.layout.title.text
    assert fig.layout.plot_bgcolor == M.HIDDEN_GREY


def test_score_steps_say_when_the_mask_hides_nothing(families):
    fig = M.score_steps_figure(families["bert"], "encoder", 0, 0, batch=0)  # longest text
    assert "hides nothing" in fig.layout.title.text


def test_score_steps_mean_pool_long_texts(bert):
    tr = bert_trace(bert, ["word " * 600], max_length=512)
    fig = M.score_steps_figure(tr, "encoder", 0, 0)
    assert z_of(fig.data[0]).shape == (128, 128)
    assert "512 tokens mean-pooled" in fig.layout.title.text
    assert len(fig.to_json()) < 400_000


# ---------------------------------------------------------------- every stack, escaping, captions


@pytest.mark.parametrize(("family", "stack"), STACKS)
def test_every_mask_view_works_on_every_stack_of_every_family(families, family, stack):
    tr = families[family]
    figures = [M.padding_masks_figure(tr, stack), M.score_steps_figure(tr, stack, 0, 0, 1)]
    if stack == "cross":
        figures.append(M.cross_mask_figure(tr, 1))
    for fig in figures:
        assert isinstance(fig, go.Figure)
        assert fig.layout.height and 250 <= fig.layout.height <= 1200
        assert fig.layout.title.text


@pytest.mark.parametrize(("family", "stack"), STACKS)
def test_token_text_is_escaped_in_every_mask_view(families, family, stack):
    tr = with_hostile_token(families[family])
    figures = [M.padding_masks_figure(tr, stack), M.score_steps_figure(tr, stack, 0, 0)]
    if stack == "cross":
        figures.append(M.cross_mask_figure(tr))
    for fig in figures:
        assert_escaped(fig)
    assert_escaped(M.causal_mask_figure(["a", HOSTILE, "b"]))


def test_masks_travel_as_one_byte_a_cell(families):
    fig = json.loads(M.padding_masks_figure(families["bert"]).to_json())
    assert {t["z"]["dtype"] for t in fig["data"]} == {"u1"}


def test_every_mask_view_has_a_caption_with_its_formula():
    assert set(M.CAPTIONS) == {"padding", "causal", "cross", "score_steps"}
    for caption in M.CAPTIONS.values():
        assert "M[i, j]" in caption or "QKᵀ/√d_k" in caption


# ---------------------------------------------------------------- drawn in Chromium


@pytest.mark.browser
def test_mask_views_draw_in_chromium(bert, families, tmp_path):
    from tests.conftest import LONG_TEXT

    tr = bert_trace(bert, [LONG_TEXT * 2], max_length=128)
    pair = bert_trace(bert, ["time flies like an arrow", "I have a dog"])
    figures = [
        M.padding_masks_figure(pair),
        M.causal_mask_figure(pair.tokens[0], arch="encoder"),
        M.cross_mask_figure(families["seed003-encdec"], batch=1),
        M.score_steps_figure(tr, "encoder", 2, 3),
        M.score_steps_figure(families["seed001-decoder"], "decoder", 2, 1, batch=1),
    ]
    draw_in_chromium(figures, SCREENSHOTS / "viz_masks.png", tmp_path)  # asserts each drew
