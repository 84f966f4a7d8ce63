"""Attention + residual + LayerNorm norms (Kobayashi et al. 2021) equal the paper's formulas
written here over Hugging Face BertModel's layers."""

from __future__ import annotations

import pytest
import torch

import analysis
from model import load_trained

TOL = 1e-4


def kobayashi(hf_bert, enc):
    """Per layer (norms [B, T, T], mixing ratio [B, T]) from the paper's formulas on HF's layers.

    The vector key j adds to token i: v_ij = Σ_h α_ij^h f_h(x_j) + δ_ij x_i, f_h(x) = (x W_V^h +
    b_V^h) W_O^h, built head by head; LayerNorm's share: (v_ij - mean(v_ij)) / s_i ⊙ γ, with s_i
    the standard deviation (plus ε) of what the LayerNorm reads, x_i + attention output.
    """
    with torch.no_grad():
        ref = hf_bert(**enc, output_attentions=True, output_hidden_states=True)
        n_heads = hf_bert.config.num_attention_heads
        for layer, block in enumerate(hf_bert.encoder.layer):
            x = ref.hidden_states[layer]  # (B, T, d)
            batch, t, d = x.shape
            d_head = d // n_heads
            alpha = ref.attentions[layer]  # (B, H, T, T)
            w_o, ln = block.attention.output.dense, block.attention.output.LayerNorm
            v = block.attention.self.value(x).view(batch, t, n_heads, d_head)  # (B, T, H, d_head)
            vec = torch.zeros(batch, t, t, d)  # (B, T_q, T_k, d)
            for h in range(n_heads):
                f = v[:, :, h] @ w_o.weight[:, h * d_head : (h + 1) * d_head].T  # (B, T_k, d)
                vec += alpha[:, h, :, :, None] * f[:, None]
            vec += torch.eye(t)[None, :, :, None] * x[:, :, None]  # the residual, j = i only
            attn_out = w_o(torch.einsum("bhqk,bkhe->bqhe", alpha, v).reshape(batch, t, d))
            reads = x + attn_out  # (B, T, d): the LayerNorm's input
            s = (reads.var(-1, unbiased=False) + ln.eps).sqrt()  # (B, T)
            share = (vec - vec.mean(-1, keepdim=True)) / s[:, :, None, None] * ln.weight
            keep = torch.stack([share[:, i, i] for i in range(t)], 1)  # (B, T, d)
            mix = share.sum(2) - keep
            yield (
                layer,
                share.norm(dim=-1),
                mix.norm(dim=-1) / (mix.norm(dim=-1) + keep.norm(dim=-1)),
            )


def test_block_norms_and_mixing_ratio_equal_the_formulas_on_a_padded_batch(bert, hf_bert):
    net, tok = bert
    enc = tok(["A Titan RTX has 24GB of VRAM", "I have a dog"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    ours = analysis.norm_attention_block(tr, "encoder")  # (B, L, T, T)
    with_net = analysis.norm_attention_block(tr, "encoder", net=net)
    torch.testing.assert_close(ours, with_net)
    per_token = analysis.mixing_ratio(tr, "encoder", per_token=True)  # (B, L, T)
    per_layer = analysis.mixing_ratio(tr, "encoder")  # (B, L)
    assert ours.shape == (2, 6, 12, 12) and per_layer.shape == (2, 6)
    real = enc["attention_mask"].bool()
    for layer, norms, ratio in kobayashi(hf_bert, enc):
        for b in range(2):
            rows = real[b]
            got = ours[b, layer][rows][:, rows]
            torch.testing.assert_close(got, norms[b][rows][:, rows], atol=TOL, rtol=0)
            torch.testing.assert_close(per_token[b, layer][rows], ratio[b][rows], atol=TOL, rtol=0)
            mean = ratio[b][rows].mean()
            torch.testing.assert_close(per_layer[b, layer], mean, atol=TOL, rtol=0)
    assert torch.all(ours[1][:, ~real[1]] == 0) and torch.all(ours[1][:, :, ~real[1]] == 0)


def test_a_short_text_gets_positive_norms_and_ratios_inside_0_1(bert):
    net, tok = bert
    tr = net.trace(tok(["hello"], return_tensors="pt")["input_ids"])
    ours = analysis.norm_attention_block(tr)  # (1, L, 3, 3)
    assert torch.all(ours > 0) and torch.isfinite(ours).all()
    ratios = analysis.mixing_ratio(tr)
    assert torch.all((ratios > 0) & (ratios < 1))


def test_a_pre_norm_decoder_gets_attention_plus_residual():
    net = load_trained("induction")
    enc = net.tokenizer(["abcab"])
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    ours = analysis.norm_attention_block(tr, "decoder")  # (1, L, T, T)
    alpha = tr.attentions["decoder"][0].double()  # (L, H, T, T)
    f = analysis.transformed_values(tr, "decoder", net)[0].double()  # (L, H, T, d)
    x = tr.hidden_states["decoder"][0, :-1].double()  # (L, T, d)
    t = alpha.shape[-1]
    for layer in range(2):
        for i in range(t):
            for j in range(t):
                v = sum(alpha[layer, h, i, j] * f[layer, h, j] for h in range(4))
                v = v + (x[layer, i] if i == j else 0)
                assert float(ours[0, layer, i, j]) == pytest.approx(float(v.norm()), abs=1e-4)
    assert torch.all(ours[0].triu(1) == 0)


def test_cross_attention_gets_a_sentence(bert):
    from model import PRESETS, Transformer

    net = Transformer(PRESETS["seed000-tiny"])
    ids = net.tokenizer(["hi"])["input_ids"]
    tr = net.trace(ids, tgt_ids=ids)
    with pytest.raises(ValueError, match="pick 'encoder' or 'decoder'"):
        analysis.norm_attention_block(tr, "cross")
