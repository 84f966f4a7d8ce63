"""Figures built as plain Plotly JSON (``viz.common.figure``) skip Plotly's validation to keep a
tab switch cheap; here Plotly validates each of them, on every stack of every architecture, and
the validated figure must write exactly the same JSON (same keys, same values, named colour
scales expanded as Plotly's validator expands them)."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch

from analysis import layer_steps, logit_lens, logit_lens_top
from model import PRESETS, Transformer, TransformerConfig, load_trained
from train import Progress
from viz import rope
from viz.attention import compare_figure, head_figure, overview_figure
from viz.block import block_figure, ratio_figure
from viz.common import figure, token_labels
from viz.embeddings import embedding_figure, position_curves_figure, position_table_figure
from viz.heads import distance_figure, flow_figure, rollout_figure
from viz.hidden import norms_heatmap, norms_lines
from viz.layer_steps import step_figure
from viz.logit_lens import figure_for, lens_answers, logit_lens_figure, top_figure
from viz.masks import (
    causal_mask_figure,
    cross_mask_figure,
    padding_masks_figure,
    score_steps_figure,
)
from viz.patching import (
    attention_shift_figure,
    attribution_figure,
    pair_head_figure,
    restored_heads_figure,
    restored_positions_figure,
)
from viz.training import progress_figure


def as_json(fig) -> dict:
    return json.loads(pio.to_json(fig, validate=False))


def assert_valid(fig) -> None:
    """Plotly's validating constructor accepts the figure's JSON and writes it back unchanged
    (it raises on a property Plotly does not know or a value it does not take)."""
    plain = as_json(fig)
    assert as_json(go.Figure(fig.to_plotly_json())) == plain
    for trace in plain["data"]:  # Plotly.js knows no "RdBu_r": the validator's stops are sent
        for part in (trace, trace.get("marker", {})):
            assert not isinstance(part.get("colorscale"), str), part["colorscale"]


def views(trace, stack: str, net) -> list:
    figs = [
        head_figure(trace, stack, 0, 1, scale="auto"),
        head_figure(trace, stack, 1, 0, scale="head"),
        overview_figure(trace, stack),
        overview_figure(trace, stack, scale="head"),
        compare_figure(trace, stack, (0, 0), (1, 1)),
        compare_figure(trace, stack, (0, 1), (1, 0), scale="head"),
        score_steps_figure(trace, stack, 0, 0),
    ]
    if stack != "cross":  # rollout and the block add a token's own residual
        figs += [
            block_figure(trace, stack, net),
            block_figure(trace, stack, net, scale="head"),
            rollout_figure(trace, stack, 1),
            distance_figure(trace, stack),
            flow_figure(trace, stack, 1, 0),
        ]
    if trace.input_ids.shape[0] > 1:
        figs.append(padding_masks_figure(trace, stack))
    return figs


TEXTS = [["The cat sat on the mat."], ["我喜欢你", "a longer second text"]]


@pytest.mark.parametrize("texts", TEXTS)
def test_the_bundled_berts_plain_figures_validate(bert, texts):
    net, tok = bert
    enc = tok(texts, padding=True, return_tensors="pt")
    trace = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    for fig in views(trace, "encoder", net):
        assert_valid(fig)
    assert_valid(causal_mask_figure(trace.tokens[0], "encoder"))


def preset_trace(preset: str):
    """(a preset's random model, its trace of two padded texts; a target side where it has one)."""
    net = Transformer(PRESETS[preset]).eval()
    enc = net.tokenizer(["abc de", "x"], padding=True)
    extra = {}
    if net.config.arch == "encoder-decoder":
        dec = net.tokenizer(["xyz", "pq"], padding=True)
        extra = {"tgt_ids": dec["input_ids"], "tgt_attention_mask": dec["attention_mask"]}
    return net, net.trace(enc["input_ids"], attention_mask=enc["attention_mask"], **extra)


@pytest.mark.parametrize("preset", ["seed001-prenorm", "seed001-decoder", "seed004-encoder"])
def test_every_stack_of_every_architecture_validates(preset):
    net, trace = preset_trace(preset)
    for stack in trace.stacks:
        for fig in views(trace, stack, net):
            assert_valid(fig)
    if "cross" in trace.stacks:
        assert_valid(cross_mask_figure(trace))
    assert_valid(causal_mask_figure(["a", "b", "c"]))


def test_a_property_plotly_does_not_know_is_caught():
    """The check above can fail: a misspelt property passes ``figure`` but not the validator."""
    fig = figure([{"type": "heatmap", "z": [[1]], "colorscal": "Blues"}], {"height": 300})
    with pytest.raises(ValueError):
        assert_valid(fig)


@pytest.mark.parametrize(("corrupt", "panels"), [("The dog sat on the mat.", 3), ("A dog.", 2)])
def test_one_head_on_both_texts_is_drawn_as_two_heads_compared_are(bert, corrupt, panels):
    """The pair's panels are the compare figure's (viz.attention.three_panels): clean and
    corrupt share a colour axis, their difference has its own; texts of different lengths get
    no difference panel, each panel over its own text's tokens."""
    net, tok = bert
    clean, other = (
        net.trace(**tok([t], return_tensors="pt")) for t in ("The cat sat on the mat.", corrupt)
    )
    fig = pair_head_figure(clean, other, "encoder", 1, 2)
    assert_valid(fig)
    plain = fig.to_plotly_json()
    assert [t["coloraxis"] for t in plain["data"]] == ["coloraxis", "coloraxis", "coloraxis2"][
        :panels
    ]
    assert plain["data"][1]["y"] == token_labels(other.tokens[0])


@pytest.mark.parametrize("preset", ["seed001-prenorm", "seed001-decoder", "seed003-encdec"])
def test_the_hidden_state_figures_validate(preset):
    _, trace = preset_trace(preset)
    for stack in trace.hidden_states:
        assert_valid(norms_heatmap(trace, stack))
        assert_valid(norms_lines(trace, stack))


def embedding_views(trace, stack: str) -> list:
    return [
        embedding_figure(trace, stack),
        position_table_figure(trace, stack),
        position_table_figure(trace, stack, n_positions=300),  # strided, with its note
        position_curves_figure(trace, stack),
        position_curves_figure(trace, stack, dims=(0, 5), n_positions=300),
    ]


def test_the_bundled_berts_embedding_figures_validate(bert):
    """Token types (a pair of segments), learned positions, a text cut at MAX_ROWS tokens."""
    net, tok = bert
    pair = net.trace(**tok(["The cat sat."], ["It was warm."], return_tensors="pt"))
    long = net.trace(**tok(["The cat sat on the mat. " * 30], return_tensors="pt"))
    for trace in (pair, long):
        for fig in embedding_views(trace, "encoder"):
            assert_valid(fig)


@pytest.mark.parametrize("preset", ["seed003-encdec", "seed004-encoder", "gqa"])
def test_the_embedding_figures_of_every_stack_validate(preset):
    """Sinusoidal (both stacks of an encoder-decoder), learned with a LayerNorm, and RoPE (no
    position panel, its curves)."""
    if preset == "gqa":
        trace = Transformer(GQA).eval().trace(torch.tensor([[1, 5, 7, 9, 3, 2]]))
    else:
        _, trace = preset_trace(preset)
    for stack in trace.embeddings:
        for fig in embedding_views(trace, stack):
            assert_valid(fig)


def test_the_mixing_ratios_past_the_blocks_limit_validate():
    assert_valid(ratio_figure("decoder", torch.rand(3).numpy(), 300))


def test_a_long_texts_lines_in_position_blocks_validate(bert):
    net, tok = bert
    trace = net.trace(**tok(["The cat sat on the mat. " * 5], return_tensors="pt"))
    assert_valid(norms_heatmap(trace, "encoder"))
    assert_valid(norms_lines(trace, "encoder"))


@pytest.mark.parametrize("n_pos", [3, 90])
def test_the_logit_lens_validates_with_its_cell_text_and_without(n_pos):
    probs = torch.softmax(torch.randn(4, n_pos, 5) * 3, dim=-1)  # (L+1, T, V)
    answers = [t % 5 if t % 2 else None for t in range(n_pos)]
    assert_valid(logit_lens_figure(probs, ["<b>"] * n_pos, list("abcde"), answers, title="a<b"))


def test_the_logit_lens_of_a_trace_validates_whole_and_its_last_positions():
    net = load_trained("induction")
    trace = net.trace(torch.tensor([[net.tokenizer.bos_token_id, *net.tokenizer.encode("ab ab")]]))
    assert_valid(figure_for(logit_lens(net, trace), trace, net.tokenizer, typed=3))
    answers = lens_answers(trace)
    top = logit_lens_top(net, trace, answers=answers, top=1, first=2)
    assert_valid(top_figure(top, trace, net.tokenizer, first=2))


GQA = TransformerConfig(
    arch="decoder", vocab_size=50, d_model=64, n_heads=8, n_kv_heads=2, n_layers=2, d_ff=96,
    norm="pre", norm_kind="rms", positions="rotary", mlp="gated", activation="silu",
)  # fmt: skip


@pytest.mark.parametrize("config", [PRESETS["seed001-decoder"], GQA], ids=["mha", "gqa"])
def test_the_four_patching_grids_validate(config):
    """Which heads, which positions (a short text with a value in each cell, a long one without),
    direct logit attribution and the attention shift: one skeleton, valid each time."""
    n_layers, n_heads = config.n_layers, config.n_heads
    grid = torch.randn(n_layers, n_heads)
    assert_valid(restored_heads_figure(grid, config, "decoder", "logit difference"))
    for n in (5, 40):
        tokens = [f"t{i}" for i in range(n)]
        shares = torch.randn(n_layers, n)
        assert_valid(restored_positions_figure(shares, tokens, tokens[::-1], "decoder", "cos"))
    dla = {"heads": grid, "mlp": torch.randn(n_layers), "attn_bias": torch.zeros(n_layers)}
    dla.update(embed=torch.tensor(0.2), bias=torch.tensor(0.1), logit_diff=torch.tensor(2.0))
    assert_valid(attribution_figure(dla, config, "logit difference"))
    assert_valid(attention_shift_figure(grid.abs() / 4, config, "decoder"))


@pytest.mark.parametrize("llama3", [None, (8.0, 1.0, 4.0, 8192)])
def test_the_rope_figures_validate(llama3):
    config = GQA.replace(rope_llama3=llama3, rope_theta=500000.0)
    assert_valid(rope.frequency_figure(config))
    assert_valid(rope.frequency_figure(config, 12))
    net = Transformer(config).eval()
    trace = net.trace(torch.tensor([[1, 5, 7, 9, 3, 2]]))
    assert_valid(rope.distance_figure(trace, "decoder", 1, 3))


@pytest.mark.parametrize("preset", ["seed002-encoder", "seed003-encdec", "gqa"])
def test_every_step_of_a_layer_validates(preset):
    """The layer walk's figures: vectors, per-head steps (grouped-query attention's shared key /
    value heads too), scores, the FFN's top neurons; cross-attention's keys its own tokens."""
    if preset == "gqa":
        net = Transformer(GQA).eval()
        trace = net.trace(torch.tensor([[1, 5, 7, 9, 3, 2]]))
    else:
        net, trace = preset_trace(preset)
    group = net.config.n_heads // net.config.kv_heads
    for stack in trace.stacks:
        queries, keys = (tokens[0] for tokens in trace.tokens_for(stack))
        for step in layer_steps(trace, stack, 0, 0):
            assert_valid(step_figure(step, queries, 1, net.config.n_heads - 1, keys, group))


def test_a_folded_vector_and_a_long_texts_window_validate(bert):
    net, tok = bert
    trace = net.trace(**tok(["The cat sat on the mat. " * 12], return_tensors="pt"))
    tokens = trace.tokens[0]
    steps = {step.name: step for step in layer_steps(trace, "encoder", 0, 0)}
    assert_valid(step_figure(steps["input"], tokens, 40))  # d_model 384: folded
    assert_valid(step_figure(steps["Q heads"], tokens, 40, 2))  # a window of rows


def test_a_live_trainings_progress_figure_validates():
    progress = Progress(
        name="roles", step=3, elapsed=2.4, seconds=30.0, losses=[3.0, 2.0, 1.0], score=0.5,
        score_name="sentence accuracy", stack="encoder", layer=1, head=2,
        queries=["<b>", "a"], keys=["<b>", "a"], attention=torch.tensor([[1.0, 0.0], [0.5, 0.5]]),
        lesson=0.95, steps=300,
    )  # fmt: skip
    assert_valid(progress_figure(progress))
