"""One pass's inputs and options, written once: every way of running the model builds a Call.

``Transformer.forward``, ``trace``, ``patched`` and ``run_with_sites`` take these fields as their
keyword arguments (``input_ids`` and ``attention_mask`` also by position) and differ only in what
they return; ``model.generate`` hands the options on to each pass. What a pass does inside the
layers (head masks, a patch, a key/value cache, a caller's sites) it does at named sites
(model/sites.py), so a new option is a field here and replacements there, not a parameter of
every module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from model.attention import ABLATIONS
from model.patch import Patch
from model.sites import Sites

HeadMask = torch.Tensor | Mapping[str, torch.Tensor] | None

PADDINGS = ("keys", "query_and_key")


@dataclass(frozen=True)
class Call:
    """The inputs and options of one pass.

    Attributes:
        input_ids: [B, T] source ids (the decoder's ids for a decoder-only model).
        attention_mask: [B, T] 1 = real token, 0 = padding; all ones when omitted.
        tgt_ids, tgt_attention_mask: [B, T_tgt] the decoder's input, for encoder-decoder models.
        token_type_ids: [B, T] BERT segment ids.
        padding: "keys" hides padded keys only (seed 003 variant b, what BERT does);
            "query_and_key" also empties padded query rows (variant a), for teaching.
        positions: False runs the same weights without the positional-encoding term.
        head_mask: [L, H] for the first stack (encoder; decoder when decoder-only), or a dict
            {"encoder" | "decoder" | "cross": [L, H]}: 1 keeps a head, 0 removes its context
            z_h before the concat and W_O (HF's convention). Its weights are still reported.
        ablation: "zero" (HF's) or "mean": a removed head's context becomes its mean over the
            real query positions of the same text (mean-ablation).
        patch: activations from another run put in place of this run's, for each batch item
            its own (model/patch.py: a head's context z, the stream entering a layer).
        sites: named activations read, replaced or differentiated (model/sites.py).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor | None = None
    tgt_ids: torch.Tensor | None = None
    tgt_attention_mask: torch.Tensor | None = None
    token_type_ids: torch.Tensor | None = None
    padding: str = "keys"
    positions: bool = True
    head_mask: HeadMask = None
    ablation: str = "zero"
    patch: Patch | None = None
    sites: Sites | None = None

    def __post_init__(self) -> None:
        if self.padding not in PADDINGS:
            raise ValueError("padding must be 'keys' (variant b) or 'query_and_key' (variant a).")
        if self.ablation not in ABLATIONS:
            raise ValueError(f"ablation must be one of {ABLATIONS}, not {self.ablation!r}.")
        object.__setattr__(self, "positions", bool(self.positions))
