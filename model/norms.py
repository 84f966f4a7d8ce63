"""The two normalisations: LayerNorm (paper, BERT, GPT-2) and RMSNorm (LLaMA, Qwen2, Mistral,
Gemma 3 with its gain written as 1 + w)."""

from __future__ import annotations

import torch
from torch import nn

from model.config import TransformerConfig


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / √(mean(x²) + ε) · g (Zhang & Sennrich 2019): no mean, no bias.

    offset: the gain is g = 1 + w, w stored (Gemma's RMSNorm: a zero w is the identity gain).
    """

    def __init__(self, d_model: int, eps: float, offset: bool = False) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(d_model) if offset else torch.ones(d_model))
        self.eps = eps
        self.offset = offset

    @property
    def gain(self) -> torch.Tensor:
        """g, what each normalised coordinate is multiplied by: w, or 1 + w with the offset."""
        return 1.0 + self.weight if self.offset else self.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # In float32 whatever x is, then back, in HF's order: LlamaRMSNorm casts before the
        # gain, Gemma3RMSNorm after it (x · (1 + w) in float32): the same rounding as each.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.offset:
            return (h * (1.0 + self.weight.float())).type_as(x)  # (..., d)
        return self.weight * h.to(x.dtype)  # (..., d_model)

    def extra_repr(self) -> str:
        offset = ", gain 1 + w" if self.offset else ""
        return f"{self.weight.shape[0]}, eps={self.eps}{offset}"


def make_norm(config: TransformerConfig, width: int | None = None) -> nn.Module:
    """The config's normalisation over d_model (or ``width``: QK-norm's d_head): nn.LayerNorm or
    RMSNorm (config.norm_kind), its gain 1 + w where config.norm_offset says so (Gemma)."""
    width = config.d_model if width is None else width
    if config.norm_kind == "rms":
        return RMSNorm(width, config.layer_norm_eps, config.norm_offset)
    return nn.LayerNorm(width, eps=config.layer_norm_eps)


NORMS = (nn.LayerNorm, RMSNorm)  # isinstance() of either kind (parameter counts)
