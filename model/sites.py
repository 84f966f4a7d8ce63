"""Named activations of one call: read, replace or differentiate them by TransformerLens's names.

A ``Sites`` is an argument of ``Transformer.run_with_sites`` and ``forward`` (as ``patch`` is),
never a hook on the shared model: what one call reads or changes belongs to that call alone, so
concurrent requests stay apart. Use one ``Sites`` per call. Each layer l (0-based) of a stack has
these names, P being "blocks" for a model of one stack and "encoder" or "decoder" for an
encoder-decoder; shapes are ours (heads before positions, as in a Trace), B items, T tokens:

- ``P.{l}.hook_resid_pre`` [B, T, d_model]: the stream entering the layer (layer 0: the
  embeddings as the first layer reads them).
- ``P.{l}.hook_q_input``, ``hook_k_input``, ``hook_v_input`` [B, H or H_kv, T, d_model]: each
  query (key, value) head's own copy of the stream, before the layer's norm (TransformerLens's
  ``use_split_qkv_input``; key and value per key/value head). Named, the layer's attention reads
  them instead of the one stream; the stream itself goes on unchanged.
- ``P.{l}.attn.hook_q``, ``hook_k``, ``hook_v`` [B, H or H_kv, T, d_head] (before RoPE),
  ``attn.hook_pattern`` [B, H, T_q, T_k], ``attn.hook_z`` [B, H, T_q, d_head] (the heads'
  contexts before W_O), ``attn.hook_result`` [B, H, T_q, d_model] (each head's z_h·W_O^h; W_O's
  bias is added to their sum); the same under ``cross_attn.`` for a decoder's cross-attention.
- ``P.{l}.hook_attn_out`` (``hook_cross_attn_out``) [B, T, d_model]: the sublayer's output.
- ``P.{l}.hook_resid_mid`` [B, T, d_model]: the stream after attention (post-norm: after its norm).
- ``P.{l}.hook_mlp_in`` [B, T, d_model]: the stream as the MLP reads it, before its norm
  (the stream itself goes on unchanged); ``P.{l}.hook_mlp_out``: the MLP's output.
- ``P.{l}.hook_resid_post`` [B, T, d_model]: the stream leaving the layer (the last layer's is
  what the final norm reads).

At a named site, in this order: ``replace[name](x)`` gives the value the run goes on with; a name
in ``grad`` gets a zero tensor added that requires grad (``gradients(value)`` is then ∂value/∂ the
site); a name in ``read`` keeps the value in ``values``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class SiteView:
    """A Sites seen from a layer or a sublayer: names relative to ``prefix``."""

    sites: Sites
    prefix: str

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        return self.sites(self.prefix + name, x)

    def wants(self, name: str) -> bool:
        return self.sites.wants(self.prefix + name)

    def at(self, prefix: str) -> SiteView:
        return SiteView(self.sites, self.prefix + prefix)


def prefix(config, stream: str) -> str:
    """The site names' prefix of a stream's layers: "blocks" for a model of one stack (as
    TransformerLens names them), the stream ("encoder", "decoder") for an encoder-decoder."""
    return stream if config.arch == "encoder-decoder" else "blocks"


def site(view: SiteView | None, name: str, x: torch.Tensor) -> torch.Tensor:
    """x through the view's site ``name``; x itself when the call has no sites."""
    return x if view is None else view(name, x)
