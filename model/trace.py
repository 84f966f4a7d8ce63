"""The Trace: everything one forward pass computed, returned per call (DESIGN.md, Trace contract).

Stacks are keyed "encoder" (encoder self-attention), "decoder" (masked decoder self-attention) and
"cross" (decoder queries over encoder keys). Shapes use B batch, L layers, H heads, T tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields

import torch

from model.config import TransformerConfig

Tensors = dict[str, torch.Tensor]


@dataclass
class Trace:
    """Internals of one call of ``Transformer.trace``; all tensors belong to this call alone."""

    config: TransformerConfig
    device: str  # where the forward pass ran: "cpu", "cuda:0", ...
    tokens: list[list[str]]  # source side, one list per batch item, padding included
    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T] 1 = real token, 0 = padding
    attentions: Tensors = field(default_factory=dict)  # [B, L, H, T_q, T_k] softmax after masking
    masks: Tensors = field(default_factory=dict)  # bool [B, T_q, T_k], True = may attend
    hidden_states: Tensors = field(
        default_factory=dict
    )  # [B, L+1, T, d_model] resid after each layer
    queries: Tensors = field(default_factory=dict)  # [B, L, H, T_q, d_head]
    keys: Tensors = field(default_factory=dict)  # [B, L, H, T_k, d_head]
    values: Tensors = field(default_factory=dict)  # [B, L, H, T_k, d_head]
    attn_out: Tensors = field(
        default_factory=dict
    )  # [B, L, T_q, d_model] attention sublayer output
    mlp_out: Tensors = field(default_factory=dict)  # [B, L, T, d_model] FFN sublayer output
    outputs: Tensors = field(default_factory=dict)  # [B, T, d_model] stack output (after final LN)
    # Per stack ("encoder" / "decoder"): "token" [B, T, d], "position" [T, d], "token_type"
    # [B, T, d] (BERT), "sum" [B, T, d] (before any embedding LayerNorm), "output" [B, T, d].
    embeddings: dict[str, Tensors] = field(default_factory=dict)
    tgt_tokens: list[list[str]] | None = None
    tgt_ids: torch.Tensor | None = None  # [B, T_tgt]
    tgt_attention_mask: torch.Tensor | None = None  # [B, T_tgt]
    logits: torch.Tensor | None = None  # [B, T, vocab] when the model has an LM head and asked for
    pooled: torch.Tensor | None = None  # [B, d_model] BERT pooler output, when present
    label_logits: torch.Tensor | None = None  # [B, T, n_labels] per-token classifier, when present
    positions: bool = True  # False: run with the positional-encoding term switched off
    head_mask: Tensors = field(default_factory=dict)  # per stack [L, H] as applied; empty = none
    ablation: str = "zero"  # how masked heads were removed: "zero" or "mean" (see HeadAblation)
    _score_cache: Tensors = field(default_factory=dict, repr=False)

    @property
    def scores(self) -> Mapping[str, torch.Tensor]:
        """QKᵀ/√d_k before masking, [B, L, H, T_q, T_k] per stack.

        Computed from this trace's own Q and K on first access, by the product the model itself
        computes; storing it next to the softmax would double every trace's memory.
        """
        return _Scores(self)

    @property
    def stacks(self) -> list[str]:
        """Attention stacks present, in the order data flows: encoder, decoder, cross."""
        return [s for s in ("encoder", "decoder", "cross") if s in self.attentions]

    def tokens_for(self, stack: str) -> tuple[list[list[str]], list[list[str]]]:
        """(query tokens, key tokens) of a stack: cross-attention's queries are the target's."""
        tgt = (
            self.tgt_tokens if self.tgt_tokens is not None else self.tokens
        )  # decoder-only: one text
        if stack == "encoder":
            return self.tokens, self.tokens
        if stack == "decoder":
            return tgt, tgt
        return tgt, self.tokens

    def cpu(self) -> Trace:
        """A copy with every tensor on the CPU, floats as float32 (bool and int keep dtype)."""

        def move(value):
            if isinstance(value, torch.Tensor):
                value = value.detach().cpu()
                return value.float() if value.is_floating_point() else value
            if isinstance(value, dict):
                return {k: move(v) for k, v in value.items()}
            return value

        return Trace(**{f.name: move(getattr(self, f.name)) for f in fields(self)})

    def nbytes(self) -> int:
        """Total bytes held by this trace's tensors (what a cache entry costs)."""
        total = 0
        stack = [getattr(self, f.name) for f in fields(self)]
        while stack:
            value = stack.pop()
            if isinstance(value, torch.Tensor):
                total += value.numel() * value.element_size()
            elif isinstance(value, dict):
                stack.extend(value.values())
        return total


class _Scores(Mapping):
    """Lazy per-stack scores of one trace (see Trace.scores)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace

    def __getitem__(self, stack: str) -> torch.Tensor:
        cache = self.trace._score_cache
        if stack not in cache:
            q, k = self.trace.queries[stack], self.trace.keys[stack]  # (B, L, H, T, d_head)
            with torch.no_grad():
                cache[stack] = (q * q.shape[-1] ** -0.5) @ k.transpose(
                    -2, -1
                )  # (B, L, H, T_q, T_k)
        return cache[stack]

    def __iter__(self) -> Iterator[str]:
        return iter(self.trace.queries)

    def __len__(self) -> int:
        return len(self.trace.queries)
