"""Circuits: edge attribution patching, a circuit's faithfulness, and composition scores.

A pre-norm model's residual stream is a sum: what each node writes (the embeddings, each head's
z_h·W_O^h, each MLP's output) is read by every later node. An edge is one such write as one
later reader reads it: a head's query, key or value input, an MLP's input, or the logits. Edge
attribution patching (Syed et al. 2023, EAP; Hanna et al. 2024, EAP-IG) scores each edge by
(out_source(clean) − out_source(corrupt)) · mean ∂m/∂in_target, the gradient taken through that
target alone (each head's q, k and v input its own copy of the stream, model/sites.py), over
(m_clean − m_corrupt). A circuit keeps some edges; every other edge carries its source's
corrupt output (Hanna et al. 2024's evaluation), and its faithfulness is the share of the clean
metric that comes back. Composition scores (Elhage et al. 2021) read the weights alone.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn

from analysis.attribution_patching import _item, _metric_tensor, integrated, stack_of
from analysis.patching import Metric, _inputs, _Pair
from model.sites import Sites

PAGE_STEPS = 8  # EAP-IG runs a page's circuit asks for: one step is blind to the copy's keys


@dataclass(frozen=True)
class Graph:
    """A pre-norm model's nodes and edges. Sources and targets in data-flow order, with their
    site names; ``upstream`` [S, N] bool: source s writes before target n reads."""

    sources: list[str]
    targets: list[str]
    upstream: torch.Tensor
    target_sites: list[tuple[str, int]]  # per target group: (site name, how many targets)


def _graph(net: nn.Module) -> Graph:
    """The nodes of a decoder-only (or encoder-only) pre-norm model; refused otherwise."""
    cfg = net.config
    if cfg.norm != "pre":
        raise ValueError(
            "Edge attribution needs a pre-norm model: a post-norm model (BERT, the seed 000, "
            "002 and 003 presets) renormalises its residual stream after every sublayer, so "
            "the stream is not a sum of what each head and MLP wrote."
        )
    if cfg.arch == "encoder-decoder":
        raise ValueError(
            "Edge attribution reads one stack's residual stream; an encoder-decoder's decoder "
            "also reads the encoder through cross-attention, which these edges do not name: "
            "use attribute_heads with stack='cross'."
        )
    n_layers, n_heads, n_kv = cfg.n_layers, cfg.n_heads, cfg.kv_heads
    kv = "KV" if n_kv < n_heads else "H"
    sources, source_stage = ["embed"], [-1]
    targets, target_stage, sites = [], [], []
    for layer in range(n_layers):
        sources += [f"L{layer}H{h}" for h in range(n_heads)] + [f"L{layer}MLP"]
        source_stage += [2 * layer] * n_heads + [2 * layer + 1]
        for kind, count, name in (("q", n_heads, "H"), ("k", n_kv, kv), ("v", n_kv, kv)):
            targets += [f"L{layer}{name}{h}.{kind}" for h in range(count)]
            target_stage += [2 * layer] * count
            sites.append((f"blocks.{layer}.hook_{kind}_input", count))
        targets.append(f"L{layer}MLP")
        target_stage.append(2 * layer + 1)
        sites.append((f"blocks.{layer}.hook_mlp_in", 1))
    targets.append("logits")
    target_stage.append(2 * n_layers)
    sites.append((f"blocks.{n_layers - 1}.hook_resid_post", 1))
    upstream = torch.tensor(source_stage)[:, None] < torch.tensor(target_stage)[None, :]
    return Graph(sources, targets, upstream, sites)


def _w_o(net: nn.Module, layer: int) -> torch.Tensor:
    """Layer's W_O per head, [d_model, H, d_head] (result_h = z_h · W_O^hᵀ in this layout), of
    a model of one stack."""
    w_o = (net.decoder or net.encoder).layers[layer].self_attn.w_o.weight.detach()
    return w_o.view(w_o.shape[0], net.config.n_heads, net.config.d_head)


def _head_outputs(net: nn.Module, layer: int, z: torch.Tensor) -> torch.Tensor:
    """What each head writes, z_h·W_O^h without the bias: z [..., H, T, d_head] ->
    [..., H, T, d_model]."""
    return torch.einsum("...htk,dhk->...htd", z, _w_o(net, layer).to(z))


def _source_sites(n_layers: int) -> list[str]:
    return ["blocks.0.hook_resid_pre"] + [
        f"blocks.{layer}.{name}"
        for layer in range(n_layers)
        for name in ("attn.hook_z", "hook_mlp_out")
    ]


def edge_attribution(
    net: nn.Module, clean: Mapping, corrupt: Mapping, metric: Metric, steps: int = 1
) -> pd.DataFrame:
    """Edge attribution patching (EAP; EAP-IG with steps > 1) of a pre-norm model.

    Args as analysis.attribute_heads. Returns one row per edge, columns ``source`` ("embed",
    "L{l}H{h}", "L{l}MLP"), ``target`` ("L{l}H{h}.q" / ".k" / ".v" — "L{l}KV{g}.k" / ".v" with
    grouped-query attention —, "L{l}MLP", "logits") and ``score``: Σ over positions and d_model
    of (out_source(clean) − out_source(corrupt)) · mean ∂m/∂in_target, over (m_clean −
    m_corrupt). A ValueError (one sentence) for a post-norm model or an encoder-decoder.
    """
    graph = _graph(net)
    n_layers = net.config.n_layers
    grad = [name for name, _ in graph.target_sites]
    found = integrated(net, clean, corrupt, metric, steps, _source_sites(n_layers), grad)
    diff = {k: found.clean[k] - found.corrupt[k] for k in found.clean}
    parts = [diff["blocks.0.hook_resid_pre"][None]]  # (1, T, d_model)
    for layer in range(n_layers):
        parts.append(_head_outputs(net, layer, diff[f"blocks.{layer}.attn.hook_z"]))
        parts.append(diff[f"blocks.{layer}.hook_mlp_out"][None])
    outs = torch.cat(parts).flatten(1)  # (S, T · d_model)
    grads = torch.cat([found.grads[n].reshape(c, -1) for n, c in graph.target_sites])  # (N, T·d)
    scores = (outs @ grads.T) / found.gap  # (S, N)
    s, n = graph.upstream.nonzero(as_tuple=True)
    return pd.DataFrame(
        {
            "source": [graph.sources[i] for i in s.tolist()],
            "target": [graph.targets[i] for i in n.tolist()],
            "score": scores[s, n].double().numpy(),
        }
    )


@dataclass
class Circuit:
    """A circuit's edges (rows of edge_attribution; score NaN where the edges were given) and
    its faithfulness: (m − m_corrupt) / (m_clean − m_corrupt) of the clean text run with every
    other edge carrying its source's corrupt output (1: all the answer, 0: none)."""

    edges: pd.DataFrame
    faithfulness: float
    m_circuit: float
    m_clean: float
    m_corrupt: float


def _kept(net, clean, corrupt, metric, keep, steps) -> pd.DataFrame:
    """The kept edges as rows source, target, score."""
    if isinstance(keep, pd.DataFrame):
        rows = keep.copy()
        if "score" not in rows:
            rows["score"] = float("nan")
        return rows[["source", "target", "score"]].reset_index(drop=True)
    if isinstance(keep, numbers.Integral):
        scores = edge_attribution(net, clean, corrupt, metric, steps)
        order = scores["score"].abs().sort_values(ascending=False, kind="stable").index
        return scores.loc[order[: max(0, keep)]].reset_index(drop=True)
    pairs = [tuple(edge) for edge in keep]
    return pd.DataFrame(
        {"source": [a for a, _ in pairs], "target": [b for _, b in pairs], "score": float("nan")}
    )


def _removed(graph: Graph, kept: pd.DataFrame) -> torch.Tensor:
    """[S, N] float: 1 where an edge is not kept."""
    where = torch.zeros_like(graph.upstream)
    s_index = {name: i for i, name in enumerate(graph.sources)}
    t_index = {name: i for i, name in enumerate(graph.targets)}
    for source, target in zip(kept["source"], kept["target"], strict=True):
        s, n = s_index.get(source), t_index.get(target)
        if s is None or n is None or not bool(graph.upstream[s, n]):
            raise ValueError(f"{source} → {target} is not an edge of this model.")
        where[s, n] = True
    return (graph.upstream & ~where).float()


class _Ablation:
    """The sites of a circuit's run, batch items (circuit, clean, corrupt): each source's output
    is noted as it is written (the circuit item's minus the corrupt item's), and each target of
    the circuit item reads its input minus what its removed edges carried."""

    def __init__(self, net: nn.Module, graph: Graph, removed: torch.Tensor) -> None:
        self.net, self.removed, self.diffs = net, removed, []
        replace = {"blocks.0.hook_resid_pre": self.note_stream}
        for layer in range(net.config.n_layers):
            replace[f"blocks.{layer}.attn.hook_z"] = self.note_heads(layer)
            replace[f"blocks.{layer}.hook_mlp_out"] = self.note_stream
        first = 0
        for name, count in graph.target_sites:
            replace[name] = self.target(first, count)
            first += count
        self.sites = Sites(replace=replace)

    def note_stream(self, x: torch.Tensor) -> torch.Tensor:
        self.diffs.append((x[0] - x[2])[None])  # (1, T, d_model)
        return x

    def note_heads(self, layer: int):
        def note(z: torch.Tensor) -> torch.Tensor:
            self.diffs.append(_head_outputs(self.net, layer, z[0] - z[2]))  # (H, T, d_model)
            return z

        return note

    def target(self, first: int, count: int):
        def read(x: torch.Tensor) -> torch.Tensor:
            weights = self.removed[:, first : first + count]  # (S, count)
            diffs = torch.cat(self.diffs)  # (S so far, T, d_model)
            weights = weights[: diffs.shape[0]]
            if not bool(weights.any()):
                return x
            carried = torch.einsum("sc,std->ctd", weights.to(diffs), diffs)  # (count, T, d)
            own = x[0] - carried.reshape(x[0].shape)  # heads' copies (count, T, d), else (T, d)
            return torch.cat([own[None], x[1:]])

        return read


def circuit(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    keep: int | Sequence[tuple[str, str]] | pd.DataFrame,
    steps: int = PAGE_STEPS,
) -> Circuit:
    """The faithfulness of a circuit of a pre-norm model (Hanna et al. 2024).

    keep: how many edges of largest |score| of edge_attribution(..., steps) to keep, a list of
    (source, target) pairs, or rows of edge_attribution. The clean text is run with every edge
    not kept carrying its source's output from the corrupt run: a target reads its input in
    this run minus Σ over its removed edges of (out_source(this run) − out_source(corrupt)).
    Every edge kept gives 1, none 0.
    """
    graph = _graph(net)
    kept = _kept(net, clean, corrupt, metric, keep, steps)
    ablation = _Ablation(net, graph, _removed(graph, kept))
    clean_in, corrupt_in = _inputs(net, clean, corrupt)
    batch = {k: torch.cat([v, v, corrupt_in[k]]) for k, v in clean_in.items()}
    trace = net.run_with_sites(sites=ablation.sites, **batch)
    pair = _Pair(net, clean_in, corrupt_in, metric, (_item(trace, 1), _item(trace, 2)))
    m_circuit = float(_metric_tensor(metric, trace, 3)[0])
    share = (m_circuit - pair.m_corrupt) / (pair.m_clean - pair.m_corrupt)
    return Circuit(kept, share, m_circuit, pair.m_clean, pair.m_corrupt)


def _qr_r(w: torch.Tensor) -> torch.Tensor:
    """R of w = QR, w [..., d_model, d_head]: ‖Q R X‖_F = ‖R X‖_F for any X."""
    return torch.linalg.qr(w, mode="r")[1]  # (..., d_head, d_head)


def _per_head(linear: nn.Linear, n_heads: int, d_head: int) -> torch.Tensor:
    """A projection's weight as W^h [H, d_model, d_head] per query head (x W^h), a key/value
    head repeated for each query head of its group."""
    w = linear.weight.detach().double()
    w = w.view(-1, d_head, w.shape[-1])  # (heads, d_head, d_model)
    return w.repeat_interleave(n_heads // w.shape[0], dim=0).transpose(1, 2)


def composition_scores(net: nn.Module, kind: str, stack: str | None = None) -> torch.Tensor:
    """Elhage et al. 2021's composition scores of every pair of heads, [L, H, L, H].

    kind "q", "k" or "v": ‖W_OV¹ M‖_F / (‖W_OV¹‖_F ‖M‖_F) with M = W_QK², (W_QK²)ᵀ or W_OV² of
    the later head (W_QK = W_Q W_Kᵀ, W_OV = W_V W_O, d_model × d_model, on the raw weights,
    no norm folded); 0 unless the first head's layer is earlier. Grouped-query heads use their
    group's W_K, W_V. ``stack``: whose self-attention (the model's first by default).
    """
    if kind not in ("q", "k", "v"):
        raise ValueError(f"kind is 'q', 'k' or 'v', not {kind!r}.")
    cfg = net.config
    attn = [layer.self_attn for layer in getattr(net, stack or stack_of(net, None)).layers]
    n_layers, n_heads, d_head = cfg.n_layers, cfg.n_heads, cfg.d_head
    w_q, w_k, w_v = (
        torch.stack([_per_head(getattr(a, name), n_heads, d_head) for a in attn])
        for name in ("w_q", "w_k", "w_v")
    )  # (L, H, d_model, d_head) each
    w_o = torch.stack(  # W_O^hᵀ, (L, H, d_model, d_head): W_O's columns of head h
        [a.w_o.weight.detach().double().view(-1, n_heads, d_head).transpose(0, 1) for a in attn]
    )
    r_q, r_k, r_v, r_o = (_qr_r(w) for w in (w_q, w_k, w_v, w_o))  # (L, H, d_head, d_head)
    # W_OV¹ = Q_V R_V W_O¹ and M = A Bᵀ = Q_A R_A R_Bᵀ Q_Bᵀ (A, B [d_model, d_head]), so
    # ‖W_OV¹ M‖ = ‖R_V W_O¹ A R_Bᵀ‖, ‖W_OV¹‖ = ‖R_V R_Oᵀ‖ and ‖M‖ = ‖R_A R_Bᵀ‖.
    a_side, r_a, r_b = {"q": (w_q, r_q, r_k), "k": (w_k, r_k, r_q), "v": (w_v, r_v, r_o)}[kind]
    left = r_v @ w_o.transpose(-1, -2)  # (L, H, d_head, d_model)
    norm_left = torch.linalg.matrix_norm(r_v @ r_o.transpose(-1, -2))  # (L, H)
    norm_m = torch.linalg.matrix_norm(r_a @ r_b.transpose(-1, -2))  # (L, H)
    scores = torch.zeros(n_layers, n_heads, n_layers, n_heads, dtype=torch.float64)
    for first in range(n_layers - 1):
        later = slice(first + 1, n_layers)
        inner = torch.einsum("hkd,bcde->hbcke", left[first], a_side[later])  # (H, L', H, dh, dh)
        both = inner @ r_b[later].transpose(-1, -2)[None]  # (H, L', H, d_head, d_head)
        norms = torch.linalg.matrix_norm(both)  # (H, L', H)
        scores[first, :, later] = norms / (norm_left[first][:, None, None] * norm_m[later][None])
    return scores.float()
