"""How the heads connect: attribution grids, attribution against patching, a circuit's
faithfulness curve and composition scores, as plain Plotly JSON (analysis/circuits.py and
analysis/attribution_patching.py compute them; the circuit's graph is viz/circuit_graph.py).

Shares use the patching tab's scale (viz/patching.py): one diverging scale fixed at [-1, 1], so
a grid here reads like the grid there.
"""

from __future__ import annotations

import numpy as np

from lang import tr
from viz.attention import stack_title
from viz.common import (
    DIVERGING_SCALE,
    display_token,
    figure,
    grid,
    head_label,
    heatmap,
    layout_of,
    safe,
)

TITLE_TOP = 32  # px above a title: Plotly's toolbar
MIN_CELL_FONT = 9  # px: as Which heads matter's grids (viz/patching.py)


def title_of(text: str, second: str) -> str:
    """A figure's title: its line, and under it a smaller second one (both escaped)."""
    return f"{safe(text)}<br><sup>{safe(second)}</sup>"


def hung_layout(title: str, height: int) -> dict:
    """layout_of's, its title hung from the top under Plotly's toolbar (as viz/patching.py's
    grids): the lines a phone wraps it into push the plot down, and no empty band opens above
    the title (Plotly centres a title in the top margin)."""
    layout = layout_of(title, height)
    layout["title"].update(yref="container", y=1, yanchor="top", pad={"t": TITLE_TOP})
    return layout


def _head_axes(config, n_layers: int, n_heads: int):
    heads = [f"H{head_label(config, h)}" for h in range(n_heads)]
    return heads, [f"L{layer}" for layer in range(n_layers)]


def _head_names(config, n_layers: int, n_heads: int) -> list[str]:
    """Every head as "L{layer}H{head}", layer by layer."""
    return [
        f"L{layer}H{head_label(config, h)}" for layer in range(n_layers) for h in range(n_heads)
    ]


def _share_grid(z, config, value_name: str, x=None, x_title: str = "", **axes) -> dict:
    """A grid of shares, layers down: heads across, or the ``x`` given (named ``x_title``)."""
    z = np.asarray(z, dtype=np.float32)
    across = x if x is not None else _head_axes(config, *z.shape)[0]
    layers = [f"L{layer}" for layer in range(z.shape[0])]
    trace = heatmap(z, across, layers, x_title=x_title or tr("head"), y_title=tr("layer"),
                    value_name=value_name, colorscale=DIVERGING_SCALE, zmin=-1.0, zmax=1.0,
                    zmid=0.0)  # fmt: skip
    if z.shape[1] <= 24:
        trace["text"] = [[f"{v:.2f}" for v in row] for row in z.tolist()]
        trace["texttemplate"] = "%{text}"
    return {**trace, **axes}


def _estimate_figure(trace: dict, heading: str, what: str, xaxis: dict, below: int = 0):
    """A grid of estimated shares, layers down, under its title and what its 0 and 1 mean;
    ``below``: px more for the labels under it."""
    trace["colorbar"] = {"title": {"text": tr("estimated share"), "side": "right"}}
    title = title_of(heading, tr("{what}: 0 = nothing restored, 1 = all of it", what=what))
    layout = hung_layout(title, min(720, 170 + below + 34 * len(trace["y"])))
    layout["margin"] = {"l": 10, "r": 10, "t": 80, "b": 10}
    layout["yaxis"] = {"autorange": "reversed", "title": {"text": tr("layer")}}
    layout["xaxis"] = xaxis
    # a cell's value is left out where Plotly would fit it smaller (a phone's residual grid:
    # 11 positions in 270 px); the cell keeps its colour and hover (ui/js/figures.js)
    layout["meta"] = {"min_cell_font": MIN_CELL_FONT}
    return figure([trace], layout)


def attribution_grid_figure(grid_values, config, stack: str, what: str, steps: int):
    """analysis.attribute_heads' [L, H] grid: every head's estimated share, with ``steps``
    integrated-gradient steps (EAP-IG)."""
    trace = _share_grid(grid_values, config, tr("estimated share"))
    heading = tr(
        "Attribution patching: every head's share, {steps} integrated-gradient steps — {stack}",
        steps=steps,
        stack=stack_title(stack),
    )
    return _estimate_figure(trace, heading, what, {"title": {"text": tr("head")}})


def residual_grid_figure(grid_values, clean_tokens, corrupt_tokens, stack: str, what: str):
    """analysis.attribute_residual's [L, T] grid (one step): the estimated share of patching the
    stream entering each layer at each position (Which heads matter's second grid, estimated)."""
    n_tokens = np.asarray(grid_values).shape[1]
    pairs = zip(clean_tokens[:n_tokens], corrupt_tokens[:n_tokens], strict=False)
    labels = [  # "position·clean→corrupt", or "position·token" where the two runs agree
        safe(f"{i}·{display_token(a)}" + ("" if a == b else f"→{display_token(b)}"))
        for i, (a, b) in enumerate(pairs)
    ]
    name = tr("position (clean→corrupt)")
    trace = _share_grid(grid_values, None, tr("estimated share"), x=labels, x_title=name)
    heading = tr(
        "Attribution patching: the residual stream entering each layer, each position — {stack}",
        stack=stack_title(stack),
    )
    xaxis = {"title": {"text": name}, "tickangle": -45}
    return _estimate_figure(trace, heading, what, xaxis, below=20)


def compare_figure(estimated, exact, config, r: float, one_step, steps: int):
    """Activation patching's grid beside a scatter of attribution against it, with y = x: the
    ``estimated`` grid (``steps`` integrated-gradient steps, Pearson ``r``) and ``one_step``
    (the one-step grid, its r), each a kind of point."""
    a = np.asarray(estimated, dtype=np.float32)
    e = np.asarray(exact, dtype=np.float32)
    one = np.asarray(one_step[0], dtype=np.float32)
    titles = [tr("Activation patching (exact)"), tr("Attribution against patching")]
    axes, cells = grid(1, 2, h_space=0.16, titles=titles)
    (x1, y1), (x2, y2) = cells
    exact_trace = _share_grid(e, config, tr("share restored"), xaxis=x1, yaxis=y1)
    exact_trace["colorbar"] = {"x": 0.44, "thickness": 12}
    names = (
        tr("{steps} steps (r = {r:.2f})", steps=steps, r=r),
        tr("one step (r = {r:.2f})", r=one_step[1]),
    )
    points = _against_exact(e, (a, one), names, _head_names(config, *e.shape), (x2, y2))
    title = title_of(
        tr("Attribution patching against activation patching"),
        tr(
            "this pair: Pearson r = {r:.2f} over {n} heads ({steps} steps), {r_one:.2f} (one "
            "step); published 0.98: GPT-2 small's IOI, not this model",
            r=r,
            n=e.size,
            steps=steps,
            r_one=one_step[1],
        ),  # fmt: skip
    )
    layout = _compare_layout(title, e.shape[0], axes, cells)
    return figure([exact_trace, *points], layout)


def _against_exact(exact, estimates, names, labels: list[str], cell) -> list[dict]:
    """Each estimate's points against exact patching (the page's steps filled, one step open),
    named in the legend, and the diagonal y = x over all of them."""
    xaxis, yaxis = cell
    hover = (
        "%{text}<br>" + safe(tr("patching")) + " %{x:.3f}<br>" + safe(tr("attribution"))
        + " %{y:.3f}<extra></extra>"
    )  # fmt: skip
    markers = ({"size": 8, "color": "#d62728"},
               {"size": 7, "color": "#777", "symbol": "circle-open"})  # fmt: skip
    points = [
        {
            "type": "scatter",
            "mode": "markers",
            "x": exact.ravel().tolist(),
            "y": estimate.ravel().tolist(),
            "text": labels,
            "marker": marker,
            "hovertemplate": hover,
            "xaxis": xaxis,
            "yaxis": yaxis,
            "name": name,
            "showlegend": True,
        }
        for estimate, marker, name in zip(estimates, markers, names, strict=True)
    ]
    low = float(min(0.0, exact.min(), *(e.min() for e in estimates)))
    high = float(max(0.0, exact.max(), *(e.max() for e in estimates)))
    diagonal = {
        "type": "scatter",
        "mode": "lines",
        "x": [low, high],
        "y": [low, high],
        "line": {"color": "#999", "dash": "dot", "width": 1},
        "hoverinfo": "skip",
        "xaxis": xaxis,
        "yaxis": yaxis,
        "showlegend": False,
    }
    return [*points, diagonal]


def _compare_layout(title: str, n_layers: int, axes: dict, cells) -> dict:
    """The comparison's layout: the grid's axes (layers down), the scatter's, and the legend at
    the figure's foot, under the scatter (over it, it lay on its panel title once the text grew:
    presented at 720p)."""
    (x1, y1), (x2, y2) = cells
    layout = hung_layout(title, min(760, 260 + 34 * n_layers))
    layout["margin"] = {"l": 10, "r": 10, "t": 96, "b": 40}
    layout.update(axes)
    layout[f"yaxis{y1[1:]}"].update(autorange="reversed", title={"text": tr("layer")})
    layout[f"xaxis{x1[1:]}"].update(title={"text": tr("head")})
    layout[f"xaxis{x2[1:]}"].update(title={"text": tr("activation patching (share restored)")})
    layout[f"yaxis{y2[1:]}"].update(title={"text": tr("attribution (estimated share)")})
    layout["legend"] = {"orientation": "h", "x": 1, "xanchor": "right", "y": 0,
                        "yanchor": "bottom", "yref": "container"}  # fmt: skip
    return layout


def curve_figure(points: list[tuple[int, float]], keep: int, share: float = 1.0):
    """Faithfulness against the number of edges kept (a log axis), the shown circuit marked;
    ``share`` as circuit_figure's."""
    sizes = [n for n, _ in points]
    ticks = [m * 10**e for e in range(7) for m in (1, 2, 5) if m * 10**e <= max(sizes)]
    shares = [value for _, value in points]
    line = {
        "type": "scatter",
        "mode": "lines+markers",
        "x": sizes,
        "y": shares,
        "line": {"color": "#1f77b4"},
        "hovertemplate": safe(tr("edges kept"))
        + " %{x}<br>"
        + safe(tr("faithfulness"))
        + " %{y:.3f}<extra></extra>",
        "showlegend": False,
    }
    here = [(n, s) for n, s in points if n == keep]
    mark = {
        "type": "scatter",
        "mode": "markers",
        "x": [n for n, _ in here],
        "y": [s for _, s in here],
        "marker": {"size": 13, "color": "#d62728", "symbol": "diamond"},
        "hoverinfo": "skip",
        "showlegend": False,
    }
    title = title_of(tr("Faithfulness by circuit size"),
                   tr("1 = the edges kept restore all of the answer, 0 = none"))  # fmt: skip
    layout = hung_layout(title, 320)
    layout["margin"] = {"l": 10, "r": 10, "t": 80, "b": 10}
    layout["xaxis"] = {
        "type": "log",
        "title": {"text": tr("edges kept")},
        # 1, 2, 5, 10, 20, … up to the largest size: 0.3 of a decade apart at least, so that a
        # phone's labels stand clear (15 beside 20, 200 beside 262 would touch); hover names
        # every size measured
        "tickvals": ticks,
        "ticktext": [str(n) for n in ticks],
    }
    layout["yaxis"] = {"title": {"text": tr("faithfulness")}}
    layout["meta"] = {"share": share}
    return figure([line, mark], layout)


# ---- composition scores --------------------------------------------------------------------------
def composition_figure(scores: dict, config, stack: str):
    """Elhage et al.'s Q, K and V composition scores of every earlier head into every later one:
    three [L·H, L·H] grids, the writing head down, the reading head across."""
    kinds = ("q", "k", "v")
    first = np.asarray(scores["q"])
    n_layers, n_heads = first.shape[:2]
    names = _head_names(config, n_layers, n_heads)
    titles = [tr("{kind}-composition", kind=kind.upper()) for kind in kinds]
    axes, cells = grid(1, 3, h_space=0.06, titles=titles)
    high = max(float(np.asarray(scores[k]).max()) for k in kinds) or 1.0
    traces = []
    for kind, (x, y) in zip(kinds, cells, strict=True):
        z = np.asarray(scores[kind], dtype=np.float32).reshape(n_layers * n_heads, -1)
        trace = heatmap(z, names, names, x_title=tr("reading head"), y_title=tr("writing head"),
                        value_name=tr("composition score"), zmin=0.0, zmax=high,
                        showscale=kind == "v")  # fmt: skip
        traces.append({**trace, "xaxis": x, "yaxis": y})
    title = title_of(
        tr("Composition scores from the weights — {stack}", stack=stack_title(stack)),
        tr(
            "how much an earlier head's output can move a later head's query, key or value "
            "(Elhage et al. 2021)"
        ),  # fmt: skip
    )
    layout = hung_layout(title, min(560, 240 + 10 * n_layers * n_heads))
    layout["margin"] = {"l": 10, "r": 10, "t": 96, "b": 10}
    layout.update(axes)
    for x, y in cells:
        layout[f"yaxis{y[1:]}"].update(autorange="reversed")
        layout[f"xaxis{x[1:]}"].update(tickangle=-90)
    return figure(traces, layout)
