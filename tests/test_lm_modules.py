"""The language-model modules one at a time: RMSNorm, RoPE, the gated MLP, grouped-query attention,
the sliding-window band, and the config fields that choose them (defaults change nothing)."""

from __future__ import annotations

import pytest
import torch

from model import PRESETS, Transformer, TransformerConfig
from model.attention import MultiHeadAttention
from model.gated_mlp import GatedFeedForward
from model.layers import ACTIVATION_MODULES, PositionwiseFeedForward
from model.masks import causal_mask, sliding_window_mask
from model.norms import RMSNorm
from model.rotary import RotaryEmbedding

LM = TransformerConfig(
    arch="decoder", vocab_size=50, d_model=64, n_heads=8, n_kv_heads=2, n_layers=2, d_ff=96,
    norm="pre", norm_kind="rms", positions="rotary", rope_theta=500000.0, mlp="gated",
    activation="silu", attn_bias=False, attn_out_bias=False, mlp_bias=False, lm_head=True,
    lm_head_bias=False, dropout=0.0,
)  # fmt: skip


def test_rmsnorm_equals_llamas():
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    ours, theirs = RMSNorm(64, 1e-6), LlamaRMSNorm(64, eps=1e-6)
    with torch.no_grad():
        ours.weight.normal_()
        theirs.weight.copy_(ours.weight)
    x = torch.randn(2, 5, 64) * 3
    assert torch.equal(ours(x), theirs(x))
    rms = x.pow(2).mean(-1, keepdim=True).sqrt()
    torch.testing.assert_close(ours(x), x / rms * ours.weight, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_rope_equals_llamas_and_depends_on_the_offset_only(theta):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    d_head, t = 16, 12
    hf = LlamaRotaryEmbedding(LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=theta))
    q, k = torch.randn(2, 4, t, d_head), torch.randn(2, 4, t, d_head)
    cos, sin = hf(q, torch.arange(t)[None])
    hf_q, hf_k = apply_rotary_pos_emb(q, k, cos, sin)
    turn = RotaryEmbedding(d_head, theta).rotation(t)
    assert torch.equal(turn(q), hf_q) and torch.equal(turn(k), hf_k)
    # One query and one key, moved together along the text: the same score.
    one_q, one_k = q[:1, :1, :1].expand(1, 1, t, d_head), k[:1, :1, :1].expand(1, 1, t, d_head)
    scores = turn(one_q)[0, 0] @ turn(one_k)[0, 0].T  # (T, T)
    for offset in range(3):
        diagonal = scores.diagonal(-offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal), atol=1e-4, rtol=0)


def test_gated_mlp_equals_llamas():
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    theirs = LlamaMLP(LlamaConfig(hidden_size=64, intermediate_size=96, mlp_bias=True))
    ours = GatedFeedForward(LM.replace(mlp_bias=True), ACTIVATION_MODULES["silu"]()).eval()
    names = {"w_gate": "gate_proj", "w_up": "up_proj", "w_down": "down_proj"}
    with torch.no_grad():
        for mine, hf_name in names.items():
            for part in ("weight", "bias"):
                getattr(getattr(ours, mine), part).copy_(getattr(getattr(theirs, hf_name), part))
    x = torch.randn(2, 5, 64)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=0)


def test_grouped_query_attention_shares_keys_within_a_group():
    attn = MultiHeadAttention(LM).eval()
    assert attn.w_q.weight.shape == (64, 64) and attn.w_k.weight.shape == (16, 64)
    assert attn.w_q.bias is None and attn.w_o.bias is None
    x = torch.randn(1, 7, 64)
    rotary = RotaryEmbedding(LM.d_head, LM.rope_theta).rotation(7)
    _, record = attn(x, x, causal_mask(7)[None], rotary=rotary)
    assert record["pattern"].shape == (1, 8, 7, 7)  # every query head has its own pattern
    assert [LM.kv_head_of(h) for h in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert torch.equal(record["k"][:, 0], record["k"][:, 3])
    assert not torch.equal(record["k"][:, 3], record["k"][:, 4])
    assert not torch.equal(record["pattern"][:, 0], record["pattern"][:, 1])  # own queries


def test_the_sliding_window_is_the_last_w_tokens_including_itself():
    band = sliding_window_mask(6, 3) & causal_mask(6)
    assert band.sum(dim=1).tolist() == [1, 2, 3, 3, 3, 3]
    assert band[5].nonzero().flatten().tolist() == [3, 4, 5]


def test_a_rotary_gqa_decoder_traces_with_every_field():
    net = Transformer(LM)
    tr = net.trace(torch.randint(0, 50, (2, 9)), torch.ones(2, 9, dtype=torch.long))
    assert tr.attentions["decoder"].shape == (2, 2, 8, 9, 9)
    assert tr.keys["decoder"].shape == tr.queries["decoder"].shape == (2, 2, 8, 9, 8)
    assert tr.keys_pre_rope["decoder"].shape == (2, 2, 8, 9, 8)
    assert set(tr.computed()) >= {"queries_pre_rope", "keys_pre_rope", "mlp_out"}
    assert tr.embeddings["decoder"]["position"].shape == (9, 64)
    assert "RMSNorm" in " ".join(net.param_counts())
    assert sum(net.param_counts().values()) == net.get_num_params()


def test_defaults_keep_every_preset_as_it_was():
    for config in PRESETS.values():
        assert (config.norm_kind, config.mlp, config.kv_heads) == ("layer", "ffn", config.n_heads)
        assert (config.n_kv_heads, config.sliding_window, config.tie_lm_head) == (None, None, False)
        assert config.attn_bias and config.attn_out_bias and config.mlp_bias
    net = Transformer(PRESETS["seed001-decoder"])
    layer = net.decoder.layers[0]
    assert isinstance(layer.ffn, PositionwiseFeedForward)
    assert isinstance(layer.add_norm1.norm, torch.nn.LayerNorm)
    assert layer.self_attn.w_k.weight.shape == (128, 128) and layer.self_attn.w_k.bias is not None
    assert net.embedding.rotary is None
    # A config written before these fields (a trained model's card) reads back the same.
    old = {k: v for k, v in PRESETS["seed000-tiny"].to_dict().items() if k != "norm_kind"}
    assert TransformerConfig(**old) == PRESETS["seed000-tiny"]


BAD = {
    "kv heads not dividing": ({"n_kv_heads": 3}, "multiple of n_kv_heads"),
    "kv heads zero": ({"n_kv_heads": 0}, "positive integer"),
    "odd head for rope": ({"d_model": 24, "n_heads": 8, "n_kv_heads": None}, "must be even"),
    "theta": ({"rope_theta": 0.5}, "rope_theta"),
    "tie without head": ({"lm_head": False, "tie_lm_head": True}, "lm_head=True"),
    "window on an encoder": ({"arch": "encoder", "sliding_window": 4}, "decoder-only"),
    "norm kind": ({"norm_kind": "batch"}, "norm_kind"),
    "mlp": ({"mlp": "moe"}, "mlp must be one of"),
    "positions": ({"positions": "alibi"}, "positions must be one of"),
}


@pytest.mark.parametrize("changes, fragment", BAD.values(), ids=BAD)
def test_bad_lm_configs_say_why(changes, fragment):
    with pytest.raises(ValueError, match=fragment):
        LM.replace(**changes)


def test_a_tied_head_is_the_embedding_matrix():
    net = Transformer(LM.replace(tie_lm_head=True))
    assert net.lm_head.weight is net.embedding.tok_emb.weight
    assert "LM head" not in net.param_counts()
    assert sum(net.param_counts().values()) == net.get_num_params()


def test_llama3_rope_scaling_equals_transformers():
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    scaling = {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}
    scaling["original_max_position_embeddings"] = 8192
    hf_config = LlamaConfig(  # Llama-3.2-1B's head and RoPE settings
        hidden_size=2048, num_attention_heads=32,
        rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, **scaling},
    )  # fmt: skip
    theirs, _ = ROPE_INIT_FUNCTIONS["llama3"](hf_config, "cpu")
    ours = RotaryEmbedding(64, 500000.0, tuple(scaling.values())).inv_freq
    plain = RotaryEmbedding(64, 500000.0).inv_freq
    assert torch.equal(ours, theirs)
    assert (ours < plain).sum() > 8 and torch.equal(ours[:4], plain[:4])  # slow pairs slowed
