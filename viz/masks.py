"""Mask views (seed 003's section on masks): padding (variants a and b), causal, cross, and what
a mask does to one head's scores on their way through softmax.

Masks are bool, True = may attend (model/masks.py); drawn as allowed = blue, hidden = grey.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch

from lang import tr
from model.masks import causal_mask, padding_mask, padding_mask_query_key
from viz.attention import (
    HIDDEN_GREY,
    MAX_PANEL_CELLS,
    axis_titles,
    check_selection,
    colorbars_below,
    label_px,
    panel_height,
    pool,
    pool_labels,
    pool_note,
    stack_title,
    three_panels,
    token_axis_props,
)
from viz.common import (
    ATTENTION_SCALE,
    DIVERGING_SCALE,
    axis_key,
    figure,
    grid,
    head_label,
    heatmap,
    layout_of,
    token_labels,
)

CAPTIONS = {
    "padding": "**Padding masks** — (b) keys only, M[i, j] = key_j is real: what the model uses; "
    "(a) query and key, M[i, j] = query_i and key_j are real: padded rows are hidden too.",
    "causal": "**Causal mask** — M[i, j] = (j ≤ i): token i sees itself and the past, never the "
    "future; a decoder uses it, an encoder does not.",
    "cross": "**Cross-attention mask** — M[i, j] = source key_j is real: every target query may "
    "look at every real source token; padded source keys are hidden.",
    "score_steps": "**Scores → mask → softmax** — S = QKᵀ/√d_k; hidden entries become −∞; "
    "softmax(S) turns them into exactly 0 and each row sums to 1 over what is left.",
}

ALLOWED_BLUE = "#2f6db5"
MASK_SCALE = [[0.0, HIDDEN_GREY], [0.5, HIDDEN_GREY], [0.5, ALLOWED_BLUE], [1.0, ALLOWED_BLUE]]
MAX_MASK_CELLS = 128  # mask panels: cells a side before mean-pooling
LEGEND = (
    "<span style='color:{blue}'>■</span> may attend   <span style='color:{grey}'>■</span> hidden"
)


def legend() -> str:
    """The colour key of every mask figure: blue may attend, grey hidden."""
    return tr(LEGEND, blue=ALLOWED_BLUE, grey="#9a9a9a")


def mask_heatmap(
    mask: np.ndarray, q_tokens: list[str], k_tokens: list[str], stack: str
) -> tuple[dict, str]:
    """A bool mask (T_q, T_k) as blue (may attend) / grey (hidden) cells, one byte a cell.

    Longer than MAX_MASK_CELLS tokens, cells are mean-pooled and shaded by the share of their
    pairs that may attend. Returns (the heatmap, as plain JSON, and a title note that says so,
    or "").
    """
    k_q, k_k = math.ceil(len(q_tokens) / MAX_MASK_CELLS), math.ceil(len(k_tokens) / MAX_MASK_CELLS)
    x_lab = pool_labels(token_labels(k_tokens), k_k)
    y_lab = pool_labels(token_labels(q_tokens), k_q)
    y_title, x_title = axis_titles(stack)
    if k_q == 1 and k_k == 1:
        z, scale, zmax = mask.astype(np.uint8), MASK_SCALE, 1
        value = tr("may attend: %{z} (1 = yes)")
        note = ""
    else:
        share = pool(torch.from_numpy(mask).float()[None], k_q, k_k, "mean")[0]  # (T_q', T_k')
        z = torch.round(share * 100).to(torch.uint8).numpy()
        scale, zmax = [[0.0, HIDDEN_GREY], [1.0, ALLOWED_BLUE]], 100
        value = tr("%{z} % may attend")
        note = pool_note(q_tokens, k_tokens, y_lab, x_lab, "mean") + tr(": shade = share allowed")
    gap = 1 if max(z.shape) <= 48 else 0  # a cell grid helps counting; costs pixels when long
    cells = {
        "type": "heatmap",
        "z": z,
        "x": x_lab,
        "y": y_lab,
        "zmin": 0,
        "zmax": zmax,
        "colorscale": scale,
        "showscale": False,
        "xgap": gap,
        "ygap": gap,
        "hovertemplate": f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{value}<extra></extra>",
    }
    return cells, note


def mask_size_px(n: int) -> int:
    """Side of one square mask panel in pixels: ~16 px a token, between 160 and 420."""
    return int(min(420, max(160, 16 * n)))


def _one_mask_figure(
    mask: np.ndarray, q_tokens: list[str], k_tokens: list[str], title: str, stack: str
) -> go.Figure:
    """One mask as a single square panel (cells stay square: the plot area shrinks rather than
    stretching them), with the colour legend in the title."""
    y_title, x_title = axis_titles(stack)
    cells, note = mask_heatmap(mask, q_tokens, k_tokens, stack)
    x_lab, y_lab = cells["x"], cells["y"]
    height = mask_size_px(max(len(x_lab), len(y_lab))) + label_px(x_lab) + 110
    layout = layout_of(f"{title}<br><sup>{legend()}{note}</sup>", height=height)
    layout["margin"]["t"] = 70
    layout["meta"] = {"fit": "square"}  # laid out for the asking page's screen (viz.screen)
    x, y = token_axis_props(len(x_lab), len(y_lab))
    layout["xaxis"] = {**x, "constrain": "domain", "title": {"text": x_title}}
    layout["yaxis"] = {**y, "constrain": "domain", "scaleanchor": "x", "title": {"text": y_title}}
    return figure([cells], layout)


# ---------------------------------------------------------------- padding: variants (a) and (b)


def _stack_masks(trace, stack: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(query mask, key mask), each [B, T] 1 = real token, of a stack's two sides."""
    src = trace.attention_mask
    tgt = trace.tgt_attention_mask if trace.tgt_attention_mask is not None else src
    return {"encoder": (src, src), "decoder": (tgt, tgt), "cross": (tgt, src)}[stack]


def padding_masks_figure(batch_trace, stack: str = "encoder") -> go.Figure:
    """For the first two texts of a padded batch: the key-only padding mask (b, what the model
    uses) and the query-and-key mask (a), 2 × 2 panels with [PAD] tokens labelled."""
    check_selection(batch_trace, stack)
    if batch_trace.input_ids.shape[0] < 2:
        raise ValueError(
            "Padding needs two texts of different length: trace a batch of your text and a "
            "second sentence (tokenizer(..., padding=True))."
        )
    q_mask, k_mask = _stack_masks(batch_trace, stack)
    mask_b = padding_mask(k_mask, q_mask.shape[1]).cpu().numpy()  # (B, T_q, T_k)
    mask_a = padding_mask_query_key(q_mask, k_mask).cpu().numpy()  # (B, T_q, T_k)
    q_all, k_all = batch_trace.tokens_for(stack)
    titles = []
    for i in (1, 2):
        titles += [
            tr("text {i} · (b) keys only — used", i=i),
            tr("text {i} · (a) query and key", i=i),
        ]
    # Pixels first, then fractions: row 2's titles must clear row 1's rotated key labels.
    panel = mask_size_px(min(max(mask_b.shape[1:]), MAX_MASK_CELLS))
    lab = label_px(token_labels(k_all[0]) + token_labels(k_all[1]))
    gap = lab + 30  # rotated key labels + the next row's panel titles
    layout, cells = grid(
        2, 2, h_space=0.1, v_space=gap / (2 * panel + gap), titles=titles, title_size=12
    )
    panels = []
    for b in (0, 1):
        for col, mask in ((0, mask_b[b]), (1, mask_a[b])):
            heat, pooled = mask_heatmap(mask, q_all[b], k_all[b], stack)
            xaxis, yaxis = cells[2 * b + col]
            heat.update(xaxis=xaxis, yaxis=yaxis)
            panels.append(heat)
            x, y = token_axis_props(len(heat["x"]), len(heat["y"]))
            layout[axis_key(xaxis)].update(x, constrain="domain")
            # square cells: each panel's y axis follows its own x axis
            layout[axis_key(yaxis)].update(y, constrain="domain", scaleanchor=xaxis)
    n_pad = int((q_mask[:2] == 0).sum() + (k_mask[:2] == 0).sum())
    note = "" if n_pad else tr(" · these two texts have the same length: nothing is padded")
    key = tr("{legend}   rows = queries, columns = keys{pooled}", legend=legend(), pooled=pooled)
    title = tr(
        "Padding masks — {stack}{note}<br><sup>{key}</sup>",
        stack=stack_title(stack),
        note=note,
        key=key,
    )
    layout.update(layout_of(title, height=80 + 2 * panel + gap + lab + 10))
    layout["margin"].update(t=80, b=lab + 10)
    return figure(panels, layout)


# ---------------------------------------------------------------- causal and cross masks


def causal_mask_figure(tokens: list[str], arch: str = "decoder") -> go.Figure:
    """The lower-triangular causal mask over ``tokens`` (raw, unescaped).

    Args:
        arch: the model's architecture; an "encoder" does not use this mask and the title says so.
    """
    mask = causal_mask(len(tokens)).numpy()
    if arch == "encoder":
        title = tr(
            "Causal mask — an encoder does not use it (every token sees every token); "
            "a decoder would"
        )
    else:
        title = tr("Causal (look-ahead) mask — token i sees tokens 0…i, never the future")
    return _one_mask_figure(mask, tokens, tokens, title, "decoder")


def cross_mask_figure(trace, batch: int = 0) -> go.Figure:
    """Cross-attention's mask: target queries × source keys, padded source keys hidden."""
    if "cross" not in trace.masks:
        raise ValueError(
            "This model has no cross-attention: only an encoder-decoder (e.g. seed003-encdec) "
            "has decoder queries looking at encoder keys."
        )
    q_all, k_all = trace.tokens_for("cross")
    mask = trace.masks["cross"][batch].detach().cpu().numpy()  # (T_tgt, T_src)
    title = tr("Cross-attention mask — target queries × source keys; padded source keys hidden")
    return _one_mask_figure(mask, q_all[batch], k_all[batch], title, "cross")


# ---------------------------------------------------------------- scores → mask → softmax


def head_scores(trace, stack: str, layer: int, head: int, batch: int = 0) -> torch.Tensor:
    """QKᵀ/√d_k (T_q, T_k) of one head, before masking: the product ``trace.scores`` computes,
    for one head only (trace.scores would compute and cache every head of the stack)."""
    q = trace.layer_field("queries", stack, layer)[batch, head].detach().cpu().float()  # (T_q, d)
    k = trace.layer_field("keys", stack, layer)[batch, head].detach().cpu().float()  # (T_k, d)
    return (q * q.shape[-1] ** -0.5) @ k.T  # (T_q, T_k)


def _step_maps(
    trace, stack: str, layer: int, head: int, batch: int, k_q: int, k_k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, torch.Tensor]:
    """(scores, masked scores, weights) of one head, each mean-pooled k_q × k_k (a masked cell
    is the mean over its allowed pairs, NaN where it has none), and the mask (T_q, T_k)."""
    scores = head_scores(trace, stack, layer, head, batch)
    mask = trace.layer_mask(stack, layer) if hasattr(trace, "layer_mask") else trace.masks[stack]
    allowed = mask[batch].detach().cpu().float()  # (T_q, T_k) 1 = may attend: this layer's own
    weights = trace.attentions[stack][batch, layer, head].detach().cpu().float()
    maps = pool(torch.stack([scores, scores * allowed, allowed, weights]), k_q, k_k, "mean")
    raw, kept_sum, kept_frac, probs = maps.numpy()  # (T_q', T_k') each
    with np.errstate(invalid="ignore", divide="ignore"):
        masked = np.where(kept_frac > 0, kept_sum / kept_frac, np.nan)  # mean over allowed pairs
    return raw, masked, probs, allowed


def _step_colorbars(top: float) -> tuple[dict, dict]:
    """The scores' diverging axis (±top, panels 1 and 2) and the weights' [0, 1] (panel 3)."""
    return (
        {"colorscale": DIVERGING_SCALE, "cmin": -top, "cmax": top, "cmid": 0.0,
         "colorbar": {"title": {"text": "QKᵀ/√d_k", "side": "right"}, "thickness": 12}},
        {"colorscale": ATTENTION_SCALE, "cmin": 0.0, "cmax": 1.0,
         "colorbar": {"title": {"text": tr("weight"), "side": "right"}, "thickness": 12}},
    )  # fmt: skip


def _mask_note(allowed: torch.Tensor) -> str:
    """The title's line on what the mask hides."""
    if bool(allowed.all()):
        return tr("<br><sup>this mask hides nothing here (no padding, no causal mask): 1 = 2</sup>")
    hidden = int((allowed == 0).sum())
    return tr("<br><sup>{n} hidden pairs become −∞, then weight 0</sup>", n=hidden)


def score_steps_figure(
    trace, stack: str, layer: int, head: int, batch: int = 0, max_cells: int = MAX_PANEL_CELLS
) -> go.Figure:
    """One head in three steps: scores before masking, after masking (hidden = −∞, grey), softmax.

    Padding tokens stay in (they are what a padding mask hides); the mask is the stack's own, so
    a decoder shows its causal mask. Texts longer than ``max_cells`` are mean-pooled.
    """
    check_selection(trace, stack, layer, head)
    q_all, k_all = trace.tokens_for(stack)
    q_tok, k_tok = q_all[batch], k_all[batch]
    k_q, k_k = math.ceil(len(q_tok) / max_cells), math.ceil(len(k_tok) / max_cells)
    raw, masked, probs, allowed = _step_maps(trace, stack, layer, head, batch, k_q, k_k)
    x_lab, y_lab = pool_labels(token_labels(k_tok), k_k), pool_labels(token_labels(q_tok), k_q)
    y_title, x_title = axis_titles(stack)
    common = {"x_title": x_title, "y_title": y_title}
    panels = [
        heatmap(raw, x_lab, y_lab, value_name=tr("score"), fmt=".2f", **common),
        heatmap(masked, x_lab, y_lab, value_name=tr("masked score"), fmt=".2f", **common),
        heatmap(probs, x_lab, y_lab, value_name=tr("weight"), **common),
    ]
    panels[1].update(hoverongaps=False)
    colorbars = _step_colorbars(max(float(np.abs(raw).max()), 1e-6))
    titles = ["1 · S = QKᵀ/√d_k", tr("2 · masked: hidden → −∞ (grey)"), "3 · softmax(S)"]
    data, layout = three_panels(panels, titles, len(x_lab), len(y_lab), x_title, y_title, colorbars)
    title = tr(
        "Layer {layer}, head {head} — {stack}{note}",
        layer=layer,
        head=head_label(trace.config, head),  # "5 (kv 1)" under grouped-query attention
        stack=stack_title(stack),
        note=pool_note(q_tok, k_tok, y_lab, x_lab, "mean") + _mask_note(allowed),
    )
    layout.update(layout_of(title, panel_height(x_lab, max(len(x_lab), len(y_lab))) + 20))
    layout["margin"]["t"] = 90
    layout["plot_bgcolor"] = HIDDEN_GREY
    return colorbars_below(data, layout)
