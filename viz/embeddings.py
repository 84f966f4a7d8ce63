"""The input sum, term by term: token embedding + positional encoding (+ token type) = x.

Heatmaps here are tokens (or positions) × d_model, the largest matrices a view sends; values travel
as float32 so the hover shows the real number. Rows beyond MAX_ROWS are cut (embeddings: the first
MAX_ROWS tokens) or strided (position table), with a note in the title.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import torch

from lang import ordinal, tr
from model.embeddings import sinusoid_table
from viz.common import (
    DIVERGING_SCALE,
    axis_key,
    figure,
    grid,
    heatmap,
    layout_of,
    safe,
    stack_tokens,
    token_labels,
)

MAX_ROWS = 128  # rows of a tokens × d_model panel; 128 × 384 int16 ≈ 210 KB of JSON per panel
MAX_CELLS = 64 * 512  # cells of the position table (positions strided beyond it): ≤ 160 KB
SEED_POSITIONS = 100  # seed 002 plots the sinusoidal table for 100 positions
CLIP_PERCENTILE = 99.0  # colour range: BERT's embeddings have a few entries 10× the rest

CAPTIONS = {
    "embeddings": (
        "**x = E_tok[id] + P[pos] (+ E_type[segment] in BERT)**, then LayerNorm where the model "
        "has one — rows are tokens, columns the d_model dimensions. Each panel has its own colour "
        "range (in its title; clipped at the 99th percentile of |value|), red > 0 > blue."
    ),
    "positions": (
        "**PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / "
        "10000^(2i/d_model))** — the period grows with the dimension (seed 002). Learned "
        "positions (BERT, GPT-2) are rows of a trained table P[max_len, d_model]. A RoPE model "
        "(LLaMA, Qwen2, Mistral) adds no table: it turns each head's q and k, pair i of "
        "dimensions by pos·θ_i, θ_i = base^(−2i/d_head); drawn here are its θ_i."
    ),
    "position_curves": (
        "**One dimension of P across positions** — dimension 2i / 2i+1 is a sin / cos of period "
        "2π·10000^(2i/d_model); learned dimensions follow no formula. For a RoPE model: how the "
        "score of one fixed pair of q and k changes with their distance alone (the dimensions "
        "below do not apply)."
    ),
}


# ---- helpers ------------------------------------------------------------------------------------
def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().float().numpy()


def _clip_range(a: np.ndarray) -> float:
    """Symmetric colour limit: the 99th percentile of |a| (never 0)."""
    if not a.size:
        return 1.0
    r = float(np.percentile(np.abs(a), CLIP_PERCENTILE))
    return r if r > 0 else float(np.abs(a).max()) or 1.0


def _colorbar(r: float, y: float, length: float) -> dict:
    ticks = [-r, -r / 2, 0.0, r / 2, r]
    return {
        "tickvals": ticks,
        "ticktext": [f"{v:.2g}".replace("-", "−") for v in ticks],
        "thickness": 10,
        "len": length,
        "y": y,
        "yanchor": "middle",
        "x": 1.0,
        "xpad": 6,
    }


def _every(stride: int) -> str:
    """ "every 3rd position shown" (in Chinese the ordinal is a plain number: lang.ordinal)."""
    return tr("every {nth} position shown", nth=ordinal(stride))


def _default_stack(trace, stack: str | None) -> str:
    if stack is None:
        return "encoder" if "encoder" in trace.embeddings else "decoder"
    if stack not in trace.embeddings:
        raise ValueError(
            f"This trace has embeddings for {sorted(trace.embeddings)}, not {stack!r}."
        )
    return stack


# ---- tokens × d_model panels --------------------------------------------------------------------
def _segment_rows(token_type: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The distinct rows of the token-type term ([n, d] -> [s, d]) with labels naming their tokens.

    Every token of one segment adds the same vector E_type[s], so one row per segment says it all
    (and saves a full tokens × d_model panel of bytes).
    """
    _, first, inverse = np.unique(token_type, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # segments in order of appearance
    rows, labels = [], []
    for seg, u in enumerate(order):
        members = np.flatnonzero(inverse.reshape(-1) == u)
        span = f"{members[0]}–{members[-1]}" if len(members) > 1 else f"{members[0]}"
        rows.append(token_type[first[u]])
        labels.append(tr("segment {seg} · tokens {span}", seg=seg, span=span))
    return np.stack(rows), labels


def _panels(trace, stack: str, batch: int, n: int, labels: list[str]):
    """(title, hover name, [rows, d], row labels) per term of the sum, in the order of addition."""
    emb = trace.embeddings[stack]
    panels = [
        (tr("token embedding E_tok[id]"), "token embedding", _np(emb["token"][batch, :n]), labels),
        (tr("position P[t]"), "position", _np(emb["position"][:n]), labels),
    ]
    if trace.config.positions == "rotary":  # nothing is added: RoPE turns q and k instead
        panels.pop()
    if "token_type" in emb:
        rows, seg_labels = _segment_rows(_np(emb["token_type"][batch, :n]))
        title = tr("token type E_type[s]: one row per segment, added to each of its tokens")
        panels.append((title, "token type", rows, seg_labels))
    terms = " + ".join(tr(p[1]) for p in panels)
    panels.append((tr("sum x = {terms}", terms=terms), "sum", _np(emb["sum"][batch, :n]), labels))
    return panels


def embedding_figure(
    trace, stack: str | None = None, batch: int = 0, max_tokens: int = MAX_ROWS
) -> go.Figure:
    """Token embeddings, positions (and BERT's token types) and their sum, one panel each.

    Args:
        trace: a Trace. stack: "encoder" or "decoder" (default: the first the model has).
        batch: which text of the batch. max_tokens: rows shown (the first ones), to bound bytes.
    """
    stack = _default_stack(trace, stack)
    q_tokens, _ = stack_tokens(trace, stack, batch)
    n_total = len(q_tokens)
    n = min(n_total, max_tokens)
    labels = token_labels(q_tokens[:n])
    panels = _panels(trace, stack, batch, n, labels)

    # Panel heights in pixels: ~14 px a row for short texts, bounded.
    heights = [
        int(np.clip(len(p[3]) * 14, 28 if p[1] == "token type" else 90, 260)) for p in panels
    ]
    gap = 44
    top, bottom = 70, 46
    height = top + bottom + sum(heights) + gap * (len(panels) - 1)
    ranges = [_clip_range(p[2]) for p in panels]
    titles = [
        tr("{panel}   (colour ±{r:.2g})", panel=p[0], r=r)
        for p, r in zip(panels, ranges, strict=True)
    ]
    layout, cells = grid(
        len(panels),
        1,
        v_space=gap / (height - top - bottom),
        row_heights=[h / sum(heights) for h in heights],
        titles=titles,
        title_size=12,
    )
    for annotation in layout["annotations"]:  # panel titles at the left
        annotation.update(x=0, xanchor="left")
    traces = [
        _panel_trace(layout, cells, row, panel, r, h)
        for row, (panel, r, h) in enumerate(zip(panels, ranges, heights, strict=True), start=1)
    ]
    layout[axis_key(cells[-1][0])]["title"] = {"text": tr("dimension")}
    layout.update(layout_of(_embedding_title(trace, stack, n, n_total), height))
    layout["margin"].update(t=top, b=bottom)
    return figure(traces, layout)


def _panel_trace(layout: dict, cells: list, row: int, panel, r: float, h: int) -> dict:
    """One panel's heatmap (row ``row`` of the grid, ``h`` px tall, coloured ±``r``); sets its
    colour axis and its token axis in ``layout``."""
    _, name, z, rows = panel
    axis = "coloraxis" if row == 1 else f"coloraxis{row}"
    xaxis, yaxis = cells[row - 1]
    cells_of_panel = heatmap(
        z,
        list(range(z.shape[1])),
        rows,
        x_title=tr("dimension"),
        y_title=tr("token"),
        value_name=tr(name),
    )
    del cells_of_panel["x"]  # numeric dimension axis: no labels to send
    cells_of_panel.update(
        xaxis=xaxis,
        yaxis=yaxis,
        coloraxis=axis,
        hovertemplate=safe(tr(name))
        + tr("<br>%{y}<br>dimension %{x}<br>value %{z:.4f}")
        + "<extra></extra>",
    )
    domain = layout[axis_key(yaxis)]["domain"]
    layout[axis] = {
        "colorscale": DIVERGING_SCALE,
        "cmin": -r,
        "cmax": r,
        "cmid": 0,
        "showscale": h >= 90,
        "colorbar": _colorbar(r, (domain[0] + domain[1]) / 2, domain[1] - domain[0]),
    }
    step = max(1, int(np.ceil(len(rows) / max(2, h // 13))))
    layout[axis_key(yaxis)].update(
        type="category",
        autorange="reversed",
        tickmode="array",
        tickvals=rows[::step],
        tickfont={"size": 10},
    )
    if row < len(cells):  # one dimension axis for every panel, labelled at the bottom
        layout[axis_key(xaxis)].update(matches=cells[-1][0], showticklabels=False)
    return cells_of_panel


def _embedding_title(trace, stack: str, n: int, n_total: int) -> str:
    """The embeddings figure's title: the stack, a final LayerNorm and a cut text said."""
    note = []
    if trace.config.embedding_norm:
        note.append(tr("then LayerNorm → the input of layer 1"))
    if n < n_total:
        note.append(tr("showing the first {n} of {n_total} tokens", n=n, n_total=n_total))
    title = tr("Input embeddings · {stack}", stack=tr(stack))
    return title + (tr(" — {notes}", notes=tr("; ").join(note)) if note else "")


# ---- the position table and its curves ----------------------------------------------------------
def position_table(trace, stack: str | None = None, n_positions: int | None = None):
    """(table [n, d_model] as numpy, note) of the positions the model adds.

    Sinusoidal tables are computed from the config (any n up to max_len; default max(T, 100) as
    seed 002 plots them). Learned tables come from the trace, which holds positions 0..T−1 only.
    """
    stack = _default_stack(trace, stack)
    cfg = trace.config
    t = int(trace.embeddings[stack]["position"].shape[0])
    if cfg.positions == "sinusoidal":
        n = n_positions if n_positions is not None else max(t, SEED_POSITIONS)
        n = max(1, min(n, cfg.max_len))
        return _np(sinusoid_table(n, cfg.d_model)), ""
    n = t if n_positions is None else max(1, min(n_positions, t))
    note = ""
    if n_positions is not None and n_positions > t:
        note = tr(
            "learned rows of this trace: positions 0–{last} (a longer text shows more)", last=t - 1
        )
    return _np(trace.embeddings[stack]["position"][:n]), note


def position_table_figure(
    trace, stack: str | None = None, n_positions: int | None = None
) -> go.Figure:
    """The position table, positions × dimensions, as seed 002's heatmap draws it."""
    table, note = position_table(trace, stack, n_positions)
    n, d = table.shape
    stride = max(1, int(np.ceil(n * d / MAX_CELLS)))
    shown = table[::stride]
    r = _clip_range(shown) if trace.config.positions == "learned" else 1.0
    rows = np.arange(0, n, stride)
    trace_ = heatmap(
        shown,
        list(range(d)),
        list(rows),
        x_title=tr("dimension"),
        y_title=tr("position"),
        value_name="P",
    )
    del trace_["x"]  # numeric dimension axis: no labels to send
    trace_.update(
        y=rows,
        zmin=-r,
        zmax=r,
        zmid=0,
        colorscale=DIVERGING_SCALE,
        colorbar=_colorbar(r, 0.5, 1.0),
        hovertemplate=tr("position %{y}<br>dimension %{x}<br>value %{z:.4f}") + "<extra></extra>",
    )
    kind = _kind(trace.config)
    every = _every(stride) if stride > 1 else ""
    notes = [n_ for n_ in (note, every) if n_]
    title = tr("Position table · {kind} · {n} positions × {d} dimensions", kind=kind, n=n, d=d)
    if notes:
        title += tr(" — {notes}", notes=tr("; ").join(notes))
    layout = layout_of(title, int(np.clip(120 + 3 * len(rows), 320, 560)))
    layout["xaxis"] = {"title": {"text": tr("hidden dimension")}}
    layout["yaxis"] = {"title": {"text": tr("position")}, "autorange": "reversed"}
    return figure([trace_], layout)


def _kind(config) -> str:
    return tr("sinusoidal PE") if config.positions == "sinusoidal" else tr("learned positions")


def _dim_name(config, dim: int) -> str:
    if config.positions != "sinusoidal":
        return tr("dim {dim}", dim=dim)
    period = 2 * np.pi * 10000 ** ((dim - dim % 2) / config.d_model)
    wave = "sin" if dim % 2 == 0 else "cos"
    return tr("dim {dim} · {wave}, period {period:.3g}", dim=dim, wave=wave, period=period)


def position_curves_figure(
    trace,
    stack: str | None = None,
    dims: tuple[int, ...] = (0, 1, 2, 3),
    n_positions: int | None = None,
) -> go.Figure:
    """One line per chosen dimension across positions (seed 002's "dimension 1/2/3" plot)."""
    table, note = position_table(trace, stack, n_positions)
    n, d = table.shape
    bad = [int(i) for i in dims if not 0 <= int(i) < d]
    if bad:
        raise ValueError(f"Dimensions {bad} do not exist: this model has dimensions 0–{d - 1}.")
    positions = np.arange(n, dtype=np.int32)
    lines = []
    for dim in dims:
        name = _dim_name(trace.config, int(dim))
        hover = safe(name) + tr("<br>position %{x}<br>value %{y:.3f}") + "<extra></extra>"
        y = table[:, int(dim)].astype(np.float32)
        lines.append(
            {
                "type": "scatter",
                "x": positions,
                "y": y,
                "mode": "lines",
                "name": name,
                "hovertemplate": hover,
            }
        )
    title = tr("Position vectors, dimension by dimension · {kind}", kind=_kind(trace.config))
    title += tr(" — {notes}", notes=note) if note else ""
    layout = layout_of(title, 340)
    layout["margin"]["b"] = 70
    layout.update(
        hovermode="x unified",
        legend={"orientation": "h", "y": -0.25},
        xaxis={"title": {"text": tr("position")}},
        yaxis={"title": {"text": tr("value")}, "zeroline": True},
    )
    return figure(lines, layout)


pe_curves_figure = position_curves_figure  # the name seed 002's readers look for
