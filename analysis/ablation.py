"""Head ablation effects: remove one head (or a set) and measure how the output moves.

Michel et al. 2019, "Are Sixteen Heads Really Better than One?" (zero-ablation through a head
mask, as Hugging Face's head_mask); mean-ablation replaces the head's context by its mean over
the text's real tokens (Wang et al. 2022, "Interpretability in the Wild", §3). Each ablation is a
real forward pass of the model (net.trace / net(..., head_mask=m)), nothing is approximated;
removing heads together is not the sum of removing them one by one, so both are returned.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import pandas as pd
import torch
from torch import nn

INPUT_KEYS = ("input_ids", "attention_mask", "tgt_ids", "tgt_attention_mask", "token_type_ids")
EFFECTS = ("hidden_change", "argmax_changed", "kl")


def _final(net: nn.Module, inputs: dict, head_mask: dict | None, mode: str):
    """(last stack's output [B, T, d_model], prediction logits [B, T, n] or None)."""
    with torch.no_grad():
        if net.lm_head is None and getattr(net, "token_classifier", None) is None:
            return net(**inputs, head_mask=head_mask, ablation=mode), None
        trace = net.trace(**inputs, head_mask=head_mask, ablation=mode, with_logits=True)
        last = net.config.last_stream
        logits = trace.logits if trace.logits is not None else trace.label_logits
        return trace.outputs[last], logits


def _effects(base, ablated, real: torch.Tensor) -> dict[str, float]:
    """Mean over real output tokens of ‖Δh‖/‖h‖, and of the prediction's change when there is one.

    real: bool [B, T] of the output side (the decoder's tokens when there is a decoder).
    """
    h0, h1 = base[0][real], ablated[0][real]  # (n, d_model)
    out = {"hidden_change": float(((h1 - h0).norm(dim=-1) / h0.norm(dim=-1)).mean())}
    if base[1] is not None:
        p0 = base[1][real].log_softmax(-1)  # (n, classes)
        p1 = ablated[1][real].log_softmax(-1)
        out["argmax_changed"] = float((p0.argmax(-1) != p1.argmax(-1)).double().mean())
        out["kl"] = float((p0.exp() * (p0 - p1)).sum(-1).mean())  # KL(base ‖ ablated), nats
    return out


def ablation_effects(
    net: nn.Module,
    inputs: Mapping,
    stack: str = "encoder",
    heads: Iterable[tuple[int, int]] | None = None,
    mode: str = "zero",
) -> pd.DataFrame:
    """Each head's ablation effect on the model's output, the set's together, and their sum.

    Args:
        net: a Transformer (its trace/forward take head_mask and ablation).
        inputs: keyword inputs of net.trace: input_ids [B, T] and optionally attention_mask,
            token_type_ids, tgt_ids, tgt_attention_mask (a tokenizer's output works).
        stack: whose heads to remove: "encoder", "decoder" or "cross".
        heads: the chosen set as (layer, head) pairs, 0-based; None = every head of the stack.
        mode: "zero" (context z_h = 0 before W_O) or "mean" (z_h = its mean over real tokens).
    Returns:
        One row per single head (kind "single"), then kind "set" (all chosen heads removed in one
        pass) and kind "sum of singles" (the single rows added up: compare with "set").
        Columns: kind, layer, head (nullable ints), hidden_change = mean over real output tokens of
        ‖h_ablated - h‖ / ‖h‖ (the last stack's output), and with an LM head or token classifier
        argmax_changed (share of real positions whose predicted class changed) and kl (mean
        KL(p ‖ p_ablated) in nats). df.attrs holds stack, mode, tokens, forward passes, seconds.
        Cost: one forward pass per head plus two; at 512 tokens on the bundled 6 x 12 BERT the
        72 heads do not fit 5 s on a 2-core CPU, so choose a layer's heads there
        (bench/bench_analysis.py).
    """
    start = time.perf_counter()
    unknown = sorted(set(inputs) - set(INPUT_KEYS))
    if unknown:
        raise ValueError(f"inputs has {unknown}; ablation_effects takes {list(INPUT_KEYS)}.")
    inputs = {k: v for k, v in inputs.items() if v is not None}
    if "input_ids" not in inputs:
        raise ValueError("inputs needs input_ids (a tokenizer's output works).")
    cfg = net.config
    n_layers, n_heads = cfg.n_layers, cfg.n_heads
    chosen = (
        [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
        if heads is None
        else [(int(layer), int(head)) for layer, head in heads]
    )
    for layer, head in chosen:
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(
                f"Head ({layer}, {head}) does not exist: this model has {n_layers} layers x "
                f"{n_heads} heads (0-based)."
            )
    if not chosen:
        raise ValueError("Choose at least one head to ablate.")
    ids = inputs["input_ids"]
    last_ids, last_mask = ids, inputs.get("attention_mask")
    if cfg.arch == "encoder-decoder":
        last_ids, last_mask = inputs.get("tgt_ids", ids), inputs.get("tgt_attention_mask")
    real = (torch.ones_like(last_ids) if last_mask is None else last_mask).bool()  # (B, T)

    def mask_without(pairs: list[tuple[int, int]]) -> dict[str, torch.Tensor]:
        keep = torch.ones(n_layers, n_heads)  # (L, H) 1 keeps a head
        for layer, head in pairs:
            keep[layer, head] = 0.0
        return {stack: keep}

    base = _final(net, inputs, None, mode)
    real = real.to(base[0].device)
    rows = []
    for layer, head in chosen:
        effect = _effects(base, _final(net, inputs, mask_without([(layer, head)]), mode), real)
        rows.append({"kind": "single", "layer": layer, "head": head, **effect})
    together = _effects(base, _final(net, inputs, mask_without(chosen), mode), real)
    rows.append({"kind": "set", "layer": None, "head": None, **together})
    singles = pd.DataFrame(rows[:-1])
    summed = {name: float(singles[name].sum()) for name in EFFECTS if name in singles}
    rows.append({"kind": "sum of singles", "layer": None, "head": None, **summed})
    frame = pd.DataFrame(rows)
    frame["layer"] = frame["layer"].astype("Int64")
    frame["head"] = frame["head"].astype("Int64")
    frame.attrs.update(
        stack=stack,
        mode=mode,
        tokens=int(real.sum()),
        forward_passes=len(chosen) + 2,
        seconds=time.perf_counter() - start,
    )
    return frame
