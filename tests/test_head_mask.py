"""Head ablation: trace(..., head_mask=m) removes heads' contexts before W_O (HF's convention)."""

from __future__ import annotations

import copy

import pytest
import torch

from model import PRESETS, Transformer, TransformerConfig

SMALL = TransformerConfig(name="small", d_model=32, n_heads=4, n_layers=2, d_ff=64, seed=3)


def batch(net: Transformer, texts=("我喜欢你们", "你喜欢我")):
    enc = net.tokenizer(list(texts), padding=True)
    return enc["input_ids"], enc["attention_mask"]


def zero_w_o_columns(net: Transformer, stack: str, layer: int, head: int) -> Transformer:
    """A copy whose W_O ignores one head: its d_head input columns are zero."""
    clone = copy.deepcopy(net)
    layers = (clone.encoder if stack == "encoder" else clone.decoder).layers
    attn = layers[layer].cross_attn if stack == "cross" else layers[layer].self_attn
    d_head = clone.config.d_head
    with torch.no_grad():
        attn.w_o.weight[:, head * d_head : (head + 1) * d_head] = 0.0
    return clone


def one_head_off(cfg: TransformerConfig, layer: int, head: int) -> torch.Tensor:
    mask = torch.ones(cfg.n_layers, cfg.n_heads)
    mask[layer, head] = 0.0
    return mask


@pytest.mark.parametrize(("layer", "head"), [(0, 1), (1, 3)])
def test_an_ablated_head_equals_a_model_whose_w_o_ignores_that_head(layer, head):
    net = Transformer(SMALL)
    ids, mask = batch(net)
    ablated = net.trace(ids, mask, head_mask=one_head_off(SMALL, layer, head))
    by_hand = zero_w_o_columns(net, "encoder", layer, head).trace(ids, mask)
    torch.testing.assert_close(
        ablated.hidden_states["encoder"], by_hand.hidden_states["encoder"], atol=1e-6, rtol=0
    )
    plain = net.trace(ids, mask)
    assert (ablated.outputs["encoder"] - plain.outputs["encoder"]).abs().max() > 1e-3


def test_decoder_only_and_cross_attention_heads_ablate_like_zeroed_w_o_columns():
    dec = Transformer(PRESETS["seed001-decoder"])
    ids, mask = batch(dec)
    cfg = dec.config
    ablated = dec.trace(ids, mask, head_mask=one_head_off(cfg, 2, 0), with_logits=True)
    by_hand = zero_w_o_columns(dec, "decoder", 2, 0).trace(ids, mask, with_logits=True)
    torch.testing.assert_close(ablated.logits, by_hand.logits, atol=1e-5, rtol=0)

    ed = Transformer(PRESETS["seed000-tiny"])
    tgt, tgt_mask = batch(ed, ("I like", "you"))
    m = {"cross": one_head_off(ed.config, 1, 2)}
    ablated = ed.trace(ids, mask, tgt_ids=tgt, tgt_attention_mask=tgt_mask, head_mask=m)
    by_hand = zero_w_o_columns(ed, "cross", 1, 2).trace(
        ids, mask, tgt_ids=tgt, tgt_attention_mask=tgt_mask
    )
    torch.testing.assert_close(
        ablated.outputs["decoder"], by_hand.outputs["decoder"], atol=1e-6, rtol=0
    )
    torch.testing.assert_close(ablated.outputs["encoder"], by_hand.outputs["encoder"])
    assert set(ablated.head_mask) == {"cross"}


def test_a_plain_mask_on_an_encoder_decoder_applies_to_the_encoder():
    ed = Transformer(PRESETS["seed000-tiny"])
    ids, mask = batch(ed)
    tgt, tgt_mask = batch(ed, ("I like", "you"))
    m = one_head_off(ed.config, 0, 0)
    plain = ed.trace(ids, mask, tgt_ids=tgt, tgt_attention_mask=tgt_mask, head_mask=m)
    named = ed.trace(ids, mask, tgt_ids=tgt, tgt_attention_mask=tgt_mask, head_mask={"encoder": m})
    assert torch.equal(plain.outputs["decoder"], named.outputs["decoder"])
    assert set(plain.head_mask) == {"encoder"}


def test_a_mask_of_all_ones_equals_no_mask_exactly():
    net = Transformer(SMALL)
    ids, mask = batch(net)
    plain = net.trace(ids, mask)
    for ablation in ("zero", "mean"):
        ones = net.trace(ids, mask, head_mask=torch.ones(2, 4, dtype=torch.bool), ablation=ablation)
        assert torch.equal(ones.hidden_states["encoder"], plain.hidden_states["encoder"])
        assert torch.equal(ones.attentions["encoder"], plain.attentions["encoder"])


def test_the_ablated_heads_weights_are_still_reported():
    net = Transformer(SMALL)
    ids, mask = batch(net)
    plain = net.trace(ids, mask)
    ablated = net.trace(ids, mask, head_mask=torch.zeros(2, 4))
    # Layer 0 reads the embeddings, which no ablation touches: its weights are the same.
    assert torch.equal(ablated.attentions["encoder"][:, 0], plain.attentions["encoder"][:, 0])
    rows = ablated.attentions["encoder"].sum(-1)  # (B, L, H, T)
    real = mask.bool()[:, None, None, :].expand_as(rows)
    torch.testing.assert_close(rows[real], torch.ones_like(rows[real]))
    assert ablated.ablation == "zero" and ablated.head_mask["encoder"].sum() == 0


def test_mean_ablation_replaces_a_context_by_its_mean_over_real_queries():
    net = Transformer(SMALL)
    ids, mask = batch(net)  # item 1 is padded: its mean must skip the padding
    layer, head = 0, 2
    plain = net.trace(ids, mask)
    ablated = net.trace(ids, mask, head_mask=one_head_off(SMALL, layer, head), ablation="mean")
    pattern = plain.attentions["encoder"][:, layer]  # (B, H, T, T)
    z = pattern @ plain.values["encoder"][:, layer]  # (B, H, T, d_head)
    for b in range(ids.shape[0]):
        real = mask[b].bool()
        z[b, head] = z[b, head][real].mean(dim=0)  # every query gets the head's mean context
    attn = net.encoder.layers[layer].self_attn
    batch_size, n_heads, seq_len, d_head = z.shape
    concat = z.transpose(1, 2).reshape(batch_size, seq_len, n_heads * d_head)  # (B, T, d_model)
    expected = attn.w_o(concat)
    torch.testing.assert_close(ablated.attn_out["encoder"][:, layer], expected, atol=1e-6, rtol=0)


def test_forward_takes_the_same_head_mask_as_trace():
    dec = Transformer(PRESETS["seed001-decoder"])
    ids, mask = batch(dec)
    m = one_head_off(dec.config, 1, 1)
    logits = dec(ids, mask, head_mask=m, ablation="mean")
    traced = dec.trace(ids, mask, head_mask=m, ablation="mean", with_logits=True)
    torch.testing.assert_close(logits, traced.logits)


def test_bad_head_masks_are_explained():
    net = Transformer(SMALL)
    ids, mask = batch(net)
    with pytest.raises(ValueError, match=r"\[layers, heads\] = \[2, 4\]"):
        net.trace(ids, mask, head_mask=torch.ones(4))
    with pytest.raises(ValueError, match="this model's stacks"):
        net.trace(ids, mask, head_mask={"cross": torch.ones(2, 4)})
    with pytest.raises(ValueError, match="ablation must be"):
        net.trace(ids, mask, head_mask=torch.ones(2, 4), ablation="noise")
