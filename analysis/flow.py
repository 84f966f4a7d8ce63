"""Attention flow of Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers" (§3).

The attention graph is rollout's (analysis.rollout.residual_graph): one node per token and
layer, an edge from token i after layer l to token j before it with capacity Ã_l[i, j]. The flow
from input token j into token i after layer l is the maximum flow between the two nodes; each
row is then divided by its sum, as the authors' ``compute_flows`` does. Their code runs
networkx's Edmonds–Karp once per (node, input) pair; here SciPy's Dinic solver runs on integer
capacities (Ã scaled by 2^28 and rounded), so a value is exact up to about 1e-8 per edge of
the minimum cut.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_flow

from analysis.rollout import residual_graph
from model.trace import Trace

SCALE = 2**28  # capacities become round(Ã · SCALE): a node's out-capacity stays < 2^31


def _check(trace: Trace, stack: str, item: int, layer: int) -> tuple[torch.Tensor, int]:
    """The item's graph [L, T, T] as float64 and the layer as a non-negative index."""
    graph = residual_graph(trace, stack)  # (B, L, T, T)
    batch, n_layers = graph.shape[:2]
    if not 0 <= item < batch:
        raise ValueError(f"item {item} is outside this batch of {batch} texts.")
    if not -n_layers <= layer < n_layers:
        raise ValueError(f"layer {layer} is outside this stack's {n_layers} layers.")
    return graph[item].detach().cpu().double(), layer % n_layers


def _row_flows(graph: np.ndarray, row: int) -> np.ndarray:
    """Max-flow from node ``row`` at the top of ``graph`` [L', n, n] to every input token, [n].

    Nodes: 0 the source; then n per intermediate level (the outputs of layers L'-2 ... 0, top
    down); the sink last. The sink stands for input token j: the edges into it are layer 0's
    column j, so only input j is kept of the bottom level (every other input is a dead end).
    """
    n_levels, n = graph.shape[0], graph.shape[-1]
    caps = np.rint(graph * SCALE).astype(np.int32)  # (L', n, n)
    n_mid = (n_levels - 1) * n
    sink = 1 + n_mid
    rows, cols, data = [], [], []

    def add(src: np.ndarray, dst: np.ndarray, cap: np.ndarray) -> None:
        rows.append(src.ravel())
        cols.append(dst.ravel())
        data.append(cap.ravel())

    if n_levels == 1:  # the output of layer 0: one edge from the source to each input
        return np.array(graph[0, row])
    tokens = np.arange(n)
    add(np.zeros(n, dtype=np.int64), 1 + tokens, caps[-1, row])  # out of the source
    for level in range(n_levels - 2):  # level k: the output of layer L'-2-k, nodes 1 + k·n + i
        upper = 1 + level * n + tokens  # (n,)
        lower = 1 + (level + 1) * n + tokens  # (n,)
        cap = caps[n_levels - 2 - level]  # (n, n) layer L'-2-k: from its output to its input
        add(np.repeat(upper, n), np.tile(lower, n), cap)
    bottom = 1 + (n_levels - 2) * n + tokens  # (n,) the output of layer 0
    add(bottom, np.full(n, sink), np.ones(n, dtype=np.int32))  # capacities set per input below
    src, dst, cap = (np.concatenate(x) for x in (rows, cols, data))
    matrix = csr_matrix((cap, (src, dst)), shape=(sink + 1, sink + 1))
    into_sink = np.flatnonzero(matrix.indices == sink)  # one entry per bottom node, in order
    flows = np.zeros(n)
    for j in range(n):
        if not caps[0, :, j].any():
            continue
        matrix.data[into_sink] = caps[0, :, j]
        flows[j] = maximum_flow(matrix, 0, sink).flow_value / SCALE
    return flows


def _normalised(flows: np.ndarray) -> np.ndarray:
    """A row divided by its sum (compute_flows), left at 0 when nothing flows."""
    total = flows.sum()
    return flows / total if total > 0 else flows


def attention_flow_row(
    trace: Trace, stack: str = "encoder", item: int = 0, layer: int = -1, row: int = 0
) -> torch.Tensor:
    """One row of attention_flow, [T]: how input tokens flow into token ``row`` after ``layer``.

    Abnar & Zuidema 2020 (§3, compute_flows); 0 everywhere for a padded ``row``.
    """
    graph, layer = _check(trace, stack, item, layer)
    t = graph.shape[-1]
    if not 0 <= row < t:
        raise ValueError(f"row {row} is outside this text's {t} token positions.")
    real = graph[0].sum(-1) > 0  # (T,) padded rows are empty
    out = torch.zeros(t, dtype=torch.float64)
    if real[row]:
        idx = real.nonzero().squeeze(1)
        sub = graph[: layer + 1][:, idx][:, :, idx].numpy()  # (layer+1, n, n) real tokens only
        out[idx] = torch.from_numpy(_normalised(_row_flows(sub, int((idx < row).sum()))))
    return out.to(trace.attentions[stack].dtype)


def attention_flow(
    trace: Trace, stack: str = "encoder", item: int = 0, layer: int = -1
) -> torch.Tensor:
    """Attention flow after ``layer``, [T, T]: row i = flow into token i from each input token.

    Abnar & Zuidema 2020 (§3): the maximum flow through the rollout graph (0.5·mean_h A + 0.5·I,
    rows renormalised) from the node of token i after ``layer`` to each input token's node, each
    row divided by its sum as compute_flows does. Padded positions are left out of the graph and
    their rows and columns are 0; a causal decoder's rows stay causal. Only self-attention
    stacks ("encoder", "decoder").
    """
    graph, layer = _check(trace, stack, item, layer)
    t = graph.shape[-1]
    real = graph[0].sum(-1) > 0  # (T,)
    idx = real.nonzero().squeeze(1)
    sub = graph[: layer + 1][:, idx][:, :, idx].numpy()  # (layer+1, n, n)
    out = torch.zeros(t, t, dtype=torch.float64)
    if len(idx):
        block = np.stack([_normalised(_row_flows(sub, i)) for i in range(len(idx))])  # (n, n)
        out[idx[:, None], idx[None, :]] = torch.from_numpy(block)
    return out.to(trace.attentions[stack].dtype)
