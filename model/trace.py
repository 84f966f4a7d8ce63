"""The Trace: everything one forward pass computed, returned per call (docs/architecture.md).

Stacks are keyed "encoder" (encoder self-attention), "decoder" (masked decoder self-attention) and
"cross" (decoder queries over encoder keys). Shapes use B batch, L layers, H heads, T tokens.

A trace stores what every view reads: attention weights, masks, hidden states, embeddings. The
pre-softmax scores, per-head Q, K, V and the sublayer outputs are computed on first access (and
then kept) from the stored residual stream by the model's own modules (model/replay.py): at 512
tokens that halves a BERT-large trace. They read like the stored fields: ``tr.queries["encoder"]``.

Language models (GPT-2, LLaMA, Qwen2, Mistral) fill the same fields. ``queries`` and
``keys`` are always what the scores are made of: in a rotary (RoPE) model, after the turn by
position; ``queries_pre_rope`` and ``keys_pre_rope`` are the same projections before it (rotary
models only, self-attention stacks). With grouped-query attention (config.n_kv_heads < n_heads)
``attentions`` and ``scores`` have one row per query head, and ``keys`` / ``values`` too: query
head h's key/value head is config.kv_head_of(h), repeated for every query head of its group.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields

import torch

from model.config import TransformerConfig
from model.replay import Replay

Tensors = dict[str, torch.Tensor]
# Fields replayed on first access; the two pre-RoPE fields exist for rotary models only.
COMPUTED = ("queries", "keys", "values", "attn_out", "mlp_out", "queries_pre_rope", "keys_pre_rope")
PROJECTED = ("queries", "keys", "values", "queries_pre_rope", "keys_pre_rope")
PRE_ROPE = ("queries_pre_rope", "keys_pre_rope")


def _computed(name: str, doc: str) -> property:
    """A read-only field computed per stack on first access, then kept (see _Computed)."""

    def get(self: Trace) -> Mapping[str, torch.Tensor]:
        return _Computed(self, name)

    return property(get, doc=doc + " Computed on first access.")


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
    # Computed fields kept after first access: {"queries": {stack: tensor}, "scores": ...}.
    _lazy: dict[str, Tensors] = field(default_factory=dict, repr=False)
    _replay: Replay | None = field(default=None, repr=False)  # recomputes them (model/replay.py)

    # Scores: by the product the model computes; storing them would double a trace's memory.
    scores = _computed("scores", "QKᵀ/√d_k before masking, [B, L, H, T_q, T_k] per stack.")
    queries = _computed("queries", "Per-head queries [B, L, H, T_q, d_head] per stack.")
    keys = _computed("keys", "Per-head keys [B, L, H, T_k, d_head] per stack.")
    values = _computed("values", "Per-head values [B, L, H, T_k, d_head] per stack.")
    attn_out = _computed("attn_out", "Attention sublayer output [B, L, T_q, d_model] per stack.")
    mlp_out = _computed("mlp_out", "FFN sublayer output [B, L, T, d_model] per stack (not cross).")
    queries_pre_rope = _computed(
        "queries_pre_rope", "Rotary models: queries before RoPE [B, L, H, T, d_head] per stack."
    )
    keys_pre_rope = _computed(
        "keys_pre_rope", "Rotary models: keys before RoPE [B, L, H, T, d_head] per stack."
    )

    def layer_field(self, name: str, stack: str, layer: int) -> torch.Tensor:
        """One layer of a computed field, [B, ...]: a slice of the field when it was computed,
        else that layer replayed alone and not kept (a view of one head reads one layer; a
        whole-field replay of BERT-large at 512 tokens costs seconds, one layer a 24th of it)."""
        kept = self._lazy.get(name, {})
        if stack in kept or name == "scores" or self._replay is None:
            return getattr(self, name)[stack][:, layer]
        n_layers = self.attentions[stack].shape[1]
        if not 0 <= layer < n_layers:
            raise IndexError(f"layer {layer} is out of range ({n_layers} layers)")
        if name in PROJECTED and stack != "cross":
            if name in PRE_ROPE and self.config.positions != "rotary":
                raise KeyError(f"{name}: {self.config.name} has no rotary positions.")
            return self._replay.projection(self, stack, name, only=layer)[:, 0]
        return self._replay.layers(self, stack, only=layer)[stack][name][:, 0]

    def layer_mask(self, stack: str, layer: int) -> torch.Tensor:
        """The mask layer ``layer`` of ``stack`` applied, bool [B, T_q, T_k]: the stack's mask,
        and in a sliding layer among full ones (Gemma 3's local layers) the band of the last
        sliding_window keys as well (model.layers.band)."""
        mask = self.masks[stack]
        if stack != "decoder" or not self.config.is_local(layer):
            return mask
        t = mask.shape[-1]
        i = torch.arange(t, device=mask.device)
        return mask & (i[None, :] > i[:, None] - self.config.sliding_window)  # (B, T, T)

    def computed(self) -> dict[str, Tensors]:
        """Every computed field of every stack, computing what was not yet (export, pickling)."""
        return {name: dict(getattr(self, name)) for name in COMPUTED}

    def __copy__(self) -> Trace:
        """A shallow copy sharing tensors and computed fields (no computing)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    def __getstate__(self) -> dict:
        """Pickled complete, without the model: Q, K, V and sublayer outputs are computed first
        (on ZeroGPU a trace crosses processes this way, and the model stays behind)."""
        self.computed()
        return {**self.__dict__, "_replay": None}

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
        """Bytes held by this trace's tensors, computed fields included (what a cache entry costs).

        Counted by storage: a field that is a view of another (``outputs`` of a stack without a
        final LayerNorm is its last hidden state) costs nothing more.
        """
        storages: dict[int, int] = {}
        stack = [getattr(self, f.name) for f in fields(self)]
        while stack:
            value = stack.pop()
            if isinstance(value, torch.Tensor):
                storage = value.untyped_storage()
                storages[storage.data_ptr()] = storage.nbytes()
            elif isinstance(value, dict):
                stack.extend(value.values())
        return sum(storages.values())


class _Computed(Mapping):
    """One computed field of a trace, per stack, computed on first access and kept (see Trace)."""

    def __init__(self, trace: Trace, name: str) -> None:
        self.trace, self.name = trace, name

    def _stacks(self) -> list[str]:
        stacks = self.trace.stacks
        if self.name in PRE_ROPE:  # turned self-attention only
            rotary = self.trace.config.positions == "rotary"
            return [s for s in stacks if s != "cross"] if rotary else []
        return [s for s in stacks if s != "cross"] if self.name == "mlp_out" else stacks

    def __getitem__(self, stack: str) -> torch.Tensor:
        trace = self.trace
        found = trace._lazy.setdefault(self.name, {})
        if stack not in found:
            if stack not in self._stacks():
                raise KeyError(stack)
            found[stack] = self._compute(stack)
        return found[stack]

    def _compute(self, stack: str) -> torch.Tensor:
        trace = self.trace
        if self.name == "scores":
            q, k = trace.queries[stack], trace.keys[stack]  # (B, L, H, T, d_head)
            with torch.no_grad():
                return (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)  # (B, L, H, T_q, T_k)
        if trace._replay is None:
            raise KeyError(f"{self.name}[{stack!r}]: this trace was made without its model.")
        if self.name in PROJECTED and stack != "cross":
            return trace._replay.projection(trace, stack, self.name)
        # A whole-layer replay fills every sublayer field of the stack (and of cross-attention).
        for name, values in trace._replay.layers(trace, stack).items():
            for field_name, tensor in values.items():
                trace._lazy.setdefault(field_name, {}).setdefault(name, tensor)
        return trace._lazy[self.name][stack]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stacks())

    def __len__(self) -> int:
        return len(self._stacks())
