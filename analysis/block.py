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

import torch
from torch import nn

from analysis.tokens import check_stack, real_tokens
from analysis.weights import check_net, output_per_head
from model.trace import Trace


def _layers(trace: Trace, stack: str, net: nn.Module | None) -> list[nn.Module]:
    """The stack's layers (each with add_norm1), from ``net`` or the model the trace replays."""
    if net is not None:
        check_net(trace, net, stack, "The attention block's LayerNorm")
        return list((net.encoder if stack == "encoder" else net.decoder).layers)
    replay = trace._replay
    if replay is None or stack not in replay.stacks:
        raise ValueError(
            "The attention block's LayerNorm needs the model's weights, which this trace no "
            "longer reaches: pass net=<the model that made the trace>."
        )
    return list(replay.stacks[stack].layers)


def _parts(
    trace: Trace, stack: str, net: nn.Module | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(α [B, L, H, T, T], f·M [B, L, H, T, d], x·M [B, L, T, d], 1/s [B, L, T]) in float64.

    M = centre then scale by γ (the LayerNorm's linear part), s the std of the LayerNorm's input:
    so LN's share of a vector v added to token i's sum is v·M / s_i. Pre-norm: M = I, s = 1.
    """
    check_stack(trace, stack)
    if stack == "cross":
        raise ValueError(
            "The attention block adds each token's own residual x_i, which cross-attention's "
            "keys (source tokens) are not: pick 'encoder' or 'decoder'."
        )
    layers = _layers(trace, stack, net)
    n_heads = trace.config.n_heads
    with torch.no_grad():
        alpha = trace.attentions[stack].detach().cpu().double()  # (B, L, H, T, T)
        w_o = torch.stack([output_per_head(m.self_attn.w_o.weight, n_heads) for m in layers])
        values = trace.values[stack].detach().cpu().double()  # (B, L, H, T, d_head)
        f = torch.einsum("blhtv,lhvd->blhtd", values, w_o.cpu().double())  # (B, L, H, T, d)
        x = trace.hidden_states[stack][:, :-1].detach().cpu().double()  # (B, L, T, d) inputs
        if trace.config.norm == "pre":
            return alpha, f, x, torch.ones(x.shape[:-1], dtype=torch.float64)
        attn_out = trace.attn_out[stack].detach().cpu().double()  # (B, L, T, d) incl. b_O
        pre_ln = x + attn_out  # (B, L, T, d): what the LayerNorm reads
        norms = [layer.add_norm1.norm for layer in layers]
        gamma = torch.stack([n.weight.detach().cpu().double() for n in norms])  # (L, d)
        eps = torch.tensor([n.eps for n in norms], dtype=torch.float64)  # (L,)
        inv_s = (pre_ln.var(-1, unbiased=False) + eps[:, None]).rsqrt()  # (B, L, T)
        f = (f - f.mean(-1, keepdim=True)) * gamma[None, :, None, None]  # (B, L, H, T, d)
        x = (x - x.mean(-1, keepdim=True)) * gamma[None, :, None]  # (B, L, T, d)
        return alpha, f, x, inv_s


def norm_attention_block(
    trace: Trace, stack: str = "encoder", net: nn.Module | None = None
) -> torch.Tensor:
    """‖LN-share of Σ_h α_ij f_h(x_j) + δ_ij x_i‖, [B, L, T_q, T_k] (Kobayashi et al. 2021).

    Their "AttnResLn-N" (BertNormOutput's post_ln_norm): how much key j contributes to token i
    after the attention, the residual and the LayerNorm. ``net`` gives the LayerNorm weights;
    without it they come from the model the trace was made by. Padded positions' rows and columns
    are 0. float32.
    """
    alpha, f, x, inv_s = _parts(trace, stack, net)
    batch, n_layers, n_heads, t, _ = alpha.shape
    real = real_tokens(trace, stack)[0].cpu()  # (B, T)
    out = torch.zeros(batch, n_layers, t, t, dtype=torch.float64)  # (B, L, T, T)
    eye = torch.eye(t, dtype=torch.float64)  # (T, T)
    for b in range(batch):
        for layer in range(n_layers):
            # Per key j, the H+1 vectors [f_1(x_j)·M … f_H(x_j)·M, x_j·M] = Q_j R_j; the vector of
            # (i, j) is Q_j R_j c_ij, c_ij = (α_ij^1 … α_ij^H, δ_ij), so its norm is ‖R_j c_ij‖.
            vectors = torch.cat([f[b, layer], x[b, layer][None]], 0)  # (H+1, T_k, d)
            r = torch.linalg.qr(vectors.permute(1, 2, 0), mode="r")[1]  # (T_k, H+1, H+1)
            coeff = torch.cat([alpha[b, layer], eye[None]], 0)  # (H+1, T_q, T_k)
            u = torch.bmm(r, coeff.permute(2, 0, 1))  # (T_k, H+1, T_q)
            norms = u.square().sum(1).sqrt().T  # (T_q, T_k)
            out[b, layer] = norms * inv_s[b, layer][:, None]
    keep = (real[:, :, None] & real[:, None, :]).double()  # (B, T, T)
    return (out * keep[:, None]).float()


def mixing_ratio(
    trace: Trace, stack: str = "encoder", net: nn.Module | None = None, per_token: bool = False
) -> torch.Tensor:
    """Mixing ratio per layer, [B, L]: mean over real tokens of ‖mix_i‖ / (‖mix_i‖ + ‖keep_i‖).

    Kobayashi et al. 2021 (§5, "AttnResLn-N" mixing ratio): keep_i is the vector token i gets
    from itself (attention to itself and the residual, after LN), mix_i the sum of the vectors
    from every other token. ``per_token=True``: the ratio of every token, [B, L, T] (0 on padding).
    """
    alpha, f, x, _ = _parts(trace, stack, net)  # 1/s_i cancels in the ratio
    real = real_tokens(trace, stack)[0].cpu()  # (B, T)
    everything = torch.einsum("blhik,blhkd->blid", alpha, f) + x  # (B, L, T, d): Σ_j of it all
    diagonal = alpha.diagonal(dim1=-2, dim2=-1)  # (B, L, H, T): α_ii
    keep = torch.einsum("blhi,blhid->blid", diagonal, f) + x  # (B, L, T, d)
    mix = (everything - keep).norm(dim=-1)  # (B, L, T)
    ratio = mix / (mix + keep.norm(dim=-1)).clamp_min(1e-30)  # (B, L, T)
    ratio = ratio * real[:, None].double()
    if per_token:
        return ratio.float()
    return (ratio.sum(-1) / real.sum(-1, keepdim=True).clamp_min(1)).float()  # (B, L)
