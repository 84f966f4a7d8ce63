"""One step of a layer, for one token, as a small figure (pure functions: no Gradio).

The steps are analysis.layer_steps' (docs/layer-steps.md); each figure reads one ``Step`` and the
text's tokens:

- a vector step ([T, d_model], [T, d_ff]): the [T, d] heatmap with the token's row outlined; a
  vector of FOLD_AT dimensions or more is drawn as the token's vector alone, folded row by row
  into a rectangle (the title says so and how: dimension = row · width + column);
- a per-head step ([H, T, d_k]): one head's [T, d_k] heatmap, the token's row outlined
  (grouped-query attention's [H_kv, T, d_k] steps: the key/value head the chosen head reads);
- a score step ([H, T, S]: scores, masked scores, attention weights): the token's row in every
  head, [H, S]; a hidden score (-inf) is left blank and the title says so;
- "FFN hidden": the token's TOP_NEURONS most active neurons as a bar chart.

A text longer than WINDOW tokens shows WINDOW rows of a [T, …] heatmap, around the token, and
the title says which. Each figure is built as a plain Plotly dict (``step_spec``: no Plotly
objects, a fraction of a millisecond), so the page can be sent every step of a layer for one
token at once (``switch_data``) and switch steps in the browser (ui/js/layer_switch.js), each
the figure the server draws for that step (``step_figure``).

Words are in the page's language (lang.tr): the English is written here, the Chinese is in
ui/zh_CN.json with every other word of ours.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch

from lang import tr
from viz.common import (
    ATTENTION_SCALE,
    DIVERGING_SCALE,
    colorscale,
    figure,
    layout_of,
    safe,
    token_labels,
    typed_arrays,
)
from viz.fit import fixed_margins

FOLD_AT = 384  # a vector this wide or wider is folded into a rectangle
TOP_NEURONS = 20  # bars of the FFN step
HIGHLIGHT = "#dc2626"  # the outline of the token's row
WINDOW = 64  # rows of a [T, …] heatmap: a longer text shows this many around the token
SCORE_STEPS = ("scores", "masked scores", "attention weights")


def step_name(name: str) -> str:
    """A step's name in the page's language."""
    return tr(name)


def fold_shape(d: int) -> tuple[int, int]:
    """(rows, width) of a rectangle for a d-dimensional vector: width the smallest divisor of d
    from √d to 2√d (384 → 16 × 24, 1536 → 32 × 48), else ⌈√d⌉ with the last row part-filled."""
    root = math.sqrt(d)
    for width in range(math.ceil(root), int(2 * root) + 1):
        if d % width == 0:
            return d // width, width
    width = math.ceil(root)
    return math.ceil(d / width), width


def fold(vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values [rows, width], dimension index [rows, width]) of a vector folded row by row; the
    cells past its end are NaN (blank) with index -1."""
    d = vector.shape[0]
    rows, width = fold_shape(d)
    values = np.full(rows * width, np.nan, dtype=np.float32)
    values[:d] = vector
    index = np.full(rows * width, -1, dtype=np.int64)
    index[:d] = np.arange(d)
    return values.reshape(rows, width), index.reshape(rows, width)


def top_neurons(hidden: np.ndarray, k: int = TOP_NEURONS) -> tuple[np.ndarray, np.ndarray]:
    """(neuron indices, values) of the k largest values of one token's FFN hidden vector, the
    largest first (ties: the lower index first)."""
    order = np.argsort(-hidden, kind="stable")[:k]
    return order, hidden[order]


def _values(step) -> np.ndarray:
    return step.value.detach().to(torch.float32).cpu().numpy()


def _title(step, token_label: str, what: str) -> str:
    return f"{safe(step_name(step.name))} · {token_label} · {what}"


def window(n: int, token: int, size: int = WINDOW) -> tuple[int, int]:
    """[start, stop) of the rows shown of n: all of them up to ``size``, else ``size`` rows with
    the token in the middle (moved inside the text at its ends); token -1: the first rows."""
    if n <= size:
        return 0, n
    start = min(max(token - size // 2, 0), n - size)
    return start, start + size


def _outline(row: int, n_cols: int) -> dict:
    """A rectangle around one row of a heatmap (categorical rows sit at 0, 1, …)."""
    return {
        "type": "rect",
        "xref": "x",
        "yref": "y",
        "x0": -0.5,
        "x1": n_cols - 0.5,
        "y0": row - 0.5,
        "y1": row + 0.5,
        "line": {"color": HIGHLIGHT, "width": 2},
        "fillcolor": "rgba(0,0,0,0)",
    }


# The colour scales as [position, colour] stops, as plotly.py writes a named one into a figure
# (Plotly.js knows "Blues" but not plotly.py's reversed names such as "RdBu_r"): the browser's
# step switch draws these specs without plotly.py.
SCALES = {name: colorscale(name) for name in (ATTENTION_SCALE, DIVERGING_SCALE)}


def _scale(step) -> dict:
    """Colours: attention weights in [0, 1], anything signed diverging around 0."""
    if step.name == "attention weights":
        return {"colorscale": SCALES[ATTENTION_SCALE], "zmin": 0.0, "zmax": 1.0}
    return {"colorscale": SCALES[DIVERGING_SCALE], "zmid": 0.0}


def _heatmap(z, x, y, x_title: str, y_title: str, value: str, **colours) -> dict:
    """viz.common.heatmap's trace as a dict: hover "<y_title> <y><br><x_title> <x><br><value>",
    ``value`` the cell's name and its number (``%{z:.3f}``)."""
    return {
        "type": "heatmap",
        "z": np.asarray(z, dtype=np.float32),
        "x": x,
        "y": y,
        "showscale": True,
        "hovertemplate": (
            f"{safe(y_title)} %{{y}}<br>{safe(x_title)} %{{x}}<br>{safe(value)}<extra></extra>"
        ),
        **colours,
    }


def _spec(trace: dict, title: str, height: int, x: dict, y: dict, shapes=()) -> dict:
    """One figure as a dict: viz.common.layout_of's look, and margins sized to the tick labels
    by viz.fit.fixed_margins (so finishing the figure for the page changes nothing)."""
    layout = {**layout_of(title, height), "xaxis": x, "yaxis": y}
    if shapes:
        layout["shapes"] = list(shapes)
    return fixed_margins({"data": [trace], "layout": layout})


def _shown(n: int, start: int, stop: int) -> str:
    """What a windowed heatmap says it shows: "" when all rows are."""
    if stop - start == n:
        return ""
    return tr(", rows {start}–{last} of {n}", start=start, last=stop - 1, n=n)


def _rows_spec(step, values, labels, token, title, dim_name) -> dict:
    """[N, d] heatmap, one row per token (WINDOW of them around the token at most), the token's
    row outlined."""
    n, d = values.shape
    start, stop = window(n, token)
    shown = stop - start
    trace = _heatmap(
        values[start:stop],
        list(range(d)),
        labels[start:stop],
        dim_name,
        tr("token"),
        tr("value {z}", z="%{z:.3f}"),
        **_scale(step),
    )
    row = token - start
    shapes = [_outline(row, d)] if 0 <= token < n else []
    x = {"title": {"text": dim_name}}
    y = {"type": "category", "autorange": "reversed", "title": {"text": tr("token")}}
    return _spec(trace, title + _shown(n, start, stop), min(120 + 18 * shown, 520), x, y, shapes)


def _vector_spec(step, tokens: list[str], token: int) -> dict:
    values = _values(step)  # (T, d)
    labels = token_labels(tokens)
    d = values.shape[1]
    if d < FOLD_AT:
        what = tr("[T, {d}], its row outlined", d=d)
        title = _title(step, labels[token], what)
        dim_name = step.shape.strip("[]").split(", ")[-1]  # d_model or d_ff
        return _rows_spec(step, values, labels, token, title, dim_name)
    folded, index = fold(values[token])
    rows, width = folded.shape
    what = tr(
        "its {d} dimensions folded into {rows} × {width} (dimension = row · {width} + column)",
        d=d,
        rows=rows,
        width=width,
    )
    trace = {
        "type": "heatmap",
        "z": folded,
        "customdata": index.astype(np.int32),
        "showscale": True,
        "hovertemplate": tr("dim") + " %{customdata}: %{z:.3f}<extra></extra>",
        **_scale(step),
    }
    bare = {"showticklabels": False, "showgrid": False, "zeroline": False}
    x = {**bare, "scaleanchor": "y"}
    y = {**bare, "autorange": "reversed"}
    return _spec(trace, _title(step, labels[token], what), 120 + 14 * rows, x, y)


def _head_spec(step, tokens: list[str], token: int, head: int = 0, group: int = 1) -> dict:
    values = _values(step)  # (H, N, d_k) or (H_kv, N, d_k)
    shared = step.shape.startswith("[H_kv")
    n = values.shape[0] * (group if shared else 1)
    if not 0 <= head < n:
        raise ValueError(f"head {head} is out of range: this step has {n} heads.")
    labels = token_labels(tokens)
    what = tr("head {head}, [{n}, d_k]", head=head, n=len(tokens))
    if shared:
        kv, first = head // group, head // group * group
        span = f"{first}–{first + group - 1}"
        what = tr(
            "key/value head {kv}, shared by query heads {span}, [{n}, d_k]",
            kv=kv,
            span=span,
            n=len(tokens),
        )
        head = kv
    label = labels[token] if 0 <= token < len(labels) else ""
    return _rows_spec(step, values[head], labels, token, _title(step, label, what), "d_k")


def _scores_spec(step, tokens: list[str], token: int, key_tokens=None) -> dict:
    values = _values(step)[:, token]  # (H, S)
    hidden = ~np.isfinite(values)
    values = np.where(hidden, np.nan, values).astype(np.float32)
    keys = token_labels(key_tokens if key_tokens is not None else tokens)
    n_heads = values.shape[0]
    what = tr("its row in each of {n} heads", n=n_heads)
    if hidden.any():
        what += tr(", hidden (-inf) left blank")
    trace = _heatmap(
        values,
        keys,
        [tr("head {h}", h=h) for h in range(n_heads)],
        tr("key"),
        tr("head"),
        f"{step_name(step.name)} %{{z:.3f}}",
        **_scale(step),
    )
    x = {"type": "category", "tickangle": -60}
    y = {"type": "category", "autorange": "reversed"}
    title = _title(step, token_labels(tokens)[token], what)
    return _spec(trace, title, 160 + 22 * n_heads, x, y)


def _neurons_spec(step, tokens: list[str], token: int, k: int = TOP_NEURONS) -> dict:
    hidden = _values(step)[token]  # (d_ff,)
    index, values = top_neurons(hidden, k)
    what = tr("its {k} most active of {n} neurons", k=len(index), n=hidden.shape[0])
    trace = {
        "type": "bar",
        "x": [f"#{i}" for i in index],
        "y": values.astype(np.float32),
        "marker": {"color": "#2563eb"},
        "hovertemplate": tr("neuron") + " %{x}: %{y:.3f}<extra></extra>",
    }
    x = {"type": "category", "title": {"text": tr("neuron")}}
    y = {"title": {"text": tr("activation")}}
    return _spec(trace, _title(step, token_labels(tokens)[token], what), 300, x, y)


def step_spec(
    step,
    tokens: list[str],
    token: int = 0,
    head: int = 0,
    key_tokens: list[str] | None = None,
    group: int = 1,
) -> dict:
    """The figure of one step for one token as a plain Plotly dict {"data", "layout"} (numpy
    arrays inside; no template: the page's, viz.common.TEMPLATE). Arguments as step_figure."""
    if not 0 <= token < len(tokens):
        raise ValueError(f"token {token} is out of range: this text has {len(tokens)} tokens.")
    if step.name in SCORE_STEPS:
        return _scores_spec(step, tokens, token, key_tokens)
    if step.name == "FFN hidden":
        return _neurons_spec(step, tokens, token)
    if step.value.dim() == 3:
        rows = tokens
        if step.name in ("K heads", "V heads") and key_tokens is not None:
            rows, token = key_tokens, -1  # the keys' rows: no query row to outline
        return _head_spec(step, rows, token, head, group)
    return _vector_spec(step, tokens, token)


def _figure(spec: dict) -> go.Figure:
    return figure(spec["data"], spec["layout"])


def vector_figure(step, tokens: list[str], token: int) -> go.Figure:
    """A [T, d] step: the heatmap with the token's row outlined, or (d ≥ FOLD_AT) the token's
    vector folded into a rectangle."""
    return _figure(_vector_spec(step, tokens, token))


def head_figure(step, tokens: list[str], token: int, head: int = 0, group: int = 1) -> go.Figure:
    """An [H, N, d_k] step: head ``head``'s [N, d_k] heatmap, the token's row outlined (rows are
    the tokens the step is about: the keys' for K and V heads of cross-attention). A step of
    grouped-query attention's H_kv key/value heads ([H_kv, N, d_k]) shows the one query head
    ``head`` reads: head // group, ``group`` query heads sharing each."""
    return _figure(_head_spec(step, tokens, token, head, group))


def scores_figure(step, tokens: list[str], token: int, key_tokens: list[str] | None = None):
    """An [H, T, S] step: the token's row in every head, [H, S]; hidden scores left blank."""
    return _figure(_scores_spec(step, tokens, token, key_tokens))


def neurons_figure(step, tokens: list[str], token: int, k: int = TOP_NEURONS) -> go.Figure:
    """ "FFN hidden": the token's k most active neurons (of d_ff), the largest first."""
    return _figure(_neurons_spec(step, tokens, token, k))


def step_figure(
    step,
    tokens: list[str],
    token: int = 0,
    head: int = 0,
    key_tokens: list[str] | None = None,
    group: int = 1,
) -> go.Figure:
    """The figure of one step for one token (see the module doc for which figure).

    Args:
        step: an analysis.layer_steps.Step.
        tokens: the text's real tokens (the queries: the step's T rows).
        token: the token's position among them (0-based).
        head: the head of a per-head step.
        key_tokens: the keys' tokens when they are not ``tokens`` (cross-attention's source).
        group: query heads per key/value head (grouped-query attention; 1 without it).
    """
    return _figure(step_spec(step, tokens, token, head, key_tokens, group))


# ---- every step at once, for the browser's step switch -----------------------------------------
def switch_data(
    steps,
    tokens: list[str],
    token: int = 0,
    head: int = 0,
    key_tokens: list[str] | None = None,
    group: int = 1,
) -> list[dict]:
    """Every step's figure for one token (step_figure's) as plain JSON ({"data", "layout"}), its
    arrays as the typed arrays Plotly writes, without Plotly's object model: what the page
    needs to draw any step of the layer without asking the server, once each is finished as the
    drawn figure is, and the drawn step itself (ui/tabs/layer.py)."""
    return [typed_arrays(step_spec(s, tokens, token, head, key_tokens, group)) for s in steps]
