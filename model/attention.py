"""Scaled dot-product attention and multi-head attention (seed 000 §2, seed 004 §Attention).

Both return their intermediates instead of stashing them on the module: the model is shared by
concurrent requests, so whatever one call computes must leave through its return value. Asked to
(a slot's "record"), multi-head attention returns every intermediate of its forward pass, from
the projections to W_O: the layer walk (analysis/layer_steps.py) reads those, not a second copy
of the formula.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from model.config import TransformerConfig
from model.rotary import Rotation
from model.sites import SiteView, site

ABLATIONS = ("zero", "mean")


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    out: dict[str, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(QKᵀ / √d_k) V, with masked keys set to -inf before the softmax.

    Args:
        q: [..., T_q, d_k]; k: [..., T_k, d_k]; v: [..., T_k, d_v].
        mask: bool, broadcastable to [..., T_q, T_k]; True = may attend.
        out: optional {"pattern": tensor [..., T_q, T_k]} to write the weights into (a trace's
            per-layer slot), which saves copying them afterwards; a "record" dict there gets
            the masked scores, "masked" (the layer walk's; nothing is kept otherwise).
    Returns:
        (out [..., T_q, d_v], weights [..., T_q, T_k], scores [..., T_q, T_k]) where scores are
        QKᵀ/√d_k before masking. A query row with no allowed key gets all-zero weights (not NaN).
    """
    out = out or {}
    q = q * q.shape[-1] ** -0.5  # scale Q (T·d_k numbers) instead of QKᵀ (T·T numbers): same scores
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if mask is not None and bool(mask.all()):
        mask = None  # nothing hidden (one text, no padding, no causality): skip the masking work
    seen = out.get("record")  # the layer walk's; None in a forward pass or a trace
    if mask is None:
        if seen is not None:
            seen["masked"] = scores  # nothing hidden: the same tensor
        weights = torch.softmax(scores, dim=-1, out=out.get("pattern"))
        return weights @ v, weights, scores
    bias = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
    bias.masked_fill_(~mask, float("-inf"))  # (..., T_q, T_k) broadcast over heads
    masked = scores + bias  # (..., T_q, T_k): -inf where hidden
    if seen is not None:
        seen["masked"] = masked
    weights = torch.softmax(masked, dim=-1, out=out.get("pattern"))
    del masked  # freed before weights @ v unless recorded: a trace's peak stays where it was
    if not bool(mask.any(dim=-1).all()):
        # A fully hidden row is softmax(-inf, ..., -inf) = NaN. Every entry of such a row is hidden,
        # so this zeroes exactly those rows; other rows' hidden entries are 0 already.
        weights.masked_fill_(~mask, 0.0)
    return weights @ v, weights, scores


def fused_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """softmax(QKᵀ / √d_k) V by torch's fused kernel, which never makes the weights: a pass that
    shows no attention (a forward pass, a patched run, a continuation) is 1.3-4 × faster at 512
    tokens for it (bench/bench_forward.py). The same numbers as scaled_dot_product_attention
    within float rounding (tests/test_modules.py); a query row with no allowed key is all zeros
    there, so such a mask takes the explicit path.

    Args:
        q: [..., T_q, d_k]; k: [..., T_k, d_k]; v: [..., T_k, d_v]; mask as there.
    Returns:
        out [..., T_q, d_v].
    """
    if mask is not None and bool(mask.all()):
        mask = None  # nothing hidden: the kernel without a mask is the fastest
    if mask is not None and not bool(mask.any(dim=-1).all()):
        return scaled_dot_product_attention(q, k, v, mask)[0]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # dropout_p 0, scale 1/√d_k


@dataclass(frozen=True)
class HeadAblation:
    """Remove chosen heads' contexts z_h before concat and W_O (Michel et al. 2019; HF head_mask).

    keep is HF's head_mask for one sublayer: 1 keeps a head, 0 removes it (fractions scale it).
    "zero" multiplies z_h by keep; "mean" blends z_h towards its mean over the real (unpadded)
    query positions of the same batch item, so a removed head still adds its average output.
    """

    keep: torch.Tensor  # [H] float
    mode: Literal["zero", "mean"] = "zero"
    query_mask: torch.Tensor | None = None  # [B, T_q] 1 = real query, used by "mean"

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        """z [B, H, T_q, d_head] -> the same shape with the ablated heads replaced."""
        keep = self.keep.to(device=z.device, dtype=z.dtype).view(1, -1, 1, 1)  # (1, H, 1, 1)
        if self.mode == "zero":
            return z * keep
        if self.query_mask is None:
            mean = z.mean(dim=2, keepdim=True)  # (B, H, 1, d_head)
        else:
            w = self.query_mask.to(device=z.device, dtype=z.dtype)  # (B, T_q)
            w = w / w.sum(dim=1, keepdim=True).clamp(min=1.0)
            mean = torch.einsum("bhtd,bt->bhd", z, w).unsqueeze(2)  # (B, H, 1, d_head)
        return z * keep + mean * (1.0 - keep)


@dataclass
class KeyValues:
    """One attention's keys and values of the text so far, [B, H_kv, T, d_head] each (keys
    turned by RoPE, a group's shared heads not yet repeated): what a continuation with a
    key/value cache hands each step's pass (model/generate.py), so that a new token's pass
    computes its own key and value only. It belongs to the caller, one per continuation and
    layer, and travels in the call's slot ("cache"); the module keeps nothing."""

    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The new tokens' k and v [B, H_kv, T_new, d_head] after the ones kept; keeps them."""
        if self.keys is not None:
            k = torch.cat((self.keys, k), dim=2)  # (B, H_kv, T_past + T_new, d_head)
            v = torch.cat((self.values, v), dim=2)
        self.keys, self.values = k, v
        return k, v


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O.

    head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i): one scaled dot-product attention per subspace.
    With grouped-query attention (config.n_kv_heads < n_heads, LLaMA 2/3, Mistral, Qwen2) W_K and
    W_V make n_kv_heads heads and query head i reads key/value head i // (n_heads / n_kv_heads).
    With rotary positions each head's queries and keys are turned by their position first.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.n_heads, self.d_head = config.n_heads, config.d_head
        self.n_rep = config.n_heads // config.kv_heads  # query heads per key/value head
        d_kv = config.kv_heads * config.d_head
        self.w_q = nn.Linear(config.d_model, config.d_model, bias=config.attn_bias)
        self.w_k = nn.Linear(config.d_model, d_kv, bias=config.attn_bias)
        self.w_v = nn.Linear(config.d_model, d_kv, bias=config.attn_bias)
        self.w_o = nn.Linear(config.d_model, config.d_model, bias=config.attn_out_bias)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """[B, T, heads · d_head] -> [B, heads, T, d_head] (H query or H_kv key/value heads)."""
        batch, seq_len, width = x.shape
        return x.view(batch, seq_len, width // self.d_head, self.d_head).transpose(1, 2)

    def project(
        self,
        kind: str,
        x: torch.Tensor,
        rotary: Rotation | None = None,
        turn: bool = True,
        record: dict[str, torch.Tensor] | None = None,
        repeat: bool = True,
        sites: SiteView | None = None,
    ) -> torch.Tensor:
        """ "q", "k" or "v" of x per query head, [B, H, T, d_head]: q and k turned by rotary
        (unless turn=False: the projection before RoPE), a shared key/value head repeated for
        each query head of its group (HF's repeat_kv; repeat=False: [B, H_kv, T, d_head], as a
        key/value cache keeps them). ``record`` gets each stage: "q_linear" [B, T, heads ·
        d_head], "q_heads" [B, H or H_kv, T, d_head], "q_rot" (turned), "k_rep" (repeated),
        with the kind's letter. x may be [B, heads, T, d_model], each head's own input (the
        split inputs of model/sites.py); ``sites``: the call's "hook_q" / "hook_k" / "hook_v"."""
        linear = {"q": self.w_q, "k": self.w_k, "v": self.w_v}[kind]
        if x.dim() == 4:
            heads = self.per_head(linear, x)  # (B, H or H_kv, T, d_head)
        else:
            flat = linear(x)  # (B, T, H or H_kv · d_head)
            heads = self.split(flat)  # (B, H or H_kv, T, d_head)
            if record is not None:
                record[f"{kind}_linear"], record[f"{kind}_heads"] = flat, heads
        heads = site(sites, f"hook_{kind}", heads)
        if rotary is not None and turn and kind != "v":
            heads = rotary(heads)  # turned before repeating: H_kv heads, not H
            if record is not None:
                record[f"{kind}_rot"] = heads
        if kind != "q" and self.n_rep > 1 and repeat:
            heads = self.repeat(heads)  # (B, H, T, d_head)
            if record is not None:
                record[f"{kind}_rep"] = heads
        return heads

    def per_head(self, linear: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """Each head's slice of a projection applied to that head's own input:
        [B, heads, T, d_model] -> [B, heads, T, d_head]."""
        n = x.shape[1]
        weight = linear.weight.view(n, self.d_head, -1)  # (heads, d_head, d_model)
        heads = torch.einsum("bhtd,hed->bhte", x, weight)  # (B, heads, T, d_head)
        if linear.bias is not None:
            heads = heads + linear.bias.view(n, 1, self.d_head)
        return heads

    def repeat(self, heads: torch.Tensor) -> torch.Tensor:
        """[B, H_kv, T, d_head] -> [B, H, T, d_head]: each key/value head once per query head of
        its group (the identity without grouped-query attention)."""
        return heads.repeat_interleave(self.n_rep, dim=1) if self.n_rep > 1 else heads

    @staticmethod
    def concat(x: torch.Tensor) -> torch.Tensor:
        """[B, H, T, d_head] -> [B, T, d_model]."""
        batch, n_heads, seq_len, d_head = x.shape
        return x.transpose(1, 2).reshape(batch, seq_len, n_heads * d_head)

    def forward(
        self,
        x_q: torch.Tensor,
        x_kv: torch.Tensor,
        mask: torch.Tensor | None = None,
        out: dict[str, torch.Tensor] | None = None,
        rotary: Rotation | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Queries come from x_q, keys and values from x_kv (the same tensor in self-attention).

        Args:
            x_q: [B, T_q, d_model]; x_kv: [B, T_k, d_model].
            mask: bool [B, T_q, T_k] (or broadcastable), True = may attend.
            out: optional {"pattern": [B, H, T_q, T_k]} slot to write the weights into,
                {"ablation": HeadAblation} to remove heads' contexts (the weights stay reported),
                {"patch": callable} to replace them (activation patching, model/patch.py),
                {"record": {}} to get every intermediate back (the layer walk's), and
                {"cache": KeyValues} to attend over the keys and values kept from the text's
                earlier tokens too (x_kv holds the new tokens only; the cache then keeps theirs),
                {"fused": True} when the call needs no weights: the fused kernel
                (fused_attention) then computes the contexts, "scores" and "pattern" are None
                (unless a record, a pattern slot or the site "hook_pattern" asks for them).
            rotary: RoPE angles of the text (self-attention of a rotary model), else None.
        Returns:
            out [B, T_q, d_model] and {"q", "k", "v": [B, H, T, d_head], "scores", "pattern":
            [B, H, T_q, T_k]}; with "record", also project()'s stages, "masked" (the scores
            with -inf where hidden), "z" (the heads' contexts [B, H, T_q, d_head] before any
            ablation), "concat" [B, T_q, d_model] (after it) and "out".
        """
        record = out.get("record") if out else None
        cache = out.get("cache") if out else None
        sites = out.get("sites") if out else None
        inputs = (out.get("inputs") if out else None) or {}  # each head's own stream (sites)
        q = self.project("q", inputs.get("q", x_q), rotary, record=record, sites=sites)
        if cache is None:  # q: (B, H, T_q, d_head); k, v: (B, H, T_k, d_head)
            k = self.project("k", inputs.get("k", x_kv), rotary, record=record, sites=sites)
            v = self.project("v", inputs.get("v", x_kv), record=record, sites=sites)
        else:  # the earlier tokens' keys and values, then the new ones': (B, H_kv, T_k, d_head)
            k_new = self.project("k", x_kv, rotary, record=record, repeat=False)
            v_new = self.project("v", x_kv, record=record, repeat=False)
            k, v = cache.extend(k_new, v_new)
            k, v = self.repeat(k), self.repeat(v)  # (B, H, T_k, d_head)
        if mask is not None:
            mask = mask.unsqueeze(-3)  # (B, 1, T_q, T_k): the same mask for every head
        wants_pattern = sites is not None and sites.wants("hook_pattern")
        fused = bool(out) and out.get("fused") and out.get("pattern") is None
        # z: (B, H, T_q, d_head), the heads' contexts before concat
        if fused and record is None and not wants_pattern:
            z, pattern, scores = fused_attention(q, k, v, mask), None, None
        else:
            z, pattern, scores = scaled_dot_product_attention(q, k, v, mask, out)
        if wants_pattern:
            pattern = sites("hook_pattern", pattern)
            z = pattern @ v  # (B, H, T_q, d_head): from the pattern the call gave
        found = {"q": q, "k": k, "v": v, "scores": scores, "pattern": pattern}
        if record is not None:
            record["z"] = z
        ablation = out.get("ablation") if out else None
        if ablation is not None:
            z = ablation(z)
        patch = out.get("patch") if out else None
        if patch is not None:  # activation patching (model/patch.py): contexts from another run
            z = patch(z)
        if sites is not None:
            z = sites("hook_z", z)
            if sites.wants("hook_result"):
                return self.results(z, sites), found
        concat = self.concat(z)  # (B, T_q, d_model)
        out = self.w_o(concat)  # (B, T_q, d_model)
        if record is not None:
            found = {**record, **found, "concat": concat, "out": out}
        return out, found

    def results(self, z: torch.Tensor, sites: SiteView) -> torch.Tensor:
        """W_O applied head by head (the site "hook_result", [B, H, T_q, d_model]), then summed
        with W_O's bias: the sublayer's output [B, T_q, d_model]."""
        d_model = self.w_o.weight.shape[0]
        w_o = self.w_o.weight.view(d_model, self.n_heads, self.d_head)  # (d_model, H, d_head)
        result = sites("hook_result", torch.einsum("bhtk,dhk->bhtd", z, w_o))
        out = result.sum(dim=1)  # (B, T_q, d_model)
        return out if self.w_o.bias is None else out + self.w_o.bias


def head_masks(
    config: TransformerConfig, head_mask: torch.Tensor | Mapping | None
) -> dict[str, torch.Tensor]:
    """HF-style head_mask -> {stack: float [L, H]}; a plain tensor means the model's first stack.

    A dict may name "encoder", "decoder" and "cross" (the stacks this model has).
    """
    if head_mask is None:
        return {}
    stacks = [
        name
        for name, present in (
            ("encoder", config.has_encoder),
            ("decoder", config.has_decoder),
            ("cross", config.arch == "encoder-decoder"),
        )
        if present
    ]
    if not isinstance(head_mask, Mapping):
        head_mask = {stacks[0]: head_mask}
    shape = (config.n_layers, config.n_heads)
    masks = {}
    for stack, mask in head_mask.items():
        if stack not in stacks:
            raise ValueError(f"head_mask names {stack!r}; this model's stacks are {stacks}.")
        mask = torch.as_tensor(mask)
        if tuple(mask.shape) != shape:
            raise ValueError(
                f"head_mask[{stack!r}] must be [layers, heads] = {list(shape)}, "
                f"not {list(mask.shape)}."
            )
        masks[stack] = mask.detach().float()  # (L, H)
    return masks
