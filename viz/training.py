"""A live training run as the page shows it: the loss curve beside one head's attention map.

Pure: a train.Progress in, a Plotly figure or a sentence out (no Gradio, no model).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.common import ATTENTION_SCALE, base_layout, heatmap, safe, token_labels

SMOOTH = 20  # steps in the loss curve's moving mean


def smoothed(losses: list[float], window: int = SMOOTH) -> np.ndarray:
    """Moving mean of the last `window` steps at every step (shorter at the start)."""
    values = np.asarray(losses, dtype=np.float64)
    if values.size == 0:
        return values
    sums = np.cumsum(np.concatenate([[0.0], values]))
    ends = np.arange(1, values.size + 1)
    starts = np.maximum(0, ends - window)
    return (sums[ends] - sums[starts]) / (ends - starts)


def progress_sentence(progress) -> str:
    """Where a run stands, as one sentence."""
    state = "Done" if progress.done else "Training"
    score = (
        "no held-out score yet"
        if progress.score is None
        else f"{progress.score_name}: {progress.score:.0%}"
    )
    loss = f"loss {smoothed(progress.losses)[-1]:.3f}" if progress.losses else "no step yet"
    return (
        f"{state}: {progress.name}, step {progress.step:,}, {progress.elapsed:.0f} s of "
        f"{progress.seconds:.0f}; {loss}; {score}."
    )


def progress_figure(progress) -> go.Figure:
    """Left: the training loss (each step faint, its moving mean bold); right: the chosen head's
    attention on the probe text, layer and head in its title."""
    head = f"{progress.stack} layer {progress.layer}, head {progress.head} on the probe text"
    fig = make_subplots(
        rows=1, cols=2, column_widths=[0.5, 0.5], subplot_titles=("training loss", safe(head))
    )
    steps = np.arange(1, len(progress.losses) + 1)
    fig.add_trace(
        go.Scatter(x=steps, y=progress.losses, mode="lines", name="loss", opacity=0.3),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=steps, y=smoothed(progress.losses), mode="lines", name=f"mean of {SMOOTH}"),
        row=1,
        col=1,
    )
    fig.add_trace(
        heatmap(
            progress.attention.detach().cpu().float().numpy(),
            token_labels(progress.keys),
            token_labels(progress.queries),
            x_title="key",
            y_title="query",
            value_name="weight",
            colorscale=ATTENTION_SCALE,
            zmin=0.0,
            zmax=1.0,
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title="step", row=1, col=1)
    fig.update_yaxes(title="loss", row=1, col=1)
    fig.update_xaxes(type="category", tickangle=-60, row=1, col=2)
    fig.update_yaxes(type="category", autorange="reversed", row=1, col=2)
    return base_layout(fig, safe(progress_sentence(progress)), 420, showlegend=False)
