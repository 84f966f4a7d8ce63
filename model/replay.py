"""Compute a trace's per-layer internals again, from its residual stream and the model's weights.

A trace stores what every view reads (attention weights, hidden states, embeddings, masks). The
per-head Q, K, V and the sublayer outputs are 35 % of a BERT trace (250 MB for BERT-large at 512
tokens) and only a few views read them, so they are computed on first access: by the same
modules, on the same inputs, in the same order as the forward pass (the equal numbers are pinned
in tests/test_big_shapes.py and tests/test_transformer.py).

``walk`` runs one layer of one text again and reads the named sites it is asked for
(model/sites.py), any intermediate from its input to its output (the layer walk,
analysis/layer_steps.py): what the layer's own modules computed, so no second copy of the
formulas exists to drift from the model.

The replay holds a reference to the model's stacks (shared, read-only) and the version counters
of their weights: if the weights change in place after the trace (a training step, a new
checkpoint copied in), asking for a replayed field is an error rather than a silent mismatch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import torch
from torch import nn

from model.attention import ablation_sites
from model.rotary import Rotation
from model.sites import Intervention, Sites, prefix

# Field -> (projection, turned by RoPE). Rotary models also give Q and K before the turn.
PROJECTIONS = {
    "queries": ("q", True),
    "keys": ("k", True),
    "values": ("v", True),
    "queries_pre_rope": ("q", False),
    "keys_pre_rope": ("k", False),
}
# Fields a whole-layer replay fills for a self-attention stack. Cross-attention's Q, K, V and
# output come from the same replay: its Q reads the decoder's self-attention sublayer output.
LAYER_FIELDS = ("attn_out", "mlp_out")


class Replay:
    """Recomputes one trace's Q, K, V, attention and FFN sublayer outputs (see module doc)."""

    def __init__(
        self,
        stacks: dict[str, nn.Module],
        rotation: Callable[[int, bool], Rotation | None] | None = None,
    ) -> None:
        self.stacks = stacks  # "encoder" / "decoder": model.stacks.Encoder / Decoder
        self.rotation = rotation or (lambda seq_len, positions: None)  # the embedding's RoPE
        self.versions = self._versions()

    def _versions(self) -> list[int]:
        return [p._version for module in self.stacks.values() for p in module.parameters()]

    def _check(self, module: nn.Module) -> None:
        if module.training:
            raise RuntimeError(
                "This trace's model is in training mode now: call model.eval() (dropout is on)."
            )
        if self._versions() != self.versions:
            raise RuntimeError(
                "The model's weights changed after this trace was made; trace the text again."
            )

    def projection(self, trace, stack: str, name: str, only: int | None = None) -> torch.Tensor:
        """queries / keys / values (and, rotary, Q and K before RoPE) of a self-attention stack:
        [B, L, H, T, d_head] ([B, 1, …] with ``only``: that layer alone)."""
        module = self.stacks[stack]
        self._check(module)
        hidden = trace.hidden_states[stack]  # (B, L+1, T, d_model)
        device = next(module.parameters()).device
        kind, turn = PROJECTIONS[name]
        rotary = self.rotation(hidden.shape[2], trace.positions)
        per_layer = []
        with torch.no_grad():
            for i, layer in enumerate(module.layers):
                if only is not None and i != only:
                    continue
                x = hidden[:, i].to(device).contiguous()  # (B, T, d_model): the layer's input
                attn = layer.self_attn
                h = layer.add_norm1.sublayer_input(x)  # LayerNorm(x) when pre-norm
                turned = rotary
                if getattr(layer, "window", None) is not None and rotary is not None:
                    turned = rotary.local or rotary  # a local layer's own base (Gemma 3)
                per_layer.append(attn.project(kind, h, turned, turn))  # (B, H, T, d_head)
        out = torch.stack(per_layer, dim=1)  # (B, L, H, T, d_head)
        return out.to(device=hidden.device, dtype=hidden.dtype)

    def layers(
        self, trace, stack: str, only: int | None = None
    ) -> dict[str, dict[str, torch.Tensor]]:
        """Every layer of a stack run again: {stack: {field: [B, L, ...]}}, "cross" included
        ([B, 1, …] with ``only``: that layer alone — each layer reads its stored input)."""
        name = "decoder" if stack == "cross" else stack
        module = self.stacks[name]
        self._check(module)
        hidden = trace.hidden_states[name]  # (B, L+1, T, d_model)
        device = next(module.parameters()).device

        def on(t):
            return None if t is None else t.to(device)

        query_mask = trace.attention_mask
        if name == "decoder" and trace.tgt_attention_mask is not None:
            query_mask = trace.tgt_attention_mask
        keep = {s: on(m) for s, m in trace.head_mask.items()}
        at = _ablations(trace, keep, {name: on(query_mask)})
        rotary = self.rotation(hidden.shape[2], trace.positions)
        records = []
        with torch.no_grad():
            for i, layer in enumerate(module.layers):
                if only is not None and i != only:
                    continue
                sites = at.at(f"{prefix(trace.config, name)}.{i}.")
                x = hidden[:, i].to(device).contiguous()  # (B, T, d_model)
                if name == "encoder":
                    _, record = layer(x, on(trace.masks["encoder"]), sites, rotary)
                else:
                    memory = trace.outputs.get("encoder")
                    cross = trace.masks.get("cross")
                    mask = on(trace.masks["decoder"])
                    _, record = layer(x, mask, on(memory), on(cross), sites, rotary)
                records.append(record)

        def stacked(*path: str) -> torch.Tensor:
            items = []
            for record in records:
                for key in path:
                    record = record[key]
                items.append(record)
            out = torch.stack(items, dim=1)  # (B, L, ...)
            return out.to(device=hidden.device, dtype=hidden.dtype)

        found = {name: {f: stacked(f) for f in LAYER_FIELDS}}
        if name == "decoder" and "cross" in trace.masks:
            found["cross"] = {
                "queries": stacked("cross", "q"),
                "keys": stacked("cross", "k"),
                "values": stacked("cross", "v"),
                "attn_out": stacked("cross_out"),
            }
        return found

    def walk(self, trace, stack: str, layer: int, item: int, read: Collection[str]) -> dict:
        """One layer of one text run again, its sites ``read`` read (see module doc).

        The layer's own forward pass on the text's real tokens only, as one call with
        ``Sites(read=…)`` and the trace's head masks: padded keys were hidden and padding never
        reaches a real token, so these are the padded batch's numbers. RoPE turns the real rows
        by their own positions in the batch; with positions off a rotary model's turn is the
        identity (so the walk can show that nothing turned).

        Args:
            read: site names under the layer ("hook_resid_pre", "attn.hook_q", "mlp.hook_post",
                …; model/sites.py).
        Returns:
            "sites": {name: value} for each name of ``read`` the layer passed, the batch
            dimension dropped; "contexts": {"attn." | "cross_attn.": [H, T, d_head]} each
            attention's contexts as computed, before the trace's head mask replaced them at
            "hook_z"; "mask" [T, T] (self-attention's, True = may attend), with cross-attention
            "memory" [S, d_model] (the encoder output C of the source's real tokens) and
            "cross_mask" [T, S]; on the model's device and dtype.
        """
        name = "decoder" if stack == "cross" else stack
        module = self.stacks[name]
        self._check(module)
        param = next(module.parameters())

        def on(t: torch.Tensor, *index: torch.Tensor) -> torch.Tensor:
            t = t.to(param.device)
            for dim, positions in enumerate(index):
                t = t.index_select(dim, positions)
            return t.to(param.dtype) if t.is_floating_point() else t

        src = trace.attention_mask[item].bool().to(param.device)  # (T_src,)
        tgt = src
        if name == "decoder" and trace.tgt_attention_mask is not None:
            tgt = trace.tgt_attention_mask[item].bool().to(param.device)  # (T_tgt,)
        rows, cols = tgt.nonzero().squeeze(1), src.nonzero().squeeze(1)
        hidden = trace.hidden_states[name]  # (B, L+1, T, d_model)
        x = on(hidden[item, layer], rows)  # (T, d_model)
        mask = on(trace.masks[name][item], rows, rows)  # (T, T)
        rotary = self._walk_rotation(trace, hidden.shape[2], rows, on, param)
        under = f"{prefix(trace.config, name)}.{layer}."
        sites = Sites(read=[under + n for n in read])
        at, contexts = _walk_sites(trace, under, sites, layer, param.device)
        found: dict = {"mask": mask}
        args: tuple = () if name == "encoder" else (None, None)  # memory, cross mask
        if name == "decoder" and "cross" in trace.masks:
            memory = on(trace.outputs["encoder"][item], cols)  # (S, d_model)
            cross = on(trace.masks["cross"][item], rows, cols)  # (T, S)
            found.update(memory=memory, cross_mask=cross)
            args = (memory[None], cross[None])
        with torch.no_grad():
            module.layers[layer](x[None], mask[None], *args, at.at(under), rotary)
        found["sites"] = {n[len(under) :]: v[0] for n, v in sites.values.items()}
        found["contexts"] = {n: v[0] for n, v in contexts.items()}
        return found

    def _walk_rotation(self, trace, seq_len: int, rows, on, param) -> Rotation | None:
        """RoPE's angles of the real rows (their own positions in the batch); positions off,
        a rotary model's identity turn."""
        rotary = self.rotation(seq_len, trace.positions)
        if rotary is not None:  # the real rows' own angles
            local = rotary.local
            if local is not None:  # Gemma 3's sliding layers' own base
                local = Rotation(on(local.cos, rows), on(local.sin, rows))
            return Rotation(on(rotary.cos, rows), on(rotary.sin, rows), local)  # (T, d_head)
        if trace.config.positions == "rotary":
            one = torch.ones((), dtype=param.dtype, device=param.device)
            return Rotation(one, one * 0)  # positions off: the identity turn
        return None


def _walk_sites(
    trace, under: str, sites: Sites, layer: int, device: torch.device
) -> tuple[Intervention, dict[str, torch.Tensor]]:
    """The walk's Intervention: at each attention's "hook_z", first a keeper of the contexts as
    computed (into the dict returned, by "attn." / "cross_attn."), then the trace's head mask as
    its pass applied it (the layer's); then the walk's Sites, which read what follows it."""
    at = Intervention(sites, weights=True)
    contexts: dict[str, torch.Tensor] = {}
    for attn in ("attn.", "cross_attn."):
        at.replace(under + attn + "hook_z", _keeper(contexts, attn))
    keep = {s: m.to(device) for s, m in trace.head_mask.items()}
    layers = range(layer, layer + 1)
    for name, fn in ablation_sites(trace.config, keep, trace.ablation, {}, layers).items():
        at.replace(name, fn)
    return at, contexts


def _keeper(kept: dict, key: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """A replacement that changes nothing and keeps the value it was given under ``key``."""

    def keep(x: torch.Tensor) -> torch.Tensor:
        kept[key] = x
        return x

    return keep


def _ablations(
    trace, keep: dict[str, torch.Tensor], query_masks: dict, layers: range | None = None
) -> Intervention:
    """The trace's head masks as its pass applied them (every layer's, or ``layers``'), in an
    Intervention that shows weights: the explicit attention, as in the trace's pass."""
    at = Intervention(weights=True)
    for name, fn in ablation_sites(trace.config, keep, trace.ablation, query_masks, layers).items():
        at.replace(name, fn)
    return at
