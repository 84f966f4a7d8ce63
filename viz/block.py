"""The attention block with the residual and the LayerNorm (Kobayashi et al. 2021) for every layer
at once: one small heatmap a layer, each titled with its layer and mixing ratio.

Drawn on the Attention tab beside the weights α and the norms ‖α·f(x)‖. It reads every layer, so
a layer or head switch never redraws it (the tab's head switch stays in the browser); only the
stack and the colour scale change it. The numbers are analysis.norm_attention_block and
analysis.mixing_ratio.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go

import analysis
from lang import tr
from viz.attention import axis_titles, stack_title
from viz.common import (
    ATTENTION_SCALE,
    axis_key,
    figure,
    grid,
    heatmap,
    layout_of,
    stack_tokens,
    token_labels,
)

BLOCK_TOKENS = 128  # the figure's limit: L·T² cells (6 × 128² ≈ 98k cells, ~0.4 MB) at most
LABELLED_TOKENS = 24  # token labels on the axes up to this many tokens (else positions by hover)
TILE_PX = 290  # a tile's height; three tiles fill a row of the page's width


def columns(n_layers: int) -> int:
    """Tiles a row: three up to 12 layers (2 × 3 for six), four beyond."""
    return min(n_layers, 3 if n_layers <= 12 else 4)


def block_figure(
    trace, stack: str, net, scale: str = "auto", phone: float | None = None
) -> go.Figure:
    """Every layer's ‖LN-share of Σ_h α_ij f_h(x_j) + δ_ij x_i‖ as a grid of heatmaps.

    scale "head" colours each layer 0 → its own largest norm; "auto" and "fixed" colour every
    layer on one scale (one colour bar, shared_top). Above BLOCK_TOKENS
    tokens only the mixing ratios are drawn, and the title says why. ``phone``: the width in px
    of a phone's figure, for which the tiles are laid out in a compact grid (phone_grid).
    """
    q_tok, k_tok = stack_tokens(trace, stack)
    if max(len(q_tok), len(k_tok)) > BLOCK_TOKENS:
        ratio = analysis.mixing_ratio(trace, stack, net)[0].numpy()  # (L,)
        return ratio_figure(stack, ratio, len(k_tok))
    block, ratio = analysis.attention_block(trace, stack, net)  # (B, L, T, T), (B, L)
    block = block[0, :, : len(q_tok), : len(k_tok)].numpy()
    ratio = ratio[0].numpy()
    layout, cells, rows, cols = phone_grid(ratio, phone) if phone else page_grid(ratio)
    shared = scale != "head"
    top, peak = shared_top(block, scale)
    traces = block_tiles(block, stack, q_tok, k_tok, cells, top if shared else None)
    labelled = max(len(q_tok), len(k_tok)) <= LABELLED_TOKENS and not phone
    share_axes(layout, cells, rows, cols, labelled)
    if shared:
        layout["coloraxis"] = {
            "colorscale": ATTENTION_SCALE,
            "cmin": 0.0,
            "cmax": top,
            "colorbar": {"title": {"text": tr("norm"), "side": "right"}, "thickness": 12},
        }
    note = scale_note(shared, top, peak)
    if phone:
        note += tr(" · each tile: its layer and mixing ratio")
    title = tr(
        "Attention block with residual and LayerNorm, every layer — {stack} "
        "(Kobayashi et al. 2021)<br><sup>{note} · click a layer to open it</sup>",
        stack=stack_title(stack),
        note=note,
    )
    meta = layout.pop("meta", None)
    layout.update(layout_of(title, height=int(rows * TILE_PX + 110)))
    layout["margin"]["t"] = 96
    if meta:  # a phone's grid: its own margins and height
        on_phone(layout, meta)
    return figure(traces, layout)


def page_grid(ratio: np.ndarray) -> tuple[dict, list, int, int]:
    """The page's grid of the layers' tiles (layout, cells, rows, cols), each titled with its
    layer and mixing ratio."""
    n_layers = len(ratio)
    cols = columns(n_layers)
    rows = math.ceil(n_layers / cols)
    layout, cells = grid(
        rows,
        cols,
        h_space=0.03,
        v_space=0.28 / rows,
        titles=[
            tr("layer {layer} · mixing ratio {ratio:.2f}", layer=lay, ratio=float(ratio[lay]))
            for lay in range(n_layers)
        ],
        title_size=12,  # the panel titles: smaller than the figure's
    )
    return layout, cells, rows, cols


TOWER = 4  # "auto": the first token's column above this × every other cell: scaled apart


def shared_top(block: np.ndarray, scale: str) -> tuple[float, float]:
    """(the shared colour scale's top, the largest norm). "fixed": the largest norm; "auto" the
    same, unless the first token's column (what each token takes from the text's first, the
    start token of a language model: SmolLM2's reach 25,095 where every other cell stays under
    ~600) towers over every other cell by more than TOWER: then the largest other cell, so that
    they take colours (that column in the top colour; the note says so, the hover gives it)."""
    peak = float(block.max()) or 1.0
    rest = float(block[..., 1:].max()) if block.shape[-1] > 1 else 0.0
    if scale == "auto" and rest > 0 and peak > TOWER * rest:
        return rest, peak
    return peak, peak


def scale_note(shared: bool, top: float, peak: float) -> str:
    """What the colours mean, said under the title."""
    if not shared:
        return tr("each layer coloured 0 → its own largest norm (hover for the number)")
    if peak > top:
        return tr(
            "one colour scale for every layer: 0 → {top:.2f}, the largest beside the first "
            "token's column (up to {peak:.0f} there, in the top colour)",
            top=top,
            peak=peak,
        )
    return tr("one colour scale for every layer: 0 → {top:.2f}", top=top)


PHONE_GAP = 8  # px between a phone's tiles, side by side
PHONE_TITLE = 18  # px over each tile for its title ("L12 · 0.45")
PHONE_BAR = 56  # px under the plot: the colour bar across, its title and numbers


def phone_grid(ratio: np.ndarray, width: float) -> tuple[dict, list, int, int]:
    """A phone's grid of the layers' tiles (layout, cells, rows, cols): three tiles a row (two
    up to six layers), square, without token names (the hover names them), each titled with its
    layer and mixing ratio in a phone's few characters. SmolLM2's 30 layers drawn one under
    another made a page ~18,800 px tall; ten rows of three take ~1,300. The figure's height and
    margins go into ``layout["meta"]`` (on_phone)."""
    n_layers = len(ratio)
    cols = 2 if n_layers <= 6 else 3
    rows = math.ceil(n_layers / cols)
    room = width - 36  # viz.fit.fixed_margins leaves 35 px at the left at least
    tile = (room - PHONE_GAP * (cols - 1)) / cols
    plot = rows * tile + (rows - 1) * PHONE_TITLE
    layout, cells = grid(
        rows,
        cols,
        h_space=PHONE_GAP / room,
        v_space=PHONE_TITLE / plot,
        titles=[f"L{lay} · {float(ratio[lay]):.2f}" for lay in range(n_layers)],
        title_size=10,
    )
    layout["meta"] = {"plot": plot, "tile": tile}
    return layout, cells, rows, cols


def on_phone(layout: dict, grid_meta: dict) -> None:
    """A phone's grid laid out to the px: margins for its title and colour bar, the figure as
    tall as its plot (``meta.plot_px``, viz.fit) and left as it is by the phone's general layout
    (``meta.narrow``), the colour bar across under the plot."""
    plot = grid_meta["plot"]
    top = 64 + PHONE_TITLE  # the title's two lines (viz.fit.wrap_title adds those it gains)
    layout["margin"].update(l=36, r=0, t=top, b=PHONE_BAR)
    layout["height"] = math.ceil(plot + top + PHONE_BAR)
    # the tiles name no token (viz.fit.fixed_margins would keep room for their names at the left)
    narrow = {"layout": {"margin.l": 36}}
    layout["meta"] = {"narrow": narrow, "plot_px": plot, "tile_px": grid_meta["tile"]}
    bar = (layout.get("coloraxis") or {}).get("colorbar")
    if bar:
        bar.update(
            orientation="h", x=0.5, xanchor="center", y=-(PHONE_BAR - 4) / plot,
            yanchor="bottom", len=0.92, thickness=10, xpad=0, ypad=4,
            title={**bar["title"], "side": "top"},
        )  # fmt: skip


def block_tiles(
    block: np.ndarray, stack: str, q_tok, k_tok, cells: list, top: float | None
) -> list[dict]:
    """One heatmap a layer, in its grid cell; ``top``: the one colour scale's end they share
    (None: each layer coloured 0 → its own largest norm)."""
    y_title, x_title = axis_titles(stack)
    x_labels, y_labels = token_labels(k_tok), token_labels(q_tok)
    traces = []
    for layer in range(block.shape[0]):
        cells_of_layer = heatmap(
            block[layer],
            x_labels,
            y_labels,
            x_title=x_title,
            y_title=y_title,
            value_name=tr("norm"),
            zmin=0.0,
            zmax=top if top is not None else float(block[layer].max()) or 1.0,
            showscale=top is not None and layer == 0,
        )
        xaxis, yaxis = cells[layer]
        # name: a click on the tile opens this layer (ui/js/figures.js)
        cells_of_layer.update(name=f"L{layer}", xaxis=xaxis, yaxis=yaxis)
        if top is not None:
            cells_of_layer.update(coloraxis="coloraxis")
        traces.append(cells_of_layer)
    return traces


def share_axes(layout: dict, cells: list, rows: int, cols: int, labelled: bool) -> None:
    """Tiles share their column's x axis and their row's y axis (zoom one, zoom its row or
    column); the query labels once a row, at the left, and only where ``labelled``."""
    for n, (xaxis, yaxis) in enumerate(cells):
        bottom = cells[min(len(cells) - 1, (rows - 1) * cols + n % cols)][0]
        first = cells[n - n % cols][1]
        layout[axis_key(xaxis)].update(
            type="category", showgrid=False, showticklabels=labelled, tickangle=-60
        )
        layout[axis_key(yaxis)].update(
            type="category",
            showgrid=False,
            showticklabels=labelled and n % cols == 0,
            autorange="reversed",
        )
        if xaxis != bottom:
            layout[axis_key(xaxis)]["matches"] = bottom
        if yaxis != first:
            layout[axis_key(yaxis)]["matches"] = first


def ratio_figure(stack: str, ratio: np.ndarray, n_tokens: int) -> go.Figure:
    """Past BLOCK_TOKENS tokens: every layer's mixing ratio alone, the limit said in the title."""
    bars = {
        "type": "bar",
        "x": [str(layer) for layer in range(len(ratio))],
        "y": ratio,
        "marker": {"color": "#1f4e9a"},
        "hovertemplate": tr("layer %{x}: mixing ratio %{y:.3f}") + "<extra></extra>",
    }
    title = tr(
        "Mixing ratio per layer — {stack} (Kobayashi et al. 2021)<br><sup>{n} tokens: the "
        "block's norms are drawn for texts of up to {limit} tokens</sup>",
        stack=stack_title(stack),
        n=n_tokens,
        limit=BLOCK_TOKENS,
    )
    layout = layout_of(title, height=360)
    layout["margin"]["t"] = 80
    layout["xaxis"] = {"title": {"text": tr("layer")}, "type": "category"}
    layout["yaxis"] = {"title": {"text": tr("mixing ratio")}, "range": [0, 1]}
    return figure([bars], layout)
