"""Edge attribution and circuits of a pre-norm encoder-decoder (seed 001) equal the same sums done
by hand with forward hooks on the model's own modules and autograd.

The graph has two streams: the encoder's nodes (under "encoder.") end in "memory" (as a target,
the stream before the encoder's final norm; as a source, its output, which every cross-attention
reads), and the decoder's (under "decoder.", its cross-attention heads under "cross.") end in
"logits". The reference keeps every tensor with PyTorch hooks on the modules (no named sites),
blends both stacks' embeddings from the corrupt run's to the clean run's for each step, and
carries each target's gradient back through its own path with autograd.
"""

from __future__ import annotations

import pytest
import torch

import analysis
import engine
from analysis.circuits import circuit, edge_attribution
from model import PRESETS, Transformer
from model.sites import Sites
from tests.test_patching import answer_pair

TOL = 1e-9  # the model and the reference run in float64


@pytest.fixture(scope="module")
def encdec():
    """(model, clean, corrupt, answer, wrong, position): seed 001's pre-norm encoder-decoder in
    float64, its weights 6 × the init's (at N(0, 0.02) every pattern is uniform and the pair's
    logit difference moves by 4e-4 only), a source with one word changed."""
    net = Transformer(PRESETS["seed001-prenorm"])
    with torch.no_grad():
        for p in net.parameters():
            if p.dim() == 2:
                p.mul_(6.0)
    net = net.double()
    clean, corrupt = engine.encode(net, "the cat sat down", "the dog sat down", target="le ch")
    position = 3
    return (net, clean, corrupt, *answer_pair(net, clean, corrupt, position=position), position)


def node_of(name):
    """ "cross.L1H0.k" -> ("cross", 1, "k", 0); "encoder.L0MLP" -> ("encoder", 0, "mlp", None);
    "memory" / "logits" -> (name, None, name, None)."""
    if name in ("memory", "logits"):
        return name, None, name, None
    stack, node = name.split(".", 1)
    if node.endswith("MLP"):
        return stack, int(node[1:-3]), "mlp", None
    if node == "embed":
        return stack, None, "embed", None
    head, _, kind = node.partition(".")
    layer, index = head[1:].split("H")
    return stack, int(layer), kind or "head", int(index)


class Hooked:
    """One run of the model with hooks keeping what the references read, both stacks' first
    layer inputs blended by ``alpha`` towards the corrupt run's (``base``)."""

    def __init__(self, net):
        self.net = net

    def run(self, inputs, alpha=1.0, base=None):
        net, store, handles = self.net, {}, []

        def pre(name, blend_with=None):
            def hook(module, args, kwargs):
                x = args[0]
                if blend_with is not None:
                    x = base[blend_with] * (1 - alpha) + x * alpha
                store[name] = x
                return (x, *args[1:]), kwargs

            return hook

        def post(name):
            def hook(module, args, output):
                store[name] = output[0] if isinstance(output, tuple) else output

            return hook

        def add(module, name, where="in", blend=None):
            if where == "in":
                handles.append(module.register_forward_pre_hook(pre(name, blend), with_kwargs=True))
            else:
                handles.append(module.register_forward_hook(post(name)))

        for stack in ("encoder", "decoder"):
            layers = getattr(net, stack).layers
            for i, layer in enumerate(layers):
                blend = stack if i == 0 and base is not None else None
                add(layer, f"{stack}{i}.x", blend=blend)  # the stream entering the layer
                add(layer.self_attn.w_o, f"{stack}{i}.z")
                for kind in "qkv":
                    add(getattr(layer.self_attn, f"w_{kind}"), f"{stack}{i}.{kind}", "out")
                mlp_norm = layer.add_norm2 if stack == "encoder" else layer.add_norm3
                add(mlp_norm, f"{stack}{i}.mid")  # the stream the MLP's Add & Norm reads
                add(layer.ffn, f"{stack}{i}.mlp_in")
                add(layer.ffn, f"{stack}{i}.mlp", "out")
                if stack == "decoder":
                    add(layer.add_norm2, f"cross{i}.mid")  # the stream cross-attention reads
                    add(layer.cross_attn.w_o, f"cross{i}.z")
                    for kind in "qkv":
                        add(getattr(layer.cross_attn, f"w_{kind}"), f"cross{i}.{kind}", "out")
        add(net.encoder.final_norm, "memory.in")
        add(net.encoder.final_norm, "memory", "out")
        add(net.decoder.final_norm, "logits.in")
        try:
            return net(**inputs), store
        finally:
            for h in handles:
                h.remove()


def through(fn, x, g):
    """g carried back through fn at x: ∂⟨fn(x), g⟩/∂x."""
    x = x.detach().requires_grad_(True)
    return torch.autograd.grad(fn(x), x, grad_outputs=g)[0]


def reference_edges(net, clean, corrupt, metric_of, edges, steps):
    """EAP(-IG) scores of the edges by hooks and autograd."""
    hooked = Hooked(net)
    d_head = net.config.d_head
    with torch.no_grad():
        m_clean, on_clean = hooked.run(clean)
        m_corrupt, on_corrupt = hooked.run(corrupt)
    m_clean, m_corrupt = float(metric_of(m_clean)), float(metric_of(m_corrupt))
    base = {s: on_corrupt[f"{s}0.x"] for s in ("encoder", "decoder")}

    def target_grad(target, store, grads):
        stack, layer, kind, index = node_of(target)
        if kind in ("memory", "logits"):
            return grads[f"{kind}.in"]
        mods = net.decoder.layers[layer] if stack in ("decoder", "cross") else None
        mods = mods or net.encoder.layers[layer]
        if kind == "mlp":
            norm = (mods.add_norm2 if stack == "encoder" else mods.add_norm3).norm
            return through(norm, store[f"{stack}{layer}.mid"], grads[f"{stack}{layer}.mlp_in"])
        cols = slice(index * d_head, (index + 1) * d_head)
        g = grads[f"{stack}{layer}.{kind}"][..., cols]
        if stack == "cross":
            proj = getattr(mods.cross_attn, f"w_{kind}")
            if kind == "q":
                return through(
                    lambda x: proj(mods.add_norm2.norm(x))[..., cols], store[f"cross{layer}.mid"], g
                )
            return through(lambda m: proj(m)[..., cols], store["memory"], g)
        proj = getattr(mods.self_attn, f"w_{kind}")
        return through(
            lambda x: proj(mods.add_norm1.norm(x))[..., cols], store[f"{stack}{layer}.x"], g
        )

    sums = {}
    for k in range(1, steps + 1):
        m, store = hooked.run(clean, k / steps, base)
        names = list(store)
        found = torch.autograd.grad(metric_of(m), [store[n] for n in names], allow_unused=True)
        grads = {n: g for n, g in zip(names, found, strict=True) if g is not None}
        for target in {t for _, t in edges}:
            sums[target] = sums.get(target, 0) + target_grad(target, store, grads) / steps

    def written(source, store):
        if source == "memory":
            return store["memory"]
        stack, layer, kind, index = node_of(source)
        if kind == "embed":
            return store[f"{stack}0.x"]
        if kind == "mlp":
            return store[f"{stack}{layer}.mlp"]
        attn = (net.decoder if stack in ("decoder", "cross") else net.encoder).layers[layer]
        w_o = (attn.cross_attn if stack == "cross" else attn.self_attn).w_o.weight
        cols = slice(index * d_head, (index + 1) * d_head)
        return store[f"{stack}{layer}.z"][..., cols] @ w_o[:, cols].T

    gap = m_clean - m_corrupt
    return {
        (s, t): float(((written(s, on_clean) - written(s, on_corrupt)) * sums[t]).sum().detach())
        / gap
        for s, t in edges
    }


EDGES = [
    ("encoder.embed", "encoder.L0H1.q"),
    ("encoder.L0H2", "encoder.L1H0.k"),
    ("encoder.L0MLP", "encoder.L1H3.v"),
    ("encoder.L1H2", "memory"),
    ("encoder.embed", "memory"),
    ("encoder.L1MLP", "memory"),
    ("memory", "cross.L0H1.k"),
    ("memory", "cross.L1H0.v"),
    ("decoder.embed", "cross.L0H2.q"),
    ("decoder.L0H1", "cross.L0H3.q"),
    ("cross.L0H0", "decoder.L1H2.k"),
    ("cross.L0H2", "decoder.L0MLP"),
    ("decoder.L0MLP", "cross.L1H1.q"),
    ("cross.L1H0", "logits"),
    ("decoder.embed", "logits"),
]


@pytest.mark.parametrize("steps", [1, 3])
def test_encoder_decoder_edges_equal_hooks_and_autograd(encdec, steps):
    net, clean, corrupt, answer, wrong, position = encdec
    df = edge_attribution(net, clean, corrupt, analysis.logit_diff(answer, wrong, position), steps)
    ours = df.set_index(["source", "target"])["score"]

    def metric_of(logits):
        return logits[0, position, answer] - logits[0, position, wrong]

    ref = reference_edges(net, clean, corrupt, metric_of, EDGES, steps)
    for edge, value in ref.items():
        assert abs(ours[edge] - value) < TOL, (edge, ours[edge], value)
    assert sorted(abs(v) for v in ref.values())[-3] > 1e-2  # numbers, not zeros


def test_the_two_stacks_meet_only_through_the_memory(encdec):
    net, clean, corrupt, answer, wrong, position = encdec
    df = edge_attribution(net, clean, corrupt, analysis.logit_diff(answer, wrong, position))
    cfg = net.config
    n_l, n_h = cfg.n_layers, cfg.n_heads
    src_stack = df["source"].str.split(".").str[0]
    tgt_stack = df["target"].str.split(".").str[0]
    into_kv = df["target"].str.match(r"cross\.L\d+H\d+\.[kv]$")
    # the memory feeds every cross-attention key and value, and nothing else
    assert set(df.loc[df["source"] == "memory", "target"]) == set(df.loc[into_kv, "target"])
    assert (df.loc[into_kv, "source"] == "memory").all() and into_kv.sum() == 2 * n_l * n_h
    # the encoder's nodes feed only the encoder's targets and the memory
    assert set(tgt_stack[src_stack == "encoder"]) == {"encoder", "memory"}
    assert len(df[df["target"] == "memory"]) == 1 + n_l * (n_h + 1)  # every encoder source
    # the decoder's: its own, the cross-attention's queries, the logits
    assert set(df.loc[src_stack.isin(["decoder", "cross"]), "target"].str.split(".").str[0]) == {
        "decoder",
        "cross",
        "logits",
    }
    assert len(df[df["target"] == "logits"]) == 1 + n_l * (2 * n_h + 1)
    assert not ((df["source"] == "cross.L0H0") & (df["target"] == "cross.L0H1.q")).any()
    assert ((df["source"] == "decoder.L0H0") & (df["target"] == "cross.L0H1.q")).any()
    assert not df.duplicated(["source", "target"]).any()


def test_edges_into_a_target_add_up_to_its_input_patched(encdec):
    """Every source of a target is in the graph: the edges into it add up to (its input on the
    clean text − on the corrupt) · the same gradient, what attributing that input alone gives."""
    net, clean, corrupt, answer, wrong, position = encdec
    metric = analysis.logit_diff(answer, wrong, position)
    df = edge_attribution(net, clean, corrupt, metric)
    sums = df.groupby("target")["score"].sum()
    from analysis.attribution_patching import integrated

    sites = {"memory": "encoder.1.hook_resid_post", "logits": "decoder.1.hook_resid_post"}
    found = integrated(net, clean, corrupt, metric, 1, list(sites.values()), list(sites.values()))
    for target, site in sites.items():
        assert abs(float(found.effect(site).sum()) - sums[target]) < TOL


def test_a_circuit_of_every_edge_restores_all_and_of_none_nothing(encdec):
    net, clean, corrupt, answer, wrong, position = encdec
    metric = analysis.logit_diff(answer, wrong, position)
    every = edge_attribution(net, clean, corrupt, metric)
    assert abs(circuit(net, clean, corrupt, metric, every).faithfulness - 1) < TOL
    assert abs(circuit(net, clean, corrupt, metric, []).faithfulness) < TOL
    with pytest.raises(ValueError, match="not an edge"):
        circuit(net, clean, corrupt, metric, [("encoder.L0H0", "cross.L0H0.k")])


def test_a_circuit_equals_the_run_it_names_done_by_hand(encdec):
    """Two edges removed: memory → cross.L1H0.v (that head's values read the corrupt run's
    memory) and encoder.L0H1 → memory (the memory reads L0H1's corrupt output)."""
    net, clean, corrupt, answer, wrong, position = encdec
    metric = analysis.logit_diff(answer, wrong, position)
    every = edge_attribution(net, clean, corrupt, metric)
    removed = {("memory", "cross.L1H0.v"), ("encoder.L0H1", "memory")}
    kept = [e for e in zip(every["source"], every["target"], strict=True) if e not in removed]
    found = circuit(net, clean, corrupt, metric, kept)
    read = ["encoder.0.attn.hook_z", "encoder.ln_final.hook_normalized"]
    with torch.no_grad():
        values = []
        for inputs in (clean, corrupt):
            sites = Sites(read=read)
            net.run_with_sites(sites=sites, **inputs)
            values.append(sites.values)
        w_o = net.encoder.layers[0].self_attn.w_o.weight.view(net.config.d_model, 4, -1)
        z = values[0][read[0]][0, 1] - values[1][read[0]][0, 1]  # head 1's (T, d_head)
        carried = z @ w_o[:, 1].T  # (T, d_model)

        def memory(x):  # the stream the final norm reads
            return x - carried

        corrupt_memory = values[1][read[1]][0]

        def values_of(x):  # x [1, H, T_src, d_model]
            x = x.clone()
            x[0, 0] = corrupt_memory
            return x

        replace = {"encoder.1.hook_resid_post": memory, "decoder.1.hook_cross_v_input": values_of}
        out = net.run_with_sites(sites=Sites(replace=replace), **clean)
    m = float(metric(out)[0])
    expect = (m - found.m_corrupt) / (found.m_clean - found.m_corrupt)
    assert abs(found.faithfulness - expect) < TOL and len(found.edges) == len(every) - 2
    assert abs(found.faithfulness - 1) > 1e-3  # the two edges matter


def test_cross_attention_split_inputs_leave_the_run_unchanged(encdec):
    net, clean, _, _, _, _ = encdec
    names = [f"decoder.{i}.hook_cross_{k}_input" for i in range(2) for k in "qkv"]
    with torch.no_grad():
        plain = net(**clean)
        split = net(**clean, sites=Sites(read=names))
    torch.testing.assert_close(split, plain, atol=1e-12, rtol=0)
