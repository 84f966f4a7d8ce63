"""Input module (seed 000 §1.2): token embedding + positional encoding, summed.

BERT (seed 004) adds segment (token-type) embeddings and a LayerNorm after the sum. Rotary models
(LLaMA) add no position vector: they turn queries and keys (model/rotary.py), and the position
term of the sum is reported as zeros, as when positions are switched off.
"""

from __future__ import annotations

import torch
from torch import nn

from model.config import TransformerConfig
from model.rotary import RotaryEmbedding, Rotation


class TokenEmbedding(nn.Embedding):
    """Look-up table [vocab_size, d_model]: ids [B, T] -> vectors [B, T, d_model]."""

    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__(vocab_size, d_model)


def sinusoid_table(max_len: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...) (paper §3.5)."""
    pos = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model/2,)
    angle = pos / (10000.0 ** (two_i / d_model))  # (max_len, d_model/2)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal positions, held as a (non-trainable) buffer so it moves with .to()."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__()
        self.register_buffer("encoding", sinusoid_table(max_len, d_model), persistent=False)

    def forward(self, seq_len: int) -> torch.Tensor:
        return self.encoding[:seq_len]  # (T, d_model)


class LearnedPositionalEmbedding(nn.Embedding):
    """Trainable positions (BERT, seed 004): row p is the vector of position p."""

    def __init__(self, max_len: int, d_model: int) -> None:
        super().__init__(max_len, d_model)

    def forward(self, seq_len: int) -> torch.Tensor:  # type: ignore[override]
        return self.weight[:seq_len]  # (T, d_model)


class TransformerEmbedding(nn.Module):
    """x = token_emb + pos_emb (+ token_type_emb) -> [LayerNorm] -> dropout.

    Returns the output and its parts, so a trace can show each term of the sum.
    """

    def __init__(self, config: TransformerConfig, token_embedding: TokenEmbedding) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = token_embedding  # shared by encoder and decoder of one vocabulary
        self.pos_emb: nn.Module | None = None  # rotary and "none": nothing added to the sum
        if config.positions == "sinusoidal":
            self.pos_emb = SinusoidalPositionalEncoding(config.max_len, config.d_model)
        elif config.positions == "learned":
            self.pos_emb = LearnedPositionalEmbedding(config.max_len, config.d_model)
        self.rotary = (
            RotaryEmbedding(config.d_head, config.rope_theta, config.rope_llama3)
            if config.positions == "rotary"
            else None
        )
        # Gemma 3's sliding layers turn by their own base (config.rope_local_theta).
        self.rotary_local = (
            RotaryEmbedding(config.d_head, config.rope_local_theta)
            if self.rotary is not None and config.rope_local_theta is not None
            else None
        )
        # Gemma multiplies the token embeddings by √d_model, in the weights' dtype (HF's
        # Gemma3TextScaledWordEmbedding keeps it as a float32 tensor: the same rounding).
        self.register_buffer(
            "scale", torch.tensor(config.d_model**0.5) if config.embed_scale else None, False
        )
        self.type_emb = (
            nn.Embedding(config.type_vocab_size, config.d_model) if config.type_vocab_size else None
        )
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
            if config.embedding_norm
            else None
        )
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        positions: bool = True,
        position_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """positions=False drops the position term (reported as zeros): the same model blind to
        word order, the seeds' reason for positional encoding (seed 001: 我喜欢你 / 你喜欢我).

        position_ids: [B, T] each token's position when it is not 0..T−1 (a continuation with a
        key/value cache feeds its new tokens alone, model/generate.py); the term added is the
        same row of the same table."""
        seq_len = ids.shape[1]
        last = seq_len if position_ids is None else int(position_ids.max()) + 1
        if last > self.config.max_len:
            raise ValueError(
                f"Sequence is {last} tokens; this model reads at most {self.config.max_len}."
            )
        tok = self.tok_emb(ids)  # (B, T, d_model)
        if self.scale is not None:
            tok = tok * self.scale.to(tok.dtype)  # (B, T, d_model): Gemma's √d_model
        if positions and self.pos_emb is not None:
            pos = self.pos_emb(last)  # (T, d_model)
            if position_ids is not None:
                pos = pos[position_ids]  # (B, T, d_model): each token's own row
            x = tok + pos
        else:
            pos = tok.new_zeros(seq_len, self.config.d_model)  # (T, d_model): no term added
            x = tok + pos  # the same sum (and dtype) as with a position vector
        parts = {"token": tok, "position": pos}
        if self.type_emb is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(ids)
            typ = self.type_emb(token_type_ids)  # (B, T, d_model)
            x = x + typ
            parts["token_type"] = typ
        parts["sum"] = x
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x), parts

    def rotation(
        self, seq_len: int, positions: bool = True, position_ids: torch.Tensor | None = None
    ) -> Rotation | None:
        """RoPE angles of positions 0..T−1 (or of ``position_ids`` [B, T]) for a rotary model;
        None otherwise or when positions are switched off (then queries and keys are not
        turned: the model is blind to order)."""
        if self.rotary is None or not positions:
            return None
        dtype = self.tok_emb.weight.dtype
        if position_ids is None:
            position_ids = torch.arange(seq_len, device=self.rotary.inv_freq.device)
        turn = self.rotary.rotation_at(position_ids, dtype)
        if self.rotary_local is None:
            return turn
        local = self.rotary_local.rotation_at(position_ids, dtype)
        return Rotation(turn.cos, turn.sin, local)
