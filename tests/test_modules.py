"""The seed modules one by one: positional encoding, attention, masks, FFN, Add & Norm."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from model import TransformerConfig
from model.attention import MultiHeadAttention, fused_attention, scaled_dot_product_attention
from model.embeddings import SinusoidalPositionalEncoding, sinusoid_table
from model.layers import AddNorm, PositionwiseFeedForward
from model.masks import causal_mask, cross_mask, padding_mask, padding_mask_query_key
from model.sites import Intervention


def test_sinusoidal_pe_follows_the_seed_formula():
    d_model, table = 16, sinusoid_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_pe_is_a_buffer_not_a_parameter():
    pe = SinusoidalPositionalEncoding(32, 8)
    assert list(pe.parameters()) == []
    assert "encoding" in dict(pe.named_buffers())
    assert pe(5).shape == (5, 8)


def test_attention_rows_sum_to_one_and_return_weights_and_raw_scores():
    q, k, v = torch.randn(3, 2, 5, 8), torch.randn(3, 2, 6, 8), torch.randn(3, 2, 6, 4)
    out, weights, scores = scaled_dot_product_attention(q, k, v)
    assert out.shape == (3, 2, 5, 4) and weights.shape == (3, 2, 5, 6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 5))
    torch.testing.assert_close(scores, q @ k.transpose(-2, -1) / math.sqrt(8))
    torch.testing.assert_close(out, weights @ v)


def test_masked_keys_get_exactly_zero_and_rows_still_sum_to_one():
    q, k, v = torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8)
    mask = padding_mask(torch.tensor([[1, 1, 1, 0]]), 4)[:, None]  # (1, 1, 4, 4)
    _, weights, scores = scaled_dot_product_attention(q, k, v, mask)
    assert torch.all(weights[..., 3] == 0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 1, 4))
    assert torch.isfinite(scores).all()  # scores are kept from before masking


def test_fully_masked_rows_yield_zeros_not_nan():
    mask = padding_mask_query_key(torch.tensor([[1, 1, 0]]), torch.tensor([[1, 1, 0]]))
    q = k = v = torch.randn(1, 1, 3, 4)
    out, weights, _ = scaled_dot_product_attention(q, k, v, mask[:, None])
    assert not torch.isnan(weights).any() and not torch.isnan(out).any()
    assert torch.all(weights[0, 0, 2] == 0)  # the padded query has nothing to attend to
    torch.testing.assert_close(weights[0, 0, :2].sum(-1), torch.ones(2))


def test_mask_variants_have_the_seed_003_meaning():
    m = torch.tensor([[1, 1, 0]])
    keys_only = padding_mask(m, 3)[0]
    query_and_key = padding_mask_query_key(m, m)[0]
    assert keys_only.tolist() == [[True, True, False]] * 3
    assert query_and_key.tolist() == [[True, True, False], [True, True, False], [False] * 3]
    assert causal_mask(3).tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]
    combined = keys_only & causal_mask(3)
    assert combined.dtype == torch.bool and combined.tolist()[2] == [True, True, False]
    cm = cross_mask(torch.ones(1, 2), torch.tensor([[1, 1, 0]]))
    assert cm.shape == (1, 2, 3) and cm[0].tolist() == [[True, True, False]] * 2


@pytest.mark.parametrize("kind", ["none", "keys", "causal", "causal_and_keys", "empty_row"])
def test_the_fused_kernel_computes_the_explicit_attention_within_1e_5(kind):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)
    real = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    masks = {
        "none": None,
        "keys": padding_mask(real, 7),
        "causal": causal_mask(7).expand(2, 7, 7),
        "causal_and_keys": padding_mask(real, 7) & causal_mask(7),
        "empty_row": padding_mask_query_key(real, real),  # padded queries see nothing
    }
    mask = masks[kind] if masks[kind] is None else masks[kind][:, None]  # (B, 1, T, T)
    explicit = scaled_dot_product_attention(q, k, v, mask)[0]
    torch.testing.assert_close(fused_attention(q, k, v, mask), explicit, atol=1e-5, rtol=0)


def test_a_pass_without_weights_uses_the_fused_kernel_and_returns_the_same_output():
    cfg = TransformerConfig(d_model=16, n_heads=4)
    mha = MultiHeadAttention(cfg).eval()
    x = torch.randn(2, 6, 16)
    mask = padding_mask(torch.tensor([[1] * 6, [1] * 3 + [0] * 3]), 6)
    out, found = mha(x, x, mask)
    fused_out, fused = mha(x, x, mask, Intervention(weights=False).at("attn."))
    assert found["pattern"] is not None and fused["pattern"] is None  # no weights were made
    torch.testing.assert_close(fused_out, out, atol=1e-5, rtol=0)


def test_multi_head_split_and_concat_are_inverse():
    mha = MultiHeadAttention(TransformerConfig(d_model=12, n_heads=3))
    x = torch.randn(2, 5, 12)
    heads = mha.split(x)
    assert heads.shape == (2, 3, 5, 4)
    torch.testing.assert_close(heads[:, 1], x[..., 4:8])  # head 1 owns dims 4..7
    torch.testing.assert_close(mha.concat(heads), x)


def test_multi_head_attention_equals_per_head_attention_then_w_o():
    cfg = TransformerConfig(d_model=8, n_heads=2)
    mha = MultiHeadAttention(cfg).eval()
    x = torch.randn(1, 4, 8)
    out, rec = mha(x, x)
    heads = []
    for h in range(2):
        sl = slice(4 * h, 4 * h + 4)
        q = x @ mha.w_q.weight[sl].T + mha.w_q.bias[sl]
        k = x @ mha.w_k.weight[sl].T + mha.w_k.bias[sl]
        v = x @ mha.w_v.weight[sl].T + mha.w_v.bias[sl]
        p = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1)
        torch.testing.assert_close(rec["pattern"][:, h], p)
        heads.append(p @ v)
    torch.testing.assert_close(out, mha.w_o(torch.cat(heads, dim=-1)))


def test_seed_003_conv1d_ffn_is_the_same_function_as_the_linear_ffn():
    cfg = TransformerConfig(d_model=16, d_ff=32, n_heads=2)
    ffn = PositionwiseFeedForward(cfg).eval()
    conv1 = nn.Conv1d(16, 32, kernel_size=1)
    conv2 = nn.Conv1d(32, 16, kernel_size=1)
    with torch.no_grad():
        conv1.weight.copy_(ffn.fc1.weight[:, :, None])
        conv1.bias.copy_(ffn.fc1.bias)
        conv2.weight.copy_(ffn.fc2.weight[:, :, None])
        conv2.bias.copy_(ffn.fc2.bias)
    x = torch.randn(3, 7, 16)
    seed_003 = conv2(torch.relu(conv1(x.transpose(1, 2)))).transpose(1, 2)  # PoswiseFFN.forward
    torch.testing.assert_close(ffn(x), seed_003, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_add_and_norm_places_the_layer_norm_as_named(norm):
    add_norm = AddNorm(TransformerConfig(d_model=8, n_heads=2, norm=norm)).eval()
    x = torch.randn(2, 3, 8)

    def f(h):
        return 2 * h, {}

    out, sub_out, _ = add_norm(x, f)
    if norm == "post":
        torch.testing.assert_close(out, add_norm.norm(x + 2 * x))
        torch.testing.assert_close(sub_out, 2 * x)
    else:
        torch.testing.assert_close(out, x + 2 * add_norm.norm(x))
