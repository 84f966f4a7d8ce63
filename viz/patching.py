"""Which heads matter: activation patching's grids, direct logit attribution and a minimal pair's
attention, as Plotly figures (analysis/patching.py, analysis/attribution.py compute them).

Every grid of shares uses one diverging scale centred on 0 and fixed at [-1, 1] (values beyond
are drawn at the ends and read in the hover), so two pairs' grids read alike: white = the patch
restores nothing, deep red = it restores the clean answer whole, blue = it pushes the other way.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from lang import tr
from viz.attention import (
    axis_titles,
    colorbars_below,
    panel_height,
    stack_title,
    three_panels,
)
from viz.common import (
    ATTENTION_SCALE,
    DIVERGING_SCALE,
    display_token,
    figure,
    head_label,
    heatmap,
    layout_of,
    safe,
    token_labels,
)

CELL_TEXT_MAX = 24  # heads or positions per row up to which each cell prints its value


MIN_CELL_FONT = 9  # px: a cell's value is left out where Plotly would fit it smaller
CELLS = {"min_cell_font": MIN_CELL_FONT}  # layout.meta read by ui/js/figures.js
TITLE_TOP, TITLE_LINES = 32, 21 + 20 + 8  # px: above the title (the toolbar); its two lines, a gap


def _meaning(what: str) -> str:
    """The title's second line: the measure, and what its 0 and 1 mean."""
    return tr("{what}: 0 = nothing restored, 1 = all of it", what=what)


def _grid_figure(
    z: np.ndarray,
    x: list[str],
    *,
    x_name: str,
    x_axis: dict,
    value_name: str,
    bar: str,
    zmin: float,
    zmax: float,
    zmid: float | None = None,
    custom: np.ndarray | None = None,
    title: str,
    note: str,
) -> go.Figure:
    """The skeleton of every grid here: layers down (L0 at the top), ``x`` across, a value in
    every cell that fits, and the title's second line ``note`` hung under it from the top (never
    on the grid: a phone wraps both lines, and Plotly anchors only a title's first line)."""
    y = [f"L{layer}" for layer in range(z.shape[0])]
    trace = heatmap(
        z,
        x,
        y,
        x_title=x_name,
        y_title=tr("layer"),
        value_name=value_name,
        colorscale=DIVERGING_SCALE if zmid is not None else ATTENTION_SCALE,
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        fmt=".3f",
    )
    trace["colorbar"] = {"title": {"text": bar, "side": "right"}, "thickness": 14}
    if z.shape[1] <= CELL_TEXT_MAX:  # Plotly fits it to the cells; a phone drops it (figures.js)
        trace["text"] = np.vectorize(lambda v: f"{v:.2f}")(z)
        trace["texttemplate"] = "%{text}"
    if custom is not None:
        trace["customdata"] = custom
    turned = 20 if x_axis.get("tickangle") else 0  # room for labels turned under the grid
    height = min(720, 170 + 34 * len(y) + turned)
    layout = layout_of(f"{title}<br><sup>{safe(note)}</sup>", height)
    layout["title"].update(yref="container", y=1, yanchor="top", pad={"t": TITLE_TOP})
    layout["margin"]["t"] = TITLE_TOP + TITLE_LINES
    layout["meta"] = dict(CELLS)
    layout["xaxis"] = x_axis
    layout["yaxis"] = {"autorange": "reversed", "title": {"text": tr("layer")}}
    return figure([trace], layout)


def _head_names(config, n_heads: int) -> list[str]:
    return [f"H{head_label(config, h)}" for h in range(n_heads)]


def _head_cells(n_layers: int, heads: list[int]) -> np.ndarray:
    """[layer, head] of every cell, [L, len(heads), 2]: what a click on a cell selects."""
    return np.array([[[layer, h] for h in heads] for layer in range(n_layers)])


def _shares() -> dict:
    """The colours and names of a grid of shares restored: fixed at [-1, 1] around 0."""
    shares = tr("share restored")
    return {"value_name": shares, "bar": shares, "zmin": -1.0, "zmax": 1.0, "zmid": 0.0}


def restored_heads_figure(shares, config, stack: str, what: str) -> go.Figure:
    """The [L, H] grid of patch_heads: each head's output taken from the clean run."""
    z = np.asarray(shares, dtype=np.float32)
    n_layers, n_heads = z.shape
    x_axis = {"title": {"text": tr("head (click one to see it on both texts)")}, "side": "bottom"}
    title = tr("Which heads restore the answer — {stack}", stack=stack_title(stack))
    return _grid_figure(
        z,
        _head_names(config, n_heads),
        x_name=tr("head"),
        x_axis=x_axis,
        **_shares(),
        custom=_head_cells(n_layers, list(range(n_heads))),
        title=title,
        note=_meaning(what),
    )


def restored_positions_figure(shares, clean_tokens, corrupt_tokens, stack: str, what: str):
    """The [L, T] grid of patch_residual: the stream entering each layer at each position."""
    z = np.asarray(shares, dtype=np.float32)
    t = z.shape[1]
    labels = []
    for i, (a, b) in enumerate(zip(clean_tokens[:t], corrupt_tokens[:t], strict=False)):
        shown = display_token(a) if a == b else f"{display_token(a)}→{display_token(b)}"
        labels.append(safe(f"{i}·{shown}"))
    name = tr("position (clean→corrupt)")
    title = tr(
        "Which positions carry it — {stack}, the stream entering each layer",
        stack=stack_title(stack),
    )
    return _grid_figure(
        z,
        labels,
        x_name=name,
        x_axis={"title": {"text": name}, "tickangle": -45},
        **_shares(),
        title=title,
        note=_meaning(what),
    )


def attribution_figure(dla: dict, config, what: str) -> go.Figure:
    """Direct logit attribution of the clean run: each head's and each MLP's share of the logit
    difference, one grid [L, H + 1] (the last column the MLP), in logits."""
    heads = dla["heads"].numpy()
    mlp = dla["mlp"].numpy()[:, None]  # (L, 1)
    z = np.concatenate([heads, mlp], axis=1).astype(np.float32)
    n_layers, n_heads = heads.shape
    bound = float(np.abs(z).max()) or 1.0
    rest = float(dla["embed"] + dla["bias"] + dla["attn_bias"].sum())
    note = tr(
        "{what}: the cells + embeddings and biases ({rest:+.2f}) = the model's {total:+.2f}",
        what=what,
        rest=rest,
        total=float(dla["logit_diff"]),
    )
    name = tr("component")
    return _grid_figure(
        z,
        [*_head_names(config, n_heads), tr("MLP")],
        x_name=name,
        x_axis={"title": {"text": name}},
        value_name=tr("logit difference written"),
        bar=tr("logits"),
        zmin=-bound,
        zmax=bound,
        zmid=0.0,
        custom=_head_cells(n_layers, [*range(n_heads), -1]),  # the MLP's head -1: selects none
        title=tr("Direct logit attribution: what each head and MLP writes into the answer"),
        note=note,
    )


def attention_shift_figure(shift, config, stack: str) -> go.Figure:
    """Per head, how differently it attends on the two texts (analysis.attention_shift)."""
    z = np.asarray(shift, dtype=np.float32)
    n_layers, n_heads = z.shape
    moved = tr("attention moved")
    return _grid_figure(
        z,
        _head_names(config, n_heads),
        x_name=tr("head"),
        x_axis={"title": {"text": tr("head")}},
        value_name=moved,
        bar=moved,
        zmin=0.0,
        zmax=max(float(z.max()), 1e-6),
        custom=_head_cells(n_layers, list(range(n_heads))),
        title=tr(
            "How far each head's attention moves between the texts — {stack}",
            stack=stack_title(stack),
        ),
        note=tr("½·Σ|A − A′| per query, averaged: 0 = the same pattern, 1 = no key in common"),
    )


def pair_head_figure(clean, corrupt, stack: str, layer: int, head: int) -> go.Figure:
    """One head on both texts side by side: the clean pattern, the corrupt one and their
    difference (clean − corrupt), over each text's own tokens — the panels of two heads
    compared (``viz.attention.three_panels``), each panel its own token axes."""
    a = clean.attentions[stack][0, layer, head].float().numpy()
    b = corrupt.attentions[stack][0, layer, head].float().numpy()
    (q_a, k_a), (q_b, k_b) = (
        [tokens[0] for tokens in trace.tokens_for(stack)] for trace in (clean, corrupt)
    )
    q_title, k_title = axis_titles(stack)
    common = {"x_title": k_title, "y_title": q_title}
    panels = [
        heatmap(z[: len(q), : len(k)], token_labels(k), token_labels(q), value_name=tr("weight"),
                **common)
        for z, q, k in ((a, q_a, k_a), (b, q_b, k_b))
    ]  # fmt: skip
    titles = [tr("clean"), tr("corrupt")]
    colorbars = [
        {"colorscale": ATTENTION_SCALE, "cmin": 0.0, "cmax": 1.0,
         "colorbar": {"title": {"text": tr("weight")}, "thickness": 12}},
    ]  # fmt: skip
    if a.shape == b.shape:  # a difference only where both texts have as many tokens
        diff = (a - b)[: len(q_a), : len(k_a)]
        bound = max(float(np.abs(diff).max()), 1e-6)
        panels.append(
            heatmap(diff, token_labels(k_a), token_labels(q_a),
                    value_name=tr("clean − corrupt"), **common)
        )  # fmt: skip
        titles.append(tr("clean − corrupt"))
        colorbars.append(
            {"colorscale": DIVERGING_SCALE, "cmin": -bound, "cmax": bound, "cmid": 0.0,
             "colorbar": {"title": {"text": tr("clean − corrupt")}, "thickness": 12}}
        )  # fmt: skip
    n = max(len(q_a), len(q_b))
    data, layout = three_panels(
        panels, titles, n, n, k_title, q_title, tuple(colorbars), shared_y=False
    )
    name = f"L{layer} H{head_label(clean.config, head)}"
    title = tr("{head} on both texts of the pair — {stack}", head=name, stack=stack_title(stack))
    layout.update(layout_of(title, panel_height(token_labels(k_a), n)))
    layout["margin"]["t"] = 70
    return colorbars_below(data, layout)
