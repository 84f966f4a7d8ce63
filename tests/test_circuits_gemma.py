"""Edges of a sandwich model (Gemma 3): each head writes its part of the norm after the attention.

(And of Qwen3's QK-norm, whose heads are not d_model / heads wide.)

Gemma 3 normalises the attention's output as a whole before adding it to the stream, so a head's
write is not z_h·W_O^h: analysis.circuits splits the norm's output over the heads at the run's
own scale, z_h·W_O^h · g / √(mean(a²) + ε) with a the heads' writes summed, and the MLP's write
is its norm's output. The reference here takes the same sums on transformers' own
Gemma3ForCausalLM with hooks and autograd (tests/test_circuits.py's way), and the circuit keeps
its two ends: every edge restores all of the answer, none of them nothing.
"""

from __future__ import annotations

import pytest
import torch

import analysis
from analysis.circuits import circuit, edge_attribution
from model import load_lm
from tests.test_circuits import Family, logit_diff_of, reference_edges, with_query_minus
from tests.test_lm import TEXTS, save_checkpoint
from tests.test_patching import answer_pair

TOL = 1e-4


class GemmaFamily(Family):
    """Where Gemma 3 keeps what the references read: the norm before the MLP is
    pre_feedforward_layernorm, and both sublayers' outputs are normalised again."""

    def norms(self, layer):
        b = self.blocks[layer]
        return b.input_layernorm, b.pre_feedforward_layernorm

    def keeps(self):
        found = super().keeps()
        for layer, block in enumerate(self.blocks):
            found[f"attn_raw{layer}"] = (self.o_proj(layer), "out")  # what the second norm reads
            found[f"mlp{layer}"] = (block.post_feedforward_layernorm, "out")  # the MLP's write
        return found

    def written(self, source, store):
        if source == "embed" or source.endswith("MLP"):
            return super().written(source, store)
        layer, head = (int(x) for x in source[1:].split("H"))
        norm = self.blocks[layer].post_attention_layernorm
        a = store[f"attn_raw{layer}"]
        scale = torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + norm.eps) * (1 + norm.weight)
        return self.head_out(layer, head, store[f"z{layer}"]) * scale


def pair_of(tmp_path_factory, case):
    """(our model, transformers', clean, corrupt, answer, wrong) of a small random ``case``."""
    folder = tmp_path_factory.mktemp(case)
    hf = save_checkpoint(folder, case)
    net, tok = load_lm(folder, device="cpu")
    ids = tok([TEXTS[0]], return_tensors="pt")["input_ids"]
    swapped = torch.cat([ids[:, :-3], torch.tensor([[40, 41]]), ids[:, -1:]], dim=1)
    clean, corrupt = (
        {"input_ids": x, "attention_mask": torch.ones_like(x)} for x in (ids, swapped)
    )
    return net, hf, clean, corrupt, *answer_pair(net, clean, corrupt)


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    return pair_of(tmp_path_factory, "gemma3")


def test_the_heads_parts_add_up_to_the_norms_output(gemma):
    from analysis.circuits import _graph, _head_writes
    from model.sites import Sites

    net, _, clean, *_ = gemma
    graph = _graph(net)
    heads = [g for g in graph.source_sites if g.attn is not None]
    assert heads and all(g.post is not None for g in heads)
    names = [g.site for g in heads] + [g.post_site for g in heads]
    layers = [g.site.split(".")[1] for g in heads]
    normed = [f"blocks.{layer}.ln1_post.hook_normalized" for layer in layers]
    sites = Sites(read=names + normed)
    net.run_with_sites(sites=sites, **clean)
    for group, out in zip(heads, normed, strict=True):
        parts = _head_writes(group, sites.values[group.site][0], sites.values[group.post_site][0])
        torch.testing.assert_close(parts.sum(0), sites.values[out][0], atol=1e-5, rtol=0)


def test_edge_scores_equal_transformers_hooks_and_autograd(gemma):
    net, hf, clean, corrupt, answer, wrong = gemma
    cfg = net.config
    assert cfg.sandwich_norm and cfg.kv_heads < cfg.n_heads
    df = edge_attribution(net, clean, corrupt, analysis.logit_diff(answer, wrong), steps=3)
    last = cfg.n_layers - 1
    edges = [("embed", "L1H1.q"), ("L0H1", f"L{last}KV0.k"), ("L0H0", "L1KV0.v")]
    edges += [("L0H1", "L0MLP"), ("L0MLP", "logits"), (f"L{last}H0", "logits")]
    edges += [("L1MLP", f"L{last}H1.q"), ("embed", "logits")]
    ref = reference_edges(
        GemmaFamily(hf), clean, corrupt, logit_diff_of(answer, wrong), edges, steps=3
    )
    ours = df.set_index(["source", "target"])["score"]
    for edge, value in ref.items():
        assert abs(ours[edge] - value) < TOL, (edge, ours[edge], value)
    assert max(abs(v) for v in ref.values()) > 1e-3


def test_qk_norms_edges_equal_transformers_hooks_and_autograd(tmp_path_factory):
    """Qwen3: QK-norm and a head size of its own (not d_model / heads), no sandwich."""
    net, hf, clean, corrupt, answer, wrong = pair_of(tmp_path_factory, "qwen3")
    assert net.config.qk_norm and net.config.d_head * net.config.n_heads != net.config.d_model
    df = edge_attribution(net, clean, corrupt, analysis.logit_diff(answer, wrong), steps=3)
    edges = [("embed", "L0H0.q"), ("embed", "L0KV0.k"), ("embed", "L0KV1.v"), ("L0H0", "logits")]
    edges += [("L0H3", "L1H0.q"), ("L0H7", "L1KV1.k"), ("L0H0", "L0MLP")]
    ref = reference_edges(Family(hf), clean, corrupt, logit_diff_of(answer, wrong), edges, 3)
    ours = df.set_index(["source", "target"])["score"]
    for edge, value in ref.items():
        assert abs(ours[edge] - value) < TOL, (edge, ours[edge], value)
    assert max(abs(v) for v in ref.values()) > 1e-3


def test_a_circuit_of_every_edge_restores_all_and_of_none_nothing(gemma):
    net, _, clean, corrupt, answer, wrong = gemma
    metric = analysis.logit_diff(answer, wrong)
    df = edge_attribution(net, clean, corrupt, metric)
    assert abs(circuit(net, clean, corrupt, metric, df).faithfulness - 1) < 1e-4
    assert abs(circuit(net, clean, corrupt, metric, df.iloc[:0]).faithfulness) < 1e-4
    half = circuit(net, clean, corrupt, metric, len(df) // 2).faithfulness
    assert half == half  # a number, neither end forced
    for ablation in ("zero", "mean", "mean-positional"):  # each head's part averaged, or none
        every = circuit(net, clean, corrupt, metric, df, ablation=ablation).faithfulness
        none = circuit(net, clean, corrupt, metric, df.iloc[:0], ablation=ablation).faithfulness
        assert abs(every - 1) < 1e-4 and abs(none) < 1e-4, (ablation, every, none)


def test_a_circuit_equals_the_run_it_names_done_by_hand(gemma):
    """One removed edge L0H1 → L1H0.q: only that head's query reads L0H1's corrupt part of the
    norm after layer 0's attention, each run's part at that run's scale."""
    from model.sites import Sites

    net, _, clean, corrupt, answer, wrong = gemma
    metric = analysis.logit_diff(answer, wrong)
    every = edge_attribution(net, clean, corrupt, metric)
    kept = every[~((every["source"] == "L0H1") & (every["target"] == "L1H0.q"))]
    found = circuit(net, clean, corrupt, metric, kept)
    layer = net.decoder.layers[0]
    d_head, norm = net.config.d_head, layer.add_norm1.post
    w_o = layer.self_attn.w_o.weight[:, d_head : 2 * d_head]  # head 1's columns

    def head_1_writes(inputs):
        read = Sites(read=["blocks.0.attn.hook_z", "blocks.0.ln1_post.hook_in"])
        net.run_with_sites(sites=read, **inputs)
        z, a = (
            read.values["blocks.0.attn.hook_z"][0, 1],
            read.values["blocks.0.ln1_post.hook_in"][0],
        )
        return (
            z @ w_o.T * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + norm.eps) * (1 + norm.weight)
        )

    with torch.no_grad():
        carried = head_1_writes(clean) - head_1_writes(corrupt)  # (T, d_model)
    m = with_query_minus(net, clean, metric, carried)
    expect = (m - found.m_corrupt) / (found.m_clean - found.m_corrupt)
    assert abs(found.faithfulness - expect) < 1e-5 and len(found.edges) == len(every) - 1
    assert abs(expect - 1) > 1e-4  # the edge carries something
