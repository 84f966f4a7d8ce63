"""The gated MLP of LLaMA, Qwen2 and Mistral (SwiGLU, Shazeer 2020, "GLU Variants")."""

from __future__ import annotations

import torch
from torch import nn

from model.config import TransformerConfig
from model.sites import SiteView, site


class GatedFeedForward(nn.Module):
    """MLP(x) = (act(x W_gate) ⊙ (x W_up)) W_down, act = SiLU in LLaMA: the gate scales each of
    the d_ff features of x W_up before W_down reads them back to d_model."""

    def __init__(self, config: TransformerConfig, activation: nn.Module) -> None:
        super().__init__()
        bias = config.mlp_bias
        self.w_gate = nn.Linear(config.d_model, config.d_ff, bias=bias)
        self.w_up = nn.Linear(config.d_model, config.d_ff, bias=bias)
        self.act = activation
        self.dropout = nn.Dropout(config.dropout)
        self.w_down = nn.Linear(config.d_ff, config.d_model, bias=bias)

    def forward(self, x: torch.Tensor, sites: SiteView | None = None) -> torch.Tensor:
        """sites: the call's sites under "mlp." (model/sites.py), TransformerLens's names:
        "hook_pre" x W_gate, "hook_pre_linear" x W_up and "hook_post" their product after the
        activation, each [B, T, d_ff]."""
        gate = site(sites, "hook_pre", self.w_gate(x))  # (B, T, d_ff)
        up = site(sites, "hook_pre_linear", self.w_up(x))  # (B, T, d_ff)
        gated = site(sites, "hook_post", self.act(gate) * up)  # (B, T, d_ff)
        del gate, up  # freed before W_down unless a site keeps them: a pass's peak stays as it was
        return self.w_down(self.dropout(gated))  # (B, T, d_model)
