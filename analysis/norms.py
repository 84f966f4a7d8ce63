"""Norm-based attention of Kobayashi et al. 2020, "Attention is not only a weight" (§3).

Head h writes α_ij f_h(x_j) into query i's output, f_h(x) = (x W_V^h + b_V^h) W_O^h: the vector
transformed by the value and output projections. The trace's V already is x W_V^h + b_V^h, so
only W_O^h is needed. The output bias b_O is shared by all keys and heads, so it is not part of
f_h (as in the paper).
"""

from __future__ import annotations

import torch
from torch import nn

from analysis.tokens import check_stack
from analysis.weights import head_output_weights
from model.trace import Trace


def transformed_values(trace: Trace, stack: str, net: nn.Module | None = None) -> torch.Tensor:
    """f_h(x_j) = v_j^h W_O^h for every key, [B, L, H, T_k, d_model] (Kobayashi et al. 2020)."""
    check_stack(trace, stack)
    values = trace.values[stack]  # (B, L, H, T_k, d_head)
    w_o = head_output_weights(trace, stack, net)  # (L, H, d_head, d_model)
    with torch.no_grad():
        return torch.einsum("blhtd,lhdm->blhtm", values, w_o)  # (B, L, H, T_k, d_model)


def norm_attention(
    trace: Trace, stack: str = "encoder", net: nn.Module | None = None
) -> torch.Tensor:
    """‖α_ij f_h(x_j)‖ per head, [B, L, H, T_q, T_k] (Kobayashi et al. 2020, eq. 6).

    Args:
        trace: a Trace of ``net``.
        stack: "encoder", "decoder" or "cross".
        net: the model that made the trace, for W_O (a Trace carries activations, not weights);
            may be omitted when the trace carries ``w_o`` ({stack: [L, d_model, d_model]}).
    Returns:
        float [B, L, H, T_q, T_k]; 0 wherever α is 0 (masked keys, padding).
    """
    with torch.no_grad():
        f_norm = transformed_values(trace, stack, net).norm(dim=-1)  # (B, L, H, T_k)
        # α ≥ 0, so ‖α f‖ = α ‖f‖: no [T_q, T_k, d_model] tensor is needed.
        return trace.attentions[stack] * f_norm.unsqueeze(-2)  # (B, L, H, T_q, T_k)


def norm_attention_summed(
    trace: Trace, stack: str = "encoder", net: nn.Module | None = None
) -> torch.Tensor:
    """‖Σ_h α_ij^h f_h(x_j)‖, what key j adds to query i over all heads, [B, L, T_q, T_k].

    Kobayashi et al. 2020 (§3, "multi-head"): the heads' vectors add before their norm is taken,
    so this is not the sum of the per-head norms. Args as norm_attention.
    """
    with torch.no_grad():
        f = transformed_values(trace, stack, net)  # (B, L, H, T_k, d_model)
        # The H vectors f_h(x_j) of key j span at most H dimensions: with [f_1 ... f_H] = Q_j R_j
        # (QR, Q_j orthonormal), Σ_h α_h f_h = Q_j (R_j α) and its norm is ‖R_j α‖. That costs
        # H²·T² per layer instead of H·T²·d_model for summing the vectors themselves, with no
        # cancellation (a Gram matrix would subtract large squares).
        r = torch.linalg.qr(f.permute(0, 1, 3, 4, 2), mode="r")[1]  # (B, L, T_k, H, H)
        alpha = trace.attentions[stack]  # (B, L, H, T_q, T_k)
        batch, n_layers, _, t_q, t_k = alpha.shape
        out = alpha.new_empty(batch, n_layers, t_q, t_k)  # (B, L, T_q, T_k)
        for b in range(batch):
            for layer in range(n_layers):
                a = alpha[b, layer].permute(2, 0, 1).contiguous()  # (T_k, H, T_q)
                u = torch.bmm(r[b, layer], a)  # (T_k, H, T_q): R_j α_·j per key j
                out[b, layer] = u.square().sum(1).sqrt().T
        return out
