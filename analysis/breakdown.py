"""One attention score taken apart, every step a real number checked against the trace.

Follows the paper's Attention(Q, K, V) = softmax(QKᵀ/√d_k) V (Vaswani et al. 2017, §3.2.1) for
one query/key pair. At layer 0 the score is also split into the token and position parts of the
embedding sum x = token + position (paper §3.5): q and k are affine in x, so
q·k = Σ_parts (W_Q part + ...)·(W_K part + ...) exactly. A LayerNorm on the way (BERT's embedding
LayerNorm, pre-norm's LayerNorm) is affine too once its σ is fixed at the value it measured for
that token: LN(Σ p) = Σ γ(p - mean p)/σ + β. So the split is exact there as well; what it then
shows is each part as scaled by the whole sum's σ, not what the part alone would give. After the
first attention the residual stream mixes tokens through a softmax, so deeper layers (and
cross-attention, whose keys are the encoder's output) have no token/position split.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from analysis.tokens import check_stack
from analysis.weights import check_net, output_per_head, per_head
from model.trace import Trace

Parts = dict[str, torch.Tensor]


def _ln_split(parts: Parts, norm: nn.Module) -> Parts:
    """LayerNorm applied part by part with σ of the whole sum (exact: centring is linear); an
    RMSNorm (no centring, no bias) part by part with the whole sum's RMS."""
    total = sum(parts.values())  # (d_model,)
    gamma = getattr(norm, "gain", norm.weight).detach().cpu().double()  # RMSNorm: w or 1 + w
    if getattr(norm, "bias", None) is None:  # RMSNorm: x / √(mean(x²) + ε) · g
        rms = torch.sqrt(total.pow(2).mean() + norm.eps)
        return {name: gamma * p / rms for name, p in parts.items()}
    sigma = torch.sqrt(total.var(unbiased=False) + norm.eps)
    out = {name: gamma * (p - p.mean()) / sigma for name, p in parts.items()}
    out["bias"] = out.get("bias", torch.zeros_like(total)) + norm.bias.detach().cpu().double()
    return out


def _input_parts(trace: Trace, net: nn.Module, stack: str, item: int, pos: int) -> Parts:
    """The layer-0 attention input of one token as token + position (+ token_type) + bias."""
    emb = {name: t.detach().cpu().double() for name, t in trace.embeddings[stack].items()}
    parts: Parts = {"token": emb["token"][item, pos], "position": emb["position"][pos]}
    if "token_type" in emb:
        parts["token_type"] = emb["token_type"][item, pos]
    if net.embedding.norm is not None:
        parts = _ln_split(parts, net.embedding.norm)
    if trace.config.norm == "pre":
        layer = (net.encoder if stack == "encoder" else net.decoder).layers[0]
        parts = _ln_split(parts, layer.add_norm1.norm)
    return parts


def _project(parts: Parts, linear: nn.Linear, head: int, n_heads: int) -> Parts:
    """Each part through head `head` of an input projection (of ``n_heads`` heads: fewer for
    W_K and W_V under grouped-query attention); the projection's bias, if any, joins "bias"."""
    w = per_head(linear.weight.detach().cpu().double(), n_heads)[head]  # (d_model, d_head)
    out = {name: p @ w for name, p in parts.items() if name != "bias"}
    bias = 0
    if linear.bias is not None:
        bias = linear.bias.detach().cpu().double().view(n_heads, -1)[head]  # (d_head,)
    if "bias" in parts or linear.bias is not None:
        out["bias"] = (parts["bias"] @ w if "bias" in parts else 0) + bias
    return out


def _split(trace, net, stack, layer, head, query, key, item, score_trace) -> dict:
    """The token/position split of the score where it is exact (see the module docstring)."""
    if net is None:
        return {"available": False, "reason": "The split needs the model's W_Q, W_K: pass net."}
    if stack == "cross" or layer != 0:
        return {
            "available": False,
            "reason": "Only layer 0 of a self-attention stack reads token + position directly; "
            "after the first attention the softmax mixes them non-linearly.",
        }
    cfg = trace.config
    if cfg.positions == "rotary":
        return {
            "available": False,
            "reason": "RoPE adds no position vector: it turns q and k by angles set by their "
            "positions, so q·k has no token + position split (the Embeddings tab shows how a "
            "score changes with distance).",
        }
    attn = check_net(trace, net, stack, "The token/position split")[0]
    n_heads, scale = cfg.n_heads, cfg.d_head**-0.5
    q_parts = _project(_input_parts(trace, net, stack, item, query), attn.w_q, head, n_heads)
    k_parts = _project(
        _input_parts(trace, net, stack, item, key), attn.w_k, cfg.kv_head_of(head), cfg.kv_heads
    )
    terms = [
        {"query_part": a, "key_part": b, "value": float(qa @ kb * scale)}
        for a, qa in q_parts.items()
        for b, kb in k_parts.items()
    ]
    q = trace.layer_field("queries", stack, layer)[item, head, query].cpu().double()
    k = trace.layer_field("keys", stack, layer)[item, head, key].cpu().double()
    total = math.fsum(t["value"] for t in terms)
    norms = trace.config.embedding_norm or trace.config.norm == "pre"
    return {
        "available": True,
        "reason": "x = "
        + " + ".join(p for p in q_parts if p != "bias")
        + (" through LayerNorm, its σ fixed at the value it measured" if norms else ""),
        "parts": list(q_parts),
        "terms": terms,
        "sum": total,
        "difference": abs(total - score_trace),
        "q_difference": float((sum(q_parts.values()) - q).abs().max()),
        "k_difference": float((sum(k_parts.values()) - k).abs().max()),
    }


def _context_check(trace, net, stack, layer, item, query, context_all) -> dict:
    """Σ_h z_h W_O^h + b_O against the trace's attention output for this query."""
    if net is None:
        return {"available": False, "reason": "Checking the context needs W_O: pass net."}
    attn = check_net(trace, net, stack, "The context check")[layer]
    w_o = output_per_head(attn.w_o.weight.detach().cpu().double(), trace.config.n_heads)
    rebuilt = torch.einsum("hd,hdm->m", context_all, w_o)  # (d_model,)
    if attn.w_o.bias is not None:  # LLaMA's W_O has none
        rebuilt = rebuilt + attn.w_o.bias.detach().cpu().double()
    out = trace.layer_field("attn_out", stack, layer)[item, query].cpu().double()  # (d_model,)
    return {"available": True, "difference": float((rebuilt - out).abs().max())}


def score_breakdown(
    trace: Trace,
    stack: str,
    layer: int,
    head: int,
    query: int,
    key: int,
    item: int = 0,
    net: nn.Module | None = None,
) -> dict:
    """One query/key pair from q·k/√d_k through mask and softmax to Σ_j α_ij v_j, checked.

    Vaswani et al. 2017, eq. 1. Indices are 0-based positions in the (padded) sequence.

    Args:
        net: the model that made the trace. Without it, everything but the token/position split
            and the W_O check of the context is still computed (a Trace carries no weights).
    Returns:
        A dict of Python floats and lists (masked entries are -inf): q, k, dot, scale, score
        (float64 from the trace's q, k), score_trace (the trace's own float32 QKᵀ/√d_k), mask,
        mask_value (0 or -inf), row_max, exp, partition, weight (the trace's α_ij),
        weight_recomputed (exp / partition), row and row_sum (the trace's softmax row), value
        (v_j), weighted_value (α_ij v_j), context (Σ_j α_ij v_j), "split" (the token/position
        terms, their sum and its difference from score_trace, or why it is not available) and
        "context_check" (Σ_h context_h W_O^h + b_O against the trace's attention output).
    """
    check_stack(trace, stack)
    pattern = trace.attentions[stack]  # (B, L, H, T_q, T_k)
    names = ("item", "layer", "head", "query", "key")
    for name, value, size in zip(
        names, (item, layer, head, query, key), pattern.shape, strict=True
    ):
        if not 0 <= value < size:
            raise ValueError(f"{name} {value} is out of range: this trace has {size} (0-based).")
    # One layer each (B, H, T, d_head): replayed alone unless the whole field was computed.
    queries = trace.layer_field("queries", stack, layer)
    keys = trace.layer_field("keys", stack, layer)
    values = trace.layer_field("values", stack, layer)[item].cpu().double()  # (H, T_k, d_head)
    d_k = queries.shape[-1]
    q32 = queries[item, head, query].cpu()  # (d_head,)
    k_all32 = keys[item, head].cpu()  # (T_k, d_head)
    score_row32 = (q32 * d_k**-0.5) @ k_all32.T  # (T_k,) the Trace.scores formula
    q, k_all = q32.double(), k_all32.double()
    score_row = (q @ k_all.T) / math.sqrt(d_k)  # (T_k,)
    allowed = trace.masks[stack][item, query].cpu()  # (T_k,) bool
    masked = score_row.masked_fill(~allowed, -math.inf)  # (T_k,)
    row_max = float(masked.max())
    exp = torch.exp(masked - row_max) if math.isfinite(row_max) else torch.zeros_like(masked)
    partition = float(exp.sum())
    alpha_row = pattern[item, layer, head, query].cpu().double()  # (T_k,)
    alpha_heads = pattern[item, layer, :, query].cpu().double()  # (H, T_k)
    context_all = torch.einsum("ht,htd->hd", alpha_heads, values)  # (H, d_head)
    weight = float(alpha_row[key])
    weight_recomputed = float(exp[key] / partition) if partition > 0 else 0.0
    score_trace = float(score_row32[key])
    return {
        "stack": stack,
        "layer": layer,
        "head": head,
        "item": item,
        "query": query,
        "key": key,
        "query_token": trace.tokens_for(stack)[0][item][query],
        "key_token": trace.tokens_for(stack)[1][item][key],
        "d_k": d_k,
        "q": q.tolist(),
        "k": k_all[key].tolist(),
        "dot": float(q @ k_all[key]),
        "scale": 1 / math.sqrt(d_k),
        "score": float(score_row[key]),
        "score_trace": score_trace,
        "score_difference": abs(float(score_row[key]) - score_trace),
        "mask": bool(allowed[key]),
        "mask_value": 0.0 if bool(allowed[key]) else -math.inf,
        "row_max": row_max,
        "exp": float(exp[key]),
        "partition": partition,
        "weight": weight,
        "weight_recomputed": weight_recomputed,
        "weight_difference": abs(weight - weight_recomputed),
        "row": alpha_row.tolist(),
        "row_sum": float(alpha_row.sum()),
        "value": values[head, key].tolist(),
        "weighted_value": (weight * values[head, key]).tolist(),
        "context": context_all[head].tolist(),
        "split": _split(trace, net, stack, layer, head, query, key, item, score_trace),
        "context_check": _context_check(trace, net, stack, layer, item, query, context_all),
    }
