"""Edges in the EAP-IG authors' graph JSON (Hanna et al. 2024; their Graph.to_json / from_json).

Their file holds "cfg" (n_layers, n_heads, parallel_attn_mlp, d_model), "nodes" ({name:
{"in_graph": bool}}) and "edges" ({name: {"score": float, "in_graph": bool}}). Their nodes are
"input", "a{l}.h{h}", "m{l}" and "logits"; an edge is "parent->child", with "<q>", "<k>" or
"<v>" where the child is a head. Ours are "embed", "L{l}H{h}", "L{l}MLP", "logits", a head's
inputs the targets "L{l}H{h}.q" / ".k" / ".v". Their graph has a key and a value input per query
head: a grouped-query model's "L{l}KV{g}.k" is the sum of its group's query heads' edges, so
such a file is read (summed), not written. Scores are written as they are (ours: shares of the
gap); ranking by |score| is what their apply_topn does, the same in either unit.
"""

from __future__ import annotations

import json

import pandas as pd
from torch import nn

from analysis.circuits import _graph


def _theirs(name: str) -> str:
    """Our node name as theirs: "embed" -> "input", "L1H2" -> "a1.h2", "L0MLP" -> "m0"."""
    if name == "embed":
        return "input"
    if name.endswith("MLP"):
        return f"m{name[1:-3]}"
    layer, head = name[1:].split("H")
    return f"a{layer}.h{head}"


def _edge_name(source: str, target: str) -> str:
    """Our edge as theirs: ("L0H1", "L1H0.k") -> "a0.h1->a1.h0<k>"."""
    if target == "logits":
        return f"{_theirs(source)}->logits"
    node, _, kind = target.partition(".")
    child = _theirs(node)
    return f"{_theirs(source)}->{child}<{kind}>" if kind else f"{_theirs(source)}->{child}"


def _one_stack(net: nn.Module, why: str) -> None:
    cfg = net.config
    if cfg.arch == "encoder-decoder":
        raise ValueError(f"The authors' graph has one stack: an encoder-decoder's edges {why}.")


def graph_json(net: nn.Module, scores: pd.DataFrame, kept=None) -> str:
    """Rows of edge_attribution (every edge of the model) as the authors' graph JSON text.

    kept: a circuit's edges (rows with source, target, e.g. Circuit.edges): those are
    "in_graph", and so is each node with a kept edge out or in (the logits always); None: none
    is. A grouped-query model is refused (their file has a key and value edge per query head)."""
    _one_stack(net, "are not written")
    cfg = net.config
    if cfg.kv_heads < cfg.n_heads:
        raise ValueError(
            "The authors' graph has key and value edges per query head: a grouped-query "
            "model's edges per key/value head are read from their file (summed), not written."
        )
    if len(scores) != int(_graph(net).upstream.sum()):
        raise ValueError("scores are every edge of the model, as edge_attribution gives them.")
    inside = set() if kept is None else set(zip(kept["source"], kept["target"], strict=True))
    edges, nodes = {}, {"logits": {"in_graph": True}}
    rows = zip(scores["source"], scores["target"], scores["score"], strict=True)
    for source, target, score in rows:
        here = (source, target) in inside
        edges[_edge_name(source, target)] = {"score": float(score), "in_graph": here}
        for node in (source, target.partition(".")[0]):
            name = "logits" if node == "logits" else _theirs(node)
            nodes[name] = {"in_graph": nodes.get(name, {"in_graph": False})["in_graph"] or here}
    config = {"n_layers": cfg.n_layers, "n_heads": cfg.n_heads, "parallel_attn_mlp": False}
    config["d_model"] = cfg.d_model
    return json.dumps({"cfg": config, "nodes": nodes, "edges": edges})


def read_graph_json(net: nn.Module, text: str) -> pd.DataFrame:
    """The authors' graph JSON text as our edges: rows source, target, score, in_graph, one per
    edge of this model (a grouped-query model's key/value edges the sum of their group's query
    heads' scores, in the graph where any of them is). Refuses a file of another shape."""
    _one_stack(net, "are not read")
    data = json.loads(text)
    cfg = net.config
    if (data["cfg"]["n_layers"], data["cfg"]["n_heads"]) != (cfg.n_layers, cfg.n_heads):
        raise ValueError(
            f"The file's graph has {data['cfg']['n_layers']} layers of {data['cfg']['n_heads']} "
            f"heads, this model {cfg.n_layers} of {cfg.n_heads}."
        )
    n_rep = cfg.n_heads // cfg.kv_heads
    ours = _graph(net)
    found = {}
    for s, n in zip(*(i.tolist() for i in ours.upstream.nonzero(as_tuple=True)), strict=True):
        source, target = ours.sources[s], ours.targets[n]
        node, _, kind = target.partition(".")
        heads = [node]
        if "KV" in node:  # their query heads of the group
            layer, group = node[1:].split("KV")
            heads = [f"L{layer}H{h}" for h in range(int(group) * n_rep, (int(group) + 1) * n_rep)]
        names = [_edge_name(source, f"{h}.{kind}" if kind else h) for h in heads]
        if any(name not in data["edges"] for name in names):
            raise ValueError(f"The file has no edge {names[0]}: it is another model's graph.")
        score = sum(float(data["edges"][name]["score"]) for name in names)
        inside = any(bool(data["edges"][name]["in_graph"]) for name in names)
        found[(source, target)] = (score, inside)
    return pd.DataFrame(
        [(s, t, score, inside) for (s, t), (score, inside) in found.items()],
        columns=["source", "target", "score", "in_graph"],
    )
