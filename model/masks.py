"""Attention masks (seed 003 §掩码机制). Convention: bool, True = may attend; combine with ``&``.

All masks are shaped [B, T_q, T_k] (or broadcast to it) so that mask[b, i, j] answers
"may query i of batch item b look at key j?".
"""

from __future__ import annotations

import torch


def padding_mask(key_mask: torch.Tensor, n_queries: int) -> torch.Tensor:
    """Variant (b): only padded *keys* are hidden; every query row keeps its real keys.

    Args:
        key_mask: [B, T_k], 1/True = real token, 0/False = padding (a tokenizer's attention_mask).
        n_queries: T_q.
    Returns:
        bool [B, T_q, T_k].
    """
    keys = key_mask.bool()[:, None, :]  # (B, 1, T_k)
    return keys.expand(-1, n_queries, -1)


def padding_mask_query_key(query_mask: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
    """Variant (a): hide a pair when the query *or* the key is padding (seed 000's make_pad_mask).

    Padded query rows have nothing to attend to; attention turns such rows into zeros, never NaN.
    """
    return query_mask.bool()[:, :, None] & key_mask.bool()[:, None, :]  # (B, T_q, T_k)


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Lower-triangular [T, T]: position i sees 0..i, never the future (seed 000's no_peak mask)."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def sliding_window_mask(
    seq_len: int, window: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """[T, T]: query i sees keys j > i − window (Mistral, HF's sliding_window_overlay); combine
    with the causal mask: a band of the last ``window`` tokens, the query itself included."""
    i = torch.arange(seq_len, device=device)
    return i[None, :] > i[:, None] - window  # (T_q, T_k)


def cross_mask(tgt_mask: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
    """Decoder queries over encoder keys: hide padded *source* keys (variant (b) across stacks).

    Args:
        tgt_mask: [B, T_tgt] decoder attention_mask (sets T_q).
        src_mask: [B, T_src] encoder attention_mask.
    Returns:
        bool [B, T_tgt, T_src].
    """
    return padding_mask(src_mask, tgt_mask.shape[1])
