"""Named activations of one call: read, replace or differentiate them by TransformerLens's names.

A ``Sites`` is an argument of ``Transformer.run_with_sites`` and ``forward`` (as ``patch`` is),
never a hook on the shared model: what one call reads or changes belongs to that call alone, so
concurrent requests stay apart. Use one ``Sites`` per call. Each pass puts its own options in
the same vocabulary (``Intervention``, below): a head mask and a patch replace ``attn.hook_z``
and ``hook_resid_pre``, a key/value cache ``attn.hook_rot_k`` (``hook_k`` without rotary
positions) and ``attn.hook_v``, and a trace's attention patterns are written into slots at
``attn.hook_pattern``; the modules read one argument, never a key per option.

Each layer l (0-based) of a stack has these names, P being "blocks" for a model of one stack
and "encoder" or "decoder" for an encoder-decoder; shapes are ours (heads before positions, as
in a Trace), B items, T tokens:

- ``P.{l}.hook_resid_pre`` [B, T, d_model]: the stream entering the layer (layer 0: the
  embeddings as the first layer reads them).
- ``P.{l}.hook_q_input``, ``hook_k_input``, ``hook_v_input`` [B, H or H_kv, T, d_model]: each
  query (key, value) head's own copy of the stream, before the layer's norm (TransformerLens's
  ``use_split_qkv_input``; key and value per key/value head). Named, the layer's attention reads
  them instead of the one stream; the stream itself goes on unchanged.
- ``decoder.{l}.hook_cross_q_input`` [B, H, T, d_model] (the decoder's stream, before the
  cross-attention's norm), ``hook_cross_k_input``, ``hook_cross_v_input`` [B, H_kv, T_src,
  d_model] (the encoder's output, after its final norm, as each key or value head of the
  cross-attention reads it), ours: the split inputs of an encoder-decoder's cross-attention.
- ``P.{l}.ln1.hook_normalized`` [B, T, d_model]: the attention's norm's output: pre-norm what
  the attention reads, post-norm the stream after attention (the value of hook_resid_mid);
  ``ln2.`` the MLP's norm (in a decoder layer with cross-attention ``ln2.`` is cross-attention's
  and ``ln3.`` the MLP's, as in TransformerLens's T5 block).
- ``P.{l}.attn.hook_q``, ``hook_k``, ``hook_v`` [B, H or H_kv, T, d_head] (before RoPE),
  ``attn.hook_rot_q``, ``hook_rot_k`` (the same turned by RoPE, in a pass with rotary positions),
  ``attn.hook_attn_scores`` [B, H, T_q, T_k] (the scores after the mask, -inf where hidden),
  ``attn.hook_pattern`` [B, H, T_q, T_k], ``attn.hook_z`` [B, H, T_q, d_head] (the heads'
  contexts before W_O), ``attn.hook_result`` [B, H, T_q, d_model] (each head's z_h·W_O^h; W_O's
  bias is added to their sum); the same under ``cross_attn.`` for a decoder's cross-attention.
- Ours, where TransformerLens has no name (each one stage of the layer walk,
  analysis/layer_steps.py): ``attn.hook_q_flat``, ``hook_k_flat``, ``hook_v_flat`` [B, T, H or
  H_kv · d_head] (x W_Q + b_Q before the split into heads; not with split inputs);
  ``attn.hook_rep_k``, ``hook_rep_v`` [B, H, T, d_head] (grouped-query attention's key/value
  heads repeated for the query heads of their group; only where H_kv < H);
  ``attn.hook_unmasked_scores`` [B, H, T_q, T_k] (QKᵀ/√d_k before the mask);
  ``attn.hook_concat`` [B, T_q, d_model] (the contexts after hook_z, concatenated: what W_O
  reads; not where hook_result is named).
- ``P.{l}.hook_attn_out`` (``hook_cross_attn_out``) [B, T, d_model]: the sublayer's output
  (with Gemma's sandwich norms: after its second norm).
- ``P.{l}.ln1_post.hook_normalized``, ``ln2_post.hook_normalized`` [B, T, d_model]: a sandwich
  layer's second norm after the attention (the MLP), TransformerLens's Gemma 2 names; ours,
  ``ln1_post.hook_in``, ``ln2_post.hook_in``: what that norm reads, the sublayer's own output.
- ``P.{l}.attn.hook_q_normed``, ``hook_k_normed`` [B, H or H_kv, T, d_head], ours: the heads after
  QK-norm (Qwen3, Gemma 3), before RoPE.
- ``P.{l}.hook_attn_resid`` (``hook_cross_attn_resid``, ``hook_mlp_resid``) [B, T, d_model],
  ours: the stream plus the sublayer's output, what a post-norm layer's norm reads (pre-norm:
  the value of hook_resid_mid, hook_resid_mid_cross, hook_resid_post).
- ``P.{l}.hook_resid_mid`` [B, T, d_model]: the stream after attention (post-norm: after its norm);
  ``hook_resid_mid_cross``: after cross-attention, in a decoder layer with it.
- ``P.{l}.hook_mlp_in`` [B, T, d_model]: the stream as the MLP reads it, before its norm
  (the stream itself goes on unchanged).
- ``P.{l}.mlp.hook_pre`` [B, T, d_ff]: x W_1 + b_1 before the activation (gated MLP: x W_gate),
  ``mlp.hook_pre_linear`` (gated MLP: x W_up), ``mlp.hook_post``: the activation (gated MLP:
  act(x W_gate) ⊙ x W_up), what W_2 (W_down) reads; ``P.{l}.hook_mlp_out``: the MLP's output.
- ``P.{l}.hook_resid_post`` [B, T, d_model]: the stream leaving the layer (the last layer's is
  what the final norm reads).
- ``P.ln_final.hook_normalized`` [B, T, d_model]: the stack's final norm's output, where it has
  one (TransformerLens's ``ln_final.hook_normalized``, here under the prefix): an encoder-
  decoder's ``encoder.ln_final.hook_normalized`` is what every cross-attention reads.

A site that reads or replaces the scores or the pattern makes attention compute its weights in
a pass that would otherwise run the fused kernel (a forward pass, ``run_with_sites``).

At a named site, in this order: ``replace[name](x)`` gives the value the run goes on with; a name
in ``grad`` gets a zero tensor added that requires grad (``gradients(value)`` is then ∂value/∂ the
site); a name in ``read`` keeps the value in ``values``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import torch


@dataclass
class Sites:
    """What one call reads (``values`` after it), replaces and differentiates, by site name."""

    read: Collection[str] = ()
    replace: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] = field(default_factory=dict)
    grad: Collection[str] = ()
    values: dict[str, torch.Tensor] = field(default_factory=dict)
    deltas: dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.read, self.grad = frozenset(self.read), frozenset(self.grad)
        self.names = self.read | self.grad | frozenset(self.replace)
        self.live = bool(self.names)  # whether any site is named (SiteView's quick way past)

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """The value the run goes on with at site ``name``, x as the model computed it."""
        if name not in self.names:
            return x
        fn = self.replace.get(name)
        if fn is not None:
            x = fn(x)
        if name in self.grad:
            delta = torch.zeros_like(x, requires_grad=True)
            self.deltas[name] = delta
            x = x + delta
        if name in self.read:
            self.values[name] = x
        return x

    def wants(self, name: str) -> bool:
        return name in self.names

    def at(self, prefix: str) -> SiteView:
        """The sites under a prefix ("blocks.3."), named from there on."""
        return SiteView(self, prefix)

    def gradients(self, value: torch.Tensor) -> dict[str, torch.Tensor]:
        """∂ value.sum() / ∂ each site in ``grad`` the run passed, without touching the model's
        parameters' .grad (the model is shared)."""
        names = list(self.deltas)
        found = torch.autograd.grad(value.sum(), [self.deltas[n] for n in names], allow_unused=True)
        return {
            n: torch.zeros_like(self.deltas[n]) if g is None else g
            for n, g in zip(names, found, strict=True)
        }


Replacement = Callable[[torch.Tensor], torch.Tensor]


class Intervention:
    """Everything one pass does at its named sites (see the module doc), made per call by
    ``Transformer`` and dropped with it: the pass's own replacements (a head mask's, a patch's,
    a key/value cache's) in the order they were added, then the caller's ``Sites``; the slots
    an explicit attention writes its pattern into (a trace's); and whether the pass shows
    attention ``weights`` (a trace, training): else attention runs by the fused kernel
    wherever no site reads or replaces the pattern."""

    def __init__(self, sites: Sites | None = None, weights: bool = False) -> None:
        self.sites, self.weights = sites, weights
        self.own: dict[str, list[Replacement]] = {}
        self.slots: dict[str, torch.Tensor] = {}
        # whether any site is named: a pass without one (a plain forward) passes each site by
        # one attribute read (SiteView), not a name lookup
        self.live = sites is not None and sites.live

    def replace(self, name: str, fn: Replacement | None) -> None:
        """Put fn(x) in place of x at site ``name``, after what was added there before."""
        if fn is not None:
            self.own.setdefault(name, []).append(fn)
            self.live = True

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """The value the run goes on with at site ``name``, x as the model computed it."""
        for fn in self.own.get(name, ()):
            x = fn(x)
        return x if self.sites is None else self.sites(name, x)

    def wants(self, name: str) -> bool:
        return name in self.own or (self.sites is not None and self.sites.wants(name))

    def slot(self, name: str) -> torch.Tensor | None:
        """A tensor the site's value is written into (a trace's pattern), or None."""
        return self.slots.get(name)

    def at(self, prefix: str) -> SiteView:
        return SiteView(self, prefix)


class Named(Protocol):
    """What a SiteView looks through: a Sites or an Intervention."""

    live: bool  # whether any site is named

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor: ...

    def wants(self, name: str) -> bool: ...


@dataclass(frozen=True)
class SiteView:
    """A Sites or an Intervention seen from a layer or a sublayer: names relative to ``prefix``."""

    sites: Named
    prefix: str

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return self.sites(self.prefix + name, x) if self.sites.live else x

    def wants(self, name: str) -> bool:
        return self.sites.live and self.sites.wants(self.prefix + name)

    def at(self, prefix: str) -> SiteView:
        return SiteView(self.sites, self.prefix + prefix)

    @property
    def weights(self) -> bool:
        """Whether the pass shows attention weights (an Intervention's; a bare Sites': yes)."""
        return getattr(self.sites, "weights", True)

    def slot(self, name: str) -> torch.Tensor | None:
        slot = getattr(self.sites, "slot", None)
        return None if slot is None else slot(self.prefix + name)


def prefix(config, stream: str) -> str:
    """The site names' prefix of a stream's layers: "blocks" for a model of one stack (as
    TransformerLens names them), the stream ("encoder", "decoder") for an encoder-decoder."""
    return stream if config.arch == "encoder-decoder" else "blocks"


def attn_site(config, stack: str, layer: int, name: str) -> str:
    """The full name of a site of an attention stack's layer: stack "encoder" / "decoder" (self-
    attention, under "attn.") or "cross" (the decoder's cross-attention, "cross_attn.")."""
    stream = "decoder" if stack == "cross" else stack
    attn = "cross_attn" if stack == "cross" else "attn"
    return f"{prefix(config, stream)}.{layer}.{attn}.{name}"


def site(view: SiteView | None, name: str, x: torch.Tensor) -> torch.Tensor:
    """x through the view's site ``name``; x itself when the call has no sites."""
    return x if view is None else view(name, x)
