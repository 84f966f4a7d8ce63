"""Attribution patching, edge attribution and circuits equal the same sums done by hand.

analysis.attribute_heads / attribute_residual / edge_attribution take their gradients in one
batched call through named sites (model/sites.py). The references here take them the way a
notebook does: forward hooks on transformers' own modules (GPT-2, LLaMA with grouped-query
heads, BERT) keep the activations, autograd gives ∂m/∂ each, the first block's input is blended
from the corrupt embeddings to the clean ones for each step, and a head's q / k / v input's
gradient is its projection slice's gradient carried back through the layer's norm by autograd.
TransformerLens checks the head attributions and the composition scores where it is installed.
"""

from __future__ import annotations

import pytest
import torch

import analysis
import engine
import model
from analysis.attribution_patching import attribute_heads, attribute_residual
from analysis.circuits import PAGE_STEPS, circuit, composition_scores, edge_attribution
from model import load_lm
from tests.test_lm import TEXTS, save_checkpoint
from tests.test_patching import answer_pair

TOL = 1e-4


# ---- the reference: transformers' modules, hooks and autograd ----------------------------------
def hooked_run(call, first_block, keeps, inputs, blend=None):
    """(metric, kept tensors) of one run; "resid0" is the first block's input (blended)."""
    store, handles = {}, []

    def first(module, args, kwargs):
        x = args[0] if args else kwargs["hidden_states"]
        x = x if blend is None else blend(x)
        store["resid0"] = x
        if args:
            return (x, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": x}

    def keep(name, where):
        def pre(module, args, kwargs):
            store[name] = args[0] if args else kwargs["hidden_states"]

        def post(module, args, output):
            store[name] = output[0] if isinstance(output, tuple) else output

        return pre if where == "in" else post

    handles.append(first_block.register_forward_pre_hook(first, with_kwargs=True))
    for name, (module, where) in keeps.items():
        if where == "in":
            handles.append(module.register_forward_pre_hook(keep(name, where), with_kwargs=True))
        else:
            handles.append(module.register_forward_hook(keep(name, where)))
    try:
        return call(inputs), store
    finally:
        for h in handles:
            h.remove()


def reference(call, first_block, keeps, clean, corrupt, steps, per_step=None):
    """Clean and corrupt values of the kept tensors, their mean gradients over the steps, the
    mean of per_step(store, grads) (targets' gradients through a norm), and the gap."""
    with torch.no_grad():
        m_clean, on_clean = hooked_run(call, first_block, keeps, clean)
        m_corrupt, on_corrupt = hooked_run(call, first_block, keeps, corrupt)
    e_corrupt = on_corrupt["resid0"]
    grads, extra = {}, {}
    for k in range(1, steps + 1):
        a = k / steps
        m, store = hooked_run(
            call, first_block, keeps, clean, blend=lambda x, a=a: e_corrupt * (1 - a) + x * a
        )
        names = list(store)
        found = dict(zip(names, torch.autograd.grad(m, [store[n] for n in names]), strict=True))
        for name, g in found.items():
            grads[name] = grads.get(name, 0) + g / steps
        for name, g in (per_step(store, found) if per_step else {}).items():
            extra[name] = extra.get(name, 0) + g / steps
    gap = float(m_clean - m_corrupt)
    return on_clean, on_corrupt, grads, extra, gap


def through(fn, x, g):
    """g carried back through fn at x: ∂⟨fn(x), g⟩/∂x."""
    x = x.detach().requires_grad_(True)
    return torch.autograd.grad(fn(x), x, grad_outputs=g)[0]


class Family:
    """Where GPT-2 and LLaMA keep what the references read."""

    def __init__(self, hf):
        self.hf, cfg = hf, hf.config
        self.gpt2 = hasattr(hf.base_model, "h")
        self.blocks = list(hf.base_model.h if self.gpt2 else hf.base_model.layers)
        self.n_heads = cfg.num_attention_heads
        self.n_kv = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.d_model = cfg.hidden_size
        self.d_head = getattr(cfg, "head_dim", None) or self.d_model // self.n_heads
        self.final = hf.base_model.ln_f if self.gpt2 else hf.base_model.norm

    def attn(self, layer):
        return self.blocks[layer].attn if self.gpt2 else self.blocks[layer].self_attn

    def o_proj(self, layer):
        return self.attn(layer).c_proj if self.gpt2 else self.attn(layer).o_proj

    def norms(self, layer):
        b = self.blocks[layer]
        return (b.ln_1, b.ln_2) if self.gpt2 else (b.input_layernorm, b.post_attention_layernorm)

    def mlp(self, layer):
        return self.blocks[layer].mlp

    def projections(self, layer):
        """{kept name: the module whose output is the layer's queries, keys or values}."""
        if self.gpt2:
            return {f"qkv{layer}": self.attn(layer).c_attn}
        return {f"{kind}{layer}": getattr(self.attn(layer), f"{kind}_proj") for kind in "qkv"}

    def final_keep(self):
        """(module, "in" | "out"): where the stream the logits read is kept."""
        return self.final, "in"

    def keeps(self):
        """The tensors the references read, per layer."""
        found = {"final": self.final_keep()}
        for layer, block in enumerate(self.blocks):
            found[f"z{layer}"] = (self.o_proj(layer), "in")
            found[f"x{layer}"] = (block, "in")
            found[f"mid{layer}"] = (self.norms(layer)[1], "in")
            found[f"mlp_in{layer}"] = (self.mlp(layer), "in")
            found[f"mlp{layer}"] = (self.mlp(layer), "out")
            found.update({name: (m, "out") for name, m in self.projections(layer).items()})
        return found

    def projection(self, layer, kind, index):
        """(the kept output's name, x normed -> that head's slice of the projection)."""
        d, dh = self.d_model, self.d_head
        cols = slice(index * dh, (index + 1) * dh)
        if self.gpt2:
            offset = "qkv".index(kind) * d
            cols = slice(offset + cols.start, offset + cols.stop)
            return f"qkv{layer}", cols, self.attn(layer).c_attn
        return f"{kind}{layer}", cols, getattr(self.attn(layer), f"{kind}_proj")

    def written(self, source, store):
        """What a source ("embed", "L0H1", "L0MLP") wrote in a run, from its kept tensors."""
        if source == "embed":
            return store["resid0"]
        layer = int(source[1:].split("H")[0].split("M")[0])
        if source.endswith("MLP"):
            return store[f"mlp{layer}"]
        return self.head_out(layer, int(source.split("H")[1]), store[f"z{layer}"])

    def head_out(self, layer, head, z):
        """z [.., d_model] (heads side by side) -> head's z_h W_O^h [.., d_model]."""
        cols = slice(head * self.d_head, (head + 1) * self.d_head)
        if self.gpt2:
            return z[..., cols] @ self.o_proj(layer).weight[cols]  # Conv1D: [in, out]
        return z[..., cols] @ self.o_proj(layer).weight[:, cols].T


def parse_target(target):
    """ "L1H0.k" -> (1, "k", 0); "L1KV1.v" -> (1, "v", 1); "L0MLP" -> (0, "mlp", None)."""
    if target == "logits":
        return None, "logits", None
    if target.endswith("MLP"):
        return int(target[1:-3]), "mlp", None
    node, kind = target.split(".")
    layer, index = node[1:].replace("KV", "H").split("H")
    return int(layer), kind, int(index)


def target_gradients(fam, targets, store, grads):
    """{target: ∂m/∂ its input} of one run: each target's gradient carried through its own
    path (a head's projection slice through the layer's norm, an MLP's input through its norm,
    the logits' stream as it is)."""
    found = {}
    for target in targets:
        layer, kind, index = parse_target(target)
        if kind == "logits":
            found[target] = grads["final"]
        elif kind == "mlp":
            found[target] = through(
                fam.norms(layer)[1], store[f"mid{layer}"], grads[f"mlp_in{layer}"]
            )
        else:
            name, cols, proj = fam.projection(layer, kind, index)
            ln = fam.norms(layer)[0]
            found[target] = through(
                lambda x, ln=ln, proj=proj, cols=cols: proj(ln(x))[..., cols],
                store[f"x{layer}"],
                grads[name][..., cols],
            )
    return found


def written(fam, source, store):
    """What a source wrote in one run's kept tensors (the family's own way: Gemma's heads write
    their part of the norm after the attention)."""
    return fam.written(source, store)


def reference_edges(fam, clean, corrupt, metric_of, edges, steps):
    """EAP(-IG) scores of the edges, each target's gradient carried through its own path."""

    def call(inputs):
        return metric_of(fam.hf(**inputs).logits)

    def per_step(store, grads):
        return target_gradients(fam, [t for _, t in edges], store, grads)

    on_clean, on_corrupt, _, target_grads, gap = reference(
        call, fam.blocks[0], fam.keeps(), clean, corrupt, steps, per_step
    )
    return {
        (s, t): float(
            ((fam.written(s, on_clean) - fam.written(s, on_corrupt)) * target_grads[t])
            .sum()
            .detach()
        )
        / gap
        for s, t in edges
    }


def reference_nodes(fam, clean, corrupt, metric_of, steps):
    """attribute_heads [L, H] and attribute_residual [L, T] by hooks."""

    def call(inputs):
        return metric_of(fam.hf(**inputs).logits)

    on_clean, on_corrupt, grads, _, gap = reference(
        call, fam.blocks[0], fam.keeps(), clean, corrupt, steps
    )
    n_layers = len(fam.blocks)
    heads, resid = [], []
    for layer in range(n_layers):
        z = f"z{layer}"
        effect = ((on_clean[z] - on_corrupt[z]) * grads[z])[0]  # (T, d_model)
        heads.append(effect.view(effect.shape[0], fam.n_heads, fam.d_head).sum((0, 2)))
        x = "resid0" if layer == 0 else f"x{layer}"
        resid.append(((on_clean[x] - on_corrupt[x]) * grads[x])[0].sum(-1))
    return torch.stack(heads) / gap, torch.stack(resid) / gap


# ---- GPT-2 and LLaMA (grouped-query) against transformers ------------------------------------
@pytest.fixture(scope="module", params=["gpt2", "llama"])
def lm(request, tmp_path_factory):
    """(case, our model, tokenizer, transformers' model, its folder, clean, corrupt, answer,
    wrong): test_patching's pair, two tokens changed near the end."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = save_checkpoint(folder, request.param)
    net, tok = load_lm(folder, device="cpu")
    ids = tok([TEXTS[0]], return_tensors="pt")["input_ids"]
    swapped = torch.cat([ids[:, :-3], torch.tensor([[40, 41]]), ids[:, -1:]], dim=1)
    clean, corrupt = (
        {"input_ids": x, "attention_mask": torch.ones_like(x)} for x in (ids, swapped)
    )
    return (request.param, net, tok, hf, folder, clean, corrupt, *answer_pair(net, clean, corrupt))


def logit_diff_of(answer, wrong):
    return lambda logits: logits[0, -1, answer] - logits[0, -1, wrong]


@pytest.mark.parametrize("steps", [1, 3])
def test_node_attributions_equal_transformers_hooks_and_autograd(lm, steps):
    _, net, _, hf, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    heads = attribute_heads(net, clean, corrupt, metric, steps=steps)
    resid = attribute_residual(net, clean, corrupt, metric, steps=steps)
    fam = Family(hf)
    ref_heads, ref_resid = reference_nodes(fam, clean, corrupt, logit_diff_of(answer, wrong), steps)
    assert heads.shape == (net.config.n_layers, net.config.n_heads)
    torch.testing.assert_close(heads, ref_heads.float(), atol=TOL, rtol=0)
    torch.testing.assert_close(resid, ref_resid.float(), atol=TOL, rtol=0)
    assert heads.abs().max() > 1e-3  # a comparison of numbers, not of zeros


def test_edge_scores_equal_transformers_hooks_and_autograd(lm):
    case, net, _, hf, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    df = edge_attribution(net, clean, corrupt, metric, steps=3)
    if case == "gpt2":
        edges = [("embed", "L0H1.q"), ("L0H1", "L1H0.k"), ("L0H2", "L2H3.v"), ("L0H0", "L0MLP")]
        edges += [("L0MLP", "L1H3.v"), ("L1H2", "logits"), ("L1MLP", "L2MLP"), ("embed", "logits")]
    else:  # 8 query heads, 2 key/value heads
        assert net.config.kv_heads == 2 and "L1KV1.k" in set(df["target"])
        edges = [("embed", "L1H7.q"), ("L0H5", "L1KV1.k"), ("L0H3", "L1KV0.v"), ("L0H2", "L1H6.q")]
        edges += [("L0MLP", "logits"), ("L1H2", "L1MLP"), ("L0MLP", "L1KV0.k")]
    fam = Family(hf)
    ref = reference_edges(fam, clean, corrupt, logit_diff_of(answer, wrong), edges, steps=3)
    ours = df.set_index(["source", "target"])["score"]
    for edge, value in ref.items():
        assert abs(ours[edge] - value) < TOL, (edge, ours[edge], value)
    assert max(abs(v) for v in ref.values()) > 1e-3


def test_the_graph_has_an_edge_from_every_upstream_source_and_no_other(lm):
    case, net, _, _, _, clean, corrupt, answer, wrong = lm
    df = edge_attribution(net, clean, corrupt, analysis.logit_diff(answer, wrong))
    cfg = net.config
    n_l, n_h, n_kv = cfg.n_layers, cfg.n_heads, cfg.kv_heads
    per_layer_targets = n_h + 2 * n_kv  # q of every head, k and v of every key/value head
    expected = 0
    for layer in range(n_l):  # targets of layer: its heads' inputs (sources before it) + MLP
        sources_before_heads = 1 + layer * (n_h + 1)
        expected += per_layer_targets * sources_before_heads + sources_before_heads + n_h
    expected += 1 + n_l * (n_h + 1)  # logits read everything
    assert len(df) == expected and not df.duplicated(["source", "target"]).any()
    assert not ((df["source"] == "L1H0") & (df["target"] == "L1H1.q")).any()
    assert ((df["source"] == "L1H0") & (df["target"] == "L1MLP")).any()


def test_composition_scores_follow_the_definition(lm):
    """Against the definition written with d_model × d_model matrices (and GQA's groups)."""
    _, net, _, _, _, _, _, _, _ = lm
    cfg = net.config
    layers = net.decoder.layers
    dh, n_rep = cfg.d_head, cfg.n_heads // cfg.kv_heads

    def w(layer, name, head):
        """x W^h: [d_model, d_head]; keys and values of the head's group."""
        weight = getattr(layers[layer].self_attn, name).weight.detach().double()
        group = head if name == "w_q" else head // n_rep
        return weight[group * dh : (group + 1) * dh].T

    def w_o(layer, head):
        return (
            layers[layer].self_attn.w_o.weight.detach().double()[:, head * dh : (head + 1) * dh].T
        )

    def ov(layer, head):
        return w(layer, "w_v", head) @ w_o(layer, head)

    def qk(layer, head):
        return w(layer, "w_q", head) @ w(layer, "w_k", head).T

    for kind, m in (("q", qk), ("k", lambda layer, h: qk(layer, h).T), ("v", ov)):
        scores = composition_scores(net, kind)
        assert scores.shape == (cfg.n_layers, cfg.n_heads, cfg.n_layers, cfg.n_heads)
        for l1, h1, l2, h2 in [(0, 1, 1, 0), (0, 3, 1, 2), (0, 0, 1, 7 % cfg.n_heads)]:
            left, right = ov(l1, h1), m(l2, h2)
            want = torch.linalg.norm(left @ right) / (
                torch.linalg.norm(left) * torch.linalg.norm(right)
            )
            assert abs(float(scores[l1, h1, l2, h2]) - float(want)) < 1e-5
        assert float(scores[1, 0, 0, 0]) == 0 and float(scores[1, 0, 1, 1]) == 0


# ---- TransformerLens -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bridge(lm):
    pytest.importorskip("transformer_lens")
    from transformer_lens.model_bridge import TransformerBridge

    _, _, tok, hf, folder, *_ = lm
    return TransformerBridge.boot_transformers(str(folder), hf_model=hf, tokenizer=tok)


def test_head_attributions_equal_transformer_lens_hooks(lm, bridge):
    """EAP-IG by hand on TransformerLens's hook_z and hook_resid_pre."""
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    steps, n_layers = 3, net.config.n_layers
    ids_clean, ids_corrupt = clean["input_ids"], corrupt["input_ids"]
    z_names = [f"blocks.{layer}.attn.hook_z" for layer in range(n_layers)]

    def diff(logits):
        return logits[0, -1, answer] - logits[0, -1, wrong]

    def run(ids, blend=None):
        store = {}

        def keep(name):
            def hook(act, hook):
                act = act if blend is None or name != "resid0" else blend(act)
                store[name] = act
                return act

            return hook

        hooks = [("blocks.0.hook_resid_pre", keep("resid0"))]
        hooks += [(n, keep(n)) for n in z_names]
        return diff(bridge.run_with_hooks(ids, fwd_hooks=hooks)), store

    with torch.no_grad():
        m_clean, on_clean = run(ids_clean)
        m_corrupt, on_corrupt = run(ids_corrupt)
    e_corrupt = on_corrupt["resid0"]
    grads = {n: 0 for n in z_names}
    for k in range(1, steps + 1):
        a = k / steps
        m, store = run(ids_clean, blend=lambda x, a=a: e_corrupt * (1 - a) + x * a)
        for n, g in zip(z_names, torch.autograd.grad(m, [store[n] for n in z_names]), strict=True):
            grads[n] = grads[n] + g / steps
    theirs = torch.stack(
        [((on_clean[n] - on_corrupt[n]) * grads[n])[0].sum((0, 2)) for n in z_names]
    ) / (m_clean - m_corrupt)  # TransformerLens's z: [B, T, H, d_head]
    ours = attribute_heads(net, clean, corrupt, analysis.logit_diff(answer, wrong), steps=steps)
    torch.testing.assert_close(ours, theirs.detach().float(), atol=TOL, rtol=0)


def test_composition_scores_equal_transformer_lens(lm, bridge):
    """TransformerLens's all_composition_scores uses the same convention: left = W_V W_O of the
    earlier head, right = W_Q W_Kᵀ ("Q"), its transpose ("K") or W_V W_O ("V")."""
    _, net, *_ = lm
    for kind in "qkv":
        theirs = bridge.all_composition_scores(kind.upper()).scores
        ours = composition_scores(net, kind)
        torch.testing.assert_close(ours, theirs.detach().float(), atol=1e-5, rtol=0)


# ---- first order, integrated gradients, circuits ----------------------------------------------
def moved_token(lm, scale):
    """(model, clean, corrupt): a copy of the model whose token 41 is the clean text's token
    before last plus scale × noise, and the text with that token swapped in."""
    _, net, _, _, _, clean, _, _, _ = lm
    copy = type(net)(net.config, net.tokenizer)
    copy.load_state_dict(net.state_dict())
    a, b = int(clean["input_ids"][0, -2]), 41
    noise = torch.randn(net.config.d_model, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        emb = copy.embedding.tok_emb.weight
        emb[b] = emb[a] + scale * noise
    corrupt = {k: v.clone() for k, v in clean.items()}
    corrupt["input_ids"][0, -2] = b
    return copy, clean, corrupt


def test_one_call_gives_the_steps_the_one_step_and_the_residual_estimates(lm):
    """attribute_all (How the heads connect's grids, one call): its heads with 3 steps are
    attribute_heads' with 3, its one-step heads and residual those of steps=1, though it ran
    only the integrated runs (the clean run among them), on GPT-2 and LLaMA alike."""
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    found = analysis.attribute_all(net, clean, corrupt, metric, 3)
    torch.testing.assert_close(found.heads, attribute_heads(net, clean, corrupt, metric, 3))
    one = attribute_heads(net, clean, corrupt, metric)
    torch.testing.assert_close(found.heads_one_step, one, atol=1e-5, rtol=0)
    resid = attribute_residual(net, clean, corrupt, metric)
    torch.testing.assert_close(found.residual, resid, atol=1e-5, rtol=0)
    assert (found.heads - found.heads_one_step).abs().max() > 1e-4  # two estimates, not one


def test_one_step_equals_patching_when_the_patch_is_small(lm):
    """Two tokens whose embeddings differ by 1e-3: every activation moves a little, and the
    first-order estimate is activation patching's share (measured within 0.0015 of heads')."""
    net, clean, corrupt = moved_token(lm, 1e-3)
    metric = analysis.logit_diff(*answer_pair(net, clean, corrupt))
    patched = analysis.patch_heads(net, clean, corrupt, metric)
    torch.testing.assert_close(
        attribute_heads(net, clean, corrupt, metric), patched, atol=0.005, rtol=0
    )
    patched = analysis.patch_residual(net, clean, corrupt, metric)
    resid = attribute_residual(net, clean, corrupt, metric)
    torch.testing.assert_close(resid, patched, atol=0.02, rtol=0)


def test_more_steps_come_closer_to_patching_where_one_step_is_off(lm):
    """Embeddings 0.5 apart: one step misses patching by 0.06 (GPT-2) and 0.21 (LLaMA) of a
    share; 16 blended runs by 0.02 in both."""
    net, clean, corrupt = moved_token(lm, 0.5)
    metric = analysis.logit_diff(*answer_pair(net, clean, corrupt))
    patched = analysis.patch_heads(net, clean, corrupt, metric)
    one = (attribute_heads(net, clean, corrupt, metric) - patched).abs().max()
    many = (attribute_heads(net, clean, corrupt, metric, steps=16) - patched).abs().max()
    assert many < 0.05 and many < one / 2


def test_integrated_gradients_at_the_embeddings_add_up_to_the_whole_difference(lm):
    """The blended runs are a straight line between the embeddings, so the first layer's
    attributions add up to 1 as the steps grow (completeness, Sundararajan et al. 2017)."""
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    one = float(attribute_residual(net, clean, corrupt, metric)[0].sum())
    many = float(attribute_residual(net, clean, corrupt, metric, steps=64)[0].sum())
    assert abs(many - 1) < 0.02 and abs(many - 1) < abs(one - 1)


def test_a_circuit_of_every_edge_restores_all_and_of_none_nothing(lm):
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    every = edge_attribution(net, clean, corrupt, metric)
    assert abs(circuit(net, clean, corrupt, metric, every).faithfulness - 1) < 1e-5
    assert abs(circuit(net, clean, corrupt, metric, len(every), steps=1).faithfulness - 1) < 1e-5
    assert abs(circuit(net, clean, corrupt, metric, []).faithfulness) < 1e-5
    assert abs(circuit(net, clean, corrupt, metric, 0, steps=1).faithfulness) < 1e-5
    with pytest.raises(ValueError, match="not an edge"):
        circuit(net, clean, corrupt, metric, [("L1H0", "L0H0.q")])


def without_l0h1_to_l1h0_q(net, clean, corrupt, metric, carry):
    """m of the clean text with head L1H0's query reading its input minus (L0H1's write minus
    carry(z_clean, z_corrupt)'s, z being L0H1's context [T, d_head] on each text), done by hand
    at the site hook_q_input: the circuit of every edge but L0H1 → L1H0.q."""

    with torch.no_grad():
        z_clean, z_corrupt = (
            (tr.attentions["decoder"] @ tr.values["decoder"])[0, 0, 1]  # (T, d_head)
            for tr in (net.trace(**clean), net.trace(**corrupt))
        )
        w_o = net.decoder.layers[0].self_attn.w_o.weight.view(
            net.config.d_model, net.config.n_heads, -1
        )
        removed = (z_clean - carry(z_clean, z_corrupt)) @ w_o[:, 1].T  # (T, d_model)
    return with_query_minus(net, clean, metric, removed)


def with_query_minus(net, clean, metric, removed) -> float:
    """m of the clean text with head L1H0's query reading its input minus ``removed`` [T,
    d_model] (what a removed edge into it carried), at the site hook_q_input."""
    from model.sites import Sites

    def query(x):  # x [1, H, T, d_model]: each query head's copy of the stream
        x = x.clone()
        x[0, 0] -= removed
        return x

    with torch.no_grad():
        out = net.run_with_sites(sites=Sites(replace={"blocks.1.hook_q_input": query}), **clean)
    return float(metric(out)[0])


def test_a_circuit_equals_the_run_it_names_done_by_hand(lm):
    """One removed edge L0H1 → L1H0.q: only that head's query reads L0H1's corrupt output."""
    _, net, _, _, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    every = edge_attribution(net, clean, corrupt, metric)
    kept = every[~((every["source"] == "L0H1") & (every["target"] == "L1H0.q"))]
    found = circuit(
        net, clean, corrupt, metric, list(zip(kept["source"], kept["target"], strict=True))
    )
    m = without_l0h1_to_l1h0_q(net, clean, corrupt, metric, lambda z_clean, z_corrupt: z_corrupt)
    expect = (m - found.m_corrupt) / (found.m_clean - found.m_corrupt)
    assert abs(found.faithfulness - expect) < 1e-5 and len(found.edges) == len(every) - 1


# ---- BERT and refusals ---------------------------------------------------------------------
def test_bert_gets_node_attributions_equal_to_transformers_and_no_edges(bert, hf_bert):
    net, tok = bert
    texts = ["the trophy did not fit: it was too big", "the trophy did not fit: it was too small"]
    clean, corrupt = (
        {k: v[i : i + 1] for k, v in tok(texts, return_tensors="pt").items()} for i in (0, 1)
    )
    position = -3
    metric = analysis.cosine_to(net.trace(**clean), position)
    heads = attribute_heads(net, clean, corrupt, metric, steps=4)
    ref_out = hf_bert(**clean).last_hidden_state[0, position].detach()

    def call(inputs):
        out = hf_bert(**inputs).last_hidden_state[0, position]
        return torch.nn.functional.cosine_similarity(out, ref_out, dim=0)

    layers = hf_bert.encoder.layer
    keeps = {f"z{i}": (layer.attention.output.dense, "in") for i, layer in enumerate(layers)}
    on_clean, on_corrupt, grads, _, gap = reference(call, layers[0], keeps, clean, corrupt, 4)
    h = net.config.n_heads
    ref = (
        torch.stack(
            [
                ((on_clean[n] - on_corrupt[n]) * grads[n])[0]
                .view(-1, h, net.config.d_head)
                .sum((0, 2))
                for n in keeps
            ]
        )
        / gap
    )
    torch.testing.assert_close(heads, ref.float(), atol=TOL, rtol=0)
    with pytest.raises(ValueError, match="pre-norm model") as err:
        edge_attribution(net, clean, corrupt, metric)
    assert str(err.value).count(". ") == 0 and str(err.value).endswith(".")  # one sentence


def test_an_encoder_decoder_gets_head_attributions_of_each_stack_and_no_edges():
    net = model.load_trained("dates")
    clean, corrupt = engine.encode(net, "2026-11-22", "2025-11-22", target="2026-11")
    metric = analysis.logit_diff(*answer_pair(net, clean, corrupt, position=3), position=3)
    for stack in ("encoder", "decoder", "cross"):
        heads = attribute_heads(net, clean, corrupt, metric, stack=stack)
        assert heads.shape == (net.config.n_layers, net.config.n_heads)
        assert torch.isfinite(heads).all()
    assert attribute_residual(net, clean, corrupt, metric).shape[1] == clean["input_ids"].shape[1]
    with pytest.raises(ValueError, match="pre-norm model"):
        edge_attribution(net, clean, corrupt, metric)


# ---- the shipped induction model -------------------------------------------------------------
@pytest.fixture(scope="module")
def induction():
    """The page's copy pair as the page encodes and measures it (ui/tabs/patching.py: answer
    "v", the wrong token the corrupt run's own top prediction, analysis.patch_pair's default)."""
    net = model.load_trained("induction")
    clean, corrupt = engine.encode(net, "qzxwv qzxw", "bhmtk qzxw")
    pair = analysis.patch_pair(net, clean, corrupt, answer=net.tokenizer.char_to_id("v"))
    return net, clean, corrupt, analysis.logit_diff(pair.answer, pair.wrong)


def key_edges_from_layer_0(df):
    keys = df[df["source"].str.startswith("L0H") & df["target"].str.endswith(".k")]
    return keys.reindex(keys["score"].abs().sort_values(ascending=False).index)


def test_eight_steps_find_the_previous_token_heads_key_edge_one_step_misses(induction):
    net, clean, corrupt, metric = induction
    one = key_edges_from_layer_0(edge_attribution(net, clean, corrupt, metric, steps=1))
    eight = key_edges_from_layer_0(edge_attribution(net, clean, corrupt, metric, steps=PAGE_STEPS))
    assert one["score"].abs().max() < 0.02  # one step is blind to the key edges
    top = list(zip(eight["source"], eight["target"], strict=True))
    assert top[:2] == [("L0H1", "L1H0.k"), ("L0H1", "L1H2.k")]
    assert 0.06 < eight["score"].iloc[0] < 0.07


def test_a_circuit_of_the_26_strongest_edges_restores_the_copy(induction):
    net, clean, corrupt, metric = induction
    scores = edge_attribution(net, clean, corrupt, metric, steps=PAGE_STEPS)
    assert len(scores) == 262
    found = circuit(net, clean, corrupt, metric, 26)
    assert found.faithfulness >= 0.8 and len(found.edges) == 26  # measured 0.85
    assert circuit(net, clean, corrupt, metric, 20).faithfulness >= 0.7  # measured 0.75
    top = scores.loc[scores["score"].abs().sort_values(ascending=False).index[:26]]
    assert list(found.edges["score"]) == list(top["score"])
    pruned = circuit(net, clean, corrupt, metric, 26, scores=scores, prune=True)
    assert pruned.asked == 26 and len(pruned.edges) == 20  # 6 of the 26 dangle (measured)
    assert list(pruned.edges["score"]) == list(analysis.prune_edges(net, top)["score"])
    assert abs(pruned.faithfulness - found.faithfulness) < 1e-6
