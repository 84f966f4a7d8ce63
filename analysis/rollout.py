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
    with torch.no_grad():
        mixed = residual_graph(trace, stack)  # (B, L, T, T)
        out = torch.empty_like(mixed)  # (B, L, T, T)
        flow = None
        for layer in range(mixed.shape[1]):
            flow = mixed[:, layer] if flow is None else torch.bmm(mixed[:, layer], flow)
            out[:, layer] = flow  # (B, T, T)
        return out


def residual_graph(trace: Trace, stack: str = "encoder") -> torch.Tensor:
    """Ã_l = 0.5·mean_h A_l + 0.5·I, rows renormalised, padding cut out, [B, L, T, T].

    The attention graph of Abnar & Zuidema 2020 (§3): the edge weights both rollout and attention
    flow run on. Rows and columns of padded positions are 0.
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
        t = attention.shape[-1]
        eye = torch.eye(t, dtype=attention.dtype, device=attention.device)  # (T, T)
        mixed = (0.5 * attention.mean(2) + 0.5 * eye) * keep[:, None]  # (B, L, T, T)
        # Rows sum to 1 already unless a query row was fully masked (then only 0.5 I is
        # left, or nothing on padding): renormalise, leaving empty rows at 0.
        return mixed / mixed.sum(-1, keepdim=True).clamp_min(1e-12)
