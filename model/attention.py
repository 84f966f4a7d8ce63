"""Scaled dot-product attention and multi-head attention (seed 000 §2, seed 004 §Attention).

Both return their intermediates instead of stashing them on the module: the model is shared by
concurrent requests, so whatever one call computes must leave through its return value. What a
call changes or reads in between (a head mask, a patch, a key/value cache, a trace's pattern
slot, a caller's sites) arrives as one argument, a view of the call's sites (model/sites.py).
Every intermediate from the projections to W_O passes a named site there: the layer walk
(analysis/layer_steps.py) reads them by name, not a second copy of the formula.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from model.config import TransformerConfig
from model.norms import make_norm
from model.rotary import Rotation
from model.sites import SiteView, attn_site, site

ABLATIONS = ("zero", "mean")


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    pattern: torch.Tensor | None = None,
    sites: SiteView | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(QKᵀ / √d_k) V, with masked keys set to -inf before the softmax.

    Args:
        q: [..., T_q, d_k]; k: [..., T_k, d_k]; v: [..., T_k, d_v].
        mask: bool, broadcastable to [..., T_q, T_k]; True = may attend.
        pattern: optional tensor [..., T_q, T_k] to write the weights into (a trace's per-layer
            slot), which saves copying them afterwards.
        sites: the call's sites under the attention (model/sites.py): "hook_unmasked_scores"
            (QKᵀ/√d_k) and "hook_attn_scores" (with -inf where hidden), read or replaced there.
    Returns:
        (out [..., T_q, d_v], weights [..., T_q, T_k], scores [..., T_q, T_k]) where scores are
        QKᵀ/√d_k before masking. A query row with no allowed key gets all-zero weights (not NaN).
    """
    q = q * q.shape[-1] ** -0.5  # scale Q (T·d_k numbers) instead of QKᵀ (T·T numbers): same scores
    scores = site(sites, "hook_unmasked_scores", q @ k.transpose(-2, -1))  # (..., T_q, T_k)
    bias, rows_ok = (None, True) if mask is None else _prepared(mask, scores.dtype, scores.device)
    if bias is None:  # nothing hidden: the masked scores are the same tensor
        weights = torch.softmax(site(sites, "hook_attn_scores", scores), dim=-1, out=pattern)
        return weights @ v, weights, scores
    masked = site(sites, "hook_attn_scores", scores + bias)  # (..., T_q, T_k): -inf where hidden
    weights = torch.softmax(masked, dim=-1, out=pattern)
    del masked  # freed before weights @ v unless a site keeps it: a trace's peak stays as it was
    if not rows_ok:
        # A fully hidden row is softmax(-inf, ..., -inf) = NaN. Every entry of such a row is hidden,
        # so this zeroes exactly those rows; other rows' hidden entries are 0 already.
        weights.masked_fill_(~mask, 0.0)
    return weights @ v, weights, scores


def for_heads(mask: torch.Tensor) -> torch.Tensor:
    """mask.unsqueeze(-3), the same mask for every head, made once per mask: every layer then
    gets the same view, and what _prepared keeps on it is found again."""
    view = mask.__dict__.get("_ta_heads")
    if view is None:
        view = mask.__dict__["_ta_heads"] = mask.unsqueeze(-3)
    return view


def _prepared(mask: torch.Tensor, dtype, device) -> tuple[torch.Tensor | None, bool]:
    """(the additive bias of a mask: 0 where allowed, -inf where hidden, or None when nothing is
    hidden; whether every query row has a key it may attend to), made once per mask tensor and
    kept on it: every layer of a pass gets the same mask, and making the bias again in each of
    SmolLM2's 30 layers was a tenth of a 512-token trace's time. A mask is never changed in
    place once made (model/masks.py), so what is kept stays its own."""
    kept = mask.__dict__.setdefault("_ta_prepared", {})
    key = (dtype, device)
    if key not in kept:
        if bool(mask.all()):  # one text, no padding, no causality: no masking work at all
            kept[key] = (None, True)
        else:
            bias = torch.zeros(mask.shape, dtype=dtype, device=device)
            bias.masked_fill_(~mask, float("-inf"))  # (..., T_q, T_k) broadcast over heads
            kept[key] = (bias, bool(mask.any(dim=-1).all()))
    return kept[key]


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
    bias, rows_ok = (None, True) if mask is None else _prepared(mask, q.dtype, q.device)
    if bias is None:
        mask = None  # nothing hidden: the kernel without a mask is the fastest
    if mask is not None and not rows_ok:
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
    layer, and acts through the call's sites (``replacements``); the module keeps nothing."""

    keys: torch.Tensor | None = None
    values: torch.Tensor | None = None

    def more_keys(self, k: torch.Tensor) -> torch.Tensor:
        """The new tokens' keys [B, H_kv, T_new, d_head] after the ones kept; keeps them."""
        if self.keys is not None:
            k = torch.cat((self.keys, k), dim=2)  # (B, H_kv, T_past + T_new, d_head)
        self.keys = k
        return k

    def more_values(self, v: torch.Tensor) -> torch.Tensor:
        """The same for the values."""
        if self.values is not None:
            v = torch.cat((self.values, v), dim=2)  # (B, H_kv, T_past + T_new, d_head)
        self.values = v
        return v

    def extend(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Both at once: the keys and values of the text so far."""
        return self.more_keys(k), self.more_values(v)

    def replacements(self, rotary: bool) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
        """The attention's sites this cache replaces (names under "attn."): the keys once
        turned ("hook_rot_k"; "hook_k" in a pass without rotary positions) and the values,
        each the text's so far, the new tokens' last."""
        return {"hook_rot_k" if rotary else "hook_k": self.more_keys, "hook_v": self.more_values}


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W_O.

    head_i = Attention(Q W_Q^i, K W_K^i, V W_V^i): one scaled dot-product attention per subspace.
    With grouped-query attention (config.n_kv_heads < n_heads, LLaMA 2/3, Mistral, Qwen2) W_K and
    W_V make n_kv_heads heads and query head i reads key/value head i // (n_heads / n_kv_heads).
    With rotary positions each head's queries and keys are turned by their position first.
    With QK-norm (Qwen3, Gemma 3) each query and key head is RMS-normalised over its d_head
    dimensions before the turn (HF's q_norm / k_norm).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.n_heads, self.d_head = config.n_heads, config.d_head
        self.n_rep = config.n_heads // config.kv_heads  # query heads per key/value head
        d_kv = config.kv_heads * config.d_head
        self.w_q = nn.Linear(config.d_model, config.d_attn, bias=config.attn_bias)
        self.w_k = nn.Linear(config.d_model, d_kv, bias=config.attn_bias)
        self.w_v = nn.Linear(config.d_model, d_kv, bias=config.attn_bias)
        self.w_o = nn.Linear(config.d_attn, config.d_model, bias=config.attn_out_bias)
        self.q_norm = make_norm(config, config.d_head) if config.qk_norm else None
        self.k_norm = make_norm(config, config.d_head) if config.qk_norm else None

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
        repeat: bool = True,
        sites: SiteView | None = None,
    ) -> torch.Tensor:
        """ "q", "k" or "v" of x per query head, [B, H, T, d_head]: q and k turned by rotary
        (unless turn=False: the projection before RoPE), a shared key/value head repeated for
        each query head of its group (HF's repeat_kv; repeat=False: [B, H_kv, T, d_head], as a
        key/value cache keeps them). x may be [B, heads, T, d_model], each head's own input (the
        split inputs of model/sites.py). ``sites``: the call's sites of each stage, with the
        kind's letter: "hook_q_flat" (x W_Q + b_Q [B, T, heads · d_head]; not with split
        inputs), "hook_q" (its heads [B, H or H_kv, T, d_head]), "hook_q_normed" (after QK-norm,
        where the model has it), "hook_rot_q" (turned; where a
        key/value cache adds its keys), "hook_rep_k" / "hook_rep_v" (repeated)."""
        linear = {"q": self.w_q, "k": self.w_k, "v": self.w_v}[kind]
        if x.dim() == 4:
            heads = self.per_head(linear, x)  # (B, H or H_kv, T, d_head)
        else:
            flat = site(sites, f"hook_{kind}_flat", linear(x))  # (B, T, H or H_kv · d_head)
            heads = self.split(flat)  # (B, H or H_kv, T, d_head)
        heads = site(sites, f"hook_{kind}", heads)
        norm = {"q": self.q_norm, "k": self.k_norm}.get(kind)
        if norm is not None:  # QK-norm over each head's d_head, before RoPE
            heads = site(sites, f"hook_{kind}_normed", norm(heads))  # (B, H or H_kv, T, d_head)
        if rotary is not None and turn and kind != "v":
            heads = rotary(heads)  # turned before repeating: H_kv heads, not H
            heads = site(sites, f"hook_rot_{kind}", heads)
        if kind != "q" and self.n_rep > 1 and repeat:
            heads = site(sites, f"hook_rep_{kind}", self.repeat(heads))  # (B, H, T, d_head)
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
        """[B, H, T, d_head] -> [B, T, H · d_head] (d_model unless head_dim says otherwise)."""
        batch, n_heads, seq_len, d_head = x.shape
        return x.transpose(1, 2).reshape(batch, seq_len, n_heads * d_head)

    def forward(
        self,
        x_q: torch.Tensor,
        x_kv: torch.Tensor,
        mask: torch.Tensor | None = None,
        sites: SiteView | None = None,
        rotary: Rotation | None = None,
        inputs: Mapping[str, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Queries come from x_q, keys and values from x_kv (the same tensor in self-attention).

        Args:
            x_q: [B, T_q, d_model]; x_kv: [B, T_k, d_model].
            mask: bool [B, T_q, T_k] (or broadcastable), True = may attend.
            sites: the call's sites under this sublayer ("attn."; model/sites.py): what it reads
                or replaces there ("hook_z": a head mask, a patch; "hook_rot_k" / "hook_v": a
                key/value cache, x_kv then holding the new tokens only; every stage of
                project() and scaled_dot_product_attention, "hook_concat" [B, T_q, d_model]
                what W_O reads), the slot a trace's pattern is written into, and whether the
                pass shows weights: in a pass that does not, where no site reads or replaces
                the scores or "hook_pattern", the fused kernel (fused_attention) computes the
                contexts and "scores" and "pattern" are None. Without sites (a direct call) the
                attention is explicit.
            rotary: RoPE angles of the text (self-attention of a rotary model), else None.
            inputs: {"q" | "k" | "v": [B, heads, T, d_model]}: each head's own input in place of
                x_q / x_kv (the split inputs of model/sites.py).
        Returns:
            out [B, T_q, d_model] and {"q", "k", "v": [B, H, T, d_head], "scores", "pattern":
            [B, H, T_q, T_k]}.
        """
        inputs = inputs or {}
        q = self.project("q", inputs.get("q", x_q), rotary, sites=sites)
        k = self.project("k", inputs.get("k", x_kv), rotary, sites=sites)
        v = self.project("v", inputs.get("v", x_kv), sites=sites)
        if mask is not None:  # q: (B, H, T_q, d_head); k, v: (B, H, T_k, d_head)
            mask = for_heads(mask)  # (B, 1, T_q, T_k): the same mask for every head
        wants_pattern = sites is not None and sites.wants("hook_pattern")
        # z: (B, H, T_q, d_head), the heads' contexts before concat
        if not _explicit(sites, wants_pattern):
            z, pattern, scores = fused_attention(q, k, v, mask), None, None
        else:
            slot = None if sites is None else sites.slot("hook_pattern")
            z, pattern, scores = scaled_dot_product_attention(q, k, v, mask, slot, sites)
        if wants_pattern:
            pattern = sites("hook_pattern", pattern)
            z = pattern @ v  # (B, H, T_q, d_head): from the pattern the call gave
        found = {"q": q, "k": k, "v": v, "scores": scores, "pattern": pattern}
        if sites is not None:
            z = sites("hook_z", z)  # a head mask's, a patch's, then the caller's
            if sites.wants("hook_result"):
                return self.results(z, sites), found
        concat = site(sites, "hook_concat", self.concat(z))  # (B, T_q, d_model)
        return self.w_o(concat), found  # (B, T_q, d_model)

    def results(self, z: torch.Tensor, sites: SiteView) -> torch.Tensor:
        """W_O applied head by head (the site "hook_result", [B, H, T_q, d_model]), then summed
        with W_O's bias: the sublayer's output [B, T_q, d_model]."""
        d_model = self.w_o.weight.shape[0]
        w_o = self.w_o.weight.view(d_model, self.n_heads, self.d_head)  # (d_model, H, d_head)
        result = sites("hook_result", torch.einsum("bhtk,dhk->bhtd", z, w_o))
        out = result.sum(dim=1)  # (B, T_q, d_model)
        return out if self.w_o.bias is None else out + self.w_o.bias


def _explicit(sites: SiteView | None, wants_pattern: bool) -> bool:
    """Whether attention makes its weights (scaled_dot_product_attention) rather than running
    the fused kernel: a direct call, a pass that shows weights, or one whose sites read or
    replace the pattern or the scores."""
    if sites is None or sites.weights or wants_pattern:
        return True
    return sites.wants("hook_attn_scores") or sites.wants("hook_unmasked_scores")


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


def ablation_sites(
    config: TransformerConfig,
    keep: Mapping[str, torch.Tensor],
    mode: str,
    query_masks: Mapping[str, torch.Tensor | None],
    layers: range | None = None,
) -> dict[str, HeadAblation]:
    """Head masks (head_masks()' {stack: [L, H]}) as replacements of each head's context, the
    site "attn.hook_z" ("cross_attn.hook_z" for "cross") of every layer (or of ``layers``);
    query_masks: {"encoder" | "decoder": [B, T_q]} the real queries a "mean" ablation averages."""
    found = {}
    for stack, kept in keep.items():
        query_mask = query_masks.get("decoder" if stack == "cross" else stack)
        for i in layers if layers is not None else range(config.n_layers):
            name = attn_site(config, stack, i, "hook_z")
            found[name] = HeadAblation(kept[i], mode, query_mask)
    return found
