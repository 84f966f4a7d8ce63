"""Rotary position embeddings (RoPE, Su et al. 2021), as LLaMA applies them to queries and keys.

Each head's d_head dimensions form d_head/2 pairs (i, i + d_head/2), HF's "rotate_half" layout;
at position m pair i turns by the angle m·θ_i, θ_i = rope_theta^(−2i/d_head). Turned queries and
keys make the score q_m·k_n depend on the offset m − n alone: nothing is added to the embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [−x2, x1] over the last dim (the 90° turn of every pair)."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., d_head/2) each
    return torch.cat((-x2, x1), dim=-1)


@dataclass(frozen=True)
class Rotation:
    """cos and sin [T, d_head] of one text's positions; turns [B, H, T, d_head] heads."""

    cos: torch.Tensor
    sin: torch.Tensor

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.cos + rotate_half(x) * self.sin  # (B, H, T, d_head)


class RotaryEmbedding(nn.Module):
    """θ_i held as a buffer; ``rotation(T)`` gives the cos and sin of positions 0..T−1."""

    def __init__(self, d_head: int, theta: float) -> None:
        super().__init__()
        # HF's compute_default_rope_parameters, in float32 as there: the same angles bit for bit.
        inv_freq = 1.0 / (theta ** (torch.arange(0, d_head, 2, dtype=torch.float) / d_head))
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d_head/2,)

    def rotation(self, seq_len: int, dtype: torch.dtype = torch.float32) -> Rotation:
        """Positions 0..T−1 (HF's default position_ids, padding included)."""
        pos = torch.arange(seq_len, device=self.inv_freq.device).float()  # (T,)
        freqs = pos[:, None] * self.inv_freq.float()  # (T, d_head/2)
        angles = torch.cat((freqs, freqs), dim=-1)  # (T, d_head): rotate_half pairs i, i + d/2
        return Rotation(angles.cos().to(dtype), angles.sin().to(dtype))
