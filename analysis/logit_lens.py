"""The logit lens (nostalgebraist 2020): read every layer's residual stream as if it were the last.

Each row of hidden_states[stack] [B, L+1, T, d_model] (the embedding output, then each layer's
output) goes through what the model applies between its last layer and its logits: the stack's
final LayerNorm when it has one (pre-norm, seed 001), then the LM head. The last row is then
exactly the model's own output distribution; earlier rows show what the stream "would say" if the
model stopped there.
"""

from __future__ import annotations

import torch

from model.trace import Trace


def check_lens(net, trace: Trace, stack: str) -> None:
    """The model has an LM head, ``stack`` feeds it, and the trace has that stack's stream."""
    if getattr(net, "lm_head", None) is None:
        raise ValueError("This model has no LM head, so its layers predict no tokens to read.")
    feeds = net.config.last_stream
    if stack != feeds:
        raise ValueError(
            f"Only the {feeds} feeds this model's LM head; the logit lens reads the {feeds!r} "
            f"stack, not {stack!r}."
        )
    if stack not in trace.hidden_states:
        raise ValueError(f"This trace has no {stack!r} residual stream.")


def logit_lens(net, trace: Trace, stack: str = "decoder", item: int = 0) -> torch.Tensor:
    """Probabilities [L+1, T, V] of one text: row l is softmax(lm_head(final_norm(h_l))).

    Args:
        net: the model that made the trace (the lens uses its final LayerNorm and LM head).
        trace: a Trace of ``net``.
        stack: the stack whose output feeds the LM head ("decoder" for a decoder-only or an
            encoder-decoder model, "encoder" for an encoder with an LM head).
        item: which text of the batch.
    """
    check_lens(net, trace, stack)
    hidden = trace.hidden_states[stack][item]  # (L+1, T, d_model)
    final_norm = getattr(net, stack).final_norm
    with torch.no_grad():
        hidden = hidden.to(net.device)
        if final_norm is not None:
            hidden = final_norm(hidden)
        return torch.softmax(net.lm_head(hidden).float(), dim=-1).cpu()  # (L+1, T, V)


CHUNK = 64  # positions per step: [64, V] probabilities at a time (152k-word Qwen2: 39 MB)


def logit_lens_top(
    net,
    trace: Trace,
    stack: str = "decoder",
    item: int = 0,
    answers: list[int | None] | None = None,
    top: int = 5,
    rows: str = "all",
    first: int = 0,
) -> dict[str, torch.Tensor]:
    """The logit lens kept small for a real vocabulary: per row and position only the ``top``
    predictions and the right answer's rank and probability (what the figure and the steps
    table show), computed a few positions at a time. GPT-2's full lens at 128 tokens would be
    13 × 128 × 50,257 floats (334 MB).

    Args:
        answers: one token id (or None) per position, e.g. the next token of the text.
        rows: "all" (the embeddings and every layer, as logit_lens) or "last" (the model's own
            output only: next-token predictions).
        first: read positions first..T−1 only (a long text's last positions: every cell costs
            a d_model × V product).
    Returns:
        top_p, top_id [R, T − first, top]; answer_rank [R, T − first] (1 = the top prediction;
        NaN where no answer) and answer_p [R, T − first]. Equal to the same numbers read from
        logit_lens.
    """
    if rows not in ("all", "last"):
        raise ValueError(f"rows is 'all' or 'last', not {rows!r}.")
    check_lens(net, trace, stack)
    hidden = trace.hidden_states[stack][item]  # (L+1, T, d_model)
    hidden = hidden[-1:] if rows == "last" else hidden  # (R, T, d_model)
    n_all = hidden.shape[1]
    answers = answers if answers is not None else [None] * n_all
    if len(answers) != n_all:
        raise ValueError(f"Give one answer (or None) per position: {n_all}, not {len(answers)}.")
    if not 0 <= first < n_all:
        raise ValueError(f"first is a position of the text (0–{n_all - 1}), not {first}.")
    hidden, answers = hidden[:, first:], answers[first:]  # (R, T', d_model)
    hidden_rows, n_pos = hidden.shape[:2]
    final_norm = getattr(net, stack).final_norm
    shape = (hidden_rows, n_pos)
    out = {
        "top_p": torch.zeros(*shape, top),
        "top_id": torch.zeros(*shape, top, dtype=torch.long),
        "answer_rank": torch.full(shape, float("nan")),
        "answer_p": torch.full(shape, float("nan")),
    }
    index = torch.tensor([a if a is not None else 0 for a in answers])  # (T,)
    known = torch.tensor([a is not None for a in answers])  # (T,)
    for start in range(0, n_pos, CHUNK):
        part = slice(start, start + CHUNK)
        with torch.no_grad():
            h = hidden[:, part].to(net.device)  # (R, t, d_model)
            h = final_norm(h) if final_norm is not None else h
            probs = torch.softmax(net.lm_head(h).float(), dim=-1).cpu()  # (R, t, V)
        p, i = probs.topk(min(top, probs.shape[-1]), dim=-1)  # (R, t, top)
        out["top_p"][:, part, : p.shape[-1]], out["top_id"][:, part, : i.shape[-1]] = p, i
        right = probs.gather(-1, index[part].view(1, -1, 1).expand(probs.shape[0], -1, 1))
        rank = (probs > right).sum(-1).float() + 1  # (R, t)
        mask = known[part].expand_as(rank)
        out["answer_rank"][:, part] = torch.where(mask, rank, float("nan"))
        out["answer_p"][:, part] = torch.where(mask, right[..., 0], float("nan"))
    return out
