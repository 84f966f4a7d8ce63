"""Distances between heads, Clark et al. 2019, "What does BERT look at?" (§6, Figure 6).

Their head_distances.py: both heads' attention rows are smoothed, p' = 0.999·p + 0.001/n, and
the Jensen–Shannon divergence JS(p', q') = ½ Σ_k p' ln(p'/m) + ½ Σ_k q' ln(q'/m), m = (p'+q')/2
is taken per query row: the divergence, not its square root, in nats (natural log). Their code
sums it over the query rows of every document; here it is averaged over the real query rows of
one text (so texts of different lengths weigh alike). The notebook embeds the heads in 2-D with
scikit-learn's metric MDS on these divergences; mds_2d is classical (Torgerson) MDS.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from analysis.tokens import check_stack, real_tokens
from model.trace import Trace

SMOOTHING = 0.001  # Clark et al.'s head_distances.py


def js_divergence(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Clark et al.'s smoothed JS divergence of rows p, q [..., n], in nats, [...]."""
    n = p.shape[-1]
    p = SMOOTHING / n + (1 - SMOOTHING) * p
    q = SMOOTHING / n + (1 - SMOOTHING) * q
    m = (p + q) / 2
    return 0.5 * (p * (p / m).log()).sum(-1) + 0.5 * (q * (q / m).log()).sum(-1)


def query_rows(n: int, queries: int | None) -> torch.Tensor:
    """The query rows a distance averages over: all n, or ``queries`` of them evenly spaced
    (the first and the last included) when there are more."""
    if queries is None or n <= queries:
        return torch.arange(n)
    return torch.linspace(0, n - 1, max(queries, 1)).round().long().unique()


def head_distances(
    trace: Trace, stack: str = "encoder", item: int = 0, queries: int | None = None
) -> torch.Tensor:
    """JS divergence between every two heads, [L·H, L·H], head index = layer·H + head.

    Clark et al. 2019 (head_distances.py): smoothed JS divergence in nats between two heads'
    attention rows, averaged over the item's real query tokens (their code sums over rows);
    padded keys and queries are cut out first, so n is the number of real keys. float64.

    queries: average over at most this many real query rows, evenly spaced (``query_rows``):
    the cost grows as (L·H)² · rows · keys, ~10 s at 512 tokens with every row on 2 cores, so
    the page's map uses 64 rows and says so. None: every row.
    """
    check_stack(trace, stack)
    attention = trace.attentions[stack]  # (B, L, H, T_q, T_k)
    if not 0 <= item < attention.shape[0]:
        raise ValueError(f"item {item} is outside this batch of {attention.shape[0]} texts.")
    q_real, k_real = (m[item].cpu() for m in real_tokens(trace, stack))
    alpha = attention[item].detach().cpu()[:, :, q_real][:, :, :, k_real]
    alpha = alpha[:, :, query_rows(alpha.shape[2], queries)].double()
    n_heads = alpha.shape[0] * alpha.shape[1]
    flat = alpha.reshape(n_heads, -1, alpha.shape[-1])  # (L·H, n_q, n_k)
    p = SMOOTHING / flat.shape[-1] + (1 - SMOOTHING) * flat  # (L·H, n_q, n_k) smoothed rows
    # JS(p, q) = ½ Σ p ln p + ½ Σ q ln q - Σ m ln m: only the last term needs both heads, and
    # it is symmetric, so head a is paired with heads a.. only. With s = p + q = 2m,
    # Σ m ln m = ½ Σ s ln s - ½ ln 2 · Σ s: one sum, one log and one product per element, in
    # place (the cost is these (L·H)²/2 · rows · keys elements: 0.6 × the time of xlogy(m, m)).
    own = (p * p.log()).sum(-1)  # (L·H, n_q); smoothed rows have no zero
    mass = p.sum(-1)  # (L·H, n_q): 1 up to rounding, kept exact
    out = torch.zeros(n_heads, n_heads, dtype=torch.float64)
    # Two buffers for every pair row: a fresh tensor of megabytes per head is a new mapping of
    # memory each time where the server hands freed memory back (serve/memory.py).
    sums, logs = torch.empty_like(p[1:]), torch.empty_like(p[1:])
    for a in range(n_heads - 1):
        k = n_heads - a - 1
        s = torch.add(p[a + 1 :], p[a], out=sums[:k])  # (L·H - a - 1, n_q, n_k)
        s_ln_s = torch.log(s, out=logs[:k]).mul_(s).sum(-1)  # (L·H - a - 1, n_q)
        m_ln_m = 0.5 * s_ln_s - 0.5 * math.log(2) * (mass[a] + mass[a + 1 :])
        out[a, a + 1 :] = (0.5 * (own[a] + own[a + 1 :]) - m_ln_m).mean(-1)
    return out + out.T  # the diagonal stays exactly 0


def mds_2d(distances: torch.Tensor) -> torch.Tensor:
    """Classical (Torgerson) MDS: 2-D points whose distances best match ``distances``, [N, 2].

    B = -½ J D² J (J centres), the two largest eigenpairs of B give X = V √λ. Each axis's sign
    is fixed so that its largest coordinate is positive (eigenvectors have no sign of their own).
    """
    d = np.asarray(distances, dtype=np.float64)
    n = d.shape[0]
    centre = np.eye(n) - np.full((n, n), 1.0 / n)  # (N, N)
    gram = -0.5 * centre @ (d**2) @ centre  # (N, N)
    values, vectors = np.linalg.eigh((gram + gram.T) / 2)  # ascending
    top = np.argsort(values)[::-1][:2]
    points = vectors[:, top] * np.sqrt(np.clip(values[top], 0, None))  # (N, 2)
    if points.shape[1] < 2:  # one head: a point at the origin
        points = np.pad(points, ((0, 0), (0, 2 - points.shape[1])))
    flip = np.sign(points[np.abs(points).argmax(0), [0, 1]])
    points *= np.where(flip == 0, 1, flip)
    return torch.from_numpy(points)
