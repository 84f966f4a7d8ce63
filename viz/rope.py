"""Rotary positions (RoPE, Su et al. 2021) as figures: what a LLaMA-style model has instead of a
position table.

RoPE adds nothing to the embedding. Each head's d_head dimensions form d_head/2 pairs; at
position m pair i is turned by the angle m·θ_i, θ_i = base^(−2i/d_head) (LLaMA 3's scaling slows
the slow pairs further). A query at m and a key at n then score (R_m q)·(R_n k) = q·R_(n−m) k:
only the distance matters. Two honest views: the frequencies θ_i pair by pair, and how one fixed
pair of vectors scores as the distance between them grows. Pure: a config (and a trace) in, a
Plotly figure out.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch

from lang import tr
from model.rotary import RotaryEmbedding
from viz.common import display_token, figure, grid, layout_of, safe

MAX_DISTANCE = 512  # distances drawn at most (the curve's shape is set well before)


def frequencies(config) -> np.ndarray:
    """θ_i of pairs 0..d_head/2 − 1 in radians per token, as the model computes them."""
    rotary = RotaryEmbedding(config.d_head, config.rope_theta, config.rope_llama3)
    return rotary.inv_freq.double().numpy()


def frequency_figure(config, n_tokens: int | None = None) -> go.Figure:
    """θ_i per dimension pair (log scale), with the wavelength 2π/θ_i in tokens in the hover;
    ``n_tokens`` (the text's length) marks which pairs turn less than once over the text."""
    theta = frequencies(config)
    pairs = np.arange(len(theta))
    waves = 2 * math.pi / theta
    half = config.d_head // 2
    hover = tr(
        "pair %{x}: dimensions %{x} and %{customdata[0]}<br>θ = %{y:.3g} rad per token<br>"
        "one full turn every %{customdata[1]:,.1f} tokens"
    )
    line = {
        "type": "scatter",
        "x": pairs,
        "y": theta,
        "mode": "lines+markers",
        "marker": {"size": 5},
        "customdata": np.stack([pairs + half, waves], axis=1),
        "hovertemplate": hover + "<extra></extra>",
        "name": "θ_i",
    }
    title = tr(
        "RoPE frequencies · θ_i = {base:g}^(−2i/{d_head}) per dimension pair",
        base=config.rope_theta,
        d_head=config.d_head,
    )
    if config.rope_llama3 is not None:
        title += tr(
            " (LLaMA 3 scaling: slow pairs {factor:g}× slower)", factor=config.rope_llama3[0]
        )
    if n_tokens:
        slow = int((waves > n_tokens).sum())
        title += "<br><sup>" + tr(
            "{slow} of {pairs} pairs turn less than once over this text's {n} tokens: they "
            "carry coarse position, the fast pairs fine",
            slow=slow,
            pairs=len(theta),
            n=n_tokens,
        )
        title += "</sup>"
    layout = {**layout_of(title, 360), "showlegend": False}
    layout["xaxis"] = {
        "title": {"text": tr("dimension pair i (0 = fastest)")},
        "dtick": max(1, len(pairs) // 8),
    }
    layout["yaxis"] = {"title": {"text": tr("θ_i (radians per token, log scale)")}, "type": "log"}
    return figure([line], layout)


def score_at_distances(q: torch.Tensor, k: torch.Tensor, config, distances) -> np.ndarray:
    """(R_m q)·(R_(m+Δ) k)/√d_head for each distance Δ: the same two vectors Δ tokens apart."""
    theta = torch.from_numpy(frequencies(config))  # (d_head/2,)
    angle = torch.as_tensor(distances, dtype=torch.float64)[:, None] * theta  # (D, d_head/2)
    q1, q2 = q.double().chunk(2)  # HF's rotate_half layout: pair i = dimensions (i, i + d/2)
    k1, k2 = k.double().chunk(2)
    # q·R_Δ k, pair by pair: (q1 k1 + q2 k2) cos Δθ + (q2 k1 − q1 k2) sin Δθ ... with the key
    # turned forwards by Δ, as a key Δ tokens before the query is seen from it.
    dot = (q1 * k1 + q2 * k2) * torch.cos(angle) + (q1 * k2 - q2 * k1) * torch.sin(angle)
    return (dot.sum(-1) / math.sqrt(config.d_head)).numpy()  # (D,)


def distance_figure(trace, stack: str = "decoder", layer: int = 0, head: int = 0) -> go.Figure:
    """How a score changes with distance alone: top, q = k = (1, …, 1) (Su et al. §3.4.3's
    long-term decay); bottom, this text's own query of its last token and key of its first,
    both before the turn, scored as if they stood Δ tokens apart."""
    config = trace.config
    n = int(trace.attention_mask[0].sum()) if trace.attention_mask is not None else None
    n = n or trace.attentions[stack].shape[-1]
    distances = np.arange(min(config.max_len, MAX_DISTANCE))
    ones = torch.ones(config.d_head)
    decay = score_at_distances(ones, ones, config, distances)
    q = trace.layer_field("queries_pre_rope", stack, layer)[0, head, n - 1]  # (d_head,)
    k = trace.layer_field("keys_pre_rope", stack, layer)[0, head, 0]  # (d_head,)
    own = score_at_distances(q, k, config, distances)
    tokens = trace.tokens_for(stack)[0][0]
    q_tok, k_tok = safe(display_token(tokens[n - 1])), safe(display_token(tokens[0]))
    titles = [
        tr(
            "q = k = (1, …, 1): highest at Δ = 0, then the pairs turn apart (RoPE's long-term "
            "decay)"
        ),
        tr(
            "layer {layer}, head {head}: q of “{q}” (last token) and k of “{k}” (first), Δ apart",
            layer=layer,
            head=head,
            q=q_tok,
            k=k_tok,
        ),
    ]
    layout, cells = grid(2, 1, v_space=0.16, titles=titles)
    hover = tr("distance %{x}<br>score %{y:.3f}") + "<extra></extra>"
    data = [
        {"type": "scatter", "x": distances, "y": values.astype(np.float32), "mode": "lines",
         "hovertemplate": hover, "showlegend": False, "xaxis": x, "yaxis": y}
        for values, (x, y) in zip((decay, own), cells, strict=True)
    ]  # fmt: skip
    if n <= distances[-1]:  # this text's length, on both panels
        layout["shapes"] = [
            {"type": "line", "x0": n - 1, "x1": n - 1, "xref": x, "y0": 0, "y1": 1,
             "yref": f"{y} domain", "line": {"dash": "dot", "color": "#888"}}
            for x, y in cells
        ]  # fmt: skip
    layout["xaxis2"]["title"] = {"text": tr("distance Δ = query position − key position")}
    for key in ("yaxis", "yaxis2"):
        layout[key]["title"] = {"text": "q·R(Δ)k / √d_head"}
    title = tr("RoPE: a score depends on the distance only · dotted: this text's length")
    layout.update(layout_of(title, 520))
    return figure(data, layout)
