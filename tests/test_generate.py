"""Greedy generate() and the positions=False switch, on seeded random models."""

from __future__ import annotations

import pytest
import torch

from model import PRESETS, Transformer, TransformerConfig


@pytest.fixture(scope="module")
def dec():
    return Transformer(PRESETS["seed001-decoder"])


@pytest.fixture(scope="module")
def encdec():
    return Transformer(PRESETS["seed000-tiny"])


def greedy_by_hand(net: Transformer, ids: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        next_id = net(ids)[:, -1].argmax(-1, keepdim=True)  # (B, 1)
        ids = torch.cat([ids, next_id], dim=1)
    return ids


def test_a_decoder_only_model_continues_its_input(dec):
    ids = dec.tokenizer(["abcab"])["input_ids"]
    out = dec.generate(ids, max_new_tokens=6)
    assert out.shape == (1, 11)
    assert torch.equal(out[:, :5], ids)
    assert torch.equal(out, greedy_by_hand(dec, ids, 6))


def test_padded_texts_generate_as_if_alone(dec):
    enc = dec.tokenizer(["abcab", "xy"], padding=True)
    out = dec.generate(enc["input_ids"], max_new_tokens=4, attention_mask=enc["attention_mask"])
    alone = dec.generate(dec.tokenizer(["xy"])["input_ids"], max_new_tokens=4)
    assert torch.equal(out[1, :6], alone[0])
    assert (out[1, 6:] == dec.config.pad_id).all()


def test_an_encoder_decoder_starts_with_bos_and_matches_a_hand_loop(encdec):
    tok = encdec.tokenizer
    src = tok(["我喜欢你"])["input_ids"]
    out = encdec.generate(src, max_new_tokens=5)
    assert out[0, 0] == tok.bos_token_id and out.shape[1] <= 6
    tgt = torch.tensor([[tok.bos_token_id]])
    for _ in range(out.shape[1] - 1):
        next_id = encdec(src, tgt_ids=tgt)[:, -1].argmax(-1, keepdim=True)
        tgt = torch.cat([tgt, next_id], dim=1)
    assert torch.equal(out, tgt)


def test_the_returned_trace_rows_are_the_steps_that_chose_each_token(encdec, dec):
    src = encdec.tokenizer(["2026年11月22日"])["input_ids"]
    ids, trace = encdec.generate(src, max_new_tokens=5, return_trace=True)
    assert torch.equal(trace.tgt_ids, ids)
    assert torch.equal(trace.logits[0, :-1].argmax(-1), ids[0, 1:])
    assert trace.attentions["cross"].shape[3] == ids.shape[1]

    prompt = dec.tokenizer(["qzvk"])["input_ids"]
    ids, trace = dec.generate(prompt, max_new_tokens=3, return_trace=True)
    assert torch.equal(trace.logits[0, 3:-1].argmax(-1), ids[0, 4:])


def test_generate_needs_a_decoder():
    with pytest.raises(ValueError, match="needs a decoder"):
        Transformer(PRESETS["seed002-encoder"]).generate(torch.tensor([[5, 6]]))


def test_positions_off_drops_the_position_term_and_order():
    net = Transformer(TransformerConfig(d_model=32, n_heads=4, n_layers=2, d_ff=64, seed=1))
    tok = net.tokenizer
    a = tok(["我喜欢你"])["input_ids"]
    b = tok(["你喜欢我"])["input_ids"]  # the same characters, 我 and 你 swapped
    on_a, on_b = net.trace(a), net.trace(b)
    off_a, off_b = net.trace(a, positions=False), net.trace(b, positions=False)
    assert on_a.positions and not off_a.positions
    assert (off_a.embeddings["encoder"]["position"] == 0).all()
    # Without positions, an encoder is permutation-equivariant: each character keeps its vector.
    swap = [3, 1, 2, 0]
    torch.testing.assert_close(off_b.outputs["encoder"], off_a.outputs["encoder"][:, swap])
    assert (on_b.outputs["encoder"] - on_a.outputs["encoder"][:, swap]).abs().max() > 1e-3
    torch.testing.assert_close(net(a, positions=False), off_a.outputs["encoder"])
