"""score_breakdown adds up: parts sum to the trace's score, its softmax to the trace's weight."""

from __future__ import annotations

import json
import math

import pytest
import torch.nn.functional as F

import analysis
from model import PRESETS, Transformer

TOL = 1e-5


def trace_of(preset: str, text: str = "time flies like an arrow", **options):
    net = Transformer(PRESETS[preset])
    ids = net.tokenizer([text])["input_ids"]
    if net.config.arch == "encoder-decoder":
        options.setdefault("tgt_ids", net.tokenizer(["le temps"])["input_ids"])
    return net, net.trace(ids, **options)


def assert_adds_up(out: dict) -> None:
    split = out["split"]
    assert split["available"], split["reason"]
    assert math.fsum(t["value"] for t in split["terms"]) == pytest.approx(split["sum"], abs=1e-12)
    assert split["difference"] < TOL and split["q_difference"] < TOL
    assert split["k_difference"] < TOL
    assert abs(out["score"] - out["score_trace"]) < TOL


@pytest.mark.parametrize(
    ("preset", "stack"),
    [
        ("seed002-encoder", "encoder"),  # post-norm, sinusoidal: x = token + position exactly
        ("seed003-encdec", "decoder"),
        ("seed001-prenorm", "encoder"),  # pre-norm: through LayerNorm with its measured σ
        ("seed001-decoder", "decoder"),
        ("seed004-encoder", "encoder"),  # embedding LayerNorm, then pre-norm LayerNorm
    ],
)
def test_token_and_position_parts_sum_to_the_traced_score(preset, stack):
    net, tr = trace_of(preset)
    for head, query, key in [(0, 3, 1), (1, 5, 5), (3, 2, 0)]:
        assert_adds_up(analysis.score_breakdown(tr, stack, 0, head, query, key, net=net))


def test_bert_split_has_token_type_and_adds_up(bert):
    net, tok = bert
    enc = tok(["time flies like an arrow"], return_tensors="pt")
    tr = net.trace(enc["input_ids"], token_type_ids=enc["token_type_ids"])
    out = analysis.score_breakdown(tr, "encoder", 0, 2, 3, 2, net=net)
    assert out["split"]["parts"] == ["token", "position", "token_type", "bias"]
    assert_adds_up(out)


def test_without_layernorm_the_parts_are_the_plain_projections():
    """seed002: x = token + position, so q_pos = pos W_Q^h and k_pos = pos W_K^h by hand."""
    net, tr = trace_of("seed002-encoder")
    layer0, head, query, key = net.encoder.layers[0].self_attn, 2, 4, 1
    d_head = net.config.d_head
    rows = slice(head * d_head, (head + 1) * d_head)
    emb = tr.embeddings["encoder"]

    def part(linear, vector):
        return F.linear(vector, linear.weight[rows].detach())  # no bias: the bias is its own part

    terms = {
        (t["query_part"], t["key_part"]): t["value"]
        for t in analysis.score_breakdown(tr, "encoder", 0, head, query, key, net=net)["split"][
            "terms"
        ]
    }
    pos = emb["position"]
    tok = emb["token"][0]
    expected_pp = part(layer0.w_q, pos[query]) @ part(layer0.w_k, pos[key]) / math.sqrt(d_head)
    expected_tp = part(layer0.w_q, tok[query]) @ part(layer0.w_k, pos[key]) / math.sqrt(d_head)
    assert terms["position", "position"] == pytest.approx(float(expected_pp), abs=1e-6)
    assert terms["token", "position"] == pytest.approx(float(expected_tp), abs=1e-6)


def test_positions_switched_off_leave_no_position_part():
    net, tr = trace_of("seed002-encoder", positions=False)
    out = analysis.score_breakdown(tr, "encoder", 0, 1, 4, 2, net=net)
    assert_adds_up(out)
    assert all(t["value"] == 0 for t in out["split"]["terms"] if "position" in t.values())


def test_softmax_row_weight_and_context_are_the_traces(bert):
    net, tok = bert
    enc = tok(["the cat sat", "a dog barked at the moon"], padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    out = analysis.score_breakdown(tr, "encoder", 3, 7, 1, 2, item=0, net=net)
    alpha = tr.attentions["encoder"][0, 3, 7, 1]  # (T,)
    values = tr.values["encoder"][0, 3, 7]  # (T, d_head)
    assert out["weight"] == pytest.approx(float(alpha[2]), abs=1e-7)
    assert out["weight_recomputed"] == pytest.approx(out["weight"], abs=1e-6)
    assert out["exp"] / out["partition"] == pytest.approx(out["weight"], abs=1e-6)
    assert out["row_sum"] == pytest.approx(1.0, abs=1e-6)
    assert out["row"] == pytest.approx(alpha.tolist(), abs=1e-7)
    assert out["context"] == pytest.approx((alpha @ values).tolist(), abs=1e-5)
    assert out["weighted_value"] == pytest.approx((alpha[2] * values[2]).tolist(), abs=1e-6)
    assert out["context_check"]["available"] and out["context_check"]["difference"] < TOL
    assert out["split"]["available"] is False and "layer 0" in out["split"]["reason"]
    padded = analysis.score_breakdown(tr, "encoder", 3, 7, 1, 6, item=0, net=net)
    assert padded["mask"] is False and padded["mask_value"] == -math.inf
    assert padded["weight"] == 0 and padded["exp"] == 0
    json.dumps(out)  # plain Python numbers and lists


def test_a_future_key_is_masked_in_the_decoder():
    net, tr = trace_of("seed001-decoder")
    out = analysis.score_breakdown(tr, "decoder", 2, 1, 3, 5, net=net)
    assert out["mask"] is False and out["mask_value"] == -math.inf
    assert out["weight"] == 0.0 and out["weight_recomputed"] == 0.0
    assert out["row_sum"] == pytest.approx(1.0, abs=1e-6)
    assert sum(out["row"][4:]) == 0


def test_cross_attention_and_missing_net_say_why_there_is_no_split():
    net, tr = trace_of("seed000-tiny")
    cross = analysis.score_breakdown(tr, "cross", 0, 0, 1, 2, net=net)
    assert not cross["split"]["available"] and cross["context_check"]["difference"] < TOL
    bare = analysis.score_breakdown(tr, "encoder", 0, 0, 1, 2)
    assert not bare["split"]["available"] and "pass net" in bare["split"]["reason"]
    assert abs(bare["score"] - bare["score_trace"]) < TOL
    with pytest.raises(ValueError, match="key 99 is out of range"):
        analysis.score_breakdown(tr, "encoder", 0, 0, 1, 99)


@pytest.mark.parametrize(
    ("preset", "stack"), [("seed002-encoder", "encoder"), ("seed003-encdec", "cross")]
)
def test_one_score_replays_one_layer_and_keeps_nothing(preset, stack):
    """The breakdown reads one layer's Q, K, V and output: the trace stays as lean as it was (a
    whole-stack replay of BERT-large at 512 tokens would cost seconds before the tab draws)."""
    net, tr = trace_of(preset)
    lean = tr.nbytes()
    out = analysis.score_breakdown(tr, stack, 1, 0, 0, 0, net=net)
    assert out["context_check"]["difference"] < TOL
    assert tr._lazy == {} and tr.nbytes() == lean
