"""How the heads connect: attribution grids, attribution against patching, a circuit as a graph,
its faithfulness curve and composition scores, as plain Plotly JSON (analysis/circuits.py and
analysis/attribution_patching.py compute them).

Shares use the patching tab's scale (viz/patching.py): one diverging scale fixed at [-1, 1], so
a grid here reads like the grid there.
"""

from __future__ import annotations

import re

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
from viz.panels import STACK_BELOW

KIND_COLOURS = {
    "q": "#1f77b4",
    "k": "#d62728",
    "v": "#2ca02c",
    "mlp": "#7f7f7f",
    "logits": "#555",
    "memory": "#9467bd",
}
KIND_NAMES = {
    "q": "query edge",
    "k": "key edge",
    "v": "value edge",
    "mlp": "MLP input edge",
    "logits": "edge to the logits",
    "memory": "edge to the encoder output",
}
KIND_OFFSET = {"q": 0.3, "k": 0.0, "v": -0.3}  # where on a head node each kind arrives
MAX_WIDTH = 7.0  # px: the strongest edge shown
MIN_WIDTH = 2.5  # px: the faintest still reads as its colour at 720p and on a phone
# A node of a graph of up to BIG_LAYERS layers: its name inside, opaque over the edges that pass
# it, and a touch target (px). A deeper model's graph (SmolLM2: 30 layers, 63 columns) has no
# room for that: small nodes, only those an edge touches named.
NODE_PX, BIG_LAYERS = 34, 8  # every node of a small graph: an edge's dark, another's light
PHONE_NODE_PX = 26  # a phone's: a click within Plotly's 20 px of its centre picks it
BIG_NODE_PX, BIG_SMALL_NODE_PX = 11, 5
ARROW_PX = 12  # an edge's arrowhead, its tip on the rim of the node it enters
PHONE_ARROW_PX = 7  # a phone's, plus half its line's width
LEFT_ROOM, RIGHT_ROOM = -2.8, 2.0  # the x range past the embeddings and the logits (units)
MLP_ROW = -1.0  # the MLPs' row, under head n − 1 (at 0)
STACKED_GAP = 2.4  # rows between a phone's encoder row (its MLPs) and decoder row (its names)
TITLE_TOP = 32  # px above a title: Plotly's toolbar
MIN_CELL_FONT = 9  # px: as Which heads matter's grids (viz/patching.py)
HEAD = re.compile(r"L\d+H\d+$")  # a head's node ("L1H0", "cross.L1H0"), which a click opens
PORT = re.compile(r"<b>[qkv]</b>")  # an annotation naming the input edges enter (_ports)


def _title(text: str, second: str) -> str:
    return f"{safe(text)}<br><sup>{safe(second)}</sup>"


def _layout(title: str, height: int) -> dict:
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
    title = _title(heading, tr("{what}: 0 = nothing restored, 1 = all of it", what=what))
    layout = _layout(title, min(720, 170 + below + 34 * len(trace["y"])))
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
    n_layers, n_heads = e.shape
    titles = [tr("Activation patching (exact)"), tr("Attribution against patching")]
    axes, cells = grid(1, 2, h_space=0.16, titles=titles)
    (x1, y1), (x2, y2) = cells
    exact_trace = _share_grid(e, config, tr("share restored"), xaxis=x1, yaxis=y1)
    exact_trace["colorbar"] = {"x": 0.44, "thickness": 12}
    labels = _head_names(config, n_layers, n_heads)
    low = float(min(e.min(), a.min(), 0.0))
    high = float(max(e.max(), a.max(), 0.0))
    scatter = {
        "type": "scatter",
        "mode": "markers",
        "x": e.ravel().tolist(),
        "y": a.ravel().tolist(),
        "text": labels,
        "marker": {"size": 8, "color": "#d62728"},
        "hovertemplate": "%{text}<br>"
        + safe(tr("patching"))
        + " %{x:.3f}<br>"
        + safe(tr("attribution"))
        + " %{y:.3f}<extra></extra>",
        "xaxis": x2,
        "yaxis": y2,
        "showlegend": False,
    }
    one = np.asarray(one_step[0], dtype=np.float32)
    low, high = min(low, float(one.min())), max(high, float(one.max()))
    scatter["name"] = tr("{steps} steps (r = {r:.2f})", steps=steps, r=r)
    scatter["showlegend"] = True
    points = [
        scatter,
        {
            **scatter,
            "y": one.ravel().tolist(),
            "marker": {"size": 7, "color": "#777", "symbol": "circle-open"},
            "name": tr("one step (r = {r:.2f})", r=one_step[1]),
        },
    ]
    diagonal = {
        "type": "scatter",
        "mode": "lines",
        "x": [low, high],
        "y": [low, high],
        "line": {"color": "#999", "dash": "dot", "width": 1},
        "hoverinfo": "skip",
        "xaxis": x2,
        "yaxis": y2,
        "showlegend": False,
    }
    title = _title(
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
    layout = _layout(title, min(760, 260 + 34 * n_layers))
    layout["margin"] = {"l": 10, "r": 10, "t": 96, "b": 40}
    layout.update(axes)
    layout[f"yaxis{y1[1:]}"].update(autorange="reversed", title={"text": tr("layer")})
    layout[f"xaxis{x1[1:]}"].update(title={"text": tr("head")})
    layout[f"xaxis{x2[1:]}"].update(title={"text": tr("activation patching (share restored)")})
    layout[f"yaxis{y2[1:]}"].update(title={"text": tr("attribution (estimated share)")})
    # the two kinds of points named over the scatter
    layout["legend"] = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0,
                        "yanchor": "bottom"}  # fmt: skip
    return figure([exact_trace, *points, diagonal], layout)


# ---- the circuit as a graph --------------------------------------------------------------------
def _stacks(config) -> list[tuple[str, float, bool]]:
    """The graph's stacks left to right: (node names' prefix, x of its embeddings, whether its
    layers have cross-attention). A model of one stack: [("", 0, False)]; an encoder-decoder's
    encoder ends in "memory" (its output) one column after its last MLP, its decoder two
    columns right of that, clear of its label (analysis.circuits names the nodes so)."""
    if getattr(config, "arch", "") != "encoder-decoder":
        return [("", 0.0, False)]
    return [("encoder.", 0.0, False), ("decoder.", 2.0 * config.n_layers + 3, True)]


def _node_names(config) -> list[str]:
    """Every node of the model, in data-flow order."""
    names = []
    for name, _, crossed in _stacks(config):
        names.append(f"{name}embed")
        for layer in range(config.n_layers):
            names += [f"{name}L{layer}H{h}" for h in range(config.n_heads)]
            if crossed:
                names += [f"cross.L{layer}H{h}" for h in range(config.n_heads)]
            names.append(f"{name}L{layer}MLP")
        names.append("memory" if name == "encoder." else "logits")
    return names


NODE = re.compile(r"(?:(encoder|decoder|cross)\.)?(?:L(\d+)(?:H(\d+)|(MLP)))?(embed)?")


def _node_place(name: str, config, stacked: bool = False) -> tuple[float, float]:
    """Where a node stands: a stack's embeddings left, then each layer's heads (one column,
    head 0 on top; a decoder's cross-attention heads in the next column) and its MLP (below
    them), the logits right; an encoder-decoder's encoder first, its output ("memory") after
    it. ``stacked`` (a phone's encoder-decoder): the encoder's row above the decoder's, which
    then starts at the left edge too."""
    n_layers, n_heads = config.n_layers, config.n_heads
    middle = (n_heads - 1) / 2
    stacks = _stacks(config)
    if stacked:
        stacks = [(name, 0.0, crossed) for name, _, crossed in stacks]
    above = STACKED_GAP + n_heads if stacked else 0.0  # the encoder's rise over the decoder
    if name in ("logits", "memory"):
        x0, crossed = (stacks[-1][1], stacks[-1][2]) if name == "logits" else (0.0, False)
        rise = above if name == "memory" else 0.0
        return x0 + (3.0 if crossed else 2.0) * n_layers + 1, middle + rise
    stack, layer, head, mlp, _ = NODE.fullmatch(name).groups()
    _, x0, crossed = stacks[0] if stack in (None, "encoder") else stacks[-1]
    rise = above if stack == "encoder" else 0.0
    if layer is None:  # the embeddings
        return x0, middle + rise
    per = 3.0 if crossed else 2.0
    if mlp:  # under the heads: the lines to the logits pass above it
        return x0 + per * int(layer) + per, MLP_ROW + rise
    column = per * int(layer) + 1 + (stack == "cross")
    return x0 + column, n_heads - 1 - float(head) + rise


def _target_node(target: str, n_heads: int, n_kv: int) -> tuple[str, str]:
    """An edge's target as (node, kind): "L1H0.k" -> ("L1H0", "k"); a key/value group's edge
    ("L1KV0.k") arrives at the group's first head; "memory", "logits" and an MLP are their
    own kind."""
    node, _, kind = target.rpartition(".")
    if kind not in ("q", "k", "v"):
        if target in ("logits", "memory"):
            return target, target
        return target, "mlp"
    group = re.fullmatch(r"(.*L\d+)KV(\d+)", node)
    if group:
        node = f"{group[1]}H{int(group[2]) * (n_heads // n_kv)}"
    return node, kind


def _line(source: str, node: str, kind: str, config, stacked: bool = False):
    """An edge's line from its source's node to where its kind arrives on the target's (the
    line's end hidden under the node; its arrowhead stands on the node's rim)."""
    x0, y0 = _node_place(source, config, stacked)
    x1, y1 = _node_place(node, config, stacked)
    y1 += _offset(kind, config)
    return [x0, (x0 + x1) / 2, x1], [y0, (y0 + y1) / 2, y1]


def _offset(kind: str, config) -> float:
    """Where on a head's node an edge of this kind arrives (q above, v below; a deep graph's
    small nodes take every kind at their centre)."""
    return 0.0 if config.n_layers > BIG_LAYERS else KIND_OFFSET.get(kind, 0.0)


def _node_px(config) -> tuple[int, int]:
    """(an edge's node's size, another node's) in px: large and named inside on a graph of up to
    BIG_LAYERS layers (all alike: a name fits each), small on a deeper one."""
    if config.n_layers > BIG_LAYERS:
        return BIG_NODE_PX, BIG_SMALL_NODE_PX
    return NODE_PX, NODE_PX


def _edge_traces(kept, config) -> tuple[list[dict], set[str]]:
    """One line per kept edge (its width by |score|, its colour by the kind of input it feeds,
    dotted where negative) ending in an arrowhead on its target's rim, and the nodes the edges
    touch. A click on an edge's first point is its source's, on its arrowhead its target's
    (customdata: ui/js/circuits.js opens a head)."""
    n_heads = config.n_heads
    n_kv = getattr(config, "kv_heads", n_heads) or n_heads
    strongest = float(np.abs(kept["score"]).max()) if len(kept) else 1.0
    rim = _node_px(config)[0] / 2
    traces, shown_kinds, touched = [], set(), set()
    for source, target, score in zip(kept["source"], kept["target"], kept["score"], strict=True):
        node, kind = _target_node(str(target), n_heads, n_kv)
        xs, ys = _line(str(source), node, kind, config)
        touched.update((str(source), node))
        ends = f"{safe(_hover_name(str(source)))} → {safe(_hover_name(str(target)))}"
        hover = f"{ends}: {score:+.4f}<extra></extra>"
        width = max(MIN_WIDTH, MAX_WIDTH * abs(float(score)) / strongest)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": xs,
                "y": ys,
                "line": {
                    "color": KIND_COLOURS[kind],
                    "width": width,
                    "dash": "solid" if score >= 0 else "dot",
                },
                "marker": {  # the arrowhead: on the last point, along the line, on the rim
                    "symbol": "arrow",
                    "angleref": "previous",
                    "size": [0, 0, ARROW_PX + width],
                    "standoff": rim,
                    "color": KIND_COLOURS[kind],
                },
                "customdata": [str(source), "", node],
                "opacity": 0.45 + 0.5 * abs(float(score)) / strongest,
                "name": tr(KIND_NAMES[kind]),
                "legendgroup": kind,
                "showlegend": kind not in shown_kinds,
                "hovertemplate": hover,
            }
        )
        shown_kinds.add(kind)
    return traces, touched


def _ports(kept, config, stacked: bool = False) -> list[dict]:
    """The input each edge into a head feeds, named where it arrives: "q", "k" or "v" in its
    kind's colour left of the arrowhead, on a white ground over any line (annotations lie above
    every trace), once per head and kind."""
    n_heads = config.n_heads
    n_kv = getattr(config, "kv_heads", n_heads) or n_heads
    rim = _node_px(config)[0] / 2
    shift = 13 if config.n_layers > BIG_LAYERS else 9  # a deep graph's kinds share one point
    found, seen = [], set()
    for target in kept["target"]:
        node, kind = _target_node(str(target), n_heads, n_kv)
        if kind not in KIND_OFFSET or (node, kind) in seen:
            continue
        seen.add((node, kind))
        x, y = _node_place(node, config, stacked)
        found.append(
            {
                "text": f"<b>{kind}</b>",
                "x": x,
                "y": y + _offset(kind, config),
                "xref": "x",
                "yref": "y",
                "xanchor": "right",
                "xshift": -(rim + ARROW_PX + 1),
                "yshift": {"q": shift, "k": 0, "v": -shift}[kind],  # q above its line, v below
                "showarrow": False,
                "font": {"size": 13, "color": KIND_COLOURS[kind]},
                "bgcolor": "rgba(255,255,255,0.9)",
                "borderpad": 1,
            }
        )
    return found


DEEP_GAP, PHONE_DEEP_GAP = 3, 8  # layers between two names in one row of a deep graph


def _deep_names(config, touched: set[str]) -> tuple[list[dict], list[bool]]:
    """A deep one-stack graph's names, of the nodes an edge touches: over a head's node (under
    an MLP's), on a white ground above every line; in one row at least DEEP_GAP layers apart
    (the others keep their hover), and whether each is also kept on a phone (PHONE_DEEP_GAP)."""
    found, phone, last, last_phone = [], [], {}, {}
    for name in _node_names(config):
        if name not in touched:
            continue
        x, y = _node_place(name, config)
        match = NODE.fullmatch(name)
        layer = int(match[2]) if match and match[2] is not None else None
        if layer is not None and layer - last.get(y, -99) < DEEP_GAP:
            continue
        if layer is not None:
            last[y] = layer
        below = "MLP" in name
        short = name.rpartition(".")[2]
        anchor = {"embed": "left", "logits": "right"}.get(short, "center")
        found.append(
            {
                "text": safe(_label(name)),
                "x": x,
                "y": y,
                "xref": "x",
                "yref": "y",
                "xanchor": anchor,
                "yanchor": "top" if below else "bottom",
                "xshift": {"left": -6, "right": 6}.get(anchor, 0),
                "yshift": -7 if below else 7,
                "showarrow": False,
                "font": {"size": 12, "color": "#222"},
                "bgcolor": "rgba(255,255,255,0.85)",
                "borderpad": 1,
            }
        )
        keep = layer is None or layer - last_phone.get(y, -99) >= PHONE_DEEP_GAP
        if keep and layer is not None:
            last_phone[y] = layer
        phone.append(keep)
    return found, phone


def _sign_key() -> dict:
    """The legend's word for a dotted line: a negative score, an edge pushing toward the corrupt
    answer (solid: toward the clean one)."""
    return {
        "type": "scatter",
        "mode": "lines",
        "x": [None],
        "y": [None],
        "line": {"color": "#555", "width": 2.5, "dash": "dot"},
        "name": tr("dotted: negative (toward the corrupt answer)"),
        "showlegend": True,
        "hoverinfo": "skip",
    }


def _words() -> dict[str, str]:
    """The nodes that are no head or MLP, in words: the embeddings, encoder output, logits."""
    return {"embed": tr("embeddings"), "logits": tr("logits"), "memory": tr("encoder output")}


def _label(name: str) -> str:
    """A node's label: the name without its stack ("cross.L0H1" -> "L0H1"; a cross-attention
    head is told by its marker), the embeddings, the encoder's output and the logits in words."""
    short = name.rpartition(".")[2]
    return _words().get(short, short)


def _hover_name(name: str) -> str:
    """A node or an edge's end as its hover names it: a head's or an MLP's id as the CSV has it
    ("L1H0.q", "decoder.L0MLP"), the embeddings, the encoder's output and the logits in words
    ("decoder.embed" -> "decoder.embeddings")."""
    stack, dot, short = name.rpartition(".")
    word = _words().get(short)
    return f"{stack}{dot}{word}" if word else name


def _node_trace(config, touched: set[str]) -> dict:
    """Every node of the model, the ones an edge touches dark and large (a cross-attention head
    a diamond, an MLP a square), opaque over the lines that pass them; a small graph's heads and
    MLPs named inside their nodes, the embeddings and logits beside theirs (no line there). A
    deep model's graph names only the nodes an edge touches, above them. A head's hover says a
    click opens it."""
    names = _node_names(config)
    places = [_node_place(n, config) for n in names]
    opens = tr("click to open this head on the Attention tab")
    big, small = _node_px(config)
    deep = config.n_layers > BIG_LAYERS
    inside = [not deep and _label(n) == n.rpartition(".")[2] for n in names]
    named = touched  # a deep one-stack graph's nodes are named by annotations (_deep_names)
    if deep and len(_stacks(config)) == 1:
        named = set()
    return {
        "type": "scatter",
        "mode": "markers+text",
        "x": [x for x, _ in places],
        "y": [y for _, y in places],
        "text": [safe(_label(n)) if (not deep or n in named) else "" for n in names],
        "textposition": [_text_at(n, inner, deep) for n, inner in zip(names, inside, strict=True)],
        "textfont": {
            "size": [10 if inner else 12 for inner in inside],
            "color": [
                ("#fff" if n in touched else "#444") if inner else "#222"
                for n, inner in zip(names, inside, strict=True)
            ],
        },
        "marker": {
            "size": [big if n in touched else small for n in names],
            "color": ["#333" if n in touched else "#e4e4e4" for n in names],
            "opacity": 1.0,
            "line": {"width": 1, "color": "#999"},
            "symbol": [
                "square" if "MLP" in n else "diamond" if n.startswith("cross.") else "circle"
                for n in names
            ],
        },
        "customdata": names,  # what a click picks (ui/js/circuits.js)
        "cliponaxis": False,  # the embeddings' and the logits' names reach into the margins
        "hovertext": [
            safe(f"{n} · {opens}") if HEAD.search(n) else safe(_hover_name(n)) for n in names
        ],
        "hovertemplate": "%{hovertext}<extra></extra>",
        "showlegend": False,
    }


def _text_at(name: str, inside: bool, deep: bool) -> str:
    """Where a node's name stands: inside it, left of the embeddings, right of the logits (no
    line reaches those sides), above a deep graph's head, below an MLP."""
    if inside:
        return "middle center"
    short = name.rpartition(".")[2]
    if short == "embed" and not name.startswith("decoder."):
        return "middle left"
    if short == "logits":
        return "middle right"
    return "bottom center" if "MLP" in name else "top center"


def _stack_names(config, stacked: bool = False) -> list[dict]:
    """An encoder-decoder's stacks named over their columns (none for a model of one stack)."""
    stacks = _stacks(config)
    if len(stacks) == 1:
        return []
    words = {
        "encoder.": tr("encoder"),
        "decoder.": tr("decoder (◆ cross-attention heads)"),
    }
    found = []
    for name, x0, crossed in stacks:
        width = (3.0 if crossed else 2.0) * config.n_layers + 1
        x0 = 0.0 if stacked else x0
        rise = STACKED_GAP + config.n_heads if stacked and name == "encoder." else 0.0
        found.append(
            {
                "text": safe(words[name]),
                "x": x0 + width / 2,
                "y": config.n_heads - 0.2 + rise,
                "xref": "x",
                "yref": "y",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 13},
            }
        )
    return found


def _stacked(kept, config, traces: list[dict], height: int) -> dict:
    """A phone's layout of an encoder-decoder's graph (``layout.meta.narrow``, viz.fit): the
    encoder's row above the decoder's, every line and node moved there; one row of both
    stacks is twice a one-stack model's width, too narrow a unit for a label on a phone."""
    n_heads, n_kv = config.n_heads, getattr(config, "kv_heads", config.n_heads) or config.n_heads
    changes = {}
    for i, (source, target) in enumerate(zip(kept["source"], kept["target"], strict=True)):
        node, kind = _target_node(str(target), n_heads, n_kv)
        xs, ys = _line(str(source), node, kind, config, stacked=True)
        changes[str(i)] = {"x": xs, "y": ys}
    places = [_node_place(n, config, True) for n in traces[-1]["customdata"]]
    changes[str(len(traces) - 1)] = {"x": [x for x, _ in places], "y": [y for _, y in places]}
    right = max(x for x, _ in places)
    top = 2 * n_heads + STACKED_GAP + 0.6
    layout = {
        "height": height,
        "xaxis.range": [LEFT_ROOM, right + RIGHT_ROOM],
        "yaxis.range": [MLP_ROW - 0.6, top],
    }
    notes = _stack_names(config, stacked=True) + _ports(kept, config, stacked=True)
    for i, note in enumerate(notes):
        layout.update({f"annotations[{i}].x": note["x"], f"annotations[{i}].y": note["y"]})
    return {"below": STACK_BELOW, "layout": layout, "traces": changes}


def circuit_figure(
    kept, config, faithfulness: float, total: int, share: float = 1.0, n_kept: int | None = None
):
    """The ``kept`` edges (rows source, target, score, strongest first) between the model's nodes:
    a line's width follows |score|, its colour the kind of input it feeds, dotted where the score
    is negative (the edge pushes toward the corrupt answer). ``share``: the part of the tab's
    width its column takes on a wide page (``layout.meta.share``, read by viz.screen.lay_out);
    ``n_kept``: the circuit's size when it keeps more edges than are drawn."""
    traces, touched = _edge_traces(kept, config)
    traces.append(_sign_key())
    traces.append(_node_trace(config, touched))  # last: ui/js/circuits.js reads its names
    n_heads = config.n_heads
    right = _node_place("logits", config)[0]
    n_kept = len(kept) if n_kept is None else n_kept  # the circuit's edges; ``kept`` is drawn
    heading = tr("The circuit: the {n} strongest of {total} edges", n=len(kept), total=total)
    if n_kept > len(kept):  # more edges kept than a graph can show: say both, never one
        heading = tr(
            "The circuit of {n} edges (of {total}): its {shown} strongest drawn",
            n=n_kept,
            total=total,
            shown=len(kept),
        )
    title = _title(
        heading,
        tr(
            "faithfulness {share:.2f}: the share of the answer these edges alone restore "
            "(every other edge carries the corrupt run)",
            share=faithfulness,
        ),  # fmt: skip
    )
    layout = _layout(title, min(760, 260 + 48 * n_heads))
    layout["margin"] = {"l": 10, "r": 10, "t": 80, "b": 30}
    # room left of the embeddings for their name ("embeddings" is 75 px wide at 12 px, beside a
    # node of 34: a phone's graph is about 30 px a unit) and right of the logits for theirs
    layout["xaxis"] = {"visible": False, "range": [LEFT_ROOM, right + RIGHT_ROOM]}
    names = _stack_names(config)  # an encoder-decoder's: a row above the heads
    top = n_heads + (0.6 if names else -0.2)
    layout["yaxis"] = {"visible": False, "range": [MLP_ROW - 0.6, top]}
    layout["legend"] = {"orientation": "h", "y": -0.02, "yanchor": "top"}
    layout["meta"] = {"share": share}
    layout["annotations"] = names + _ports(kept, config)  # the stacks' names first
    narrow = {"below": STACK_BELOW, "layout": {}, "traces": {}}
    if config.n_layers > BIG_LAYERS and not names:  # a deep model's: its names over the lines
        deep, on_phone = _deep_names(config, touched)
        first = len(layout["annotations"])
        layout["annotations"] += deep
        for i, keep in enumerate(on_phone):
            if not keep:
                narrow["layout"][f"annotations[{first + i}].visible"] = False
        for i, note in enumerate(layout["annotations"][:first]):  # a phone: colours name them
            if PORT.fullmatch(str(note.get("text"))):
                narrow["layout"][f"annotations[{i}].visible"] = False
    if names:
        tall = min(900, 260 + 48 * (2 * n_heads + STACKED_GAP))
        narrow = _stacked(kept, config, traces, tall)
    if config.n_layers <= BIG_LAYERS:
        _phone_nodes(narrow, traces, layout["annotations"])
    layout["meta"]["narrow"] = narrow
    return figure(traces, layout)


def _phone_nodes(narrow: dict, traces: list[dict], notes: list[dict]) -> None:
    """A phone's smaller nodes (their names in a smaller font), the arrowheads and the q/k/v
    letters moved to their rims, added to the ``narrow`` layout: a head column is ~47 px from
    the next on a 390 px phone, too close for 34 px nodes and their letters."""
    nodes = traces[-1]
    last = str(len(traces) - 1)
    narrow["traces"].setdefault(last, {}).update(
        {
            "marker.size": [PHONE_NODE_PX] * len(nodes["x"]),
            "textfont.size": [8 if size == 10 else 11 for size in nodes["textfont"]["size"]],
        }
    )
    rim = PHONE_NODE_PX / 2
    for i, trace in enumerate(traces[:-1]):
        if "marker" in trace:  # a smaller arrowhead: the letter beside it clears the next column
            size = PHONE_ARROW_PX + trace["line"]["width"] / 2
            change = {"marker.standoff": rim, "marker.size": [0, 0, size]}
            narrow["traces"].setdefault(str(i), {}).update(change)
    for i, note in enumerate(notes):
        if PORT.fullmatch(str(note.get("text"))):
            narrow["layout"][f"annotations[{i}].xshift"] = -(rim + PHONE_ARROW_PX + 4)


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
    title = _title(tr("Faithfulness by circuit size"),
                   tr("1 = the edges kept restore all of the answer, 0 = none"))  # fmt: skip
    layout = _layout(title, 320)
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
    title = _title(
        tr("Composition scores from the weights — {stack}", stack=stack_title(stack)),
        tr(
            "how much an earlier head's output can move a later head's query, key or value "
            "(Elhage et al. 2021)"
        ),  # fmt: skip
    )
    layout = _layout(title, min(560, 240 + 10 * n_layers * n_heads))
    layout["margin"] = {"l": 10, "r": 10, "t": 96, "b": 10}
    layout.update(axes)
    for x, y in cells:
        layout[f"yaxis{y[1:]}"].update(autorange="reversed")
        layout[f"xaxis{x[1:]}"].update(tickangle=-90)
    return figure(traces, layout)
