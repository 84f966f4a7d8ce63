"""Attention, residual and LayerNorm together: Kobayashi et al. 2021, "Incorporating Residual and
Normalization Layers into Analysis of Masked Language Models" (EMNLP, §3).

A post-norm layer's attention block computes y_i = LN(Σ_j Σ_h α_ij^h f_h(x_j) + b_O + x_i). LN is
linear but for the division by the standard deviation s_i of its input, so y_i splits into one
vector per key j: LN_i(v) = (v - mean(v)) / s_i ⊙ γ applied to Σ_h α_ij^h f_h(x_j) + δ_ij x_i.
Their code (BertNormOutput) leaves b_O and the LayerNorm's β out of the per-key vectors; so does
this. A pre-norm layer has no LayerNorm after the sum: its vectors are Σ_h α_ij f_h(x_j) + δ_ij x_i
("AttnRes" in the paper), f_h reading LN(x) as the layer does.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from analysis.tokens import check_stack, real_tokens
from analysis.weights import model_of, output_per_head
from model.trace import Trace


class Parts(NamedTuple):
    """What norm_attention_block and mixing_ratio share, in float64 (M and s: below)."""

    alpha: torch.Tensor  # α, [B, L, H, T, T]
    vectors: torch.Tensor  # per key j: f_1(x_j)·M … f_H(x_j)·M, x_j·M, [B, L, T, H+1, d]
    inv_s: torch.Tensor  # 1/s_i, [B, L, T]
    mixed: torch.Tensor  # Σ_h Σ_j α_ij^h f_h(x_j)·M, [B, L, T, d]


def _parts(trace: Trace, stack: str, net: nn.Module | None) -> Parts:
    """The block's parts, M = centre then scale by γ (the LayerNorm's linear part), s the std of
    the LayerNorm's input: so LN's share of a vector v added to token i's sum is v·M / s_i.
    Pre-norm: M = I, s = 1. The vectors are formed in float32 and widened once: every sum over
    them (the Gram matrices below, the ratio's) is float64.
    """
    check_stack(trace, stack)
    if stack == "cross":
        raise ValueError(
            "The attention block adds each token's own residual x_i, which cross-attention's "
            "keys (source tokens) are not: pick 'encoder' or 'decoder'."
        )
    layers = list(
        model_of(trace, stack, net, "The attention block's LayerNorm").stacks[stack].layers
    )
    n_heads = trace.config.n_heads
    with torch.no_grad():
        # float32 at least (a half-precision model's too): every sum below is float64
        wide = torch.promote_types(trace.values[stack].dtype, torch.float32)
        alpha = trace.attentions[stack].detach().cpu().to(wide)  # (B, L, H, T, T)
        values = trace.values[stack].detach().cpu().to(wide)  # (B, L, H, T, d_head)
        x = trace.hidden_states[stack][:, :-1].detach().cpu().to(wide)  # (B, L, T, d) inputs
        w_o = [
            output_per_head(m.self_attn.w_o.weight.detach().cpu().to(wide), n_heads) for m in layers
        ]
        # f_h(x_j) = v_j^h W_O^h, one layer at a time (a stacked W_O is more memory traffic
        # than the products themselves), next to x_j: [B, L, T, H+1, d], written in place
        vectors = x.new_empty((*x.shape[:3], n_heads + 1, x.shape[-1]))
        for n, w in enumerate(w_o):
            vectors[:, n, :, :n_heads] = torch.einsum("bhtv,hvd->bthd", values[:, n], w)
        vectors[:, :, :, n_heads] = x
        # Σ_h Σ_j α_ij f_h(x_j) = Σ_h (α^h v^h) W_O^h: the heads' context vectors through W_O,
        # a third of the products of summing the f's (T·d_head·T + T·d·d against T·T·H·d)
        mixed = torch.stack(
            [
                torch.einsum("bhik,bhkv,hvd->bid", alpha[:, n], values[:, n], w)
                for n, w in enumerate(w_o)
            ],
            dim=1,
        ).double()  # (B, L, T, d)
        alpha = alpha.double()
        if trace.config.norm == "pre":
            inv_s = torch.ones(x.shape[:-1], dtype=torch.float64)
            return Parts(alpha, vectors.double(), inv_s, mixed)
        if trace.head_mask:  # heads removed: the replayed sublayer output says how
            attn_out = trace.attn_out[stack].detach().cpu().double()  # (B, L, T, d) incl. b_O
        else:  # Σ_h Σ_j α_ij f_h(x_j) + b_O: the same sum, without running the layers again
            attn_out = mixed.clone()
            for n, m in enumerate(layers):
                if m.self_attn.w_o.bias is not None:
                    attn_out[:, n] += m.self_attn.w_o.bias.detach().cpu().double()
        pre_ln = x.double() + attn_out  # (B, L, T, d): what the LayerNorm reads
        norms = [layer.add_norm1.norm for layer in layers]
        gamma = torch.stack([n.weight.detach().cpu().to(wide) for n in norms])  # (L, d)
        eps = torch.tensor([n.eps for n in norms], dtype=torch.float64)  # (L,)
        inv_s = (pre_ln.var(-1, unbiased=False) + eps[:, None]).rsqrt()  # (B, L, T)
        vectors.sub_(vectors.mean(-1, keepdim=True)).mul_(gamma[:, None, None])
        mixed = (mixed - mixed.mean(-1, keepdim=True)) * gamma.double()[:, None]
        return Parts(alpha, vectors.double(), inv_s, mixed)


def norm_attention_block(
    trace: Trace, stack: str = "encoder", net: nn.Module | None = None
) -> torch.Tensor:
    """‖LN-share of Σ_h α_ij f_h(x_j) + δ_ij x_i‖, [B, L, T_q, T_k] (Kobayashi et al. 2021).

    Their "AttnResLn-N" (BertNormOutput's post_ln_norm): how much key j contributes to token i
    after the attention, the residual and the LayerNorm. ``net`` gives the LayerNorm weights;
    without it they come from the model the trace was made by. Padded positions' rows and columns
    are 0. float32.
    """
    return _norms(_parts(trace, stack, net), real_tokens(trace, stack)[0].cpu())


def mixing_ratio(
    trace: Trace, stack: str = "encoder", net: nn.Module | None = None, per_token: bool = False
) -> torch.Tensor:
    """Mixing ratio per layer, [B, L]: mean over real tokens of ‖mix_i‖ / (‖mix_i‖ + ‖keep_i‖).

    Kobayashi et al. 2021 (§5, "AttnResLn-N" mixing ratio): keep_i is the vector token i gets
    from itself (attention to itself and the residual, after LN), mix_i the sum of the vectors
    from every other token. ``per_token=True``: the ratio of every token, [B, L, T] (0 on padding).
    """
    parts = _parts(trace, stack, net)  # 1/s_i cancels in the ratio
    return _ratio(parts, real_tokens(trace, stack)[0].cpu(), per_token)


def attention_block(
    trace: Trace, stack: str = "encoder", net: nn.Module | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(norm_attention_block, mixing_ratio) from one pass over the parts they share: the
    Attention tab draws both, and the parts are most of their cost."""
    parts = _parts(trace, stack, net)
    real = real_tokens(trace, stack)[0].cpu()
    return _norms(parts, real), _ratio(parts, real, per_token=False)


def _norms(parts: Parts, real: torch.Tensor) -> torch.Tensor:
    """norm_attention_block from its parts and the real-token mask [B, T]."""
    alpha, vectors = parts.alpha, parts.vectors
    t = alpha.shape[-1]
    # Per key j, the H+1 vectors V_j = [f_1(x_j)·M … f_H(x_j)·M, x_j·M]; the vector of (i, j) is
    # Σ_h c_ij^h V_j^h, c_ij = (α_ij^1 … α_ij^H, δ_ij), so its squared norm is c_ijᵀ G_j c_ij
    # with G_j = V_j V_jᵀ, an (H+1) × (H+1) Gram matrix per key: every layer in three products.
    gram = vectors @ vectors.transpose(-1, -2)  # (B, L, T_k, H+1, H+1)
    eye = torch.eye(t, dtype=torch.float64).expand(*alpha.shape[:2], 1, t, t)  # (B, L, 1, T, T)
    coeff = torch.cat([alpha, eye], 2).permute(0, 1, 4, 2, 3)  # (B, L, T_k, H+1, T_q)
    squared = ((gram @ coeff) * coeff).sum(3).transpose(-1, -2)  # (B, L, T_q, T_k)
    out = squared.clamp_min(0).sqrt() * parts.inv_s[..., None]  # (B, L, T_q, T_k)
    keep = (real[:, :, None] & real[:, None, :]).double()  # (B, T, T)
    return (out * keep[:, None]).float()


def _ratio(parts: Parts, real: torch.Tensor, per_token: bool) -> torch.Tensor:
    """mixing_ratio from its parts and the real-token mask [B, T]."""
    f, x = parts.vectors[..., :-1, :], parts.vectors[..., -1, :]  # (B, L, T, H, d), (B, L, T, d)
    everything = parts.mixed + x  # (B, L, T, d): Σ_j of it all
    diagonal = parts.alpha.diagonal(dim1=-2, dim2=-1)  # (B, L, H, T): α_ii
    keep = torch.einsum("blhi,blihd->blid", diagonal, f) + x  # (B, L, T, d)
    mix = (everything - keep).norm(dim=-1)  # (B, L, T)
    ratio = mix / (mix + keep.norm(dim=-1)).clamp_min(1e-30)  # (B, L, T)
    ratio = ratio * real[:, None].double()
    if per_token:
        return ratio.float()
    return (ratio.sum(-1) / real.sum(-1, keepdim=True).clamp_min(1)).float()  # (B, L)
