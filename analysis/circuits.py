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

An encoder-decoder has two streams, which meet where every cross-attention's keys and values
read the encoder's output, its final norm of the encoder's stream: one node, "memory", stands
there (a target before the norm, a source after it), so that each stream stays a sum.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import inf

import pandas as pd
import torch
from torch import nn

from analysis.attribution_patching import _item, _metric_tensor, integrated, stack_of
from analysis.patching import Metric, _inputs, _Pair
from model.sites import Sites, prefix

PAGE_STEPS = 8  # EAP-IG runs a page's circuit asks for: one step is blind to the copy's keys


@dataclass(frozen=True)
class Sources:
    """One site's sources: its value's stream (whose positions) and, for heads, the attention
    whose W_O turns each head's z into what it writes (None: the value is written as it is).
    A sandwich model's heads (Gemma 3) also name the norm after the attention and the site of
    what it reads (the heads' writes summed): each head writes its part of the norm's output."""

    site: str
    stream: str
    attn: nn.Module | None
    post: nn.Module | None = None
    post_site: str | None = None


@dataclass(frozen=True)
class Targets:
    """One site's targets: how many (a head's copies, else 1) and the stream of their positions."""

    site: str
    count: int
    stream: str


@dataclass(frozen=True)
class Graph:
    """A pre-norm model's nodes and edges. Sources and targets in data-flow order (the order a
    run writes and reads them), their sites; ``upstream`` [S, N] bool: an edge from source s
    to target n (s writes before n reads, on the same stream)."""

    sources: list[str]
    targets: list[str]
    upstream: torch.Tensor
    source_sites: list[Sources]
    target_sites: list[Targets]

    def stream_sources(self, stream: str) -> list[int]:
        """The indices of the sources written on a stream, in the order a run writes them."""
        found, first = [], 0
        for group in self.source_sites:
            count = 1 if group.attn is None else group.attn.n_heads
            if group.stream == stream:
                found += range(first, first + count)
            first += count
        return found


class _Builder:
    """Nodes added in data-flow order, each with its stage on its stream; a target reads every
    earlier source of its stream (or only those named in ``only``)."""

    def __init__(self) -> None:
        self.sources, self.targets = [], []
        self.source_sites, self.target_sites = [], []
        self.source_at, self.target_at = [], []  # (stream, stage)
        self.only: list[frozenset | None] = []

    def source(self, names, group: Sources, stage: int) -> None:
        self.sources += names
        self.source_sites.append(group)
        self.source_at += [(group.stream, stage)] * len(names)

    def target(self, names, group: Targets, stage: float, only=None) -> None:
        self.targets += names
        self.target_sites.append(group)
        self.target_at += [(group.stream, stage)] * len(names)
        self.only += [only] * len(names)

    def stack(self, net: nn.Module, stream: str, name: str, end: str) -> None:
        """A stack's embeddings, heads, MLPs and the target its end feeds (``end``: "logits" or
        "memory"); node names begin with ``name`` ("" for a model of one stack); a decoder
        with cross-attention adds the "cross." heads, whose keys and values read "memory"."""
        cfg, layers = net.config, getattr(net, stream).layers
        site, crossed = prefix(cfg, stream), stream == "decoder" and cfg.arch == "encoder-decoder"
        kv = "KV" if cfg.kv_heads < cfg.n_heads else "H"
        per_layer = 3 if crossed else 2
        self.source([f"{name}embed"], Sources(f"{site}.0.hook_resid_pre", stream, None), -1)
        attentions = [("attn", "", name, 0)] + ([("cross_attn", "cross_", "cross.", 1)] * crossed)
        for layer in range(cfg.n_layers):
            at = f"{site}.{layer}"
            for module, hook, node, offset in attentions:
                stage = per_layer * layer + offset
                attn = getattr(layers[layer], "self_attn" if module == "attn" else module)
                heads = [f"{node}L{layer}H{h}" for h in range(cfg.n_heads)]
                post = layers[layer].add_norm1.post if module == "attn" else None
                normed = None if post is None else f"{at}.ln1_post.hook_in"
                group = Sources(f"{at}.{module}.hook_z", stream, attn, post, normed)
                self.source(heads, group, stage)
                for kind, count, letters in (
                    ("q", cfg.n_heads, "H"), ("k", cfg.kv_heads, kv), ("v", cfg.kv_heads, kv)
                ):  # fmt: skip
                    names = [f"{node}L{layer}{letters}{i}.{kind}" for i in range(count)]
                    group = f"{at}.hook_{hook}{kind}_input"
                    if hook and kind != "q":  # the memory's copies: the encoder's positions
                        self.target(names, Targets(group, count, "encoder"), inf, {"memory"})
                    else:
                        self.target(names, Targets(group, count, stream), stage)
            stage = per_layer * layer + per_layer - 1
            self.source([f"{name}L{layer}MLP"], Sources(f"{at}.hook_mlp_out", stream, None), stage)
            self.target([f"{name}L{layer}MLP"], Targets(f"{at}.hook_mlp_in", 1, stream), stage)
        last = Targets(f"{site}.{cfg.n_layers - 1}.hook_resid_post", 1, stream)
        self.target([end], last, per_layer * cfg.n_layers)
        if end == "memory":  # what the cross-attentions read: the stack's output
            normed = getattr(net, stream).final_norm is not None
            written = f"{site}.ln_final.hook_normalized" if normed else last.site
            self.source(["memory"], Sources(written, stream, None), per_layer * cfg.n_layers)

    def graph(self) -> Graph:
        def columns(at):  # (stream as 0 / 1, stage) of each node
            streams = torch.tensor([stream == "decoder" for stream, _ in at])
            return streams, torch.tensor([stage for _, stage in at], dtype=torch.float64)

        (s_stream, s_stage), (t_stream, t_stage) = columns(self.source_at), columns(self.target_at)
        upstream = (s_stream[:, None] == t_stream[None]) & (s_stage[:, None] < t_stage[None])
        for n, only in enumerate(self.only):
            if only is not None:  # a cross-attention's key or value: the memory alone
                upstream[:, n] &= torch.tensor([s in only for s in self.sources])
        return Graph(self.sources, self.targets, upstream, self.source_sites, self.target_sites)


def _graph(net: nn.Module) -> Graph:
    """The nodes of a pre-norm model; a post-norm model is refused with a sentence.

    A model of one stack: "embed", "L{l}H{h}", "L{l}MLP" and "logits". An encoder-decoder: the
    encoder's nodes under "encoder.", whose stream ends in "memory" (a target: the stream before
    the encoder's final norm; a source: its output, which every cross-attention's keys and
    values read), the decoder's under "decoder.", its cross-attention heads under "cross."
    (their queries read the decoder's stream, their keys and values the memory), and "logits".
    """
    cfg = net.config
    if cfg.norm != "pre":
        raise ValueError(
            "Edge attribution needs a pre-norm model: a post-norm model (BERT, the seed 000, "
            "002 and 003 presets) renormalises its residual stream after every sublayer, so "
            "the stream is not a sum of what each head and MLP wrote."
        )
    build = _Builder()
    if cfg.arch == "encoder-decoder":
        build.stack(net, "encoder", "encoder.", "memory")
        build.stack(net, "decoder", "decoder.", "logits")
    else:
        build.stack(net, "decoder" if cfg.has_decoder else "encoder", "", "logits")
    return build.graph()


def edge_count(net: nn.Module) -> int:
    """How many edges edge_attribution scores on this model (0 where it refuses the model)."""
    try:
        return int(_graph(net).upstream.sum())
    except ValueError:
        return 0


def _head_outputs(attn: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """What each head writes, z_h·W_O^h without the bias: z [..., H, T, d_head] ->
    [..., H, T, d_model]."""
    w_o = attn.w_o.weight.detach()
    w_o = w_o.view(w_o.shape[0], attn.n_heads, attn.d_head)  # (d_model, H, d_head)
    return torch.einsum("...htk,dhk->...htd", z, w_o.to(z))


def _head_writes(group: Sources, z: torch.Tensor, normed: torch.Tensor | None = None):
    """What each head of a site writes, [..., H, T, d_model], from its z [..., H, T, d_head]. A
    sandwich's heads: each head's z_h·W_O^h times what the second norm multiplies its input by
    in this run, g / √(mean(a²) + ε) with a = ``normed`` [..., T, d_model], the heads' writes
    summed (the site the norm reads): the heads' parts add up to the norm's output, the run's
    own scale each."""
    heads = _head_outputs(group.attn, z)
    if group.post is None:
        return heads
    a = normed.float()
    scale = torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + group.post.eps)  # (..., T, 1)
    gain = group.post.gain.detach().float()
    return (heads.float() * scale.unsqueeze(-3) * gain).to(heads.dtype)


def _written_pairs(group: Sources, clean: Mapping, corrupt: Mapping) -> torch.Tensor:
    """out_source(clean) − out_source(corrupt) of a site's sources over N pairs, [sources,
    N · T · d_model], from each run's values of the sites [N, T, ...] (a sandwich's heads: each
    run at its own norm scale)."""
    if group.attn is None:
        return (clean[group.site] - corrupt[group.site]).reshape(1, -1)
    if group.post is None:  # linear in z
        change = _head_outputs(group.attn, clean[group.site] - corrupt[group.site])
    else:
        change = _head_writes(group, clean[group.site], clean[group.post_site])
        change = change - _head_writes(group, corrupt[group.site], corrupt[group.post_site])
    return change.movedim(1, 0).flatten(1)  # heads first


def edge_attribution(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    steps: int = 1,
    ig_end: str = "clean",
) -> pd.DataFrame:
    """Edge attribution patching (EAP; EAP-IG with steps > 1) of a pre-norm model.

    Args as analysis.attribute_heads (ig_end="corrupt": the EAP-IG authors' k = 0 … steps − 1,
    their ig_steps=steps). Returns one row per edge, columns ``source`` ("embed",
    "L{l}H{h}", "L{l}MLP"), ``target`` ("L{l}H{h}.q" / ".k" / ".v" — "L{l}KV{g}.k" / ".v" with
    grouped-query attention —, "L{l}MLP", "logits") and ``score``: Σ over positions and d_model
    of (out_source(clean) − out_source(corrupt)) · mean ∂m/∂in_target, over (m_clean −
    m_corrupt). An encoder-decoder's nodes are named by stack ("encoder.L0H1", "cross.L1H0.k",
    "memory", …; see _graph). A ValueError (one sentence) for a post-norm model.
    """
    graph = _graph(net)
    read = [group.site for group in graph.source_sites]
    read += [group.post_site for group in graph.source_sites if group.post_site]
    grad = [group.site for group in graph.target_sites]
    found = integrated(net, clean, corrupt, metric, steps, read, grad, ig_end)
    scores = torch.zeros(len(graph.sources), len(graph.targets), dtype=torch.float64)
    first = 0
    target_index = {}
    for group in graph.target_sites:
        target_index.setdefault(group.stream, []).extend(range(first, first + group.count))
        first += group.count
    for stream, targets in target_index.items():
        outs = torch.cat(  # (S on this stream, pairs · T · d_model)
            [
                _written_pairs(g, found.clean, found.corrupt)
                for g in graph.source_sites
                if g.stream == stream
            ]
        )
        grads = torch.cat(  # (N on this stream, pairs · T · d_model)
            [
                found.grads[g.site].unflatten(1, (g.count, -1)).movedim(1, 0).flatten(1)
                for g in graph.target_sites
                if g.stream == stream
            ]
        )
        sources = torch.tensor(graph.stream_sources(stream))
        scores[sources[:, None], torch.tensor(targets)[None]] = (outs @ grads.T).double()
    scores /= found.gap
    s, n = graph.upstream.nonzero(as_tuple=True)
    return pd.DataFrame(
        {
            "source": [graph.sources[i] for i in s.tolist()],
            "target": [graph.targets[i] for i in n.tolist()],
            "score": scores[s, n].numpy(),
        }
    )


@dataclass
class Circuit:
    """A circuit's edges (rows of edge_attribution; score NaN where the edges were given; with
    prune=True, those that stay after pruning the dangling ones), and its faithfulness:
    (m − m_corrupt) / (m_clean − m_corrupt) of the clean text run with every other edge
    carrying its source's corrupt output (1: all the answer, 0: none; with zero or mean
    ablation normalised by the run with no edge kept, m_empty). ``asked``: how many edges were
    asked for, before pruning."""

    edges: pd.DataFrame
    faithfulness: float
    m_circuit: float
    m_clean: float
    m_corrupt: float
    asked: int = 0
    m_empty: float = float("nan")  # the run with no edge kept: m_corrupt under patching
    ablation: str = "patching"


def _ranked(scores: pd.DataFrame) -> pd.DataFrame:
    """Rows of edge_attribution by |score|, largest first (ties in the table's order)."""
    if not {"source", "target", "score"} <= set(scores.columns):
        raise ValueError("scores are rows of edge_attribution: columns source, target, score.")
    order = scores["score"].abs().sort_values(ascending=False, kind="stable").index
    return scores.loc[order].reset_index(drop=True)


def _kept(net, clean, corrupt, metric, keep, steps, ig_end="clean", scores=None) -> pd.DataFrame:
    """The kept edges as rows source, target, score (the ``keep`` of largest |score| of
    ``scores``, scored here where none are given)."""
    if isinstance(keep, pd.DataFrame):
        rows = keep.copy()
        if "score" not in rows:
            rows["score"] = float("nan")
        return rows[["source", "target", "score"]].reset_index(drop=True)
    if isinstance(keep, numbers.Integral):
        if scores is None:
            scores = edge_attribution(net, clean, corrupt, metric, steps, ig_end)
        return _ranked(scores).iloc[: max(0, int(keep))].reset_index(drop=True)
    return _pairs(keep)


def _pairs(edges) -> pd.DataFrame:
    """(source, target) pairs as rows source, target, score (NaN)."""
    pairs = [tuple(edge) for edge in edges]
    return pd.DataFrame(
        {"source": [a for a, _ in pairs], "target": [b for _, b in pairs], "score": float("nan")}
    )


def _feeds(net: nn.Module, graph: Graph) -> torch.Tensor:
    """[N, S] bool: target n is an input of source node s (a head's query, key or value — a
    key/value group's of each head of the group —, an MLP's input, the memory); "logits" of
    none."""
    index = {name: i for i, name in enumerate(graph.sources)}
    n_rep = net.config.n_heads // net.config.kv_heads
    feeds = torch.zeros(len(graph.targets), len(graph.sources), dtype=torch.bool)
    for n, target in enumerate(graph.targets):
        node = target.rsplit(".", 1)[0] if target[-2:] in (".q", ".k", ".v") else target
        head, kv, group = node.rpartition("KV")
        nodes = [node]
        if kv and group.isdigit():  # a key/value group: each of its query heads reads it
            nodes = [f"{head}H{h}" for h in range(int(group) * n_rep, (int(group) + 1) * n_rep)]
        for name in nodes:
            if name in index:
                feeds[n, index[name]] = True
    return feeds


def _pruned(net: nn.Module, graph: Graph, kept: torch.Tensor) -> torch.Tensor:
    """kept [S, N] bool less its dangling edges, as the EAP-IG authors' Graph.prune: until
    nothing changes, a node stays while it has a kept edge out and one in (the embeddings need
    none in), and an edge while its source and its target's node stay ("logits" always does)."""
    feeds = _feeds(net, graph).float()
    start = torch.tensor([s == "embed" or s.endswith(".embed") for s in graph.sources])
    end = torch.tensor([t == "logits" for t in graph.targets])
    while True:
        has_in = (kept.any(0).float() @ feeds) > 0  # (S,)
        alive = kept.any(1) & (has_in | start)
        target_alive = ((feeds @ alive.float()) > 0) | end  # (N,)
        new = kept & alive[:, None] & target_alive[None]
        if torch.equal(new, kept):
            return kept
        kept = new


def _indices(graph: Graph, rows: pd.DataFrame) -> tuple[torch.Tensor, torch.Tensor]:
    """(source indices, target indices) of the rows' edges; a ValueError for a pair that is no
    edge of the graph."""
    s_index = {name: i for i, name in enumerate(graph.sources)}
    t_index = {name: i for i, name in enumerate(graph.targets)}
    s = [s_index.get(name, -1) for name in rows["source"]]
    n = [t_index.get(name, -1) for name in rows["target"]]
    s_t, n_t = torch.tensor(s, dtype=torch.long), torch.tensor(n, dtype=torch.long)
    known = (s_t >= 0) & (n_t >= 0)
    real = torch.zeros_like(known)
    real[known] = graph.upstream[s_t[known], n_t[known]]
    if not bool(real.all()):
        bad = int((~real).nonzero()[0])
        source, target = rows["source"].iloc[bad], rows["target"].iloc[bad]
        raise ValueError(f"{source} → {target} is not an edge of this model.")
    return s_t, n_t


def _mask(graph: Graph, kept: pd.DataFrame) -> torch.Tensor:
    """[S, N] bool: True where an edge is kept; a ValueError for a pair that is no edge."""
    where = torch.zeros_like(graph.upstream)
    s, n = _indices(graph, kept)
    where[s, n] = True
    return where


def prune_edges(net: nn.Module, edges: pd.DataFrame | Sequence[tuple[str, str]]) -> pd.DataFrame:
    """The edges of a circuit that are not dangling, as the EAP-IG authors' prune(): an edge
    stays where its source is reached from the embeddings and its target reaches the logits
    through kept edges. edges: rows with columns source, target (others kept) or (source,
    target) pairs; returns the rows that stay, in their order. A dangling edge changes no
    circuit's faithfulness (its source's output is its corrupt one, or its target's output is
    read by no kept edge), so pruning only makes the count honest."""
    graph = _graph(net)
    rows = edges if isinstance(edges, pd.DataFrame) else _pairs(edges)
    return _staying(graph, rows, _pruned(net, graph, _mask(graph, rows)))


def node_edges(net: nn.Module, nodes: Sequence[str]) -> pd.DataFrame:
    """A node-level circuit as its edges (the EAP-IG authors' nodes in the graph, MIB's node
    level): every edge whose source is one of ``nodes`` or the embeddings, and whose target
    feeds one of ``nodes`` or is the logits (a head's q, k and v inputs, a key/value group's for
    any of its query heads, an MLP's input; "memory" counts as a node). Rows source, target in
    edge_attribution's order; a name that is no node of the model is refused."""
    graph = _graph(net)
    unknown = sorted(set(nodes) - set(graph.sources))
    if unknown:
        raise ValueError(f"{unknown[0]} is not a node of this model.")
    named = set(nodes)
    chosen = torch.tensor([s in named or s.split(".")[-1] == "embed" for s in graph.sources])
    reads = (_feeds(net, graph).float() @ chosen.float()) > 0  # (N,): feeds a chosen node
    reads |= torch.tensor([t == "logits" for t in graph.targets])
    keep = graph.upstream & chosen[:, None] & reads[None]
    s, n = keep.nonzero(as_tuple=True)
    return pd.DataFrame(
        {
            "source": [graph.sources[i] for i in s.tolist()],
            "target": [graph.targets[i] for i in n.tolist()],
        }
    )


def _staying(graph: Graph, rows: pd.DataFrame, stays: torch.Tensor) -> pd.DataFrame:
    """The rows whose edge is True in stays [S, N], in their order."""
    s, n = _indices(graph, rows)
    return rows[stays[s, n].numpy()].reset_index(drop=True)


def _removed(graph: Graph, kept: torch.Tensor) -> torch.Tensor:
    """[S, N] float: 1 where an edge (of upstream) is not kept."""
    return (graph.upstream & ~kept).float()


ABLATIONS = ("patching", "zero", "mean", "mean-positional")  # what a removed edge carries


def _carried(x: torch.Tensor, ablation: str, pairs: int) -> torch.Tensor:
    """What a removed edge carries of a source's value x [3·N, ...] (blocks of N: circuit,
    clean, corrupt; positions second to last): the corrupt runs', zero, the mean over every
    text's positions (clean and corrupt, all pairs), or over every text at each position."""
    if ablation == "patching":
        return x[2 * pairs :]
    if ablation == "zero":
        return torch.zeros_like(x[2 * pairs :])
    texts = x[pairs:].mean(0, keepdim=True)  # (1, ..., T, ·): clean and corrupt alike
    return texts if ablation == "mean-positional" else texts.mean(-2, keepdim=True)


class _Ablation:
    """The sites of a circuit's run of N pairs, batch items in blocks of N (circuit, clean,
    corrupt): each source's output is noted as it is written (the circuit items' minus what a
    removed edge carries, _carried), and each target of the circuit items reads its input minus
    what its removed edges carried."""

    def __init__(
        self, graph: Graph, removed: torch.Tensor, ablation: str = "patching", pairs: int = 1
    ) -> None:
        self.diffs, self.ablation, self.pairs = {}, ablation, pairs
        # [S on a stream, N]: 1 where an edge from that stream's source is not kept
        self.removed = {s: removed[graph.stream_sources(s)] for s in ("encoder", "decoder")}
        self.pending: dict[str, torch.Tensor] = {}  # a sandwich's z until its norm's input
        replace: dict[str, list] = {}
        for group in graph.source_sites:
            if group.post is None:
                replace.setdefault(group.site, []).append(self.note(group))
            else:
                replace.setdefault(group.site, []).append(self.hold(group))
                replace.setdefault(group.post_site, []).append(self.note_normed(group))
        first = 0
        for group in graph.target_sites:  # a target reads before the same site is noted
            replace.setdefault(group.site, []).insert(0, self.target(group, first))
            first += group.count
        self.sites = Sites(replace={name: _chain(fns) for name, fns in replace.items()})

    def note(self, group: Sources):
        def note(x: torch.Tensor) -> torch.Tensor:
            diff = x[: self.pairs] - _carried(x, self.ablation, self.pairs)  # (N, ...)
            written = diff[None] if group.attn is None else _head_outputs(group.attn, diff)
            if group.attn is not None:
                written = written.movedim(1, 0)  # (H, N, T, d_model)
            self.diffs.setdefault(group.stream, []).append(written)
            return x

        return note

    def hold(self, group: Sources):
        def hold(x: torch.Tensor) -> torch.Tensor:
            self.pending[group.site] = x
            return x

        return hold

    def note_normed(self, group: Sources):
        """A sandwich's heads, noted where the norm after them reads their sum: each head's
        part of the norm's output, each batch item at its own scale."""

        def note(a: torch.Tensor) -> torch.Tensor:
            written = _head_writes(group, self.pending.pop(group.site), a)  # (3N, H, T, d)
            diff = written[: self.pairs] - _carried(written, self.ablation, self.pairs)
            self.diffs.setdefault(group.stream, []).append(diff.movedim(1, 0))
            return a

        return note

    def target(self, group: Targets, first: int):
        def read(x: torch.Tensor) -> torch.Tensor:
            diffs = torch.cat(self.diffs[group.stream])  # (S so far, N, T, d_model)
            removed = self.removed[group.stream][: diffs.shape[0]]
            weights = removed[:, first : first + group.count]  # (S so far, count)
            if not bool(weights.any()):
                return x
            carried = torch.einsum("sc,sntd->nctd", weights.to(diffs), diffs)  # (N, count, T, d)
            own = x[: self.pairs] - carried.reshape(x[: self.pairs].shape)
            return torch.cat([own, x[self.pairs :]])

        return read


def _chain(fns):
    """One replacement doing each of fns in turn."""
    if len(fns) == 1:
        return fns[0]

    def chained(x: torch.Tensor) -> torch.Tensor:
        for fn in fns:
            x = fn(x)
        return x

    return chained


def _circuit_run(net, graph, kept, clean_in, corrupt_in, metric, ablation):
    """The metric of the clean texts with every edge not in kept [S, N] carrying what
    ``ablation`` says, of the clean and of the corrupt texts, each averaged over the pairs."""
    pairs = clean_in["input_ids"].shape[0]
    sites = _Ablation(graph, _removed(graph, kept), ablation, pairs).sites
    batch = {k: torch.cat([v, v, corrupt_in[k]]) for k, v in clean_in.items()}
    trace = net.run_with_sites(sites=sites, **batch)
    m = _metric_tensor(metric, trace, 3 * pairs).detach().double().view(3, pairs).mean(1)
    if pairs == 1:  # one pair: refused as patch_heads refuses it, its metric measured the same
        pair = _Pair(net, clean_in, corrupt_in, metric, (_item(trace, 1), _item(trace, 2)))
        m = torch.tensor([float(m[0]), pair.m_clean, pair.m_corrupt], dtype=torch.float64)
    return m.tolist()


def circuit(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    keep: int | Sequence[tuple[str, str]] | pd.DataFrame,
    steps: int = PAGE_STEPS,
    ig_end: str = "clean",
    scores: pd.DataFrame | None = None,
    prune: bool = False,
    ablation: str = "patching",
) -> Circuit:
    """The faithfulness of a circuit of a pre-norm model (Hanna et al. 2024).

    keep: how many edges of largest |score| to keep — of ``scores`` (rows of edge_attribution
    already measured) where given, else of edge_attribution(..., steps, ig_end) —, a list of
    (source, target) pairs, or rows of edge_attribution. prune=True: drop the dangling edges
    first, as the EAP-IG authors' evaluate_graph does (prune_edges; the faithfulness is the
    same, Circuit.edges and its count are those that stay, Circuit.asked those asked for).
    The clean text is run with every edge not kept carrying its source's output from the
    corrupt run (ablation "patching"; "zero": nothing; "mean": the source's output averaged over
    both texts' positions; "mean-positional": over both texts at each position): a target reads
    its input in this run minus Σ over its removed edges of (out_source(this run) − carried).
    Faithfulness (m − m_empty) / (m_clean − m_empty), m_empty the run with no edge kept (the
    corrupt run's m under patching): every edge kept gives 1, none 0. The metric may give a
    Python float here (no gradient is taken). A dataset of N pairs ([N, T] inputs, a metric of
    N answers as edge_attribution's): every m is the mean over the pairs (MIB's), one run.
    """
    if ablation not in ABLATIONS:
        raise ValueError(f"ablation is one of {', '.join(ABLATIONS)}, not {ablation!r}.")
    graph = _graph(net)
    kept = _kept(net, clean, corrupt, metric, keep, steps, ig_end, scores)
    asked, mask = len(kept), _mask(graph, kept)
    if prune:
        mask = _pruned(net, graph, mask)
        kept = _staying(graph, kept, mask)
    clean_in, corrupt_in = _inputs(net, clean, corrupt, pairs=True)
    run = (net, graph, mask, clean_in, corrupt_in, metric, ablation)
    m_circuit, m_clean, m_corrupt = _circuit_run(*run)
    m_empty = m_corrupt
    if ablation != "patching":
        m_empty = _circuit_run(*run[:2], torch.zeros_like(mask), *run[3:])[0]
    if not abs(m_clean - m_empty) > 1e-6 * max(1.0, abs(m_clean)):
        raise ValueError(f"With {ablation} ablation no edge kept gives the clean text's metric.")
    share = (m_circuit - m_empty) / (m_clean - m_empty)
    return Circuit(kept, share, m_circuit, m_clean, m_corrupt, asked, m_empty, ablation)


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
