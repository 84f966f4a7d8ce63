"""Per-head attention statistics of Clark et al. 2019, "What does BERT look at?" (§3, §4)."""

from __future__ import annotations

import math

import pandas as pd
import torch

from analysis.tokens import check_stack, real_tokens, token_classes
from model.trace import Trace

CLASSES = ("first", "sep", "punct")
COLUMNS = ("layer", "head", "entropy", "prev", "next", "self", "first", "sep", "punct", "distance")

# The Heads tab's table (analysis.head_table): the statistics with the attention sink after first.
TABLE_COLUMNS = (*COLUMNS[:7], "sink", *COLUMNS[7:])

CONVENTIONS = ("ours", "clark")
CLARK_PUNCT = frozenset({".", ","})  # the notebook's punctuation
CLARK_SMOOTHING = 0.0001  # the notebook's entropy: α' = 0.9999·α + 0.0001/n


def head_stats(
    trace: Trace, stack: str = "encoder", item: int = 0, convention: str = "ours"
) -> pd.DataFrame:
    """One row per (layer, head) of one batch item: Clark et al. 2019's averages over real queries.

    Columns (layers and heads 0-based):
        entropy: -Σ_j α_ij ln α_ij in nats, 0·ln 0 = 0.
        prev, next, self: α_i,i-1, α_i,i+1 and α_ii, each averaged over the queries that have such
            a key (i ≥ 1 for prev, i ≤ n-2 for next).
        first: weight on the first real key token ([CLS], <s>, or position 0).
        sep: weight on all [SEP] / </s> keys together (0 when the text has none).
        punct: weight on all punctuation keys together: any token made of Unicode punctuation
            (Clark et al. count "." and "," only).
        distance: mean attention distance Σ_j α_ij |i - j|, in tokens.
    Every column is a mean over the item's real (non-padding) query tokens; padded keys are left
    out of every sum. For "cross" (target queries over source keys) prev, next, self and
    distance compare positions of two different sequences, so they are undefined: NaN.

    convention="clark" follows their General_Analysis notebook where it differs: prev = Σ_i
    α_i,i-1 / n and next = Σ_i α_i,i+1 / n (divided by all n real queries, not by those that
    have the neighbour; prev is α_i,i-1 — their "left" selector np.eye(n, n, -1), which the
    MDS figure calls "attend to prev."), entropy of the smoothed α' = 0.9999·α + 0.0001/n in nats,
    punct counts "." and "," only. The other columns are the same in both conventions.
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be 'ours' or 'clark', not {convention!r}.")
    check_stack(trace, stack)
    pattern = trace.attentions[stack]  # (B, L, H, T_q, T_k)
    if not 0 <= item < pattern.shape[0]:
        raise ValueError(f"item {item} is outside this batch of {pattern.shape[0]} texts.")
    q_real, k_real = (m[item].cpu() for m in real_tokens(trace, stack))  # (T_q,), (T_k,)
    n_layers, n_heads = pattern.shape[1:3]
    if not q_real.any():
        raise ValueError(f"Batch item {item} has no real tokens on the {stack} query side.")
    _, key_tokens = trace.tokens_for(stack)
    classes = token_classes(key_tokens[item], k_real)  # (T_k,) bool each
    q_pos = q_real.nonzero().squeeze(1)  # (n_q,) positions of real queries
    k_pos = k_real.nonzero().squeeze(1)  # (n_k,)
    alpha = pattern[item].detach().cpu()  # (L, H, T_q, T_k)
    if not q_real.all():
        alpha = alpha[:, :, q_pos]  # (L, H, n_q, T_k)
    if not k_real.all():
        alpha = alpha[:, :, :, k_pos]  # (L, H, n_q, n_k)

    def mean_over_queries(x: torch.Tensor) -> torch.Tensor:  # (L, H, n_q) -> (L, H)
        return x.double().mean(-1)

    # Weight on each key class at once: (L, H, n_q, n_k) @ (n_k, 3) -> (L, H, n_q, 3)
    on_class = alpha @ torch.stack([classes[c][k_pos] for c in CLASSES], dim=1).to(alpha.dtype)
    stats = {c: mean_over_queries(on_class[..., n]) for n, c in enumerate(CLASSES)}
    stats["entropy"] = mean_over_queries(-torch.xlogy(alpha, alpha).sum(-1))
    nan = torch.full((n_layers, n_heads), math.nan, dtype=torch.float64)
    if stack == "cross":
        stats.update(prev=nan, next=nan, self=nan, distance=nan)
    else:
        # Positions in the original sequence, so |i - j| and i±1 are the model's own neighbours.
        column = torch.full((len(k_real) + 2,), -1, dtype=torch.long)  # position + 1 -> column
        column[k_pos + 1] = torch.arange(len(k_pos))
        rows = torch.arange(len(q_pos))
        for name, offset in (("prev", -1), ("next", 1), ("self", 0)):
            target = column[(q_pos + offset + 1).clamp(0, len(k_real) + 1)]  # (n_q,)
            has = target >= 0  # queries that have such a real key
            if has.any():
                stats[name] = alpha[:, :, rows[has], target[has]].double().mean(-1)  # (L, H)
            else:
                stats[name] = nan
        dist = (q_pos[:, None] - k_pos[None, :]).abs().to(alpha.dtype)  # (n_q, n_k)
        # A product with the distances per query, not a (L, H, n_q, n_k) temporary: 2.5× faster.
        stats["distance"] = mean_over_queries(torch.einsum("lhqk,qk->lhq", alpha, dist))
    if convention == "clark":
        clark_columns(stats, alpha, q_pos, k_pos, key_tokens[item], stack)
    layer, head = torch.meshgrid(torch.arange(n_layers), torch.arange(n_heads), indexing="ij")
    frame = {"layer": layer.flatten().numpy(), "head": head.flatten().numpy()}
    frame.update({name: stats[name].flatten().numpy() for name in COLUMNS[2:]})
    return pd.DataFrame(frame, columns=list(COLUMNS))


def clark_columns(
    stats: dict,
    alpha: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    key_tokens: list[str],
    stack: str,
) -> None:
    """Replace prev, next, entropy and punct by Clark et al.'s notebook formulas (in place)."""
    n_k = alpha.shape[-1]
    smoothed = (1 - CLARK_SMOOTHING) * alpha.double() + CLARK_SMOOTHING / n_k  # (L, H, n_q, n_k)
    stats["entropy"] = -(smoothed * smoothed.log()).sum(-1).mean(-1)
    punct = torch.tensor([key_tokens[int(j)] in CLARK_PUNCT for j in k_pos], dtype=alpha.dtype)
    stats["punct"] = (alpha @ punct).double().mean(-1)  # (L, H)
    if stack == "cross":
        return
    key_at = {int(p): c for c, p in enumerate(k_pos)}  # position -> column
    for name, offset in (("prev", -1), ("next", 1)):
        total = torch.zeros(alpha.shape[:2], dtype=torch.float64)  # (L, H)
        for row, pos in enumerate(q_pos.tolist()):
            if pos + offset in key_at:
                total += alpha[:, :, row, key_at[pos + offset]].double()
        stats[name] = total / len(q_pos)


def attention_sink(trace: Trace, stack: str = "decoder", item: int = 0) -> torch.Tensor:
    """Each head's weight on the first real key, averaged over the real queries that may attend
    anywhere else, [L, H]: the "attention sink" of language models (Xiao et al. 2023,
    StreamingLLM), where heads with nothing to do park their weight on the first token.

    Under a causal mask the first query sees only itself (weight 1 there by construction), so it
    is left out; in an encoder every query counts, and this is head_stats' "first" (BERT's
    [CLS] column share). Padding is left out as in head_stats.
    """
    check_stack(trace, stack)
    pattern = trace.attentions[stack]  # (B, L, H, T_q, T_k)
    q_real, k_real = (m[item].cpu() for m in real_tokens(trace, stack))  # (T_q,), (T_k,)
    q_pos, k_pos = q_real.nonzero().squeeze(1), k_real.nonzero().squeeze(1)
    if not len(q_pos) or not len(k_pos):
        raise ValueError(f"Batch item {item} has no real tokens in the {stack} stack.")
    allowed = trace.masks[stack][item].cpu()[q_pos][:, k_pos]  # (n_q, n_k) True = may attend
    free = allowed[:, 1:].any(-1)  # queries that may look past the first real key
    rows = q_pos[free] if free.any() else q_pos
    on_first = pattern[item, :, :, rows, int(k_pos[0])].detach().cpu()  # (L, H, n)
    return on_first.double().mean(-1)
