"""The EAP-IG authors' conventions and MIB's scores, each against a computation done by hand.

ig_end="corrupt" against the authors' integrated-gradients loop written out here on
transformers' modules (hooks and autograd, as tests/test_circuits.py's references): their
activation difference is corrupt − clean at every source, the first block's input is blended
e_corrupt + (k/steps)(e_clean − e_corrupt) for k = 0 … steps − 1, and the loss they
differentiate is the negated logit difference, so their score over the gap is ours. Pruning
against an edge set built by hand, and MIB's CPR / CMD against the trapezoid rule written out.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

import analysis
from analysis import faithfulness
from analysis.attribution_patching import attribute_heads
from analysis.circuits import circuit, edge_attribution, prune_edges
from tests import test_circuits
from tests.test_circuits import (
    Family,
    hooked_run,
    logit_diff_of,
    target_gradients,
    without_l0h1_to_l1h0_q,
    written,
)
from tests.test_patching import answer_pair

lm = test_circuits.lm  # GPT-2 3 × 4 and LLaMA with grouped-query heads, one pair each
induction = test_circuits.induction  # the shipped induction model's copy pair (262 edges)

TOL = 1e-5


def authors_eap_ig(fam, clean, corrupt, answer, wrong, edges, steps):
    """The authors' EAP-IG-inputs loop: {edge: score / gap} and {"z{l}": the heads' [L, H]}."""

    def loss(inputs):  # their metric: a loss, the negated logit difference
        return -logit_diff_of(answer, wrong)(fam.hf(**inputs).logits)

    keeps = fam.keeps()
    with torch.no_grad():
        m_clean, on_clean = hooked_run(loss, fam.blocks[0], keeps, clean)
        m_corrupt, on_corrupt = hooked_run(loss, fam.blocks[0], keeps, corrupt)
    e_clean, e_corrupt = on_clean["resid0"], on_corrupt["resid0"]
    targets = sorted({t for _, t in edges})
    n_layers = len(fam.blocks)
    scores = {edge: 0.0 for edge in edges}
    heads = torch.zeros(n_layers, fam.n_heads, dtype=torch.float64)
    for k in range(0, steps):  # their `for step in range(0, steps)`, input at k / steps
        new_input = (e_corrupt + (k / steps) * (e_clean - e_corrupt)).requires_grad_(True)
        m, store = hooked_run(loss, fam.blocks[0], keeps, clean, blend=lambda x, new=new_input: new)
        names = list(store)
        grads = dict(zip(names, torch.autograd.grad(m, [store[n] for n in names]), strict=True))
        at = target_gradients(fam, targets, store, grads)
        for s, t in edges:  # activation difference corrupt − clean, times the gradient
            diff = written(fam, s, on_corrupt) - written(fam, s, on_clean)
            scores[(s, t)] += float((diff * at[t]).sum().detach())
        for layer in range(n_layers):
            z = f"z{layer}"
            diff = (on_corrupt[z] - on_clean[z])[0] * grads[z][0]  # (T, d_model)
            heads[layer] += diff.view(diff.shape[0], fam.n_heads, -1).sum((0, 2)).double()
    gap = float(-m_clean + m_corrupt)  # the logit difference's gap (clean − corrupt)
    return {e: v / steps / gap for e, v in scores.items()}, heads / steps / gap


EDGES = {
    "gpt2": [("embed", "L0H1.q"), ("L0H1", "L1H0.k"), ("L0H2", "L2H3.v"), ("L0MLP", "logits")],
    "llama": [("embed", "L1H7.q"), ("L0H5", "L1KV1.k"), ("L0H3", "L1KV0.v"), ("L1H2", "L1MLP")],
}


@pytest.mark.parametrize("steps", [1, 4])
def test_ig_end_corrupt_equals_the_authors_loop(lm, steps):
    """Edges and heads with ig_end="corrupt" are the authors' scores within 1e-5 (steps=1: the
    gradient at the corrupt input alone); ours, ig_end="clean", differ from them."""
    case, net, _, hf, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    edges = EDGES[case]
    ref, ref_heads = authors_eap_ig(Family(hf), clean, corrupt, answer, wrong, edges, steps)
    df = edge_attribution(net, clean, corrupt, metric, steps=steps, ig_end="corrupt")
    ours = df.set_index(["source", "target"])["score"]
    for edge, value in ref.items():
        assert abs(ours[edge] - value) < TOL, (edge, ours[edge], value)
    heads = attribute_heads(net, clean, corrupt, metric, steps=steps, ig_end="corrupt")
    torch.testing.assert_close(heads, ref_heads.float(), atol=TOL, rtol=0)
    assert ref_heads.abs().max() > 1e-3  # numbers, not zeros
    clean_end = attribute_heads(net, clean, corrupt, metric, steps=steps)
    assert (clean_end - heads).abs().max() > 1e-3  # two conventions, not one


def test_attribute_all_and_residual_take_the_end(lm):
    """attribute_all's heads with ig_end are attribute_heads' with it; its one-step grids stay
    the clean run's (EAP); attribute_residual's corrupt end adds the corrupt run's gradient."""
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    found = analysis.attribute_all(net, clean, corrupt, metric, 3, ig_end="corrupt")
    torch.testing.assert_close(
        found.heads, attribute_heads(net, clean, corrupt, metric, 3, ig_end="corrupt")
    )
    one = attribute_heads(net, clean, corrupt, metric)
    torch.testing.assert_close(found.heads_one_step, one, atol=1e-5, rtol=0)
    # k = 0, 1 with steps=2 (corrupt end) against k = 1, 2 (clean end) and k = 0, 1, 2 (steps=1
    # at both ends): 2·mean over {0, 1} = 2·mean over {1, 2} − g(1) + g(0)
    resid = {
        end: analysis.attribute_residual(net, clean, corrupt, metric, 2, ig_end=end)
        for end in ("clean", "corrupt")
    }
    at_clean = analysis.attribute_residual(net, clean, corrupt, metric, 1)
    at_corrupt = analysis.attribute_residual(net, clean, corrupt, metric, 1, ig_end="corrupt")
    torch.testing.assert_close(
        2 * resid["corrupt"], 2 * resid["clean"] - at_clean + at_corrupt, atol=1e-5, rtol=0
    )
    with pytest.raises(ValueError, match="ig_end"):
        attribute_heads(net, clean, corrupt, metric, 2, ig_end="middle")


def test_a_float_metric_is_refused_by_attribution_and_taken_by_a_circuit(lm):
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)

    def as_float(trace):
        return float(metric(trace).reshape(-1)[0].detach())

    with pytest.raises(ValueError, match="without a gradient") as refused:
        edge_attribution(net, clean, corrupt, as_float)
    assert str(refused.value).count(". ") == 0  # one sentence
    with pytest.raises(ValueError, match="without a gradient"):
        attribute_heads(net, clean, corrupt, as_float)
    scores = edge_attribution(net, clean, corrupt, metric)
    with_float = circuit(net, clean, corrupt, as_float, 10, scores=scores)
    with_tensor = circuit(net, clean, corrupt, metric, 10, scores=scores)
    assert abs(with_float.faithfulness - with_tensor.faithfulness) < 1e-6
    assert abs(with_tensor.faithfulness) > 0.01 and with_float.m_clean == with_tensor.m_clean


def test_a_circuit_reuses_the_scores_it_is_given(lm, monkeypatch):
    """circuit(keep=n, scores=rows) keeps the same edges and faithfulness as circuit(keep=n),
    which scores the edges itself, and scores none: edge_attribution is not called."""
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    fresh = circuit(net, clean, corrupt, metric, 30, steps=3, ig_end="corrupt")
    scores = edge_attribution(net, clean, corrupt, metric, steps=3, ig_end="corrupt")

    def refuse(*args, **kwargs):
        raise AssertionError("the edges were scored again")

    monkeypatch.setattr("analysis.circuits.edge_attribution", refuse)
    reused = circuit(net, clean, corrupt, metric, 30, scores=scores)
    assert reused.faithfulness == pytest.approx(fresh.faithfulness, abs=1e-6)
    assert list(zip(reused.edges["source"], reused.edges["target"], strict=True)) == list(
        zip(fresh.edges["source"], fresh.edges["target"], strict=True)
    )
    with pytest.raises(ValueError, match="columns source, target, score"):
        circuit(net, clean, corrupt, metric, 3, scores=scores[["source", "target"]])


PRUNING = {  # (edge, stays): built by hand on GPT-2 3 × 4 and LLaMA 2 layers × 8 (2 KV groups)
    "gpt2": [
        (("embed", "L0H1.q"), True),  # on the path embed → L0H1 → L1H0 → logits
        (("L0H1", "L1H0.k"), True),
        (("L1H0", "logits"), True),
        (("embed", "logits"), True),
        (("L0H2", "L1H3.v"), False),  # L0H2 reads no kept edge: not reached
        (("L1H3", "L2MLP"), False),  # so nor is L1H3, once L0H2 is gone (a second round)
        (("L2MLP", "logits"), False),  # and then L2MLP
        (("embed", "L1MLP"), False),  # L1MLP writes to no kept edge: reaches no logits
        (("L0H1", "L2H0.q"), False),  # L2H0 writes nowhere
    ],
    "llama": [
        (("embed", "L0H5.q"), True),
        (("L0H5", "L1KV0.k"), True),  # group 0 (heads 0-3) holds L1H2, which reaches logits
        (("L1H2", "logits"), True),
        (("embed", "L1H2.q"), True),
        (("L0H5", "L1KV1.v"), False),  # group 1 (heads 4-7): none writes to a kept edge
        (("L0H0", "L1MLP"), False),  # L0H0 is not reached
        (("L1MLP", "logits"), False),  # then L1MLP is not either
    ],
}


def test_pruning_drops_the_dangling_edges_of_a_hand_built_set(lm):
    case, net, _, _, _, clean, corrupt, answer, wrong = lm
    built = PRUNING[case]
    stays = prune_edges(net, [edge for edge, _ in built])
    expected = [edge for edge, keep in built if keep]
    assert list(zip(stays["source"], stays["target"], strict=True)) == expected
    metric = analysis.logit_diff(answer, wrong)
    kept = [edge for edge, _ in built]
    pruned = circuit(net, clean, corrupt, metric, kept, prune=True)
    whole = circuit(net, clean, corrupt, metric, kept)
    assert pruned.asked == len(built) and len(pruned.edges) == len(expected)
    assert len(whole.edges) == len(built)
    assert abs(pruned.faithfulness - whole.faithfulness) < 1e-5  # dangling edges change nothing
    scores = edge_attribution(net, clean, corrupt, metric, steps=3)
    dropped = 0
    for n in (10, 20, 40):  # the strongest edges: some dangle, none changes the faithfulness
        top = circuit(net, clean, corrupt, metric, n, scores=scores, prune=True)
        top_whole = circuit(net, clean, corrupt, metric, n, scores=scores)
        assert top.asked == n == len(top_whole.edges) >= len(top.edges)
        assert abs(top.faithfulness - top_whole.faithfulness) < 1e-5
        dropped += n - len(top.edges)
    assert dropped > 0 and abs(top.faithfulness) > 0.1  # circuits that restore something


def test_the_faithfulness_curve_is_circuit_at_each_size(induction):
    """Counts and fractions (rounded down as MIB's int(f × 262)), each point analysis.circuit's
    of that many strongest edges, the edges counted after pruning."""
    net, clean, corrupt, metric = induction
    scores = edge_attribution(net, clean, corrupt, metric, steps=8)
    curve = analysis.faithfulness_curve(
        net, clean, corrupt, metric, [0, 10, 0.1, 26, 1.0], scores=scores
    )
    assert list(curve["asked"]) == [0, 10, 26, 26, 262]  # int(0.1 · 262) = 26
    for row in curve.itertuples():
        found = circuit(net, clean, corrupt, metric, row.asked, scores=scores, prune=True)
        assert row.faithfulness == pytest.approx(found.faithfulness, abs=1e-7)
        assert row.edges == len(found.edges) <= row.asked
    assert curve["faithfulness"].iloc[-1] == pytest.approx(1, abs=1e-5)
    assert curve["faithfulness"].iloc[0] == pytest.approx(0, abs=1e-5)
    assert curve["edges"].iloc[2] == 20  # 26 asked, 6 dangling (measured)
    with pytest.raises(ValueError, match="between 0 and 1"):
        analysis.faithfulness_curve(net, clean, corrupt, metric, [1.5], scores=scores)


def test_mib_scores_are_the_trapezoids_over_mibs_fractions(induction):
    """CPR and CMD written out: the curve at 0.1 % … 100 % of the edges measured by
    analysis.circuit, then Σ (x₂ − x₁)(f₁ + f₂)/2 and Σ (x₂ − x₁)(|1 − f₁| + |1 − f₂|)/2."""
    net, clean, corrupt, metric = induction
    scores = edge_attribution(net, clean, corrupt, metric, steps=8)
    found = analysis.mib_scores(net, clean, corrupt, metric, scores=scores)
    xs = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
    fs = [
        circuit(net, clean, corrupt, metric, int(x * 262), scores=scores, prune=True).faithfulness
        for x in xs
    ]
    cpr = sum((xs[i + 1] - xs[i]) * (fs[i] + fs[i + 1]) / 2 for i in range(9))
    cmd = sum((xs[i + 1] - xs[i]) * (abs(1 - fs[i]) + abs(1 - fs[i + 1])) / 2 for i in range(9))
    assert found.cpr == pytest.approx(cpr, abs=1e-9) and found.cmd == pytest.approx(cmd, abs=1e-9)
    assert 0.5 < found.cpr < 1 and 0 < found.cmd < 0.5  # measured 0.929 and 0.090
    # a curve at 1 everywhere: all the area (0.999 wide) and none from 1; at 0, the reverse
    assert faithfulness._areas(xs, [1.0] * 10) == pytest.approx((0.999, 0.0))
    assert faithfulness._areas(xs, [0.0] * 10) == pytest.approx((0.0, 0.999))


@pytest.mark.parametrize("ablation", ["zero", "mean", "mean-positional"])
def test_a_removed_edge_carries_zero_or_the_mean_as_done_by_hand(lm, ablation):
    """One removed edge L0H1 → L1H0.q: that head's query reads its input minus L0H1's write
    in this run plus what the edge carries (nothing; L0H1's z averaged over both texts'
    positions; over both texts at each position), the run done by hand at the site
    hook_q_input; faithfulness normalised by the circuit of no edge under the same ablation."""
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    every = edge_attribution(net, clean, corrupt, metric)
    pairs = [e for e in zip(every["source"], every["target"], strict=True)]
    pairs.remove(("L0H1", "L1H0.q"))
    found = circuit(net, clean, corrupt, metric, pairs, ablation=ablation)
    carry = {
        "zero": lambda z_clean, z_corrupt: torch.zeros_like(z_clean),
        "mean": lambda z_clean, z_corrupt: ((z_clean + z_corrupt) / 2).mean(0, keepdim=True),
        "mean-positional": lambda z_clean, z_corrupt: (z_clean + z_corrupt) / 2,
    }[ablation]
    m = without_l0h1_to_l1h0_q(net, clean, corrupt, metric, carry)
    m_empty = circuit(net, clean, corrupt, metric, [], ablation=ablation).m_circuit
    assert found.m_empty == pytest.approx(m_empty, abs=1e-6)
    expect = (m - m_empty) / (found.m_clean - m_empty)
    assert abs(found.faithfulness - expect) < 1e-5
    assert abs(m - found.m_clean) > 1e-5  # the removed edge moved the metric
    assert circuit(net, clean, corrupt, metric, every, ablation=ablation).faithfulness == (
        pytest.approx(1, abs=1e-5)
    )
    assert abs(m_empty - found.m_corrupt) > 1e-3  # not the corrupt run: another ablation


def test_the_zero_ablated_empty_circuit_reads_only_the_attention_biases(lm):
    """With no edge kept and every write removed, the logits read the final norm of what no
    node writes: the sum of the attention output biases (GPT-2; LLaMA has none: zero)."""
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    empty = circuit(net, clean, corrupt, metric, [], ablation="zero")
    d_model, n_tokens = net.config.d_model, clean["input_ids"].shape[1]
    with torch.no_grad():
        biases = [layer.self_attn.w_o.bias for layer in net.decoder.layers]
        stream = sum((b for b in biases if b is not None), torch.zeros(d_model))
        logits = net.lm_head(net.decoder.final_norm(stream.expand(1, n_tokens, d_model)))
    assert empty.m_circuit == pytest.approx(
        float(logits[0, -1, answer] - logits[0, -1, wrong]), abs=1e-5
    )
    assert empty.faithfulness == pytest.approx(0, abs=1e-9)
    with pytest.raises(ValueError, match="ablation is one of"):
        circuit(net, clean, corrupt, metric, [], ablation="resample")


def three_pairs(lm):
    """Three pairs of one length from the fixture's: its own, then the first and the second
    token changed in both texts; each pair's answer as test_patching picks it, its wrong token
    the one picked there moved by 0, 1, 2 ids (so that each pair reads its own)."""
    _, net, _, _, _, clean, corrupt, _, _ = lm
    pairs = []
    for change in (0, 1, 2):
        a, b = clean["input_ids"].clone(), corrupt["input_ids"].clone()
        if change:
            a[0, change] = b[0, change] = 50 + change
        pair = [{"input_ids": x, "attention_mask": torch.ones_like(x)} for x in (a, b)]
        answer, wrong = answer_pair(net, *pair)
        pairs.append((*pair, answer, wrong + change if wrong + change != answer else wrong + 3))
    return pairs


def three_pair_batch(lm):
    """three_pairs, their clean and corrupt texts as [3, T] batches, and logit_diff of their
    three answers and wrong tokens."""
    pairs = three_pairs(lm)
    batch = [{"input_ids": torch.cat([p[i]["input_ids"] for p in pairs])} for i in (0, 1)]
    for enc in batch:
        enc["attention_mask"] = torch.ones_like(enc["input_ids"])
    return pairs, batch, analysis.logit_diff([p[2] for p in pairs], [p[3] for p in pairs])


@pytest.mark.parametrize("ig_end", ["clean", "corrupt"])
def test_a_dataset_of_pairs_is_the_sum_of_raw_scores_over_the_sum_of_gaps(lm, ig_end):
    """clean and corrupt as [3, T] batches and logit_diff of 3 answers: every edge's and head's
    score is Σ_i score_i·gap_i / Σ_i gap_i of the pairs scored one at a time (each equal to
    the hand references of tests/test_circuits.py), in one batched call."""
    net = lm[1]
    pairs, batch, metric = three_pair_batch(lm)
    together = edge_attribution(net, *batch, metric, steps=3, ig_end=ig_end)
    heads = attribute_heads(net, *batch, metric, steps=3, ig_end=ig_end)
    raw, raw_heads, gaps = 0, 0, 0
    for clean, corrupt, answer, wrong in pairs:
        one = analysis.logit_diff(answer, wrong)
        found = circuit(net, clean, corrupt, one, [])  # its m_clean and m_corrupt
        gap = found.m_clean - found.m_corrupt
        raw = raw + edge_attribution(net, clean, corrupt, one, 3, ig_end)["score"] * gap
        raw_heads = raw_heads + attribute_heads(net, clean, corrupt, one, 3, ig_end=ig_end) * gap
        gaps += gap
    assert len({p[3] for p in pairs}) == 3  # each pair its own wrong token
    assert (together["score"] - raw / gaps).abs().max() < 1e-5
    torch.testing.assert_close(heads, (raw_heads / gaps).float(), atol=1e-5, rtol=0)
    assert together["score"].abs().max() > 1e-2
    with pytest.raises(ValueError, match="2 corrupt"):
        edge_attribution(net, batch[0], {"input_ids": batch[1]["input_ids"][:2]}, metric)
    with pytest.raises(ValueError, match="single texts"):
        analysis.patch_heads(net, *batch, metric)


def their_edge_names(n_layers, n_heads):
    """The edges of the authors' Graph.from_model (attention before the MLP), named as theirs:
    every node of the stream so far feeds each head's q, k and v, then the layer's MLP, and all
    feed the logits."""
    names, stream = [], ["input"]
    for layer in range(n_layers):
        heads = [f"a{layer}.h{h}" for h in range(n_heads)]
        names += [f"{p}->{a}<{x}>" for p in stream for a in heads for x in "qkv"]
        stream += heads
        names += [f"{p}->m{layer}" for p in stream]
        stream.append(f"m{layer}")
    return names + [f"{p}->logits" for p in stream]


def test_the_authors_graph_json_names_every_edge_as_theirs_and_reads_back(lm):
    import json

    case, net, _, _, _, clean, corrupt, answer, wrong = lm
    if case == "llama":
        pytest.skip("grouped-query: written per query head by the authors (the next test)")
    metric = analysis.logit_diff(answer, wrong)
    scores = edge_attribution(net, clean, corrupt, metric)
    kept = pd.DataFrame(
        [("embed", "L0H1.q"), ("L0H1", "L1H0.k"), ("L1H0", "logits")], columns=["source", "target"]
    )
    data = json.loads(analysis.graph_json(net, scores, kept))
    cfg = net.config
    assert data["cfg"] == {"n_layers": 3, "n_heads": 4, "parallel_attn_mlp": False, "d_model": 64}
    theirs = their_edge_names(3, 4)  # their from_json reads edges by name, in any order
    assert cfg.d_model == 64 and sorted(data["edges"]) == sorted(theirs) and len(theirs) == 262
    by_pair = scores.set_index(["source", "target"])["score"]
    expect = {"input->a0.h1<q>": ("embed", "L0H1.q"), "a0.h1->a1.h0<k>": ("L0H1", "L1H0.k")}
    expect |= {"a1.h0->logits": ("L1H0", "logits"), "a1.h2->m1": ("L1H2", "L1MLP")}
    expect |= {"m0->a2.h3<v>": ("L0MLP", "L2H3.v"), "input->logits": ("embed", "logits")}
    for name, edge in expect.items():
        assert data["edges"][name]["score"] == pytest.approx(by_pair[edge], abs=1e-12)
    assert {n for n, e in data["edges"].items() if e["in_graph"]} == set(list(expect)[:3])
    assert {n for n, v in data["nodes"].items() if v["in_graph"]} == {
        "input", "a0.h1", "a1.h0", "logits"
    }  # fmt: skip
    back = analysis.read_graph_json(net, json.dumps(data))
    assert list(zip(back["source"], back["target"], strict=True)) == list(
        zip(scores["source"], scores["target"], strict=True)
    )
    assert (back["score"] - scores["score"]).abs().max() < 1e-12
    assert list(back.loc[back["in_graph"], "target"]) == ["L0H1.q", "L1H0.k", "logits"]


def test_a_grouped_query_models_key_edges_sum_the_authors_query_heads(lm):
    """Their LLaMA graph has a k and a v edge per query head: ours per key/value head is the
    sum over the group's query heads (heads 0-3 and 4-7 of 8 with 2 key/value heads)."""
    import json

    case, net, *_ = lm
    if case != "llama":
        pytest.skip("the GPT-2 file is written and read back above")
    cfg = net.config
    names = their_edge_names(cfg.n_layers, cfg.n_heads)
    edges = {name: {"score": i / 1000, "in_graph": name == "a0.h5->a1.h6<k>"} for i, name in
             enumerate(names)}  # fmt: skip
    data = {"cfg": {"n_layers": cfg.n_layers, "n_heads": cfg.n_heads}, "nodes": {}, "edges": edges}
    back = analysis.read_graph_json(net, json.dumps(data)).set_index(["source", "target"])
    group_1 = [edges[f"a0.h5->a1.h{h}<k>"]["score"] for h in (4, 5, 6, 7)]
    assert back.loc[("L0H5", "L1KV1.k"), "score"] == pytest.approx(sum(group_1))
    assert bool(back.loc[("L0H5", "L1KV1.k"), "in_graph"]) and back["in_graph"].sum() == 1
    assert back.loc[("embed", "L1H2.q"), "score"] == edges["input->a1.h2<q>"]["score"]
    assert back.loc[("L1MLP", "logits"), "score"] == edges["m1->logits"]["score"]
    with pytest.raises(ValueError, match="per query head"):
        analysis.graph_json(net, back.reset_index(), None)
    data["cfg"]["n_heads"] = 4
    with pytest.raises(ValueError, match="this model 2 of 8"):
        analysis.read_graph_json(net, json.dumps(data))


@pytest.mark.parametrize("ablation", ["patching", "zero"])
def test_a_circuit_of_a_dataset_is_the_mean_of_its_pairs_runs(lm, ablation):
    """One batched run of three pairs: m_circuit, m_clean, m_corrupt and m_empty are the means
    of the same circuit run pair by pair, faithfulness their ratio (MIB's: the mean metric
    normalised once), and faithfulness_curve takes the dataset as it is."""
    net = lm[1]
    pairs, batch, metric = three_pair_batch(lm)
    scores = edge_attribution(net, *batch, metric, steps=2)
    together = circuit(net, *batch, metric, 25, scores=scores, ablation=ablation)
    alone = [
        circuit(net, c, x, analysis.logit_diff(a, w), together.edges, ablation=ablation)
        for c, x, a, w in pairs
    ]
    for field in ("m_circuit", "m_clean", "m_corrupt", "m_empty"):
        mean = sum(getattr(one, field) for one in alone) / 3
        assert getattr(together, field) == pytest.approx(mean, abs=1e-5), field
    m = [sum(getattr(one, f) for one in alone) / 3 for f in ("m_circuit", "m_clean", "m_empty")]
    assert together.faithfulness == pytest.approx((m[0] - m[2]) / (m[1] - m[2]), abs=1e-5)
    assert len({round(one.m_clean, 3) for one in alone}) == 3  # three pairs, three answers
    curve = analysis.faithfulness_curve(
        net, *batch, metric, [25], scores=scores, prune=False, ablation=ablation
    )
    assert curve["faithfulness"].iloc[0] == pytest.approx(together.faithfulness, abs=1e-9)


def test_a_node_level_circuit_keeps_the_edges_among_its_nodes(lm):
    """Nodes L0H1, L1H0 (and L1KV0's group on LLaMA), L1MLP: the edges among them, the
    embeddings' into them and theirs into the logits, listed by hand; a circuit of them."""
    case, net, _, _, _, clean, corrupt, answer, wrong = lm
    found = analysis.node_edges(net, ["L0H1", "L1H0", "L1MLP"])
    q, k, v = (
        ("L1H0.q", "L1KV0.k", "L1KV0.v") if case == "llama" else ("L1H0.q", "L1H0.k", "L1H0.v")
    )
    expected = {
        ("embed", "L0H1.q"), ("embed", "L0H1.k" if case == "gpt2" else "L0KV0.k"),
        ("embed", "L0H1.v" if case == "gpt2" else "L0KV0.v"),
        ("embed", q), ("embed", k), ("embed", v), ("L0H1", q), ("L0H1", k), ("L0H1", v),
        ("embed", "L1MLP"), ("L0H1", "L1MLP"), ("L1H0", "L1MLP"),
        ("embed", "logits"), ("L0H1", "logits"), ("L1H0", "logits"), ("L1MLP", "logits"),
    }  # fmt: skip
    assert set(zip(found["source"], found["target"], strict=True)) == expected
    assert len(found) == len(expected)
    metric = analysis.logit_diff(answer, wrong)
    kept = circuit(net, clean, corrupt, metric, found, prune=True)
    assert len(kept.edges) == len(expected)  # nothing dangles among chosen nodes
    with pytest.raises(ValueError, match="L9H0 is not a node"):
        analysis.node_edges(net, ["L9H0"])
