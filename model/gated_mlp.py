"""The gated MLP of LLaMA, Qwen2 and Mistral (SwiGLU, Shazeer 2020, "GLU Variants")."""

from __future__ import annotations

import torch
from torch import nn

from model.config import TransformerConfig


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

    def forward(self, x: torch.Tensor, record: dict | None = None) -> torch.Tensor:
        """record: optional {} that gets "gate" x W_gate, "up" x W_up and "hidden" their
        product after the activation, each [B, T, d_ff]."""
        gate, up = self.w_gate(x), self.w_up(x)  # (B, T, d_ff) each
        gated = self.act(gate) * up  # (B, T, d_ff)
        if record is not None:
            record.update(gate=gate, up=up, hidden=gated)
        del gate, up  # freed before W_down unless recorded: a forward pass's peak stays as it was
        return self.w_down(self.dropout(gated))  # (B, T, d_model)
