"""Attention views: one head, every layer × head at once, and two heads compared.

Each view reads ``trace.attentions[stack]`` (B, L, H, T_q, T_k): softmax(QKᵀ/√d_k) after masking,
one row per query token summing to 1 over the keys it may see. Padding is removed before drawing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import plotly.graph_objects as go
import torch
import torch.nn.functional as F

from lang import tr
from viz import wire
from viz.common import (
    ATTENTION_SCALE,
    DIVERGING_SCALE,
    figure,
    head_label,
    heatmap,
    layout_of,
    square_axis_props,
    stack_tokens,
    token_labels,
)
from viz.fit import fixed_margins
from viz.measure import text_px

# One colour convention everywhere: white = weight 0, darkest blue = weight 1 (the "fixed" scale),
# so the same head looks the same in every view; "this head's max" is a switch, named on the bar.
CAPTIONS = {
    "head": "**softmax(QKᵀ/√d_k)** — each row is one query token's distribution over the keys it "
    "may see (it sums to 1); grey cells are hidden by the mask. Colour: white 0 → dark blue 1; "
    'on "auto" a faint head (largest weight below 0.3, as most are at long texts) is coloured '
    "0 → its own max instead, and its title and colour bar say so.",
    "overview": "**Every layer × head at once** — each tile is one head's softmax(QKᵀ/√d_k) on "
    "the same colour scale as the head view (switch to \"this head's max\" to see weak heads' "
    "shapes). Hover for the real weight; click a tile to open that head.",
    "compare": "**A − B** — two heads' softmax(QKᵀ/√d_k) side by side and their difference: red "
    "where head A attends more, blue where head B does, on ± the weights' own scale (so noise "
    "stays pale); the title gives the difference's range. A − B is the difference of the "
    "three-decimal weights the panels show, so hovering A, B and A − B adds up exactly.",
}

STACK_TITLES = {
    "encoder": "encoder self-attention",
    "decoder": "decoder masked self-attention",
    "cross": "cross-attention (queries: target, keys: source)",
}
HIDDEN_GREY = "#d4d4d4"  # plot background behind NaN (masked) cells
MAX_TILE_CELLS = 32  # overview: cells per tile side before max-pooling (a tile is ~80 px wide)
MAX_HEAD_CELLS = 256  # head view: exact up to 256 tokens, max-pooled beyond (512 → 256)
MAX_PANEL_CELLS = 160  # three-panel views: cells per side before mean-pooling (~2 px a cell)
COLORBAR_BAND_PX = 64  # three-panel figures: the band under the axes for the colour bars
OVERVIEW_WIDTH_PX = 1000  # the width the app gives a plot; used only to pick a height


def stack_title(stack: str) -> str:
    """What a stack's attention is called: "encoder self-attention", "cross-attention (...)"."""
    if stack not in STACK_TITLES:
        raise ValueError(f"Unknown attention stack {stack!r}: choose one of {list(STACK_TITLES)}.")
    return tr(STACK_TITLES[stack])


def axis_titles(stack: str) -> tuple[str, str]:
    """(query axis title, key axis title): cross-attention's queries come from the target."""
    if stack == "cross":
        return tr("query (target)"), tr("key (source)")
    return tr("query"), tr("key")


def check_selection(trace, stack: str, layer: int | None = None, head: int | None = None) -> None:
    """Raise an actionable ValueError when a stack, layer or head is not in this trace."""
    if stack not in trace.attentions:
        raise ValueError(
            f"This model has no {stack!r} attention; it has {', '.join(trace.stacks)}."
        )
    _, n_layers, n_heads = trace.attentions[stack].shape[:3]
    if layer is not None and not 0 <= layer < n_layers:
        raise ValueError(f"Layer {layer} does not exist: this model has layers 0–{n_layers - 1}.")
    if head is not None and not 0 <= head < n_heads:
        raise ValueError(f"Head {head} does not exist: this model has heads 0–{n_heads - 1}.")


def head_pattern(trace, stack: str, layer: int, head: int, batch: int = 0) -> np.ndarray:
    """One head's attention weights (T_q, T_k) of one batch item, padding removed."""
    check_selection(trace, stack, layer, head)
    q_tok, k_tok = stack_tokens(trace, stack, batch)
    pattern = trace.attentions[stack][batch, layer, head, : len(q_tok), : len(k_tok)]
    return pattern.detach().cpu().float().numpy()


def allowed_cells(trace, stack: str, batch: int = 0) -> np.ndarray:
    """bool (T_q, T_k): True = the mask lets this query see this key (padding removed)."""
    q_tok, k_tok = stack_tokens(trace, stack, batch)
    return trace.masks[stack][batch, : len(q_tok), : len(k_tok)].detach().cpu().numpy()


# ---------------------------------------------------------------- pooling long texts


def pool(maps: torch.Tensor, k_q: int, k_k: int, how: Literal["max", "mean"]) -> torch.Tensor:
    """Downsample (N, T_q, T_k) maps by k_q × k_k windows (the last window may be short)."""
    if k_q == 1 and k_k == 1:
        return maps
    if how == "max":
        return max_pool(maps, k_q, k_k)
    # avg_pool2d divides by the clipped window at the edge
    return F.avg_pool2d(maps[:, None], (k_q, k_k), stride=(k_q, k_k), ceil_mode=True)[:, 0]


def max_pool(maps: torch.Tensor, k_q: int, k_k: int, chunk: int = 16) -> torch.Tensor:
    """The largest value of each k_q × k_k window of (N, T_q, T_k) maps: what
    ``F.max_pool2d(ceil_mode=True)`` gives (a short last window included), NaN propagated.

    Rows by elementwise maxima of views, then keys by a reduction over a view, ``chunk`` maps at a
    time so each stays in cache: BERT-large's 384 heads of 512² pool in 0.09 s (k = 2) and
    0.04 s (k = 8) here, where max_pool2d takes 0.43 s and 0.10 s (2 CPU cores).
    """
    n, t_q, t_k = maps.shape
    if t_q % k_q or t_k % k_k:  # -inf never wins: every window holds at least one real value
        maps = F.pad(maps, (0, -t_k % k_k, 0, -t_q % k_q), value=-math.inf)
        t_q, t_k = maps.shape[1:]
    out = maps.new_empty(n, t_q // k_q, t_k // k_k)
    for start in range(0, n, chunk):
        rows = maps[start : start + chunk].reshape(-1, t_q // k_q, k_q * t_k)  # k_q rows, laid flat
        top = rows[..., :t_k]
        for i in range(1, k_q):
            top = torch.maximum(top, rows[..., i * t_k : (i + 1) * t_k])
        windows = top.reshape(len(top), t_q // k_q, t_k // k_k, k_k)
        torch.amax(windows, -1, out=out[start : start + chunk])
    return out


def pool_labels(labels: list[str], k: int) -> list[str]:
    """Labels of pooled cells: one token, or "first … last" when k tokens share a cell."""
    if k == 1:
        return labels
    return [
        f"{labels[i]} … {labels[min(i + k, len(labels)) - 1]}" for i in range(0, len(labels), k)
    ]


def pool_note(
    q_tok: list[str], k_tok: list[str], y_lab: list[str], x_lab: list[str], how: str
) -> str:
    """A title note for a downsampled view (" · 512 tokens max-pooled to 256 cells a side")."""
    if len(y_lab) == len(q_tok) and len(x_lab) == len(k_tok):
        return ""
    n_tok, n_cell = max(len(q_tok), len(k_tok)), max(len(y_lab), len(x_lab))
    pattern = {
        "max": " · {n_tok} tokens max-pooled to {n_cell} cells a side",
        "mean": " · {n_tok} tokens mean-pooled to {n_cell} cells a side",
    }[how]
    return tr(pattern, n_tok=n_tok, n_cell=n_cell)


# ---------------------------------------------------------------- layout


def token_axis_props(n_x: int, n_y: int) -> tuple[dict, dict]:
    """(x axis, y axis) properties of category token axes, first token top-left, labels thinned
    to what fits in the pixels: ``square_axis_props`` thins by token count; panels narrower than
    a full-width plot let Plotly thin by pixel width instead (nticks=0 keeps ~15 px a label)."""
    x, y = square_axis_props(n_x, n_y)
    small = {"nticks": 0, "tickfont": {"size": 10}, "showgrid": False}
    return {**x, **small}, {**y, **small}


def label_px(labels: list[str]) -> int:
    """Pixels a rotated tick label needs below the plot (about 6 px a character at size 10)."""
    return min(110, 20 + 5 * max((len(s) for s in labels), default=1))


def panel_height(labels: list[str], n: int) -> int:
    """Height for a row of three square-ish panels (about 300 px wide each) plus tick labels."""
    return int(min(640, max(360, 110 + label_px(labels) + min(300, 10 * n))))


def bars_under(colorbars: tuple[dict, ...], spans: list[tuple[float, float]]) -> dict:
    """The colour axes of a row of panels, each bar horizontal under the panels it colours
    (``spans``: their x domain, left to right): "coloraxis" for the first, "coloraxis2"."""
    # Vertical bars between or beside the panels covered panel 3 on a phone; under the panels
    # they take no width, so they overlap nothing at any screen width.
    under = {"orientation": "h", "thickness": 10, "yref": "container", "yanchor": "bottom"}
    axes = {}
    names = ("coloraxis", "coloraxis2")[: len(spans)]
    for name, bar, (left, right) in zip(names, colorbars[: len(spans)], spans, strict=True):
        # Plotly.js draws a horizontal bar's "top" title over the bar; "right" puts it at the
        # bar's left end, so the bar starts a quarter into its panels to leave the title room.
        title = {**bar["colorbar"].get("title", {}), "side": "right"}
        colorbar = {**bar["colorbar"], **under, "title": title}
        colorbar["nticks"] = 5 if name == "coloraxis" else 3  # a short bar: labels stay upright
        # each label right of its tick: the first ("−1") then clears the title at the bar's left
        colorbar["ticklabelposition"] = "outside right"
        span = right - left
        colorbar.update(x=left + 0.6 * span, xanchor="center", len=0.7 * span)
        axes[name] = {**bar, "colorbar": colorbar}
    return axes


def panel_title(text: str, domain: tuple[float, float]) -> dict:
    """A panel's title of ``three_panels``: an annotation centred over its x domain."""
    return {
        "text": text,
        "x": (domain[0] + domain[1]) / 2,
        "y": 1.0,
        "xref": "paper",
        "yref": "paper",
        "xanchor": "center",
        "yanchor": "bottom",
        "showarrow": False,
        "font": {"size": 13},
    }


def three_panels(
    panels: list[dict],
    titles: list[str],
    n_x: int,
    n_y: int,
    x_title: str,
    y_title: str,
    colorbars: tuple[dict, ...],
    shared_y: bool = True,
) -> tuple[list[dict], dict]:
    """Two or three heatmaps in a row, as plain JSON (traces, layout): A, B and A − B (two heads
    compared, one head on both texts of a pair, the masking steps). Panels 1–2 share a colour
    bar, panel 3 has its own, both horizontal under the panels (``colorbars_below`` makes room
    for them once the figure's height is set). ``shared_y``: one token y axis for every panel
    (``n_x`` × ``n_y`` tokens each), else each panel its own, over its own trace's labels (two
    texts of different tokens). Axes, not a subplot grid: fast to draw."""
    domains = (
        [(0.0, 0.31), (0.345, 0.655), (0.69, 1.0)]
        if len(panels) == 3
        else [
            (0.0, 0.47),
            (0.53, 1.0),
        ]
    )
    layout: dict = {"annotations": []}
    for i, (cells, dom) in enumerate(zip(panels, domains, strict=True)):
        suffix = "" if i == 0 else str(i + 1)
        sizes = (n_x, n_y) if shared_y else (len(cells["x"]), len(cells["y"]))
        x_props, y_props = token_axis_props(*sizes)
        y_name = "y" if shared_y else f"y{suffix}"
        cells.update(
            xaxis=f"x{suffix}", yaxis=y_name, coloraxis="coloraxis2" if i == 2 else "coloraxis"
        )
        if i == 0 or not shared_y:
            y_key = "yaxis" if y_name == "y" else f"yaxis{suffix}"
            layout[y_key] = {"title": {"text": y_title if i == 0 else ""}, **y_props}
            if y_name != "y":
                layout[y_key]["anchor"] = f"x{suffix}"
        layout[f"xaxis{suffix}"] = {
            "domain": dom,
            "anchor": y_name,
            "title": {"text": x_title},
            **x_props,
        }
        layout["annotations"].append(panel_title(titles[i], dom))
    spans = [(domains[0][0], domains[min(1, len(panels) - 1)][1])]
    if len(panels) == 3:
        spans.append(domains[2])
    layout.update(bars_under(colorbars, spans))
    return panels, layout


def colorbars_below(data: list[dict], layout: dict) -> go.Figure:
    """The figure of ``three_panels``' traces and finished layout, with a band reserved under
    its axes (its height grows by as much) for its horizontal colour bars, below the tick labels
    and axis titles."""
    # the tick labels' room; ui.render keeps the larger margin it finds
    fixed_margins({"data": data, "layout": layout})
    layout["margin"]["b"] += COLORBAR_BAND_PX
    layout["height"] += COLORBAR_BAND_PX
    for name in ("coloraxis", "coloraxis2"):
        if name in layout:
            layout[name]["colorbar"]["y"] = 2 / layout["height"]
    return figure(data, layout)


# ---------------------------------------------------------------- one head


@dataclass(frozen=True)
class HeadFrame:
    """What every head of a stack shares in the head view.

    att: the stack's weights as (L·H, T_q, T_k), layer by layer, padding removed (a view of the
    trace, on its device); k_q × k_k: the max-pooling window; shown: bool (T_q', T_k'), the cells
    the mask lets through (a pooled cell is shown if any pair in it may be); the axis labels; and
    the note every title carries (what the mask hides, how the text was pooled).
    """

    att: torch.Tensor
    k_q: int
    k_k: int
    shown: np.ndarray
    x_lab: list[str]
    y_lab: list[str]
    note: str

    def cells(self, rows: slice | list[int]) -> np.ndarray:
        """float32 (N, T_q', T_k'): these heads (rows of ``att``) pooled, NaN where hidden."""
        pooled = pool(self.att[rows].float(), self.k_q, self.k_k, "max").cpu().numpy()
        return np.where(self.shown, pooled, np.float32(np.nan))


def head_frame(trace, stack: str, batch: int = 0, max_cells: int = MAX_HEAD_CELLS) -> HeadFrame:
    """The stack's ``HeadFrame`` for ``batch``, pooled to at most ``max_cells`` a side."""
    check_selection(trace, stack)
    q_tok, k_tok = stack_tokens(trace, stack, batch)
    att = trace.attentions[stack][batch, :, :, : len(q_tok), : len(k_tok)].detach()
    allowed = torch.from_numpy(allowed_cells(trace, stack, batch)).float()[None]
    k_q, k_k = math.ceil(len(q_tok) / max_cells), math.ceil(len(k_tok) / max_cells)
    shown = pool(allowed, k_q, k_k, "max").numpy()[0] > 0
    x_lab = pool_labels(token_labels(k_tok), k_k)
    y_lab = pool_labels(token_labels(q_tok), k_q)
    masked = "" if shown.all() else tr(" · grey = hidden by the mask")
    note = masked + pool_note(q_tok, k_tok, y_lab, x_lab, "max")
    return HeadFrame(att.flatten(0, 1), k_q, k_k, shown, x_lab, y_lab, note)


def head_cells(
    trace,
    stack: str,
    heads: list[tuple[int, int]] | None = None,
    batch: int = 0,
    max_cells: int = MAX_HEAD_CELLS,
) -> tuple[np.ndarray, list[str], list[str], str]:
    """Heads as the head view draws them: (maps, key labels, query labels, title note).

    maps: float32 (N, T_q', T_k'), one per (layer, head) in ``heads`` (default: every head of the
    stack, layer by layer), max-pooled to at most ``max_cells`` a side, NaN where the mask hides
    the cell. The note says what the mask hides and how the text was pooled (for every title).
    """
    frame = head_frame(trace, stack, batch, max_cells)
    _, n_layers, n_heads = trace.attentions[stack].shape[:3]
    rows: slice | list[int] = slice(None)
    if heads:
        for lay, h in heads:
            check_selection(trace, stack, lay, h)
        rows = [lay * n_heads + h for lay, h in heads]
    return frame.cells(rows), frame.x_lab, frame.y_lab, frame.note


FAINT = 0.3  # "auto": a head whose largest weight is below this looks near-white on 0–1


def head_zmax(cells: np.ndarray, scale: Literal["auto", "fixed", "head"]) -> float:
    """The top of one head's colour scale: 1, or its largest weight ("head"; "auto" when the
    head would look near-white on 0–1, as most heads do at long texts)."""
    peak = max(float(np.nanmax(cells, initial=0.0)), 1e-6)
    if scale == "fixed" or (scale == "auto" and peak >= FAINT):
        return 1.0
    return peak


def head_bar(scale: str, zmax: float) -> str:
    """The head view's colour-bar title: which range the colours span."""
    if scale == "fixed" or zmax >= 1.0 and scale == "auto":
        return tr("weight (0–1)")
    if scale == "auto":
        return tr("weight (0–head max: faint head)")
    return tr("weight (0–head max)")


BAR_FRACTIONS = (0.0, 0.25, 0.5, 0.75, 1.0)  # the head view's colour bar ticks, of its range


def head_ticks(zmax: float) -> tuple[list[float], list[str]]:
    """The head view's colour-bar ticks: (values, labels) at 0, ¼, ½, ¾ and all of its range, so
    the top label is the range's top (a faint head's largest weight), and two heads' bars differ
    only in their labels (the browser's head switch rewrites just those)."""
    values = [f * zmax for f in BAR_FRACTIONS]
    return values, [f"{v:.3g}" for v in values]


def head_title(stack: str, layer: int, head: int | str, note: str, scale: str, zmax: float) -> str:
    """The head view's title: which head, what hides and pools cells, the colour range."""
    title = tr(
        "Layer {layer}, head {head} — {stack}{note}",
        layer=layer,
        head=head,
        stack=stack_title(stack),
        note=note,
    )
    if scale == "head":
        title += tr("<br><sup>colours 0–{zmax:.3g}, this head's largest weight</sup>", zmax=zmax)
    elif scale == "auto" and zmax < 1.0:
        title += tr(
            "<br><sup>colours 0–{zmax:.3g}, this head's largest weight: on 0–1 it would look "
            "near-white</sup>",
            zmax=zmax,
        )
    return title


def head_figure(
    trace,
    stack: str,
    layer: int,
    head: int,
    batch: int = 0,
    scale: Literal["auto", "fixed", "head"] = "fixed",
    max_cells: int = MAX_HEAD_CELLS,
) -> go.Figure:
    """One head's attention heatmap: rows = query tokens, columns = key tokens.

    Args:
        trace: a Trace from ``Transformer.trace``.
        stack: "encoder", "decoder" or "cross".
        layer, head: which head.
        batch: which text of the batch.
        scale: "fixed" colours 0..1 (heads comparable); "head" colours 0..this head's max;
            "auto" as "fixed" unless the head's largest weight is below FAINT (then "head").
        max_cells: longer texts are max-pooled to at most this many cells a side.
    Returns:
        A figure; cells the mask hides are left blank (grey), not drawn as weight 0. Its
        ``layout.meta["head"]`` is ``[layer, head]`` (the browser's head switch reads it), its
        ``layout.meta["title_head"]`` the head-specific part its title starts with
        (``head_title``, the switch payload's title of this head).
    """
    maps, x_lab, y_lab, note = head_cells(trace, stack, [(layer, head)], batch, max_cells)
    y_title, x_title = axis_titles(stack)
    zmax = head_zmax(maps[0], scale)
    cells = heatmap(
        maps[0],
        x_lab,
        y_lab,
        x_title=x_title,
        y_title=y_title,
        value_name=tr("weight"),
        zmin=0.0,
        zmax=zmax,
    )
    cells.update(hoverongaps=False, colorbar=head_colorbar(scale, zmax))
    x_axis, y_axis = square_axis_props(len(x_lab), len(y_lab))
    n = max(len(x_lab), len(y_lab))
    title = head_title(stack, layer, head_label(trace.config, head), note, scale, zmax)
    tallest = tallest_titles(trace, stack, batch, note, scale)
    layout = layout_of(title, height=min(860, max(380, 150 + 14 * n)))
    layout["margin"]["r"] = HEAD_BAR_MARGIN
    layout.update(
        plot_bgcolor=HIDDEN_GREY,
        # "square": laid out for the asking page's screen (viz.screen.lay_out); "title_head":
        # the part of the title that names this head, which the browser's head switch swaps
        # for another head's (viz.screen.head_titles)
        # "title_tallest": the head parts of the titles with the most lines any head of this
        # text can have, for which the layout keeps room (viz.screen.square)
        meta={"head": [layer, head], "fit": "square", "title_head": title},
        **square_axes(x_axis, y_axis, x_title, y_title),
    )
    layout["meta"]["title_tallest"] = tallest
    return figure([cells], layout)


def square_axes(x_axis: dict, y_axis: dict, x_title: str, y_title: str) -> dict:
    """A head map's xaxis and yaxis: titled, no grid, a key's cell as wide as a query's tall."""
    plain = {"showgrid": False, "constrain": "domain"}
    return {
        "xaxis": {**x_axis, "title": {"text": x_title}, **plain},
        "yaxis": {**y_axis, "title": {"text": y_title}, "scaleanchor": "x", **plain},
    }


def tallest_titles(trace, stack: str, batch: int, note: str, scale: str) -> list[str]:
    """The head parts of the widest titles any head of the stack has on this text (head_title):
    the last layer's widest head name, with no colour line (a strong head's, "auto") and with the
    widest colour line a head's largest weight writes (a faint head's, or every head's on "this
    head's max"). A head view laid out with room for these keeps every head's title clear of the
    map when the browser switches heads in it (issue 52: a faint head's line more lay over the
    top row's labels on a phone)."""
    q_tok, k_tok = stack_tokens(trace, stack, batch)
    att = trace.attentions[stack][batch, :, :, : len(q_tok), : len(k_tok)]
    peaks = att.detach().float().amax(dim=(-2, -1)).clamp_min(1e-6).flatten().tolist()
    _, n_layers, n_heads = trace.attentions[stack].shape[:3]
    label = max((head_label(trace.config, h) for h in range(n_heads)), key=len)
    zmax = {head_zmax(np.array([p]), scale) for p in peaks}  # 1.0 for a head drawn on 0–1
    colours = [z for z in zmax if z < 1.0 or scale == "head"]
    tops = [1.0] if scale != "head" and 1.0 in zmax else []
    if colours:
        tops.append(max(colours, key=lambda z: text_px(f"{z:.3g}", 10)))
    return [head_title(stack, n_layers - 1, label, note, scale, z) for z in tops]


def head_colorbar(scale: str, zmax: float) -> dict:
    """The head view's colour bar, at the plot's right edge inside a right margin that holds it
    for any head: a bar that pushes the margin out makes Plotly replot the whole figure, both
    axes' labels included, where a head switch in the browser otherwise redraws only cells and
    texts. Its labels (head_ticks) are up to 8 characters wide."""
    tickvals, ticktext = head_ticks(zmax)
    return {
        "title": {"text": head_bar(scale, zmax), "side": "right"},
        "x": 1.0,
        "xpad": 12,
        "thickness": 16,
        "tickmode": "array",
        "tickvals": tickvals,
        "ticktext": ticktext,
    }


# px: the head view's colour bar, its labels and title (see head_figure); measured in Chromium,
# the bar of the narrowest range a head can have (1/512: labels like 0.000488) needs 129
HEAD_BAR_MARGIN = 130
SWITCH_CHUNK = 16  # heads pooled and encoded at a time for the switch payload


def head_switch_data(
    trace,
    stack: str,
    scale: Literal["auto", "fixed", "head"] = "fixed",
    batch: int = 0,
    max_cells: int = MAX_HEAD_CELLS,
) -> dict | None:
    """Every head of a stack as the head view shows it, for switching heads in the browser.

    Each cell is sent as the number the figure's hover shows (three decimals), so a head drawn
    in the browser shows exactly the numbers the server's figure of that head would; colours
    differ from the float32 weight by at most 0.0005 (viz/wire.py, docs/wire-format.md: 0.66 MB
    for 6 × 12 heads at 128 tokens). None when a value is beyond 65.534 (the norms view of an
    unusual model): the server draws those heads instead.

    Returns ``wire.switch_payload``'s dict, a title being the head-specific part of the
    figure's title (``head_title``).
    """
    frame = head_frame(trace, stack, batch, max_cells)
    _, n_layers, n_heads = trace.attentions[stack].shape[:3]
    n = n_layers * n_heads
    codes = wire.SwitchCodes(n, len(frame.y_lab), len(frame.x_lab))
    # Pooled, rounded and split a few heads at a time: every head's cells at once would not stay
    # in the CPU's cache (BERT-large at 512 tokens has 384 heads).
    zmax = []
    for start in range(0, n, SWITCH_CHUNK):
        cells = frame.cells(slice(start, start + SWITCH_CHUNK))
        if not codes.put(start, cells):
            return None
        zmax += [head_zmax(m, scale) for m in cells]
    heads = [(lay, h) for lay in range(n_layers) for h in range(n_heads)]  # layer order
    titles = [
        head_title(stack, lay, head_label(trace.config, h), frame.note, scale, zmax[i])
        for i, (lay, h) in enumerate(heads)
    ]
    bars = [head_bar(scale, z) for z in zmax]
    ticks = [head_ticks(z)[1] for z in zmax]
    return wire.switch_payload(n_layers, n_heads, codes, zmax, titles, bars, ticks)


# ---------------------------------------------------------------- every layer × head at once


def overview_tiles(
    trace, stack: str, batch: int = 0, max_cells: int = MAX_TILE_CELLS
) -> tuple[np.ndarray, np.ndarray, int, int, np.ndarray]:
    """Every head as a tile of one image, one byte a cell: (weights, of_max, query pool, key
    pool, peaks).

    weights: uint8 (L·T_q', H·T_k'), the weight in % (0–100 = weight 0–1, the head view's
    colours); of_max: the same in % of that head's max; peaks: (L, H), each head's largest weight.
    Long texts are max-pooled to at most ``max_cells`` cells a tile side (max, so a sharp
    one-token peak survives the downsampling; pooling the max commutes with dividing by a head's
    peak, so both tiles come from one pooling).
    """
    check_selection(trace, stack)
    q_tok, k_tok = stack_tokens(trace, stack, batch)
    att = trace.attentions[stack][batch, :, :, : len(q_tok), : len(k_tok)]  # (L, H, T_q, T_k)
    att = att.detach().cpu().float()
    n_layers, n_heads, t_q, t_k = att.shape
    peak = att.amax(dim=(-2, -1), keepdim=True).clamp_min(1e-12)  # (L, H, 1, 1)
    k_q, k_k = math.ceil(t_q / max_cells), math.ceil(t_k / max_cells)
    flat = pool(att.reshape(n_layers * n_heads, t_q, t_k), k_q, k_k, "max")  # (L·H, T_q', T_k')
    att = flat.reshape(n_layers, n_heads, *flat.shape[-2:])  # (L, H, T_q', T_k')
    n_q, n_k = att.shape[-2:]

    def tiles(values: torch.Tensor) -> np.ndarray:
        percent = torch.round(values * 100).to(torch.uint8)  # a byte a cell, 1 % steps
        return percent.permute(0, 2, 1, 3).reshape(n_layers * n_q, n_heads * n_k).numpy()

    return tiles(att), tiles(att / peak), k_q, k_k, peak[..., 0, 0].numpy()


def column_head(config, head: int) -> str:
    """An overview column's head in its hover and category name: "H5", "H5/kv1" under
    grouped-query attention."""
    label = head_label(config, head)
    return f"H{head}" if label == str(head) else f"H{head}/kv{config.kv_head_of(head)}"


def overview_head(config, head: int) -> str:
    """An overview column's name: "H5", and its key/value head below under grouped-query
    attention ("H5<br>kv1")."""
    label = head_label(config, head)
    return f"H{head}" if label == str(head) else f"H{head}<br>kv{config.kv_head_of(head)}"


def overview_blocks(n_layers: int, n_heads: int, width: float, height: float) -> int:
    """How many blocks of layers the overview sets side by side on a landscape figure of
    ``width`` × ``height`` px: a grid much taller than wide (SmolLM2's 30 layers × 9 heads, Gemma
    3's 18 × 4) in one column has tiles of 16–22 px at 720p–1080p; three blocks of ten layers
    give them 45–70 px. 1 for a grid about as wide as tall (BERT's 12 × 12), or a portrait
    screen (a phone's one column is its tiles' widest)."""
    if n_layers < 2 * n_heads or width <= height:
        return 1
    return max(1, min(n_layers // 2, math.ceil(math.sqrt(n_layers / n_heads * width / height))))


@dataclass
class OverviewParts:
    """What every layout of the overview draws: the tiles (rows = layers, columns = heads), the
    real weights the hover reads where the colours are each head's share of its max (else None),
    the pooled labels and the title."""

    tiles: np.ndarray
    real: np.ndarray | None
    q_lab: list[str]
    k_lab: list[str]
    title: str
    n_layers: int
    n_heads: int

    def block(self, layers: range, heads: range, real: bool = False) -> np.ndarray | None:
        """The tiles (or real weights) of ``layers`` × ``heads``."""
        values = self.real if real else self.tiles
        if values is None:
            return None
        n_q, n_k = len(self.q_lab), len(self.k_lab)
        rows = slice(layers.start * n_q, layers.stop * n_q)
        return values[rows, heads.start * n_k : heads.stop * n_k]


def overview_parts(trace, stack: str, batch: int, max_cells: int, scale: str) -> OverviewParts:
    """The overview's tiles, labels and title (overview_tiles pooled, overview_title)."""
    weights, of_max, k_q, k_k, peaks = overview_tiles(trace, stack, batch, max_cells)
    tiles = of_max if scale == "head" else weights
    _, n_layers, n_heads = trace.attentions[stack].shape[:3]
    q_tok, k_tok = stack_tokens(trace, stack, batch)
    q_lab = pool_labels(token_labels(q_tok), k_q)
    k_lab = pool_labels(token_labels(k_tok), k_k)
    n_q, n_k = len(q_lab), len(k_lab)
    assert tiles.shape == (n_layers * n_q, n_heads * n_k)
    pooled = ""
    if k_q > 1 or k_k > 1:
        pooled = tr(
            " · {n_tok} tokens max-pooled to {n_cell} a tile",
            n_tok=max(len(q_tok), len(k_tok)),
            n_cell=max(n_q, n_k),
        )
    title = overview_title(stack, n_layers, n_heads, scale, float(peaks.max()), pooled)
    real = weights if scale == "head" else None
    return OverviewParts(tiles, real, q_lab, k_lab, title, n_layers, n_heads)


def overview_figure(
    trace,
    stack: str,
    batch: int = 0,
    max_cells: int = MAX_TILE_CELLS,
    scale: Literal["auto", "fixed", "head"] = "fixed",
    blocks: int = 1,
    width: float = OVERVIEW_WIDTH_PX,
    phone: bool = False,
) -> go.Figure:
    """All layers × heads as tiled heatmaps (rows = layers, columns = heads), ``blocks`` of
    consecutive layers side by side (overview_blocks), one heatmap each; a 12 × 12 grid of
    subplots would take seconds to draw. ``phone``: laid out for a phone ``width`` px wide
    (overview_phone).

    scale "fixed" colours the real weight 0–1, as the head view does (a uniform head over four
    tokens is pale, 0.25); "head" scales each head to its own max to show the shape of weak heads.
    Either way the hover gives the real weight (max-pooled cells: the window's largest).
    ``width``: the figure's width in px, which only picks its height.
    """
    scale = "fixed" if scale == "auto" else scale  # "auto" is the head view's: tiles share 0–1
    parts = overview_parts(trace, stack, batch, max_cells, scale)
    if phone:
        return overview_phone(trace, stack, parts, width)
    n_layers, n_heads = parts.n_layers, parts.n_heads
    n_q, n_k = len(parts.q_lab), len(parts.k_lab)
    per = math.ceil(n_layers / max(1, blocks))
    spans = [(first, min(n_layers, first + per)) for first in range(0, n_layers, per)]
    every = range(n_heads)
    data = [
        overview_cells(
            trace,
            stack,
            parts,
            layers=range(a, b),
            block=i,
            last=i == len(spans) - 1,
        )
        for i, (a, b) in enumerate(spans)
    ]
    tile_px = min(110, (width - 90) / (n_heads * len(spans)))  # few heads: no giant tiles
    plot_px = per * tile_px * n_q / n_k
    # On a narrow screen the page makes it only as tall as its square tiles (ui/js/figures.js).
    meta = {"fit_height": {"below": 560, "pad": 16}}
    layout = layout_of(parts.title, height=int(min(900, max(260, plot_px + 90))))
    two_lines = any("<br>" in overview_head(trace.config, h) for h in every)
    layout["margin"].update(l=40, t=118 if two_lines else 78)  # the heads' labels over the plot
    layout["meta"] = meta
    layout["shapes"] = []
    gap = 0.04 if len(spans) > 1 else 0.0
    share = (1 - gap * (len(spans) - 1)) / len(spans)
    for i, (a, b) in enumerate(spans):
        axes = overview_axes(trace.config, range(a, b), every, n_q, n_k, block=i)
        axes[axis_key("x", i)]["domain"] = [i * (share + gap), i * (share + gap) + share]
        layout.update(axes)
        layout["shapes"] += tile_lines(b - a, n_heads, n_q, n_k, block=i)
    return figure(data, layout)


PHONE_TILE = 32  # px: a phone's overview tile at least (a finger's tap target)
PHONE_TILE_MOST = 44  # px: and at most (few heads: no giant tiles, no page of one model)


def phone_groups(n_heads: int, room: float) -> list[range]:
    """The heads a phone's overview shows in each row of tiles: as many as ``room`` px holds at
    PHONE_TILE px each, in groups of about equal size (BERT's 12 heads at 290 px: 6 and 6;
    SmolLM2's 9: one group)."""
    most = max(1, int(room // PHONE_TILE))
    n_groups = math.ceil(n_heads / most)
    per = math.ceil(n_heads / n_groups)
    return [range(h, min(n_heads, h + per)) for h in range(0, n_heads, per)]


def overview_phone(trace, stack: str, parts: OverviewParts, width: float) -> go.Figure:
    """The overview on a phone ``width`` px wide: every layer of a group of heads under the
    group's head names, the groups one under another (phone_groups), tiles of PHONE_TILE px or
    more a side so that a finger opens the head it taps; the colour bar across under the plot.
    Laid out here for that width (``meta.narrow``: the page's phone layout leaves it as it is)."""
    config, n_layers = trace.config, parts.n_layers
    n_q, n_k = len(parts.q_lab), len(parts.k_lab)
    left, right = 36, 0  # the layers' names (viz.fit.fixed_margins: 35 px at least)
    groups = phone_groups(parts.n_heads, width - left - right)
    per = len(groups[0])
    tile = min(PHONE_TILE_MOST, (width - left - right) / per)
    two_lines = any("<br>" in overview_head(config, h) for h in range(parts.n_heads))
    names = 34 if two_lines else 22  # px: a group's head names over its tiles
    block = n_layers * tile * n_q / n_k
    plot = len(groups) * block + (len(groups) - 1) * (names + 10)
    bottom = 64  # the axes' words, the colour bar's title, the bar and its numbers
    layout = layout_of(parts.title, height=math.ceil(plot + 56 + names + bottom))
    layout["margin"].update(l=left, r=right, t=56 + names, b=bottom)
    # "plot_px": the figure as tall as its margins and this plot, whatever its title's lines
    layout["meta"] = {"narrow": {"layout": {}}, "plot_px": plot, "tile_px": tile}
    layout["shapes"] = []
    data = []
    for i, heads in enumerate(groups):
        cells = overview_cells(trace, stack, parts, heads=heads, block=i, last=i == 0)
        top = 1 - i * (block + names + 10) / plot
        axes = overview_axes(config, range(n_layers), heads, n_q, n_k, block=i)
        axes[axis_key("x", i)].update(domain=[0, per * tile / (width - left - right)],
                                      range=[-0.5, per * n_k - 0.5])  # fmt: skip
        axes[axis_key("y", i)]["domain"] = [max(0.0, top - block / plot), top]
        for key in ("x", "y"):  # the margins hold the names: Plotly's automargin moved them
            axes[axis_key(key, i)].update(tickfont={"size": 10}, automargin=False)
        layout.update(axes)
        layout["shapes"] += tile_lines(n_layers, len(heads), n_q, n_k, block=i)
        data.append(cells)
    bar = data[0]["colorbar"]
    bar.update(
        orientation="h", x=0.5, xanchor="center", y=-(bottom - 4) / plot, yanchor="bottom",
        len=0.92, thickness=10, xpad=0, ypad=4, title={**bar["title"], "side": "top"},
    )  # fmt: skip
    return figure(data, layout)


def axis_key(letter: str, block: int) -> str:
    """The layout key of a block's axis: "xaxis", "xaxis2", … ("yaxis" likewise)."""
    return f"{letter}axis{block + 1 if block else ''}"


def axis_ref(letter: str, block: int) -> str:
    """A block's axis as a trace or shape names it: "x", "x2", …"""
    return f"{letter}{block + 1 if block else ''}"


def overview_cells(
    trace,
    stack: str,
    parts: OverviewParts,
    layers: range | None = None,
    heads: range | None = None,
    block: int = 0,
    last: bool = True,
) -> dict:
    """The heatmap of one block of the overview's tiles: ``layers`` × ``heads`` (by default
    every one); ``last``: the block that carries the colour bar. Where the colours are each
    head's share of its max, the hover reads the real weights (``parts.real``)."""
    layers = range(parts.n_layers) if layers is None else layers
    heads = range(parts.n_heads) if heads is None else heads
    y_title, x_title = axis_titles(stack)
    real = parts.block(layers, heads, real=True)
    if real is not None:
        # Colours show the shape; the hover still gives the real weight (a second byte a cell).
        bar, ticks = tr("% of each head's max"), ["0", "25 %", "50 %", "75 %", "100 %"]
        hover = tr("weight %{customdata} % of the row (%{z} % of this head's max)")
    else:
        bar, ticks = tr("weight"), ["0", "0.25", "0.5", "0.75", "1"]
        hover = tr("weight %{z} % of the row")  # a query's weights sum to 100 %
    # Built here rather than with heatmap(), which widens z to float32: uint8 is ¼ of the bytes.
    return dict(
        type="heatmap",
        z=parts.block(layers, heads),
        x=[f"{column_head(trace.config, h)} · {lab}" for h in heads for lab in parts.k_lab],
        y=[f"L{layer} · {lab}" for layer in layers for lab in parts.q_lab],
        xaxis=axis_ref("x", block),
        yaxis=axis_ref("y", block),
        showscale=last,
        colorscale=ATTENTION_SCALE,
        zmin=0,
        zmax=100,
        colorbar={
            "title": {"text": bar, "side": "right"},
            "thickness": 12,
            "tickvals": [0, 25, 50, 75, 100],
            "ticktext": ticks,
        },
        customdata=real,
        hovertemplate=f"{y_title} %{{y}}<br>{x_title} %{{x}}<br>{hover}<extra></extra>",
    )


def overview_title(
    stack: str, n_layers: int, n_heads: int, scale: str, peak: float, pooled: str
) -> str:
    """The overview's title: the grid, what the colour means, how the text was pooled."""
    if scale == "head":
        note = tr("each head scaled to its own max (compare shapes, not brightness)")
    else:
        note = tr("colour = weight 0–1 as in the head view; strongest weight {peak:.2f}", peak=peak)
    return tr(
        "All {n_layers} layers × {n_heads} heads — {stack}"
        "<br><sup>{note}{pooled} · click a tile to open that head</sup>",
        n_layers=n_layers,
        n_heads=n_heads,
        stack=stack_title(stack),
        note=note,
        pooled=pooled,
    )


def tile_lines(n_layers: int, n_heads: int, n_q: int, n_k: int, block: int = 0) -> list[dict]:
    """White lines between a block's tiles, as one list of shapes (add_shape one by one
    revalidates every shape so far)."""
    line = {"type": "line", "line": {"color": "white", "width": 2}}
    x, y = axis_ref("x", block), axis_ref("y", block)
    return [
        {**line, "x0": v, "x1": v, "y0": 0, "y1": 1, "xref": x, "yref": f"{y} domain"}
        for v in (h * n_k - 0.5 for h in range(1, n_heads))
    ] + [
        {**line, "y0": v, "y1": v, "x0": 0, "x1": 1, "yref": y, "xref": f"{x} domain"}
        for v in (layer * n_q - 0.5 for layer in range(1, n_layers))
    ]


def overview_axes(config, layers: range, heads: range, n_q: int, n_k: int, block: int = 0) -> dict:
    """A block's axes: one tick a head of ``heads`` (top) and a layer (left), square cells, the
    block hung from the top (a last, shorter block stands level with the others)."""
    x, y = axis_ref("x", block), axis_ref("y", block)
    return {
        axis_key("x", block): {
            "type": "category",
            "side": "top",
            "anchor": y,
            "tickmode": "array",
            "tickvals": [i * n_k + (n_k - 1) / 2 for i in range(len(heads))],
            "ticktext": [overview_head(config, h) for h in heads],
            "tickangle": 0,
            "showgrid": False,
            "zeroline": False,
            "constrain": "domain",
        },
        axis_key("y", block): {
            "type": "category",
            "anchor": x,
            "autorange": "reversed",
            "tickmode": "array",
            "tickvals": [i * n_q + (n_q - 1) / 2 for i in range(len(layers))],
            "ticktext": [f"L{layer}" for layer in layers],
            "showgrid": False,
            "zeroline": False,
            "scaleanchor": x,  # square cells; the plot narrows instead of stretching the tiles
            "constrain": "domain",
            "constraintoward": "top",
        },
    }


# ---------------------------------------------------------------- two heads compared


def compare_figure(
    trace,
    stack: str,
    a: tuple[int, int],
    b: tuple[int, int],
    batch: int = 0,
    max_cells: int = MAX_PANEL_CELLS,
    scale: Literal["auto", "fixed", "head"] = "fixed",
) -> go.Figure:
    """Heads A and B side by side and their difference A − B (diverging, centred at 0).

    Every panel holds the numbers its hover prints: A and B are the weights rounded to three
    decimals (halves up, as the hover and the browser's payload round them), and A − B is the
    difference of those shown numbers, so A − B = A − B on screen to the last digit and the browser
    can rebuild the figure from the head switch's payload (``fill_from_payload``) exactly.

    Args:
        a, b: (layer, head) of the two heads.
        scale: "fixed" colours A and B 0–1 (as the head view), "head" 0–the larger max of the two;
            A − B always uses ± that scale (or its own extreme when larger), and the title gives
            its range in numbers.
        max_cells: longer texts are mean-pooled to at most this many cells a side.
    Returns:
        A figure whose ``layout.meta["heads"]`` is ``[[layer_a, head_a], [layer_b, head_b]]``.
    """
    scale = "fixed" if scale == "auto" else scale  # "auto" is the head view's: A, B share 0–1
    q_tok, k_tok = stack_tokens(trace, stack, batch)
    k_q, k_k = math.ceil(len(q_tok) / max_cells), math.ceil(len(k_tok) / max_cells)
    pat_a, pat_b, diff = shown_pair(trace, stack, a, b, batch, k_q, k_k)
    x_lab = pool_labels(token_labels(k_tok), k_k)
    y_lab = pool_labels(token_labels(q_tok), k_q)
    y_title, x_title = axis_titles(stack)
    cfg = trace.config
    name_a = f"A = L{a[0]} H{head_label(cfg, a[1])}"
    name_b = f"B = L{b[0]} H{head_label(cfg, b[1])}"
    common = {"x_title": x_title, "y_title": y_title}
    panels = [
        heatmap(pat_a, x_lab, y_lab, value_name=f"{name_a}:", **common),
        heatmap(pat_b, x_lab, y_lab, value_name=f"{name_b}:", **common),
        # ".3f", not "+.3f": Plotly.js 3.3's hover ignores a signed format and prints the raw
        # float32 (0.028999999165534973); negative differences still show their minus sign.
        heatmap(diff, x_lab, y_lab, value_name="A − B:", fmt=".3f", **common),
    ]
    colorbars = compare_colorbars(scale, pat_a, pat_b, diff)
    data, layout = three_panels(
        panels, [name_a, name_b, "A − B"], len(x_lab), len(y_lab), x_title, y_title, colorbars
    )
    span = tr("A − B from {low:+.3f} to {high:+.3f}", low=float(diff.min()), high=float(diff.max()))
    pooled = pool_note(q_tok, k_tok, y_lab, x_lab, "mean")
    title = tr(
        "Two heads compared — {stack}{pooled}<br><sup>{span}</sup>",
        stack=stack_title(stack),
        pooled=pooled,
        span=span,
    )
    layout.update(layout_of(title, panel_height(x_lab, max(len(q_tok), len(k_tok)))))
    layout["margin"]["t"] = 70
    layout["meta"] = {"heads": [list(a), list(b)]}
    return colorbars_below(data, layout)


def shown_pair(
    trace, stack: str, a: tuple[int, int], b: tuple[int, int], batch: int, k_q: int, k_k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, A − B) as ``compare_figure``'s panels show them: each cell its window's mean (the
    mean of a difference is the difference of the means, so A − B stays a difference of the two
    panels), rounded to three decimals, A − B the difference of the rounded numbers."""
    pair = torch.from_numpy(
        np.stack([head_pattern(trace, stack, *a, batch), head_pattern(trace, stack, *b, batch)])
    )  # (2, T_q, T_k)
    # The shown numbers, as thousandths: exact in float64.
    shown_a, shown_b = np.floor(
        pool(pair, k_q, k_k, "mean").numpy().astype(np.float64) * 1000 + 0.5
    )
    return shown_a / 1000, shown_b / 1000, (shown_a - shown_b) / 1000


def compare_colorbars(
    scale: str, pat_a: np.ndarray, pat_b: np.ndarray, diff: np.ndarray
) -> tuple[dict, dict]:
    """The two colour axes of ``compare_figure``: A and B's weights, and A − B's difference."""
    peak = max(float(pat_a.max()), float(pat_b.max()), 1e-6)
    cmax = 1.0 if scale == "fixed" else peak  # A and B share one scale: the head view's
    # The difference is drawn on ±(the weights' own scale), never stretched to its own extremes:
    # two near-uniform heads differing by 0.004 stay near white instead of saturating red/blue.
    top = max(cmax, float(np.abs(diff).max()))
    return (
        {
            "colorscale": ATTENTION_SCALE,
            "cmin": 0.0,
            "cmax": cmax,
            "colorbar": {
                "title": {
                    "text": tr("weight") if scale == "fixed" else tr("weight (0–max of A, B)")
                },
                "thickness": 12,
            },
        },
        {
            "colorscale": DIVERGING_SCALE,
            "cmin": -top,
            "cmax": top,
            "cmid": 0.0,
            "colorbar": {"title": {"text": "A − B", "side": "right"}, "thickness": 12},
        },
    )


# ---------------------------------------------------------------- figures the browser fills


def compare_in_switch_data(
    trace, stack: str, a: tuple[int, int], b: tuple[int, int], batch: int = 0
) -> bool:
    """Whether ``compare_figure``'s A and B panels hold exactly the head switch data's cells of
    heads a and b (a hidden cell there is weight 0 here): true when neither view pools the text
    (at most MAX_PANEL_CELLS tokens; the two pool differently beyond)."""
    q_tok, k_tok = stack_tokens(trace, stack, batch)
    if max(len(q_tok), len(k_tok)) > min(MAX_PANEL_CELLS, MAX_HEAD_CELLS):
        return False
    maps = head_cells(trace, stack, [a, b], batch)[0]  # (2, T_q, T_k), NaN = hidden
    pair = np.stack([head_pattern(trace, stack, *a, batch), head_pattern(trace, stack, *b, batch)])
    if not wire.codes_fit(maps):
        return False
    codes = np.where(np.isnan(maps), 0, wire.milli(maps))
    return np.array_equal(codes, wire.milli(pair))
