"""analysis.logit_lens and viz.logit_lens: every layer read through the model's own head."""

from __future__ import annotations

import pytest
import torch

from analysis import logit_lens
from model import PRESETS, Transformer, load_trained
from viz.logit_lens import answer_ranks, figure_for, logit_lens_figure, next_token_answers

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_the_last_row_is_the_models_own_distribution_decoder_only():
    net = load_trained("induction")
    ids = torch.tensor([[net.tokenizer.bos_token_id, *net.tokenizer.encode("hello hello")]])
    trace = net.trace(ids, with_logits=True)
    lens = logit_lens(net, trace)
    assert lens.shape == (net.config.n_layers + 1, ids.shape[1], net.config.vocab_size)
    assert torch.allclose(lens.sum(-1), torch.ones(lens.shape[:2]), atol=1e-5)
    own = torch.softmax(trace.logits[0], dim=-1)
    assert torch.allclose(lens[-1], own, atol=1e-5)
    assert not torch.allclose(lens[0], own, atol=1e-2)  # the embeddings alone say something else


def test_encoder_decoder_reads_the_decoder_through_its_post_norm_head():
    net = load_trained("dates")
    enc = net.tokenizer(["22.11.2026"])
    ids = net.generate(enc["input_ids"], max_new_tokens=12, attention_mask=enc["attention_mask"])
    trace = net.trace(enc["input_ids"], enc["attention_mask"], tgt_ids=ids, with_logits=True)
    lens = logit_lens(net, trace, stack="decoder")
    assert net.decoder.final_norm is None  # post-norm: the layers' outputs are normed already
    assert torch.allclose(lens[-1], torch.softmax(trace.logits[0], dim=-1), atol=1e-5)
    with pytest.raises(ValueError, match="Only the decoder feeds"):
        logit_lens(net, trace, stack="encoder")


def test_a_pre_norm_decoder_passes_its_final_layernorm():
    net = Transformer(PRESETS["seed001-decoder"].replace(vocab_size=80, max_len=16))
    trace = net.trace(torch.tensor([[5, 6, 7, 8]]), with_logits=True)
    assert net.decoder.final_norm is not None
    lens = logit_lens(net, trace)
    assert torch.allclose(lens[-1], torch.softmax(trace.logits[0], dim=-1), atol=1e-5)


def test_a_model_without_lm_head_says_so():
    net = load_trained("roles")
    trace = net.trace(net.tokenizer(["我喜欢你"])["input_ids"])
    with pytest.raises(ValueError, match="no LM head"):
        logit_lens(net, trace, stack="encoder")


def test_the_figure_names_top_predictions_and_the_right_answers_rank():
    probs = torch.tensor(
        [[[0.1, 0.6, 0.3], [0.5, 0.2, 0.3]], [[0.1, 0.2, 0.7], [0.2, 0.7, 0.1]]]
    )  # (L+1 = 2, T = 2, V = 3)
    answers = next_token_answers([1, 2])  # position 0 should predict id 2; position 1 has none
    assert answers == [2, None]
    ranks = answer_ranks(probs, answers)
    assert ranks[:, 0].tolist() == [2.0, 1.0] and all(v != v for v in ranks[:, 1])  # NaN: none
    fig = logit_lens_figure(probs, ["a", "<b>"], ["a", "<b>", "c"], answers)
    cells = fig.data[0].text
    assert cells[0][0] == "&lt;b&gt;<br>0.60" and cells[1][0] == "c ✓<br>0.70"
    assert "rank 2" in fig.data[0].customdata[0][0]
    assert "right answer" not in fig.data[0].customdata[0][1]
    assert list(fig.data[0].y) == ["embeddings", "after layer 0"]
    with pytest.raises(ValueError, match="2 positions"):
        logit_lens_figure(probs, ["a"], ["a", "b", "c"])


def test_a_trace_is_drawn_with_its_next_tokens_as_answers():
    net = load_trained("induction")
    ids = torch.tensor([[net.tokenizer.bos_token_id, *net.tokenizer.encode("hello hello")]])
    trace = net.trace(ids)
    fig = figure_for(logit_lens(net, trace), trace, net.tokenizer)
    cells = fig.data[0].text  # rows: embeddings, after layer 0, 1, 2
    assert len(cells) == net.config.n_layers + 1 and len(cells[0]) == ids.shape[1]
    assert all("✓" in cell for cell in cells[-1][7:11])  # the second copy, copied
    assert "right answer" not in fig.data[0].customdata[0][-1]  # the last token has no next one
    dates = load_trained("dates")
    enc = dates.tokenizer(["22.11.2026", "2026/11/22"])
    tgt = torch.tensor([[dates.tokenizer.bos_token_id, *dates.tokenizer.encode("2026-11-22")]] * 2)
    trace = dates.trace(enc["input_ids"], enc["attention_mask"], tgt_ids=tgt)
    lens = logit_lens(dates, trace, item=1)
    cells = figure_for(lens, trace, dates.tokenizer, item=1).data[0].text
    assert cells[-1][0].startswith("2 ✓")  # <s> -> the first digit


@pytest.mark.parametrize("n_pos", [20, 64])
def test_a_twelve_layer_lens_gives_every_row_room_and_readable_text(n_pos):
    """At 1920 × 1080 a GPT-2-small-shaped lens (embeddings + 12 layers) over 20 positions keeps
    rows of at least ROW_PX and 12 px labels, its cell text fitting at MIN_CELL_FONT px or more;
    over 64 the cells drop their text (hover and colour stay) and keep their rows."""
    from viz.logit_lens import MIN_CELL_FONT, ROW_PX, TEXT_PX, TOP_PX, below_labels, cell_font

    torch.manual_seed(0)
    probs = torch.softmax(torch.randn(13, n_pos, 50) * 3, dim=-1)  # (L+1, T, V)
    vocab = ["<|endoftext|>", "Ġthe", "Ġcat", "Ġunbelievably", "‹\\xE6\\x88›"] * 10
    tokens = [
        ["<|endoftext|>", " The", " cat", " sat", " extraordinarily"][t % 5] for t in range(n_pos)
    ]
    fig = logit_lens_figure(
        probs, tokens, vocab, next_token_answers([t % 50 for t in range(n_pos)])
    )
    cells = fig.data[0]
    plot = fig.layout.height - TOP_PX - below_labels(list(cells.x))  # the rows' share
    assert plot / 13 >= ROW_PX and fig.layout.height < 1080  # one screen at 1920 × 1080
    assert fig.layout.xaxis.tickfont.size >= TEXT_PX and fig.layout.yaxis.tickfont.size >= TEXT_PX
    assert fig.layout.font.size >= TEXT_PX
    if n_pos == 20:
        assert cells.texttemplate and cell_font(cells.text, n_pos) >= MIN_CELL_FONT
        assert plot / 13 >= 2 * 1.3 * TEXT_PX  # two lines of 12 px text in every row
    else:
        assert cells.text is None and cells.texttemplate is None
