"""Activation patching inside one call: activations from another run put in place of this run's.

A ``Patch`` is an argument of ``Transformer.forward`` / ``trace`` / ``patched`` (as ``head_mask``
is), never a hook on the shared model: two requests patching at once cannot see each other's.
The pass puts it into its named sites (``replacements``, model/sites.py).
Each batch item carries its own patch, so a whole grid of patched runs is one batched call
(analysis/patching.py). Two sites, named as TransformerLens names them:

- ``z``: a head's context softmax(QKᵀ/√d_k)·V before the concat and W_O, at every query
  position (TransformerLens's ``hook_z``); with grouped-query attention, per query head.
- ``resid_pre``: the residual stream entering a layer, per position.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

import torch

from model.sites import attn_site, prefix

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

    def replacements(self, config) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
        """This patch as replacements at the model's named sites (model/sites.py): each patched
        head's "attn.hook_z" ("cross_attn.hook_z" for "cross") and stream's "hook_resid_pre"."""
        found = {
            attn_site(config, self.stack, layer, "hook_z"): partial(_replace, site=site, shape="hd")
            for layer, site in self.z.items()
        }
        stream = prefix(config, self.stream)
        for layer, site in self.resid_pre.items():
            found[f"{stream}.{layer}.hook_resid_pre"] = partial(_replace, site=site, shape="d")
        return found


class Logits:
    """A patched run's LM-head logits [B, T, vocab], unembedded only where an index asks.

    A grid of patched runs reads one position of each (logits[:, -1]); unembedding every
    position of a 50,257-token vocabulary cost as much as the layers themselves. Indexing
    (``logits[:, -1, answer]``) applies the first two indices (items, positions) to the final
    hidden states before the LM head; any other use (``.softmax(-1)``, ``torch.log_softmax``,
    ``.shape``) computes all of them once: ``full()``.
    """

    def __init__(self, hidden: torch.Tensor, head: torch.nn.Module, grad: bool = False) -> None:
        self.hidden, self.head = hidden, head  # (B, T, d_model), the model's lm_head
        self.grad = grad  # keep gradients (model/sites.py); a patched run's have none
        self._full: torch.Tensor | None = None

    def _computing(self):
        return contextlib.nullcontext() if self.grad else torch.no_grad()

    def full(self) -> torch.Tensor:
        """Every logit, [B, T, vocab]."""
        if self._full is None:
            with self._computing():
                self._full = self.head(self.hidden)
        return self._full

    def __getitem__(self, key) -> torch.Tensor:
        key = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis or k is None for k in key):
            return self.full()[key]
        rows, rest = key[:2], key[2:]
        with self._computing():
            picked = self.head(self.hidden[rows])  # (..., vocab): the chosen items and positions
        return picked[(Ellipsis, *rest)]

    def rows(self, items: slice) -> Logits:
        """The same, for some batch items only (nothing computed)."""
        return Logits(self.hidden[items], self.head, self.grad)

    def __len__(self) -> int:
        return self.hidden.shape[0]

    def __getattr__(self, name: str):
        if name.startswith("_") or name in ("hidden", "head", "grad"):  # copy, pickle: no tensor's
            raise AttributeError(name)
        return getattr(self.full(), name)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        args = [a.full() if isinstance(a, Logits) else a for a in args]
        return func(*args, **(kwargs or {}))
