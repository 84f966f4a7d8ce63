"""Greedy decoding (seed 000 §推理: start the decoder with <s>, feed back the argmax, stop at </s>).

Each step re-runs the model on the whole prefix (no key/value cache): the small models here decode
in milliseconds, and every step goes through the same forward pass that trace() shows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from model.trace import Trace
    from model.transformer import Transformer


def _pad(rows: list[list[int]], pad_id: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Right-pad id lists into ids [B, T] and attention_mask [B, T] (1 = real token)."""
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long, device=device)  # (B, T)
    mask = torch.zeros_like(ids)
    for b, row in enumerate(rows):
        ids[b, : len(row)] = torch.tensor(row, dtype=torch.long, device=device)
        mask[b, : len(row)] = 1
    return ids, mask


def generate(
    net: Transformer,
    src_ids: torch.Tensor,
    max_new_tokens: int = 16,
    attention_mask: torch.Tensor | None = None,
    return_trace: bool = False,
    **options,
) -> torch.Tensor | tuple[torch.Tensor, Trace]:
    """Greedy decoding with a decoder's LM head, as Hugging Face's generate(do_sample=False).

    Args:
        src_ids: [B, T] the source (encoder-decoder) or the prompt (decoder-only).
        max_new_tokens: at most this many tokens are added per text; a text stops at </s>.
        attention_mask: [B, T] 1 = real token; right padding is allowed.
        return_trace: also return one Trace over the full generated sequence, with logits.
        options: positions / head_mask / ablation, passed to every forward pass (see trace()).
    Returns:
        ids [B, T_out] right-padded with the pad id: an encoder-decoder returns <s> + the new
        tokens (</s> included when reached); a decoder-only model returns its input's real ids
        followed by the new tokens. With return_trace, (ids, trace): under the causal mask
        position t sees only what existed when it was generated, so row t of the trace's
        "decoder" (and "cross") attention is the step that chose ids[:, t + 1] (equal to the
        step-by-step pass up to float rounding).
    """
    cfg = net.config
    if not cfg.has_decoder or net.lm_head is None:
        raise ValueError(
            f"generate() needs a decoder with an LM head; {cfg.name} is an {cfg.arch} model "
            "without one."
        )
    if src_ids.dim() != 2:
        raise ValueError(f"src_ids must be [batch, tokens], got shape {tuple(src_ids.shape)}.")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, not {max_new_tokens}.")
    tok, device = net.tokenizer, net.device
    src_ids = src_ids.to(device)
    src_mask = (torch.ones_like(src_ids) if attention_mask is None else attention_mask).to(device)
    if cfg.arch == "encoder-decoder":
        rows = [[tok.bos_token_id] for _ in range(src_ids.shape[0])]
    else:
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(src_ids, src_mask, strict=True)]
    done = [False] * len(rows)
    with torch.no_grad():
        for _ in range(max_new_tokens):
            if all(done) or max(len(row) for row in rows) >= cfg.max_len:
                break
            ids, mask = _pad(rows, cfg.pad_id, device)
            if cfg.arch == "encoder-decoder":
                logits = net(src_ids, src_mask, tgt_ids=ids, tgt_attention_mask=mask, **options)
            else:
                logits = net(ids, mask, **options)  # (B, T, vocab)
            last = mask.sum(dim=1) - 1  # (B,) each text's last real position
            next_ids = logits[torch.arange(len(rows), device=device), last].argmax(dim=-1)  # (B,)
            for b, token in enumerate(next_ids.tolist()):
                if not done[b]:
                    rows[b].append(token)
                    done[b] = token == tok.eos_token_id
    ids, mask = _pad(rows, cfg.pad_id, device)
    if not return_trace:
        return ids
    if cfg.arch == "encoder-decoder":
        trace = net.trace(
            src_ids, src_mask, tgt_ids=ids, tgt_attention_mask=mask, with_logits=True, **options
        )
    else:
        trace = net.trace(ids, mask, with_logits=True, **options)
    return ids, trace
