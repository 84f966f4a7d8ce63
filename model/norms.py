"""The two normalisations: LayerNorm (paper, BERT, GPT-2) and RMSNorm (LLaMA, Qwen2, Mistral)."""

from __future__ import annotations

import torch
from torch import nn

from model.config import TransformerConfig


class RMSNorm(nn.Module):
    """RMSNorm(x) = x / √(mean(x²) + ε) · g (Zhang & Sennrich 2019): no mean, no bias."""

    def __init__(self, d_model: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))  # g, HF's name
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # In float32 whatever x is, then back, in HF's order (LlamaRMSNorm): the same rounding.
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)  # (..., d_model)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


def make_norm(config: TransformerConfig) -> nn.Module:
    """The config's normalisation over d_model: nn.LayerNorm or RMSNorm (config.norm_kind)."""
    if config.norm_kind == "rms":
        return RMSNorm(config.d_model, config.layer_norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)


NORMS = (nn.LayerNorm, RMSNorm)  # isinstance() of either kind (parameter counts)
