"""The layer walk reads named sites (issue 43): every step of analysis.layer_steps is the value of
one site of model/sites.py, the same that an ordinary call (``run_with_sites``) reads there, on
BERT (post-norm encoder), a post-norm and a pre-norm encoder-decoder (cross-attention), GPT-2, a
LLaMA-like decoder (RoPE, grouped-query attention, gated MLP), Qwen3 and Gemma 3 (QK-norm; Gemma's
second norm after each sublayer). The sites the walk added work in any call: reading or replacing
the scores makes a fused pass explicit.
"""

from __future__ import annotations

import pytest
import torch

from analysis.layer_steps import layer_steps
from model import PRESETS, Transformer, load_lm
from model.sites import Sites
from tests.test_layer_steps import trace_texts
from tests.test_lm import save_checkpoint

TOL = 1e-6  # exact where the call attends explicitly too; the fused kernel differs by rounding

# Step name -> site name under the layer, the attention taken apart under "attn."
SELF_STEPS = {
    "input": "hook_resid_pre",
    "LayerNorm before attention": "ln1.hook_normalized",
    "RMSNorm before attention": "ln1.hook_normalized",
    "Q": "attn.hook_q_flat",
    "K": "attn.hook_k_flat",
    "V": "attn.hook_v_flat",
    "Q heads": "attn.hook_q",
    "K heads": "attn.hook_k",
    "V heads": "attn.hook_v",
    "QK-norm on Q": "attn.hook_q_normed",
    "QK-norm on K": "attn.hook_k_normed",
    "RoPE on Q": "attn.hook_rot_q",
    "RoPE on K": "attn.hook_rot_k",
    "K heads repeated": "attn.hook_rep_k",
    "V heads repeated": "attn.hook_rep_v",
    "scores": "attn.hook_unmasked_scores",
    "masked scores": "attn.hook_attn_scores",
    "attention weights": "attn.hook_pattern",
    "context": "attn.hook_z",  # no head mask here: the contexts as computed
    "concat": "attn.hook_concat",
    "attention output": "hook_attn_out",
    "RMSNorm on attention output": "ln1_post.hook_normalized",  # = hook_attn_out there
    "attention residual": "hook_attn_resid",
    "LayerNorm after attention": "ln1.hook_normalized",
    "LayerNorm before cross-attention": "ln2.hook_normalized",
    "cross-attention output": "hook_cross_attn_out",
    "cross-attention residual": "hook_cross_attn_resid",
    "LayerNorm after cross-attention": "ln2.hook_normalized",
    "FFN gate": "mlp.hook_pre",
    "FFN up": "mlp.hook_pre_linear",
    "FFN hidden": "mlp.hook_post",
    "FFN output": "hook_mlp_out",
    "RMSNorm on FFN output": "ln2_post.hook_normalized",
    "FFN residual": "hook_mlp_resid",
    "output": "hook_resid_post",
}
FFN_NORM = ("LayerNorm before FFN", "RMSNorm before FFN", "LayerNorm after FFN")
# A sandwich layer (Gemma 3): W_O's and W_down's own outputs, what the second norms read
SANDWICH = {"attention output": "ln1_post.hook_in", "FFN output": "ln2_post.hook_in"}


def step_sites(stack: str, cross_attention: bool) -> dict[str, str]:
    """Step name -> site name for a stack's walk; the FFN's norm is ln3 after cross-attention."""
    names = dict(SELF_STEPS)
    for name in FFN_NORM:
        names[name] = "ln3.hook_normalized" if cross_attention else "ln2.hook_normalized"
    if stack == "cross":  # cross-attention taken apart, self-attention one step
        for step, site in SELF_STEPS.items():
            if site.startswith("attn."):
                names[step] = "cross_attn." + site.removeprefix("attn.")
        names.update(
            {
                "attention output": "hook_cross_attn_out",
                "attention residual": "hook_cross_attn_resid",
                "LayerNorm before attention": "ln2.hook_normalized",
                "LayerNorm after attention": "ln2.hook_normalized",
                "LayerNorm before self-attention": "ln1.hook_normalized",
                "self-attention output": "hook_attn_out",
                "self-attention residual": "hook_attn_resid",
                "LayerNorm after self-attention": "ln1.hook_normalized",
            }
        )
    return names


def as_traced(net, trace) -> dict:
    """Replacements that give each layer the trace's stored input and the last its stored output
    (the encoder output cross-attention reads), so that a call whose other layers attend by the
    fused kernel still computes each layer from the numbers the walk starts from."""
    found = {}
    for stream, hidden in trace.hidden_states.items():
        prefix = stream if net.config.arch == "encoder-decoder" else "blocks"
        last = net.config.n_layers - 1
        for layer in range(last + 1):
            found[f"{prefix}.{layer}.hook_resid_pre"] = lambda x, h=hidden[:, layer]: h
        found[f"{prefix}.{last}.hook_resid_post"] = lambda x, h=hidden[:, last + 1]: h
    return found


def check_walk(net, trace, options: dict) -> None:
    """Each stack's every layer: the walk's steps equal the sites one ordinary call reads."""
    stacks = trace.stacks
    for stack in stacks:
        home = "decoder" if stack == "cross" else stack
        prefix = home if net.config.arch == "encoder-decoder" else "blocks"
        names = step_sites(stack, "cross" in stacks and home == "decoder")
        if net.config.sandwich_norm:
            names.update(SANDWICH)
        for layer in range(net.config.n_layers):
            steps = layer_steps(trace, stack, layer, 0)
            read = [f"{prefix}.{layer}.{names[s.name]}" for s in steps]
            sites = Sites(read=read, replace=as_traced(net, trace))
            net.run_with_sites(trace.input_ids, sites=sites, **options)
            for step, name in zip(steps, read, strict=True):
                value = sites.values[name][0].float()
                torch.testing.assert_close(step.value, value, atol=TOL, rtol=0, msg=step.name)


@pytest.mark.parametrize("name", ["seed000-tiny", "seed001-prenorm", "seed004-encoder"])
def test_every_step_is_the_site_of_its_name_in_a_seed_model(name):
    net = Transformer(PRESETS[name])
    source, target = ["time flies like an arrow"], ["le temps"]
    trace = trace_texts(net, source, target)
    options = {}
    if net.config.arch == "encoder-decoder":
        options = {"tgt_ids": trace.tgt_ids, "tgt_attention_mask": trace.tgt_attention_mask}
    check_walk(net, trace, options)


def test_every_step_is_the_site_of_its_name_in_bert(bert):
    net, tok = bert
    enc = tok(["A Titan RTX has 24GB of VRAM"], return_tensors="pt")
    check_walk(net, net.trace(enc["input_ids"], attention_mask=enc["attention_mask"]), {})


@pytest.mark.parametrize("case", ["gpt2", "llama", "qwen3", "gemma3"])
def test_every_step_is_the_site_of_its_name_in_a_language_model(case, tmp_path):
    save_checkpoint(tmp_path, case)
    net, tok = load_lm(tmp_path, device="cpu")
    enc = tok(["The cat sat on the mat, and attention is all you need"], return_tensors="pt")
    trace = net.trace(enc["input_ids"], enc["attention_mask"])
    if case == "llama":
        assert net.config.kv_heads < net.config.n_heads and net.config.mlp == "gated"
        assert net.config.positions == "rotary"
    if case == "gemma3":  # QK-norm, the sandwich, and sliding layers around a full one
        assert net.config.qk_norm and net.config.sandwich_norm and net.config.layer_types
    check_walk(net, trace, {})


def test_the_scores_sites_work_in_a_fused_pass_and_a_replaced_hidden_layer_reaches_w2():
    net = Transformer(PRESETS["seed004-encoder"])
    ids = net.tokenizer(["time flies like an arrow"], return_tensors="pt")["input_ids"]

    def hide_first_key(scores):
        scores = scores.clone()
        scores[..., 0] = float("-inf")
        return scores

    sites = Sites(
        read=["blocks.0.attn.hook_pattern", "blocks.0.hook_mlp_out", "blocks.1.attn.hook_pattern"],
        replace={
            "blocks.0.attn.hook_attn_scores": hide_first_key,
            "blocks.0.mlp.hook_post": torch.zeros_like,
        },
    )
    net.run_with_sites(ids, sites=sites)
    assert bool((sites.values["blocks.0.attn.hook_pattern"][..., 0] == 0).all())
    assert bool((sites.values["blocks.1.attn.hook_pattern"][..., 0] > 0).all())
    bias = net.encoder.layers[0].ffn.fc2.bias
    assert torch.equal(sites.values["blocks.0.hook_mlp_out"][0, 0], bias.detach())
    only = Sites(read=["blocks.0.attn.hook_unmasked_scores", "blocks.0.attn.hook_attn_scores"])
    net.run_with_sites(ids, sites=only)
    assert set(only.values) == set(only.read)  # read in a pass that fuses attention otherwise
