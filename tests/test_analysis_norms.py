"""Norm-based attention (Kobayashi et al. 2020) equals ‖α f_h(x)‖ from HF BertModel's layers."""

from __future__ import annotations

import pytest
import torch

import analysis
from model import PRESETS, Transformer
from tests.conftest import LONG_TEXT

TOL = 1e-4
CASES = {
    "padded batch": ["A Titan RTX has 24GB of VRAM", "I have a dog"],
    "300+ tokens": [LONG_TEXT],
}


def hf_norms(hf_bert, enc, rows: slice):
    """Per layer: ‖α_ij f_h(x_j)‖ [B, H, Q, T] and ‖Σ_h α_ij f_h(x_j)‖ [B, Q, T] for Q query rows.

    f_h(x) = (x W_V^h + b_V^h) W_O^h from HF's value layer and attention.output.dense, applied to
    HF's own layer inputs (its hidden states), with HF's α; the vectors are built and summed
    explicitly, one head at a time.
    """
    with torch.no_grad():
        ref = hf_bert(**enc, output_attentions=True, output_hidden_states=True)
        n_heads = hf_bert.config.num_attention_heads
        for layer, block in enumerate(hf_bert.encoder.layer):
            x = ref.hidden_states[layer]  # (B, T, d_model): input of this layer
            batch, t, d_model = x.shape
            d_head = d_model // n_heads
            v = block.attention.self.value(x).view(batch, t, n_heads, d_head)  # (B, T, H, d_head)
            w_o = block.attention.output.dense.weight  # (d_model, d_model): out x in
            alpha = ref.attentions[layer][:, :, rows]  # (B, H, Q, T)
            per_head, total = [], torch.zeros(*alpha[:, 0].shape, d_model)  # (B, Q, T, d_model)
            for h in range(n_heads):
                f = v[:, :, h] @ w_o[:, h * d_head : (h + 1) * d_head].T  # (B, T_k, d_model)
                vec = alpha[:, h, :, :, None] * f[:, None]  # (B, Q, T_k, d_model)
                per_head.append(vec.norm(dim=-1))
                total += vec
            yield layer, torch.stack(per_head, 1), total.norm(dim=-1)


@pytest.mark.parametrize("texts", CASES.values(), ids=CASES.keys())
def test_norms_equal_hf_bert_value_and_output_layers(bert, hf_bert, texts):
    net, tok = bert
    enc = tok(texts, padding=True, return_tensors="pt")
    assert enc["input_ids"].shape[1] < 40 or enc["input_ids"].shape[1] > 300
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    ours = analysis.norm_attention(tr, "encoder", net=net)  # (B, L, H, T, T)
    summed = analysis.norm_attention_summed(tr, "encoder", net=net)  # (B, L, T, T)
    rows = slice(None, None, 1 if len(texts) > 1 else 23)  # the long text: every 23rd query
    for layer, norms, summed_norms in hf_norms(hf_bert, enc, rows):
        torch.testing.assert_close(ours[:, layer, :, rows], norms, atol=TOL, rtol=0)
        torch.testing.assert_close(summed[:, layer, rows], summed_norms, atol=TOL, rtol=0)


def test_the_norms_add_up_to_the_attention_output(bert):
    """Σ_j Σ_h α_ij f_h(x_j) + b_O is the attention sublayer's output (the vectors are real)."""
    net, tok = bert
    enc = tok(["The cat sat on the mat.", "Dogs bark"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    f = analysis.transformed_values(tr, "encoder", net=net)  # (B, L, H, T, d_model)
    alpha = tr.attentions["encoder"]  # (B, L, H, T, T)
    out = torch.einsum("blhqk,blhkm->blqm", alpha, f)
    bias = torch.stack([layer.self_attn.w_o.bias for layer in net.encoder.layers])  # (L, d)
    torch.testing.assert_close(out + bias[None, :, None], tr.attn_out["encoder"], atol=1e-5, rtol=0)


def test_padded_keys_carry_no_norm_and_summed_is_at_most_the_per_head_sum(bert):
    net, tok = bert
    enc = tok(["A Titan RTX has 24GB of VRAM", "I have a dog"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    norms = analysis.norm_attention(tr, net=net)
    summed = analysis.norm_attention_summed(tr, net=net)
    pad = enc["attention_mask"][1] == 0
    assert torch.all(norms[1, ..., pad] == 0) and torch.all(summed[1, ..., pad] == 0)
    assert torch.all(summed <= norms.sum(2) + 1e-5)  # triangle inequality


@pytest.mark.parametrize("stack", ["encoder", "decoder", "cross"])
def test_every_stack_of_an_encoder_decoder_matches_explicit_vectors(stack):
    net = Transformer(PRESETS["seed000-tiny"])
    src = net.tokenizer(["hello there", "hi"], padding=True)
    tgt = net.tokenizer(["bonjour", "salut!"], padding=True)
    tr = net.trace(
        src["input_ids"],
        attention_mask=src["attention_mask"],
        tgt_ids=tgt["input_ids"],
        tgt_attention_mask=tgt["attention_mask"],
    )
    layers = net.encoder.layers if stack == "encoder" else net.decoder.layers
    d_head = net.config.d_head
    for layer, block in enumerate(layers):
        w_o = (block.cross_attn if stack == "cross" else block.self_attn).w_o.weight
        v = tr.values[stack][:, layer]  # (B, H, T_k, d_head)
        f = torch.stack(
            [v[:, h] @ w_o[:, h * d_head : (h + 1) * d_head].T for h in range(v.shape[1])], 1
        )  # (B, H, T_k, d_model)
        vec = tr.attentions[stack][:, layer, ..., None] * f[:, :, None]  # (B, H, T_q, T_k, d)
        ours = analysis.norm_attention(tr, stack, net=net)[:, layer]
        summed = analysis.norm_attention_summed(tr, stack, net=net)[:, layer]
        torch.testing.assert_close(ours, vec.norm(dim=-1), atol=1e-5, rtol=0)
        torch.testing.assert_close(summed, vec.sum(1).norm(dim=-1), atol=1e-5, rtol=0)


def test_without_the_model_the_error_says_what_to_pass(bert):
    net, tok = bert
    tr = net.trace(tok(["hi"], return_tensors="pt")["input_ids"])
    with pytest.raises(ValueError, match="pass net="):
        analysis.norm_attention(tr, "encoder")
    other = Transformer(PRESETS["seed000-tiny"])
    with pytest.raises(ValueError, match="the model that made the trace"):
        analysis.norm_attention(tr, "encoder", net=other)


def test_a_trace_that_carries_w_o_needs_no_model(bert):
    """The wiring contract: trace.w_o = {stack: [L, d_model, d_model]} (nn.Linear layout)."""
    net, tok = bert
    tr = net.trace(tok(["time flies like an arrow"], return_tensors="pt")["input_ids"])
    with_net = analysis.norm_attention_summed(tr, "encoder", net=net)
    tr.w_o = {"encoder": torch.stack([layer.self_attn.w_o.weight for layer in net.encoder.layers])}
    torch.testing.assert_close(analysis.norm_attention_summed(tr, "encoder"), with_net)
