"""How big each token's vector gets on its way up the stack: ‖h‖₂ after every layer.

The rows are the residual stream the trace records, hidden_states[stack] [B, L+1, T, d_model]:
the embedding output, then each layer's output. For pre-norm models that is the stream before the
stack's final norm (LayerNorm, seed 001; RMSNorm in a LLaMA-family model); for post-norm models
every layer ends in a LayerNorm already.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.colors import sample_colorscale

from lang import tr
from viz.common import (
    SEQUENTIAL_SCALE,
    figure,
    heatmap,
    layout_of,
    square_axis_props,
    stack_tokens,
)
from viz.common import token_labels as _token_labels

LEGEND_MAX_TOKENS = 20  # beyond this, one line per token but one legend entry per block
BINS = 8  # position blocks of a long text

CAPTIONS = {
    "norms": (
        "**‖h‖₂ of every token after every layer** — row 0 is the embedding output. Pre-norm "
        "models: the residual stream before the final norm (LayerNorm; RMSNorm in a LLaMA-family "
        "model); post-norm models: each layer's output, already LayerNorm-ed."
    ),
    "norms_lines": (
        "**One line per token across layers**, coloured by position; the thick line is the mean "
        "over tokens. Pre-norm models show the residual stream before the final norm."
    ),
}


def layer_names(n_layers: int) -> list[str]:
    """["embeddings", "after layer 0", ..., "after layer L-1"]: the rows of hidden_states.

    Layers are numbered from 0 everywhere in the app (sliders, attention titles, tables, links).
    """
    return [tr("embeddings")] + [tr("after layer {i}", i=i) for i in range(n_layers)]


def _default_stack(trace, stack: str | None) -> str:
    if stack is None:
        return "encoder" if "encoder" in trace.hidden_states else "decoder"
    return stack


def hidden_norms(trace, stack: str | None = None, batch: int = 0) -> tuple[np.ndarray, list[str]]:
    """(‖h‖₂ [L+1, T] as float32, tokens) for one text of a stack, padding removed."""
    stack = _default_stack(trace, stack)
    if stack not in trace.hidden_states:
        raise ValueError(
            f"This trace has hidden states for {sorted(trace.hidden_states)}, not {stack!r} "
            "(cross-attention has no residual stream of its own: pick 'decoder')."
        )
    tokens, _ = stack_tokens(trace, stack, batch)
    hidden = trace.hidden_states[stack][batch, :, : len(tokens)]  # (L+1, T, d_model)
    norms = torch.linalg.vector_norm(hidden.detach().cpu().float(), dim=-1)  # (L+1, T)
    return norms.numpy().astype(np.float32), tokens


def _norm_note(config) -> str:
    """What the rows are, named with the model's own norm (RMSNorm for a LLaMA-family model)."""
    norm = "RMSNorm" if getattr(config, "norm_kind", "layer") == "rms" else "LayerNorm"
    if config.norm == "pre":
        if getattr(config, "final_norm", True):
            return tr("pre-norm: the residual stream before the final {norm}", norm=norm)
        return tr("pre-norm: the raw residual stream (this stack has no final {norm})", norm=norm)
    return tr("post-norm: each layer's output is already {norm}-ed", norm=norm)


def norms_heatmap(trace, stack: str | None = None, batch: int = 0) -> go.Figure:
    """‖h‖₂ of every token (columns) after the embeddings and each layer (rows)."""
    stack = _default_stack(trace, stack)
    norms, tokens = hidden_norms(trace, stack, batch)
    rows = layer_names(norms.shape[0] - 1)
    cells = heatmap(
        norms,
        _token_labels(tokens),
        rows,
        x_title=tr("token"),
        y_title=tr("after"),
        value_name="‖h‖₂",
        colorscale=SEQUENTIAL_SCALE,
        fmt=".2f",
    )
    cells["colorbar"] = {"thickness": 10, "title": {"text": "‖h‖₂"}}
    x_axis, y_axis = square_axis_props(len(tokens), len(rows))
    del y_axis["nticks"]  # every layer named: there are few
    height = 150 + 26 * len(rows) + (70 if len(tokens) > 12 else 40)
    title = tr(
        "Hidden-state norms ‖h‖₂ · {stack} · {note}", stack=tr(stack), note=_norm_note(trace.config)
    )
    return figure([cells], {**layout_of(title, height), "xaxis": x_axis, "yaxis": y_axis})


def _token_lines(norms: np.ndarray, labels: list[str], x: list[str]) -> list[dict]:
    """One trace per token, named in the legend (short texts)."""
    colours = sample_colorscale(SEQUENTIAL_SCALE, list(np.linspace(0, 0.9, max(len(labels), 2))))
    return [
        {
            "type": "scatter",
            "x": x,
            "y": norms[:, t],
            "mode": "lines+markers",
            "name": label,
            "line": {"width": 1.6, "color": colours[t]},
            "marker": {"size": 5},
            "opacity": 0.9,
            # the name is in fullData, never parsed as a template: a token "%{y}" stays text
            "hovertemplate": "%{fullData.name}<br>%{x}<br>‖h‖₂ %{y:.2f}<extra></extra>",
        }
        for t, label in enumerate(labels)
    ]


def _binned_lines(norms: np.ndarray, labels: list[str], x: list[str]) -> list[dict]:
    """Long texts: one trace per block of consecutive tokens, lines broken by NaN.

    Eight traces instead of hundreds: the JSON stays small and the legend explains the colours
    (position blocks).
    """
    n_layers1, n = norms.shape
    n_bins = min(BINS, n)
    edges = np.linspace(0, n, n_bins + 1).round().astype(int)
    colours = sample_colorscale(SEQUENTIAL_SCALE, list(np.linspace(0, 0.9, n_bins)))
    traces = []
    for b in range(n_bins):
        lo, hi = int(edges[b]), int(edges[b + 1])
        block = norms[:, lo:hi]  # (L+1, m)
        gap = np.full((1, hi - lo), np.nan, dtype=np.float32)
        y = np.vstack([block, gap]).T.reshape(-1)  # (m·(L+2),) token after token, NaN between
        traces.append(
            {
                "type": "scatter",
                "x": (x + [None]) * (hi - lo),
                "y": y.astype(np.float32),
                "text": [label for label in labels[lo:hi] for _ in range(n_layers1 + 1)],
                "mode": "lines",
                "name": tr("tokens {lo}–{hi}", lo=lo, hi=hi - 1),
                "line": {"width": 1, "color": colours[b]},
                "opacity": 0.6,
                "hovertemplate": "%{text}<br>%{x}<br>‖h‖₂ %{y:.2f}<extra></extra>",
            }
        )
    return traces


def norms_lines(trace, stack: str | None = None, batch: int = 0) -> go.Figure:
    """One line per token across layers, coloured by position, plus the mean as a thick line."""
    stack = _default_stack(trace, stack)
    norms, tokens = hidden_norms(trace, stack, batch)
    x = layer_names(norms.shape[0] - 1)
    labels = _token_labels(tokens)
    many = len(tokens) > LEGEND_MAX_TOKENS
    lines = _binned_lines(norms, labels, x) if many else _token_lines(norms, labels, x)
    mean = {
        "type": "scatter",
        "x": x,
        "y": norms.mean(axis=1),
        "mode": "lines",
        "name": tr("mean over tokens"),
        "line": {"width": 4.5, "color": "#111827"},
        "hovertemplate": tr("mean over tokens") + "<br>%{x}<br>‖h‖₂ %{y:.2f}<extra></extra>",
    }
    title = tr(
        "‖h‖₂ per token across layers · {stack} · {note}",
        stack=tr(stack),
        note=_norm_note(trace.config),
    )
    layout = {
        **layout_of(title, 420),
        "hovermode": "closest",
        "xaxis": {"type": "category"},
        "yaxis": {"title": {"text": "‖h‖₂"}, "rangemode": "tozero"},
        "legend": {"font": {"size": 11}, "tracegroupgap": 0},
    }
    return figure([*lines, mean], layout)
