"""Greedy decoding (seed 000 §推理: start the decoder with <s>, feed back the argmax, stop at </s>).

A decoder-only model continues with a key/value cache: the first pass reads the prompt and keeps
every layer's keys and values (model.attention.KeyValues, owned by this loop, never by a
module), and each later pass reads the newest token alone, at its own position, attending to
the kept keys and values through the same attention modules (Transformer.step). The ids are
those of re-running the whole text every step (``use_cache=False``; tests/test_kv_cache.py),
which an encoder-decoder model and mean-ablation (a removed head's context is its mean over
every position, so earlier tokens change as the text grows) still do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from model.attention import KeyValues

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
    use_cache: bool = True,
    **options,
) -> torch.Tensor | tuple[torch.Tensor, Trace]:
    """Greedy decoding with a decoder's LM head, as Hugging Face's generate(do_sample=False).

    Args:
        src_ids: [B, T] the source (encoder-decoder) or the prompt (decoder-only).
        max_new_tokens: at most this many tokens are added per text; a text stops at </s>.
        attention_mask: [B, T] 1 = real token; right padding is allowed.
        return_trace: also return one Trace over the full generated sequence, with logits.
        use_cache: a decoder-only model keeps each layer's keys and values and reads only the
            newest token per step (the same ids); False re-runs the whole text every step.
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
    if use_cache and cacheable(net, options):
        with torch.no_grad():
            _continue(net, rows, done, max_new_tokens, options)
        max_new_tokens = 0  # continued: the loop below runs no step
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


def cacheable(net: Transformer, options: dict) -> bool:
    """Whether a continuation may keep keys and values: a decoder-only model, and options under
    which a token's pass reads nothing that comes after it (mean-ablation does: a removed
    head's context becomes its mean over all the text's positions)."""
    if net.config.arch != "decoder" or set(options) - {"positions", "head_mask", "ablation"}:
        return False
    return options.get("head_mask") is None or options.get("ablation", "zero") == "zero"


def _continue(
    net: Transformer, rows: list[list[int]], done: list[bool], max_new_tokens: int, options: dict
) -> None:
    """Greedy continuation of a decoder-only model's texts with a key/value cache; appends to
    ``rows`` and ``done`` in place, as the loop without a cache does.

    Slot j of the cache holds, for each text, the token its position array names: the right-
    padded prompt at positions 0..T−1 (padding hidden), then one slot per step, the newest token
    of each text at its own position (a finished text's slot hidden). A query sees the slots
    that are real and not after it (and, with Mistral's window, within the window): the mask
    the whole-text pass builds, for the same tokens.
    """
    cfg, tok, device = net.config, net.tokenizer, net.device
    positions, head_mask = options.get("positions", True), options.get("head_mask")
    cache = [KeyValues() for _ in range(cfg.n_layers)]
    ids, real = _pad(rows, cfg.pad_id, device)  # (B, T)
    batch = ids.shape[0]
    place = torch.arange(ids.shape[1], device=device).expand(batch, -1)  # (B, T) positions
    seen, seen_at = real.bool(), place  # (B, T_k) each: which slots are real, their positions
    last = real.sum(dim=1) - 1  # (B,) each prompt's last real slot
    for _ in range(max_new_tokens):
        if all(done) or max(len(row) for row in rows) >= cfg.max_len:
            break
        allowed = seen[:, None, :] & (seen_at[:, None, :] <= place[:, :, None])  # (B, T_q, T_k)
        inside = None
        if cfg.sliding_window is not None:  # the last sliding_window positions only
            inside = seen_at[:, None, :] > place[:, :, None] - cfg.sliding_window
        if inside is not None and cfg.layer_types:  # Gemma 3: in its local layers alone
            allowed = {"full": allowed, "local": allowed & inside}
        elif inside is not None:  # Mistral: in every layer
            allowed = allowed & inside
        out = net.step(ids, place, allowed, cache, positions, head_mask)  # (B, T_q, d_model)
        logits = net.lm_head(out[torch.arange(batch, device=device), last])  # (B, vocab)
        for b, token in enumerate(logits.argmax(dim=-1).tolist()):
            if not done[b]:
                rows[b].append(token)
                done[b] = token == tok.eos_token_id
        # the next pass: each text's newest token at its position (a finished text's hidden)
        going = torch.tensor([not d for d in done], device=device)  # (B,)
        newest = [row[-1] if not d else cfg.pad_id for row, d in zip(rows, done, strict=True)]
        ids = torch.tensor(newest, dtype=torch.long, device=device)[:, None]  # (B, 1)
        place = torch.tensor([len(row) - 1 for row in rows], device=device)[:, None]  # (B, 1)
        place = place * going[:, None]  # a finished text asks at position 0, read by nobody
        seen = torch.cat((seen, going[:, None]), dim=1)
        seen_at = torch.cat((seen_at, place), dim=1)
        last = torch.zeros(batch, dtype=torch.long, device=device)  # the one new slot
