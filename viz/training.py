"""A live training run as the page shows it: the loss curve beside one head's attention map.

Pure: a train.Progress in, a Plotly figure or a sentence out (no Gradio, no model).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from lang import tr
from train.progress import not_reached, toward_lesson
from viz.common import ATTENTION_SCALE, figure, grid, heatmap, layout_of, safe, token_labels

SMOOTH = 20  # steps in the loss curve's moving mean
BAR = 24  # cells of the progress bar


def progress_bar(progress) -> str:
    """The share of its steps done, as a bar and a percentage: "▰▰▰▱▱▱ 50 %" (a stopped run's
    bar stays where it stopped; one that reached its lesson before its last step is full)."""
    if progress.done and progress.ended == "lesson":
        share = 1.0
    elif progress.steps > 0:
        share = progress.step / progress.steps
    else:  # a report that names no steps: its share of the time cap
        share = progress.elapsed / progress.seconds if progress.seconds > 0 else 0.0
    share = min(max(share, 0.0), 1.0)
    filled = round(share * BAR)
    return "▰" * filled + "▱" * (BAR - filled) + f" {share:.0%}"


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
    """Where a run stands, as one sentence in the page's language: its step, its loss and how
    far its held-out score is from the lesson; at the end, why it missed the lesson if it did."""
    fields = {"name": progress.name, "step": f"{progress.step:,}"}
    fields.update(steps=f"{progress.steps:,}", elapsed=f"{progress.elapsed:.0f}")
    fields["loss"] = (
        tr("loss {loss}", loss=f"{smoothed(progress.losses)[-1]:.3f}")
        if progress.losses
        else tr("no step yet")
    )
    fields["score"] = toward_lesson(progress)
    if not progress.positions:
        fields["name"] = tr("{name} without positional encoding", name=progress.name)
    if progress.done:
        said = tr("Done: {name}, step {step} of {steps}, {elapsed} s; {loss}; {score}.", **fields)
        missed = not_reached(progress)
        return f"{said} {missed}" if missed else said
    return tr("Training: {name}, step {step} of {steps}, {elapsed} s; {loss}; {score}.", **fields)


def progress_figure(progress) -> go.Figure:
    """Left: the training loss (each step faint, its moving mean bold); right: the chosen head's
    attention on the probe text, layer and head in its title."""
    head = tr(
        "{stack} layer {layer}, head {head} on the probe text",
        stack=tr(progress.stack),
        layer=progress.layer,
        head=progress.head,
    )
    titles = [tr("training loss"), safe(head)]
    layout, ((x1, y1), (x2, y2)) = grid(1, 2, titles=titles)
    steps = np.arange(1, len(progress.losses) + 1)
    mean = tr("mean of {n} steps", n=SMOOTH)
    attention = heatmap(
        progress.attention.detach().cpu().float().numpy(),
        token_labels(progress.keys),
        token_labels(progress.queries),
        x_title=tr("key"),
        y_title=tr("query"),
        value_name=tr("weight"),
        colorscale=ATTENTION_SCALE,
        zmin=0.0,
        zmax=1.0,
    )
    data = [
        {"type": "scatter", "x": steps, "y": progress.losses, "mode": "lines",
         "name": tr("loss"), "opacity": 0.3, "xaxis": x1, "yaxis": y1},
        {"type": "scatter", "x": steps, "y": smoothed(progress.losses), "mode": "lines",
         "name": mean, "xaxis": x1, "yaxis": y1},
        {**attention, "xaxis": x2, "yaxis": y2},
    ]  # fmt: skip
    layout["xaxis"]["title"] = {"text": tr("step")}
    layout["yaxis"]["title"] = {"text": tr("loss")}
    layout["xaxis2"].update(type="category", tickangle=-60)
    layout["yaxis2"].update(type="category", autorange="reversed")
    layout.update(layout_of(safe(progress_sentence(progress)), 420))
    layout.update(meta={"narrow": NARROW}, showlegend=False)  # a phone stacks the panels
    return figure(data, layout)


# The loss above the head's map when the figure is drawn narrower than `below` px: side by side
# on a phone, the two panels' titles printed over each other and the map's labels ran into the
# loss axis. The map's colour bar follows it to the lower half.
NARROW = {
    "below": 560,
    "layout": {
        "height": 780,
        "xaxis.domain": [0, 1],
        "yaxis.domain": [0.64, 0.93],
        "xaxis2.domain": [0, 0.9],
        "yaxis2.domain": [0, 0.48],
        # the panel titles at the left, small: each above its own panel, never cut
        **{f"annotations[{i}].{k}": v for i in (0, 1) for k, v in (("x", 0), ("xanchor", "left"))},
        **{f"annotations[{i}].font.size": 12 for i in (0, 1)},
        "annotations[0].y": 0.93,
        "annotations[1].y": 0.48,
    },
    "traces": {2: {"colorbar.len": 0.46, "colorbar.y": 0.24, "colorbar.yanchor": "middle"}},
}
