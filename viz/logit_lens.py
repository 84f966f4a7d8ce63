"""The logit lens as a figure: what each layer's residual stream would predict at each position.

Rows are the embedding output and each layer's output, columns the positions; a cell names the
top prediction and its probability, coloured by that probability. Where the text itself says what
comes next (the next token), the hover gives that right answer's rank and a ✓ marks the cells whose
top prediction it is. Pure: tensors, strings and a trace in, a Plotly figure out (the lens
itself is analysis.logit_lens).
"""

from __future__ import annotations

import html
import math

import numpy as np
import plotly.graph_objects as go
import torch

from lang import Msg, tr
from viz.common import (
    SEQUENTIAL_SCALE,
    display_token,
    figure,
    layout_of,
    safe,
    stack_tokens,
    token_labels,
)

# Sizes at 1920 × 1080, where a reader must read every label: a layer row is never thinner than
# ROW_PX, and a cell carries its text only where Plotly's own fitting (the largest font whose
# lines fit the cell; LINE_SPACING is Plotly's) gives it MIN_CELL_FONT px or more on a 1920 px
# page; the other cells keep their colour and hover.
TEXT_PX = 12  # the page's font: tick labels, cell text at most
ROW_PX = 24  # a row without cell text
LINE_SPACING = 1.3
PAGE_PLOT_PX = 1600  # the cells' share of a 1920 px page (its margins, layer names, colour bar)
MIN_CELL_FONT = 10
CELL_CHARS = 6  # a cell's token, shortened: its width sets every cell's font
TOP_PX = 80  # the title and the line that names the model and text


def answer_ranks(probs: torch.Tensor, answers: list[int | None]) -> np.ndarray:
    """Rank (1 = top) of each position's right answer in every row, [L+1, T]; NaN where none."""
    ranks = np.full(probs.shape[:2], np.nan, dtype=np.float32)  # (L+1, T)
    for t, answer in enumerate(answers):
        if answer is not None:
            above = (probs[:, t] > probs[:, t, answer : answer + 1]).sum(-1)  # (L+1,)
            ranks[:, t] = above.numpy() + 1
    return ranks


def next_token_answers(ids: list[int]) -> list[int | None]:
    """The right answer at each position of a text read left to right: the next token's id."""
    return [*ids[1:], None]


def lens_cells(
    probs: torch.Tensor, vocab, answers: list[int | None]
) -> tuple[np.ndarray, list[list[str]], list[list[str]]]:
    """(top probability [L+1, T], cell texts, hover texts) of a lens."""
    top_p, top_id = probs.max(dim=-1)  # (L+1, T)
    ranks = answer_ranks(probs, answers)
    right = [
        probs[:, t, a] if a is not None else torch.full(probs.shape[:1], float("nan"))
        for t, a in enumerate(answers)
    ]
    answer_p = torch.stack(right, dim=1) if right else torch.zeros(probs.shape[:2])  # (L+1, T)
    return cells_of(top_p, top_id, ranks, answer_p, vocab, answers)


def cells_of(
    top_p: torch.Tensor,
    top_id: torch.Tensor,
    ranks: np.ndarray,
    answer_p: torch.Tensor,
    vocab,
    answers: list[int | None],
) -> tuple[np.ndarray, list[list[str]], list[list[str]]]:
    """Cells of a lens from its top prediction per cell and the right answer's rank and p
    [L+1, T]; ``vocab`` maps an id to its piece (a list, or a dict of the ids shown)."""
    texts, hovers = [], []
    for row in range(top_p.shape[0]):
        text_row, hover_row = [], []
        for t in range(top_p.shape[1]):
            token = display_token(vocab[int(top_id[row, t])], 8)
            short = display_token(vocab[int(top_id[row, t])], CELL_CHARS)
            p = float(top_p[row, t])
            answer = answers[t]
            mark = ""
            hover = tr("top {token} · p {p}", token=safe(token), p=f"{p:.3f}")
            if answer is not None:
                rank = int(ranks[row, t])
                mark = " ✓" if rank == 1 else ""
                right = safe(display_token(vocab[answer], 8))
                hover += "<br>" + tr(
                    "right answer {token}: rank {rank} · p {p}",
                    token=right,
                    rank=rank,
                    p=f"{float(answer_p[row, t]):.3f}",
                )
            text_row.append(f"{safe(short)}{mark}<br>{p:.2f}")
            hover_row.append(hover)
        texts.append(text_row)
        hovers.append(hover_row)
    return top_p.numpy().astype(np.float32), texts, hovers


def logit_lens_figure(
    probs: torch.Tensor,
    tokens: list[str],
    vocab: list[str],
    answers: list[int | None] | None = None,
    title: str | None = None,
) -> go.Figure:
    """Layers × positions: the top prediction of every row of ``probs`` [L+1, T, V] and its
    probability; ``answers`` (one id or None per position) adds the right answer's rank."""
    n_rows, n_pos = probs.shape[:2]
    answers = answers if answers is not None else [None] * n_pos
    if len(tokens) != n_pos or len(answers) != n_pos:
        raise ValueError(
            Msg("The lens has {n} positions: give as many tokens and answers.", n=n_pos)
        )
    z, texts, hovers = lens_cells(probs.detach().cpu().float(), vocab, answers)
    return lens_heatmap(z, texts, hovers, tokens, title)


def lens_heatmap(
    z, texts, hovers, tokens: list[str], title: str | None = None, labels: list[str] | None = None
) -> go.Figure:
    """The lens's heatmap: rows the embeddings and each layer, columns the positions (labelled
    "position·token", or ``labels``)."""
    n_rows, n_pos = z.shape
    rows = [tr("embeddings")] + [tr("after layer {i}", i=i) for i in range(n_rows - 1)]
    x = labels if labels is not None else token_labels(tokens)
    font = cell_font(texts, n_pos)
    shown = font >= MIN_CELL_FONT
    cells = {
        "type": "heatmap",
        "z": z,
        "x": x,
        "y": rows,
        "zmin": 0.0,
        "zmax": 1.0,
        "colorscale": SEQUENTIAL_SCALE,
        "customdata": np.array(hovers, dtype=object),
        "hovertemplate": "%{y} · %{x}<br>%{customdata}<extra></extra>",
        "colorbar": {"thickness": 10, "title": {"text": tr("top p"), "side": "right"}},
    }
    if shown:
        cells.update(text=texts, texttemplate="%{text}")
    x_axis = {"type": "category", "tickangle": -60, "tickfont": {"size": TEXT_PX}}
    x_axis["title"] = {"text": tr("reading position (predicts the next token)")}
    y_axis = {"type": "category", "autorange": "reversed", "tickfont": {"size": TEXT_PX}}
    row = math.ceil(2 * LINE_SPACING * TEXT_PX) + 4 if shown else ROW_PX  # two lines a cell
    height = TOP_PX + n_rows * row + below_labels(x)
    title = tr("Logit lens: what each layer would predict next") if title is None else title
    layout = {**layout_of(safe(title), height), "xaxis": x_axis, "yaxis": y_axis}
    layout["meta"] = {"min_cell_font": MIN_CELL_FONT}  # narrower pages drop it (ui/js/figures.js)
    return figure([cells], layout)


def cell_font(texts: list[list[str]], n_pos: int, width: int = PAGE_PLOT_PX) -> int:
    """The cell font Plotly would fit into ``n_pos`` cells sharing ``width`` px, at most TEXT_PX:
    its rule, the longest line's characters (as written, entities too) at 0.65 em each."""
    longest = max((len(line) for row in texts for c in row for line in c.split("<br>")), default=1)
    return min(TEXT_PX, math.floor(width / n_pos / longest / (LINE_SPACING / 2)))


def below_labels(labels: list[str]) -> int:
    """Room under the cells for the position labels turned 60° and the axis title, in px."""
    longest = max((len(html.unescape(label)) for label in labels), default=1)
    return math.ceil(longest * 0.6 * TEXT_PX * math.sin(math.radians(60)) + 2 * TEXT_PX + 36)


def figure_for(
    probs: torch.Tensor,
    trace,
    tokenizer,
    stack: str = "decoder",
    item: int = 0,
    typed: int | None = None,
) -> go.Figure:
    """The lens ``probs`` [L+1, T, V] (analysis.logit_lens of ``trace``) of one text, drawn with
    the trace's tokens, padding cut, the next token of the stream as each position's answer —
    where the user supplied it: from position ``typed`` on the model wrote the stream itself,
    and its own token is no answer to rank."""
    tokens = stack_tokens(trace, stack, item)[0]
    answers = lens_answers(trace, stack, item, typed)
    vocab = tokenizer.convert_ids_to_tokens(list(range(probs.shape[-1])))
    return logit_lens_figure(probs[:, : len(tokens)], tokens, vocab, answers)


def top_figure(
    summary: dict, trace, tokenizer, stack: str = "decoder", item: int = 0, first: int = 0
) -> go.Figure:
    """The lens of a real vocabulary from analysis.logit_lens_top's ``summary`` (asked with
    ``lens_answers`` from position ``first`` on): the same figure as figure_for, only the pieces
    it shows converted; a lens of the last positions only says so in its title."""
    all_tokens = stack_tokens(trace, stack, item)[0]
    tokens = all_tokens[first:]
    labels = [safe(f"{first + t}·{display_token(token)}") for t, token in enumerate(tokens)]
    answers = lens_answers(trace, stack, item)[first:]
    n = len(tokens)
    top_id = summary["top_id"][:, :n, 0]  # (L+1, T)
    shown = sorted({*top_id.flatten().tolist(), *(a for a in answers if a is not None)})
    vocab = dict(zip(shown, tokenizer.convert_ids_to_tokens(shown), strict=True))
    ranks = summary["answer_rank"][:, :n].numpy()
    z, texts, hovers = cells_of(
        summary["top_p"][:, :n, 0], top_id, ranks, summary["answer_p"][:, :n], vocab, answers
    )
    title = None
    if first:
        title = tr(
            "Logit lens: what each layer would predict next — the last {n} of {total} positions",
            n=n,
            total=len(all_tokens),
        )
    return lens_heatmap(z, texts, hovers, tokens, title, labels)


def lens_answers(trace, stack: str = "decoder", item: int = 0, typed=None) -> list[int | None]:
    """The next token of the stream at each position of one text (padding cut), where the user
    supplied it: from position ``typed`` on the model wrote the stream itself."""
    tokens = stack_tokens(trace, stack, item)[0]
    ids = trace.tgt_ids if stack == "decoder" and trace.tgt_ids is not None else trace.input_ids
    answers = next_token_answers(ids[item, : len(tokens)].tolist())
    if typed is not None:
        answers = [a if t + 1 < typed else None for t, a in enumerate(answers)]
    return answers
