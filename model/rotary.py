"""Rotary position embeddings (RoPE, Su et al. 2021), as LLaMA applies them to queries and keys.

Each head's d_head dimensions form d_head/2 pairs (i, i + d_head/2), HF's "rotate_half" layout;
at position m pair i turns by the angle m·θ_i, θ_i = rope_theta^(−2i/d_head). Turned queries and
keys make the score q_m·k_n depend on the offset m − n alone: nothing is added to the embedding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [−x2, x1] over the last dim (the 90° turn of every pair)."""
    x1, x2 = x.chunk(2, dim=-1)  # (..., d_head/2) each
    return torch.cat((-x2, x1), dim=-1)


@dataclass(frozen=True)
class Rotation:
    """cos and sin [T, d_head] of one text's positions (or [B, 1, T, d_head], each text its
    own); turns [B, H, T, d_head] heads. ``local``: the same positions at the sliding layers'
    own base (Gemma 3: 10,000 there, 1,000,000 in the full layers), which those layers use."""

    cos: torch.Tensor
    sin: torch.Tensor
    local: Rotation | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.cos + rotate_half(x) * self.sin  # (B, H, T, d_head)


def llama3_frequencies(
    inv_freq: torch.Tensor, factor: float, low: float, high: float, context: int
) -> torch.Tensor:
    """LLaMA 3.1's scaled θ_i (HF's _compute_llama3_parameters, step for step): pairs whose
    wavelength 2π/θ_i exceeds context/low turn ``factor`` times slower, those under
    context/high unchanged, the ones between blended smoothly."""
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > context / low, inv_freq / factor, inv_freq)
    smooth = (context / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    middle = ~(wavelen < context / high) * ~(wavelen > context / low)
    return torch.where(middle, blended, scaled)


class RotaryEmbedding(nn.Module):
    """θ_i held as a buffer; ``rotation(T)`` gives the cos and sin of positions 0..T−1."""

    def __init__(
        self, d_head: int, theta: float, llama3: tuple[float, float, float, int] | None = None
    ) -> None:
        super().__init__()
        # HF's compute_default_rope_parameters, in float32 as there: the same angles bit for bit.
        inv_freq = 1.0 / (theta ** (torch.arange(0, d_head, 2, dtype=torch.float) / d_head))
        if llama3 is not None:
            inv_freq = llama3_frequencies(inv_freq, *llama3)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (d_head/2,)

    def rotation(self, seq_len: int, dtype: torch.dtype = torch.float32) -> Rotation:
        """Positions 0..T−1 (HF's default position_ids, padding included)."""
        return self.rotation_at(torch.arange(seq_len, device=self.inv_freq.device), dtype)

    def rotation_at(
        self, position_ids: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> Rotation:
        """The angles of given positions: [T] gives cos and sin [T, d_head]; [B, T] (each text's
        own positions, as a continuation with a key/value cache feeds them) gives [B, 1, T,
        d_head], which turns [B, H, T, d_head] heads. The same numbers as ``rotation`` at the
        same positions."""
        pos = position_ids.to(self.inv_freq.device).float()  # (T,) or (B, T)
        freqs = pos[..., None] * self.inv_freq.float()  # (..., T, d_head/2)
        angles = torch.cat((freqs, freqs), dim=-1)  # (..., T, d_head): pairs i, i + d/2
        if angles.dim() == 3:
            angles = angles.unsqueeze(1)  # (B, 1, T, d_head): the same turn for every head
        return Rotation(angles.cos().to(dtype), angles.sin().to(dtype))
