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

Words are in the page's language (lang.LOCALE): English or 简体中文, kept here beside each other
(the page may move them into ui/zh_CN_server.json when it shows these figures).
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import torch

from lang import LOCALE
from viz.common import (
    ATTENTION_SCALE,
    DIVERGING_SCALE,
    base_layout,
    compact,
    heatmap,
    safe,
    token_labels,
)

FOLD_AT = 384  # a vector this wide or wider is folded into a rectangle
TOP_NEURONS = 20  # bars of the FFN step
HIGHLIGHT = "#dc2626"  # the outline of the token's row
SCORE_STEPS = ("scores", "masked scores", "attention weights")
NAMES_ZH = {
    "input": "输入",
    "LayerNorm before self-attention": "自注意力前的 LayerNorm",
    "self-attention output": "自注意力输出",
    "self-attention residual": "自注意力残差",
    "LayerNorm after self-attention": "自注意力后的 LayerNorm",
    "LayerNorm before attention": "注意力前的 LayerNorm",
    "RMSNorm before attention": "注意力前的 RMSNorm",
    "Q": "Q",
    "K": "K",
    "V": "V",
    "Q heads": "Q 分头",
    "K heads": "K 分头",
    "V heads": "V 分头",
    "RoPE on Q": "对 Q 做 RoPE",
    "RoPE on K": "对 K 做 RoPE",
    "K heads repeated": "K 头复制（GQA）",
    "V heads repeated": "V 头复制（GQA）",
    "scores": "注意力分数",
    "masked scores": "掩码后的分数",
    "attention weights": "注意力权重",
    "context": "各头的加权和",
    "concat": "拼接各头",
    "attention output": "注意力输出",
    "attention residual": "注意力残差",
    "LayerNorm after attention": "注意力后的 LayerNorm",
    "LayerNorm before cross-attention": "交叉注意力前的 LayerNorm",
    "cross-attention output": "交叉注意力输出",
    "cross-attention residual": "交叉注意力残差",
    "LayerNorm after cross-attention": "交叉注意力后的 LayerNorm",
    "LayerNorm before FFN": "前馈网络前的 LayerNorm",
    "RMSNorm before FFN": "前馈网络前的 RMSNorm",
    "FFN gate": "前馈网络的门",
    "FFN up": "前馈网络的上投影",
    "FFN hidden": "前馈网络隐藏层",
    "FFN output": "前馈网络输出",
    "FFN residual": "前馈网络残差",
    "LayerNorm after FFN": "前馈网络后的 LayerNorm",
    "output": "输出",
}


def say(en: str, zh: str) -> str:
    """The page's language: zh in 简体中文, else en."""
    return zh if LOCALE.get() == "zh-CN" else en


def step_name(name: str) -> str:
    """A step's name in the page's language."""
    return say(name, NAMES_ZH.get(name, name))


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


def _scale(step) -> dict:
    """Colours: attention weights in [0, 1], anything signed diverging around 0."""
    if step.name == "attention weights":
        return {"colorscale": ATTENTION_SCALE, "zmin": 0.0, "zmax": 1.0}
    return {"colorscale": DIVERGING_SCALE, "zmid": 0.0}


def _rows_heatmap(step, values, labels, token, title, dim_name) -> go.Figure:
    """[N, d] heatmap, one row per token, the token's row outlined."""
    n, d = values.shape
    trace = heatmap(
        values,
        list(range(d)),
        labels,
        x_title=dim_name,
        y_title=say("token", "词元"),
        value_name=say("value", "数值"),
        **_scale(step),
    )
    fig = go.Figure(trace)
    fig.update_layout(shapes=[_outline(token, d)] if 0 <= token < n else [])
    fig.update_xaxes(title_text=dim_name)
    fig.update_yaxes(type="category", autorange="reversed")
    base_layout(fig, title, min(120 + 18 * n, 520))
    return compact(fig)


def vector_figure(step, tokens: list[str], token: int) -> go.Figure:
    """A [T, d] step: the heatmap with the token's row outlined, or (d ≥ FOLD_AT) the token's
    vector folded into a rectangle."""
    values = _values(step)  # (T, d)
    labels = token_labels(tokens)
    d = values.shape[1]
    if d < FOLD_AT:
        what = say(f"[T, {d}], its row outlined", f"[T, {d}]，框出该词元的行")
        title = _title(step, labels[token], what)
        dim_name = step.shape.strip("[]").split(", ")[-1]  # d_model or d_ff
        return _rows_heatmap(step, values, labels, token, title, dim_name)
    folded, index = fold(values[token])
    rows, width = folded.shape
    what = say(
        f"its {d} dimensions folded into {rows} × {width} (dimension = row · {width} + column)",
        f"{d} 维向量折叠成 {rows} × {width}（维度 = 行 · {width} + 列）",
    )
    trace = go.Heatmap(
        z=folded,
        customdata=index,
        showscale=True,
        hovertemplate=say("dim", "维度") + " %{customdata}: %{z:.3f}<extra></extra>",
        **_scale(step),
    )
    fig = go.Figure(trace)
    fig.update_yaxes(autorange="reversed", showticklabels=False, showgrid=False, zeroline=False)
    fig.update_xaxes(showticklabels=False, scaleanchor="y", showgrid=False, zeroline=False)
    base_layout(fig, _title(step, labels[token], what), 120 + 14 * rows)
    return compact(fig)


def head_figure(step, tokens: list[str], token: int, head: int = 0, group: int = 1) -> go.Figure:
    """An [H, N, d_k] step: head ``head``'s [N, d_k] heatmap, the token's row outlined (rows are
    the tokens the step is about: the keys' for K and V heads of cross-attention). A step of
    grouped-query attention's H_kv key/value heads ([H_kv, N, d_k]) shows the one query head
    ``head`` reads: head // group, ``group`` query heads sharing each."""
    values = _values(step)  # (H, N, d_k) or (H_kv, N, d_k)
    shared = step.shape.startswith("[H_kv")
    n = values.shape[0] * (group if shared else 1)
    if not 0 <= head < n:
        raise ValueError(f"head {head} is out of range: this step has {n} heads.")
    labels = token_labels(tokens)
    what = say(f"head {head}, [{len(tokens)}, d_k]", f"第 {head} 个头，[{len(tokens)}, d_k]")
    if shared:
        kv, first = head // group, head // group * group
        span = f"{first}–{first + group - 1}"
        what = say(
            f"key/value head {kv}, shared by query heads {span}, [{len(tokens)}, d_k]",
            f"第 {kv} 个键/值头，由查询头 {span} 共用，[{len(tokens)}, d_k]",
        )
        head = kv
    label = labels[token] if 0 <= token < len(labels) else ""
    return _rows_heatmap(step, values[head], labels, token, _title(step, label, what), "d_k")


def scores_figure(step, tokens: list[str], token: int, key_tokens: list[str] | None = None):
    """An [H, T, S] step: the token's row in every head, [H, S]; hidden scores left blank."""
    values = _values(step)[:, token]  # (H, S)
    hidden = ~np.isfinite(values)
    values = np.where(hidden, np.nan, values).astype(np.float32)
    keys = token_labels(key_tokens if key_tokens is not None else tokens)
    n_heads = values.shape[0]
    what = say(f"its row in each of {n_heads} heads", f"它在 {n_heads} 个头中的那一行")
    if hidden.any():
        what += say(", hidden (-inf) left blank", "，被屏蔽的（-inf）留白")
    trace = heatmap(
        values,
        keys,
        [say(f"head {h}", f"头 {h}") for h in range(n_heads)],
        x_title=say("key", "键"),
        y_title=say("head", "头"),
        value_name=step_name(step.name),
        **_scale(step),
    )
    fig = go.Figure(trace)
    fig.update_xaxes(type="category", tickangle=-60)
    fig.update_yaxes(type="category", autorange="reversed")
    base_layout(fig, _title(step, token_labels(tokens)[token], what), 160 + 22 * n_heads)
    return compact(fig)


def neurons_figure(step, tokens: list[str], token: int, k: int = TOP_NEURONS) -> go.Figure:
    """ "FFN hidden": the token's k most active neurons (of d_ff), the largest first."""
    hidden = _values(step)[token]  # (d_ff,)
    index, values = top_neurons(hidden, k)
    what = say(
        f"its {len(index)} most active of {hidden.shape[0]} neurons",
        f"{hidden.shape[0]} 个神经元中最活跃的 {len(index)} 个",
    )
    trace = go.Bar(
        x=[f"#{i}" for i in index],
        y=values.astype(np.float32),
        marker={"color": "#2563eb"},
        hovertemplate=say("neuron", "神经元") + " %{x}: %{y:.3f}<extra></extra>",
    )
    fig = go.Figure(trace)
    fig.update_xaxes(type="category", title_text=say("neuron", "神经元"))
    fig.update_yaxes(title_text=say("activation", "激活值"))
    base_layout(fig, _title(step, token_labels(tokens)[token], what), 300)
    return compact(fig)


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
    if not 0 <= token < len(tokens):
        raise ValueError(f"token {token} is out of range: this text has {len(tokens)} tokens.")
    if step.name in SCORE_STEPS:
        return scores_figure(step, tokens, token, key_tokens)
    if step.name == "FFN hidden":
        return neurons_figure(step, tokens, token)
    if step.value.dim() == 3:
        rows = tokens
        if step.name in ("K heads", "V heads") and key_tokens is not None:
            rows, token = key_tokens, -1  # the keys' rows: no query row to outline
        return head_figure(step, rows, token, head, group)
    return vector_figure(step, tokens, token)
