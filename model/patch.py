"""Activation patching inside one call: activations from another run put in place of this run's.

A ``Patch`` is an argument of ``Transformer.forward`` / ``trace`` / ``patched`` (as ``head_mask``
is), never a hook on the shared model: two requests patching at once cannot see each other's.
Each batch item carries its own patch, so a whole grid of patched runs is one batched call
(analysis/patching.py). Two sites, named as TransformerLens names them:

- ``z``: a head's context softmax(QKᵀ/√d_k)·V before the concat and W_O, at every query
  position (TransformerLens's ``hook_z``); with grouped-query attention, per query head.
- ``resid_pre``: the residual stream entering a layer, per position.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

Site = tuple[torch.Tensor, torch.Tensor]  # (values, which): see Patch


def _replace(x: torch.Tensor, site: Site, shape: str) -> torch.Tensor:
    """x with the chosen entries taken from the site's values (``shape``: the dims ``which``
    leaves to broadcast, "hd" for z's [B, H] over (T, d_head), "d" for resid's [B, T] over d)."""
    values, which = site
    which = which.to(x.device)
    which = which[..., None, None] if shape == "hd" else which[..., None]
    return torch.where(which, values.to(device=x.device, dtype=x.dtype), x)


@dataclass(frozen=True)
class Patch:
    """What to replace in one run, for each batch item its own.

    Attributes:
        stack: whose heads ``z`` names: "encoder", "decoder" or "cross"; ``resid_pre`` is that
            stack's residual stream (the decoder's for "cross").
        z: layer -> (values [B or 1, H, T_q, d_head], which bool [B, H]): item b's head h
            takes its context from values where which[b, h].
        resid_pre: layer -> (values [B or 1, T, d_model], which bool [B, T]): item b's stream
            entering the layer takes position t from values where which[b, t].
    """

    stack: str
    z: Mapping[int, Site] = field(default_factory=dict)
    resid_pre: Mapping[int, Site] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.stack not in ("encoder", "decoder", "cross"):
            raise ValueError(f"Patch.stack is 'encoder', 'decoder' or 'cross', not {self.stack!r}.")

    @property
    def stream(self) -> str:
        """The residual stream resid_pre patches: cross-attention's heads write the decoder's."""
        return "decoder" if self.stack == "cross" else self.stack

    @property
    def start(self) -> int:
        """The last layer whose whole input every item replaces: the layers before it cannot
        change the output, so a forward pass need not run them (0 when there is none)."""
        whole = [layer for layer, (_, which) in self.resid_pre.items() if bool(which.all())]
        return max(whole, default=0)

    def z_at(self, stack: str, layer: int):
        """A callable z [B, H, T_q, d_head] -> z patched, for this attention sublayer, or None."""
        site = self.z.get(layer) if stack == self.stack else None
        return None if site is None else (lambda z: _replace(z, site, "hd"))

    def resid_at(self, stream: str, layer: int):
        """A callable x [B, T, d_model] -> x patched, for the stream entering a layer, or None."""
        site = self.resid_pre.get(layer) if stream == self.stream else None
        return None if site is None else (lambda x: _replace(x, site, "d"))
