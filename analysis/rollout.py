"""Attention rollout of Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers" (§3)."""

from __future__ import annotations

import torch

from analysis.tokens import check_stack, real_tokens
from model.trace import Trace


def rollout(trace: Trace, stack: str = "encoder") -> torch.Tensor:
    """Attention rollout after every layer, [B, L, T, T] (Abnar & Zuidema 2020, eq. 1).

    Ã_l = 0.5·mean_h A_l + 0.5·I (the residual connection as an identity attention), rows
    renormalised to sum to 1; R_0 = Ã_0 and R_l = Ã_l R_{l-1}. Row i of R_l says how much of
    token i's representation after layer l flows from each input token, if information only
    mixed through attention and the residual, linearly (FFN, LayerNorm and the values' norms
    are ignored: the paper's assumptions).

    Padding: padded keys already get weight 0, so real tokens never route through padding; the
    rows and columns of padded positions are set to 0 in the result. Only self-attention stacks
    ("encoder", "decoder") can be rolled out.
    """
    check_stack(trace, stack)
    if stack == "cross":
        raise ValueError(
            "Rollout multiplies a stack's token-to-same-token attentions through its layers; "
            "cross-attention maps target tokens to source tokens, so roll out 'encoder' or "
            "'decoder' instead."
        )
    with torch.no_grad():
        attention = trace.attentions[stack]  # (B, L, H, T, T)
        real, _ = real_tokens(trace, stack)  # (B, T)
        real = real.to(attention.device)
        keep = (real[:, :, None] & real[:, None, :]).to(attention.dtype)  # (B, T, T)
        n_layers, t = attention.shape[1], attention.shape[-1]
        eye = torch.eye(t, dtype=attention.dtype, device=attention.device)  # (T, T)
        out = attention.new_empty(attention.shape[0], n_layers, t, t)  # (B, L, T, T)
        flow = None
        for layer in range(n_layers):
            mixed = (0.5 * attention[:, layer].mean(1) + 0.5 * eye) * keep  # (B, T, T)
            # Rows sum to 1 already unless a query row was fully masked (then only 0.5 I is
            # left, or nothing on padding): renormalise, leaving empty rows at 0.
            mixed = mixed / mixed.sum(-1, keepdim=True).clamp_min(1e-12)
            flow = mixed if flow is None else torch.bmm(mixed, flow)  # (B, T, T)
            out[:, layer] = flow
        return out
