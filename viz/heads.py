"""The Heads tab's figures (ui/tabs/heads.py lays them out): the attention rollout after a layer,
the heads laid out by how alike they attend (one text or a corpus), and the attention flow into
one token beside the rollout's row. The numbers are analysis/'s; these only draw them."""

from __future__ import annotations

import html

import numpy as np

import analysis
from lang import tr
from viz.attention import stack_title
from viz.common import (
    display_token,
    figure,
    heatmap,
    layout_of,
    square_axis_props,
    stack_tokens,
    token_labels,
)

# The distance map's query rows (analysis.distances.query_rows): at 512 BERT tokens every row
# takes 10-15 s on 2 cores, 64 rows 1.3 s (under load 4) and stay within 0.021 of it (max 0.69).
DISTANCE_QUERIES = 64
FLOW_TOKENS = 128  # one row within 2 s at 128 tokens on 2 cores (bench/bench_research.py)


def rollout_figure(trace, stack: str, layer: int):
    """Rollout after the chosen layer: rows = tokens, columns = where their mixture came from."""
    flow = analysis.rollout(trace, stack)[0, layer]  # (T, T)
    q_tok, k_tok = stack_tokens(trace, stack)
    flow = flow[: len(q_tok), : len(k_tok)].numpy()
    cells = heatmap(
        flow,
        token_labels(k_tok),
        token_labels(q_tok),
        x_title=tr("input token"),
        y_title=tr("token after the layer"),
        value_name=tr("share"),
        zmin=0.0,
        zmax=float(flow.max()),
    )
    title = tr(
        "Rollout after layer {layer} — {stack} (a linear-mixing estimate)",
        layer=layer,
        stack=stack_title(stack),
    )
    layout = layout_of(title, height=min(860, max(380, 150 + 14 * len(q_tok))))
    layout["xaxis"], layout["yaxis"] = square_axis_props(len(k_tok), len(q_tok))
    layout["xaxis"]["title"] = {"text": tr("input token")}
    layout["yaxis"]["title"] = {"text": tr("token after the layer")}
    layout["meta"] = {"fit": "square"}  # laid out for the asking page's screen (viz.screen)
    return figure([cells], layout)


def distance_figure(trace, stack: str):
    """Every head as a point: classical MDS of Clark et al.'s Jensen–Shannon distances."""
    title = tr(
        "Heads by how alike they attend — {stack} (Jensen–Shannon distance, classical MDS)",
        stack=stack_title(stack),
    )
    distances = analysis.head_distances(trace, stack, queries=DISTANCE_QUERIES)  # (L·H, L·H)
    rows = int(analysis.tokens.real_tokens(trace, stack)[0][0].sum())
    if rows > DISTANCE_QUERIES:
        title += (
            "<br><sup>"
            + tr(
                "averaged over {used} of the {rows} query positions, evenly spaced",
                used=DISTANCE_QUERIES,
                rows=rows,
            )
            + "</sup>"
        )
    return distance_map(distances, trace.config.n_layers, trace.config.n_heads, title)


def corpus_distance_figure(result, n_layers: int, n_heads: int):
    """The same map over a corpus: MDS of the heads' Jensen–Shannon distances averaged over its
    sentences (None when the corpus measured no distances)."""
    if result.distances is None:
        return None
    title = tr(
        "Heads by how alike they attend over {n} sentences — {stack} (mean Jensen–Shannon "
        "distance, classical MDS)",
        n=result.sentences,
        stack=stack_title(result.options.get("stack", "encoder")),
    )
    return distance_map(result.distances, n_layers, n_heads, title)


def distance_map(distances, n_layers: int, n_heads: int, title: str):
    """Heads as points laid out by classical MDS of a (L·H, L·H) distance matrix, coloured by
    layer; each point carries [layer, head] for a click (ta.tilePicker, ui/js/figures.js)."""
    xy = analysis.mds_2d(distances).numpy()  # (L·H, 2)
    layers = np.repeat(np.arange(n_layers), n_heads)
    heads = np.tile(np.arange(n_heads), n_layers)
    points = {
        "type": "scatter",
        "x": xy[:, 0],
        "y": xy[:, 1],
        "mode": "markers+text",
        "text": [f"{la}.{h}" for la, h in zip(layers, heads, strict=True)],
        "textposition": "top center",
        "textfont": {"size": 9},
        "customdata": [[int(la), int(h)] for la, h in zip(layers, heads, strict=True)],
        "marker": {
            "size": 11,
            "color": layers,
            "colorscale": "Viridis",
            "showscale": True,
            "colorbar": {"title": {"text": tr("layer"), "side": "right"}},
        },
        "hovertemplate": tr("layer %{customdata[0]}, head %{customdata[1]}") + "<extra></extra>",
    }
    layout = layout_of(title, height=520)
    layout["xaxis"] = {"title": {"text": tr("MDS 1")}, "zeroline": False}
    layout["yaxis"] = {"title": {"text": tr("MDS 2")}, "zeroline": False}
    return figure([points], layout)


def flow_figure(trace, stack: str, layer: int, query: int):
    """Attention flow into one token after a layer, beside the rollout's row (bars per input)."""
    q_tok, k_tok = stack_tokens(trace, stack)
    query = min(query, len(q_tok) - 1)
    rollout_row = analysis.rollout(trace, stack)[0, layer, query, : len(k_tok)].numpy()
    labels = token_labels(k_tok)
    bars = []
    if len(k_tok) <= FLOW_TOKENS:
        row = analysis.attention_flow_row(trace, stack, 0, layer, query)[: len(k_tok)].numpy()
        bars.append({"type": "bar", "x": labels, "y": row, "name": tr("attention flow (max-flow)")})
        note = ""
    else:
        note = tr(
            "<br><sup>{n} tokens: flow is computed for up to {limit} (max-flow is costly); "
            "the rollout alone is shown</sup>",
            n=len(k_tok),
            limit=FLOW_TOKENS,
        )
    bars.append({"type": "bar", "x": labels, "y": rollout_row, "name": tr("rollout")})
    title = tr(
        "Attention flow into {token} after layer {layer} — {stack}",
        token=html.escape(display_token(q_tok[query])),
        layer=layer,
        stack=stack_title(stack),
    )
    layout = layout_of(title + note, height=420)
    layout.update(
        barmode="group",
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
        xaxis={"title": {"text": tr("input token")}, "type": "category"},
        yaxis={"title": {"text": tr("share")}, "range": [0, 1]},
    )
    return figure(bars, layout)
