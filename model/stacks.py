"""Stacks of layers (seed 000: N = 6 identical layers each) and BERT's pooler."""

from __future__ import annotations

import torch
from torch import nn

from model.config import TransformerConfig
from model.layers import DecoderLayer, EncoderLayer
from model.norms import make_norm
from model.rotary import Rotation
from model.sites import SiteView, site


def _layer_sites(sites: SiteView | None, i: int) -> SiteView | None:
    """The call's sites of layer i ("blocks.{i}.", or "encoder.{i}." / "decoder.{i}.")."""
    return None if sites is None else sites.at(f"{i}.")


class Encoder(nn.Module):
    """N encoder layers, ending with a norm when config.final_norm (seed 001; not seed 004)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))
        self.final_norm = make_norm(config) if config.final_norm else None

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        sites: SiteView | None = None,
        rotary: Rotation | None = None,
        start: int = 0,
    ) -> tuple[torch.Tensor, list]:
        """Returns (output, residual stream after embeddings and each layer).

        sites: the call's sites under this stack's prefix ("blocks.", model/sites.py), which
        read or replace what each layer computes (a patch of the stream entering a layer is its
        "hook_resid_pre"). Layers before ``start`` are not run (a patch replaces the whole input
        of layer ``start``; no trace is made then): resid begins with layer ``start``'s input.

        Each layer's record (Q, K, V, scores, sublayer outputs) is dropped as soon as the layer
        returns: a trace recomputes what it needs from the residual stream (model/replay.py), so
        the forward pass never holds every layer's scores at once.
        """
        resid = [x]
        for i, layer in enumerate(self.layers):
            if i < start:
                continue
            x, _ = layer(x, mask, _layer_sites(sites, i), rotary)
            resid.append(x)
        if self.final_norm is not None:  # the site "ln_final.hook_normalized" [B, T, d_model]
            x = site(sites, "ln_final.hook_normalized", self.final_norm(x))
        return x, resid


class Decoder(nn.Module):
    """N decoder layers (cross-attention with an encoder), then a norm when config.final_norm
    (GPT-2's ln_f, LLaMA's final RMSNorm)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        cross = config.arch == "encoder-decoder"
        self.layers = nn.ModuleList(DecoderLayer(config, cross, i) for i in range(config.n_layers))
        self.final_norm = make_norm(config) if config.final_norm else None

    def forward(
        self,
        x: torch.Tensor,
        self_mask: torch.Tensor | None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        sites: SiteView | None = None,
        rotary: Rotation | None = None,
        start: int = 0,
    ) -> tuple[torch.Tensor, list]:
        """Returns (output, residual stream after embeddings and each layer); sites and
        ``start`` as Encoder."""
        resid = [x]
        for i, layer in enumerate(self.layers):
            if i < start:
                continue
            x, _ = layer(x, self_mask, memory, memory_mask, _layer_sites(sites, i), rotary)
            resid.append(x)
        if self.final_norm is not None:  # the site "ln_final.hook_normalized" [B, T, d_model]
            x = site(sites, "ln_final.hook_normalized", self.final_norm(x))
        return x, resid


class Pooler(nn.Module):
    """BERT's pooler: tanh(W h_[CLS] + b)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.dense = nn.Linear(d_model, d_model)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))  # (B, d_model)
