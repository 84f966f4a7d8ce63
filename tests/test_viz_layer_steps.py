"""viz.layer_steps draws one step of analysis.layer_steps for one token, with the step's numbers."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
import torch

import lang
from analysis import layer_steps
from analysis.layer_steps import STEP_NAMES
from lang import speaking
from model import PRESETS, Transformer
from viz import layer_steps as viz
from viz.common import token_labels


def steps_of(net, trace, stack="encoder", layer=0, item=0):
    return {s.name: s for s in layer_steps(trace, stack, layer, item)}


@pytest.fixture(scope="module")
def small():
    """seed002 (d_model 128, below FOLD_AT) on one text."""
    net = Transformer(PRESETS["seed002-encoder"])
    trace = net.trace(net.tokenizer(["time flies"])["input_ids"])
    return trace.tokens[0], steps_of(net, trace)


@pytest.fixture(scope="module")
def bert_steps(bert):
    net, tok = bert
    enc = tok(["A Titan RTX has 24GB of VRAM"], return_tensors="pt")
    trace = net.trace(enc["input_ids"])
    return trace.tokens[0], steps_of(net, trace, layer=2)


def test_fold_shapes_are_near_square_rectangles():
    assert viz.fold_shape(384) == (16, 24)
    assert viz.fold_shape(1536) == (32, 48)
    assert viz.fold_shape(512) == (16, 32)
    assert viz.fold_shape(7) == (3, 3)  # no divisor near √7: the last row part-filled


def test_a_folded_vector_reads_back_row_by_row():
    vector = np.arange(7, dtype=np.float32) * 0.5
    values, index = viz.fold(vector)
    assert values.shape == index.shape == (3, 3)
    np.testing.assert_array_equal(values.reshape(-1)[:7], vector)
    assert np.isnan(values.reshape(-1)[7:]).all() and (index.reshape(-1)[7:] == -1).all()
    np.testing.assert_array_equal(index.reshape(-1)[:7], np.arange(7))


def test_top_neurons_are_the_largest_values_largest_first():
    hidden = np.array([0.1, 3.0, -1.0, 2.0, 3.0, 0.0], dtype=np.float32)
    index, values = viz.top_neurons(hidden, k=3)
    assert index.tolist() == [1, 4, 3] and values.tolist() == [3.0, 3.0, 2.0]


def test_a_narrow_vector_is_its_T_by_d_heatmap_with_the_tokens_row_outlined(small):
    tokens, steps = small
    fig = viz.step_figure(steps["attention residual"], tokens, token=3)
    z = np.asarray(fig.data[0].z)
    torch.testing.assert_close(torch.from_numpy(z), steps["attention residual"].value)
    (outline,) = fig.layout.shapes
    assert (outline.y0, outline.y1) == (2.5, 3.5) and outline.x1 == 128 - 0.5
    assert list(fig.data[0].y) == token_labels(tokens)
    assert "[T, 128]" in fig.layout.title.text and token_labels(tokens)[3] in fig.layout.title.text


def test_a_wide_vector_is_folded_and_the_title_says_how(bert_steps):
    tokens, steps = bert_steps
    fig = viz.step_figure(steps["input"], tokens, token=2)
    z = np.asarray(fig.data[0].z, dtype=np.float32)
    assert z.shape == (16, 24)
    np.testing.assert_allclose(z.reshape(-1), steps["input"].value[2].numpy(), atol=1e-6)
    assert "folded into 16 × 24" in fig.layout.title.text
    assert "row · 24 + column" in fig.layout.title.text


def test_the_ffn_step_shows_the_tokens_most_active_neurons(bert_steps):
    tokens, steps = bert_steps
    fig = viz.step_figure(steps["FFN hidden"], tokens, token=4)
    top = torch.topk(steps["FFN hidden"].value[4], viz.TOP_NEURONS)
    (bars,) = fig.data
    assert bars.type == "bar" and len(bars.x) == viz.TOP_NEURONS
    np.testing.assert_allclose(np.asarray(bars.y), top.values.numpy(), atol=1e-6)
    assert list(bars.x) == [f"#{i}" for i in top.indices.tolist()]
    assert "20 most active of 1536 neurons" in fig.layout.title.text


def test_attention_weights_show_the_tokens_row_in_every_head(bert_steps):
    tokens, steps = bert_steps
    fig = viz.step_figure(steps["attention weights"], tokens, token=1)
    z = np.asarray(fig.data[0].z, dtype=np.float32)
    np.testing.assert_allclose(z, steps["attention weights"].value[:, 1].numpy(), atol=1e-7)
    assert z.shape == (12, len(tokens)) and fig.data[0].zmax == 1.0


def test_hidden_scores_are_left_blank_and_the_title_says_so():
    net = Transformer(PRESETS["seed001-decoder"])
    trace = net.trace(net.tokenizer(["hello"])["input_ids"])
    tokens, steps = trace.tokens[0], steps_of(net, trace, "decoder")
    fig = viz.step_figure(steps["masked scores"], tokens, token=1)
    z = np.asarray(fig.data[0].z, dtype=np.float32)  # (H, T): query 1 sees keys 0 and 1
    assert np.isnan(z[:, 2:]).all() and np.isfinite(z[:, :2]).all()
    assert "hidden (-inf) left blank" in fig.layout.title.text
    json.loads(fig.to_json())  # NaN cells serialise


def test_a_head_step_shows_one_head_and_cross_keys_are_the_sources_tokens():
    net = Transformer(PRESETS["seed000-tiny"])
    enc = net.tokenizer(["time flies"])["input_ids"]
    trace = net.trace(enc, tgt_ids=net.tokenizer(["le temps"])["input_ids"])
    steps = steps_of(net, trace, "cross")
    targets, sources = trace.tgt_tokens[0], trace.tokens[0]
    fig = viz.step_figure(steps["Q heads"], targets, token=2, head=1)
    torch.testing.assert_close(
        torch.from_numpy(np.asarray(fig.data[0].z, dtype=np.float32)), steps["Q heads"].value[1]
    )
    assert fig.layout.shapes[0].y0 == 1.5
    keys = viz.step_figure(steps["K heads"], targets, token=2, head=3, key_tokens=sources)
    assert list(keys.data[0].y) == token_labels(sources) and not keys.layout.shapes
    with pytest.raises(ValueError, match="head 9"):
        viz.step_figure(steps["V heads"], targets, token=0, head=9)


def test_titles_speak_the_pages_language_and_tokens_are_escaped():
    net = Transformer(PRESETS["seed002-encoder"])
    trace = net.trace(net.tokenizer(["<b>x</b>"])["input_ids"])
    tokens, steps = trace.tokens[0], steps_of(net, trace)
    with speaking("zh-CN"):
        fig = viz.step_figure(steps["FFN hidden"], tokens, token=0)
        assert "前馈网络隐藏层" in fig.layout.title.text and "神经元" in fig.layout.title.text
    fig = viz.step_figure(steps["input"], tokens, token=0)
    assert "<b>" not in "".join(fig.data[0].y) and "&lt;" in "".join(fig.data[0].y)
    assert set(STEP_NAMES) <= set(lang.ZH)  # every step has its name in the table of words
    with pytest.raises(ValueError, match="token 99"):
        viz.step_figure(steps["input"], tokens, token=99)


def test_every_step_of_every_stack_draws(bert_steps):
    tokens, steps = bert_steps
    for step in steps.values():
        fig = viz.step_figure(step, tokens, token=3)
        assert fig.layout.title.text and fig.layout.height <= 600
        json.loads(fig.to_json())


def test_the_module_is_pure():
    tree = ast.parse(Path(viz.__file__).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any(name.split(".")[0] == "gradio" for name in imported)


def test_a_long_text_shows_a_window_of_rows_around_the_token_and_says_which():
    assert viz.window(30, 5) == (0, 30)
    assert viz.window(512, 300) == (300 - viz.WINDOW // 2, 300 + viz.WINDOW // 2)
    assert viz.window(512, 3) == (0, viz.WINDOW) and viz.window(512, 511) == (448, 512)
    net = Transformer(PRESETS["seed002-encoder"])  # d_model 128: [T, d] heatmaps, not folded
    ids = torch.randint(4, 90, (1, 200))
    trace = net.trace(ids)
    tokens, steps = trace.tokens[0], steps_of(net, trace)
    fig = viz.step_figure(steps["attention residual"], tokens, token=150)
    start, stop = viz.window(200, 150)
    z = np.asarray(fig.data[0].z, dtype=np.float32)
    np.testing.assert_allclose(z, steps["attention residual"].value[start:stop].numpy())
    assert list(fig.data[0].y) == token_labels(tokens)[start:stop]
    assert fig.layout.shapes[0].y0 == 150 - start - 0.5  # the token's row, inside the window
    assert f"rows {start}–{stop - 1} of 200" in fig.layout.title.text
    with speaking("zh-CN"):
        zh = viz.step_figure(steps["Q heads"], tokens, token=150, head=2)
        assert f"显示第 {start}–{stop - 1} 行（共 200 行）" in zh.layout.title.text


def test_the_step_switch_data_holds_each_steps_figure_as_the_server_draws_it(bert_steps):
    """Every step's entry of switch_data is, as plain JSON, the figure step_figure draws as
    Plotly itself writes it (its arrays as Plotly's base64 typed arrays; the template is put in
    when the figure is finished: ui/tabs/layer.py finishes each as the drawn figure is,
    tests/test_layer_tab.py)."""
    tokens, steps = bert_steps
    data = viz.switch_data(list(steps.values()), tokens, token=4, head=3)
    assert len(data) == len(steps)
    for fig, step in zip(data, steps.values(), strict=True):
        plotly = json.loads(viz.step_figure(step, tokens, token=4, head=3).to_json())
        plotly["layout"].pop("template")
        assert json.loads(json.dumps(fig)) == plotly, step.name
    z = data[list(steps).index("attention weights")]["data"][0]["z"]
    assert z["dtype"] == "f4" and z["shape"] == f"12, {len(tokens)}"
