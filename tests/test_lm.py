"""GPT-2, LLaMA, Qwen2 and Mistral checkpoints in our decoder equal transformers' own models.

Each checkpoint is built here from transformers' config classes with random weights (nothing is
downloaded), saved as safetensors beside a tiny byte-level BPE tokenizer trained in memory, and
loaded by ``model.load_lm``. Shapes are chosen to catch mistakes: an MLP width that is not 4·d, 4
query heads per key/value head, untied and tied heads, biases on W_Q/W_K/W_V only (Qwen2), RoPE
θ = 500000, a Mistral window shorter than the text, padded batches on either side.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from model import Transformer, load_lm

TOL = 1e-4  # float32, eager attention: measured 1e-7 to 1e-6 (docs/models.md)
VOCAB = 320  # more embedding rows than the tokenizer's 300 tokens, as real checkpoints have
SENTENCES = ["The cat sat on the mat.", "Attention is all you need.", "我喜欢你，你喜欢我。"]
TEXTS = ["The cat sat on the mat, and attention is all you need", "我喜欢你", "hello world"]
# family -> (config class, model class, config arguments)
SMALL = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 96}
GQA = {"num_attention_heads": 8, "num_key_value_heads": 2}  # 4 query heads per key/value head
CASES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", {
        "vocab_size": VOCAB, "n_embd": 64, "n_layer": 3, "n_head": 4, "n_inner": 96,
        "n_positions": 64, "bos_token_id": 0, "eos_token_id": 0}),
    "gpt2-untied": ("GPT2Config", "GPT2LMHeadModel", {
        "vocab_size": VOCAB, "n_embd": 64, "n_layer": 2, "n_head": 8,
        "n_positions": 64, "tie_word_embeddings": False, "activation_function": "gelu"}),
    "llama": ("LlamaConfig", "LlamaForCausalLM", {
        **SMALL, **GQA, "num_hidden_layers": 2, "rope_theta": 500000.0,
        "tie_word_embeddings": False}),
    "llama-biases": ("LlamaConfig", "LlamaForCausalLM", {
        **SMALL, "num_attention_heads": 4, "num_hidden_layers": 2, "attention_bias": True,
        "mlp_bias": True, "tie_word_embeddings": True}),
    "llama3-rope": ("LlamaConfig", "LlamaForCausalLM", {
        **SMALL, "num_attention_heads": 4, "num_key_value_heads": 1, "num_hidden_layers": 2,
        "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16},
        "tie_word_embeddings": True}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {
        **SMALL, **GQA, "hidden_size": 128, "intermediate_size": 200, "num_hidden_layers": 3,
        "tie_word_embeddings": True}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {
        **SMALL, **GQA, "num_hidden_layers": 2, "sliding_window": 4}),
    # QK-norm and heads of 32 dimensions where d_model / n_heads is 8
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {
        **SMALL, **GQA, "head_dim": 32, "num_hidden_layers": 2, "tie_word_embeddings": True}),
    # Gemma 3: sandwich norms of gain 1 + w, QK-norm, √d embeddings, GELU-tanh gates, heads
    # wider than d_model / n_heads, two sliding layers (window 3) around a full one, each
    # kind with its own RoPE base
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {
        **SMALL, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "query_pre_attn_scalar": 32, "num_hidden_layers": 3, "sliding_window": 3,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}},
        "max_position_embeddings": 64}),
}  # fmt: skip


def save_tokenizer(folder: Path) -> None:
    """A GPT-2-style byte-level BPE of 300 tokens trained in memory on three sentences."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        SENTENCES * 3, vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"]
    )
    end = "<|endoftext|>"
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token=end, bos_token=end)
    tok.save_pretrained(str(folder))


def build_hf(case: str, **changes):
    """transformers' model of a case, eager attention, with random weights far from their init
    (norm gains and biases away from 1 and 0, sharp attention) so that a swapped or missing
    weight shows."""
    import transformers

    config_class, model_class, kwargs = CASES[case]
    config = getattr(transformers, config_class)(**{**kwargs, **changes})
    config._attn_implementation = "eager"
    torch.manual_seed(1)
    hf = getattr(transformers, model_class)(config).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.add_(torch.randn_like(p) * (0.3 if "norm" in name or "ln" in name else 0.08))
    return hf


def save_checkpoint(folder: Path, case: str, **changes):
    """A checkpoint folder of a case (model.safetensors, config.json, the tokenizer)."""
    hf = build_hf(case, **changes)
    hf.save_pretrained(str(folder))
    save_tokenizer(folder)
    return hf


@pytest.fixture(scope="module", params=list(CASES))
def loaded(request, tmp_path_factory):
    """(case, our model, tokenizer, transformers' model) on the same weights."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = save_checkpoint(folder, request.param)
    net, tok = load_lm(folder, device="cpu")
    return request.param, net, tok, hf


def last_layer_output(hf):
    """The last decoder layer of a HF causal LM (its output is the residual before the final
    norm; HF's hidden_states[-1] is after it)."""
    base = hf.base_model
    return base.h[-1] if hasattr(base, "h") else base.layers[-1]


def differences(net, tok, hf, texts, padding_side="right") -> dict[str, float]:
    """Max |ours − HF| over real (unpadded) positions: attentions, hidden states, logits."""
    tok.padding_side = padding_side
    enc = tok(texts, padding=True, return_tensors="pt")
    tr = net.trace(enc["input_ids"], enc["attention_mask"], with_logits=True)
    captured = {}

    def keep(module, args, output):
        captured["last"] = output[0] if isinstance(output, tuple) else output

    hook = last_layer_output(hf).register_forward_hook(keep)
    with torch.no_grad():
        ref = hf(**enc, output_attentions=True, output_hidden_states=True)
    hook.remove()
    real = enc["attention_mask"].bool()  # (B, T)
    n_layers = net.config.n_layers
    assert len(ref.attentions) == n_layers and len(ref.hidden_states) == n_layers + 1

    def gap(ours, theirs):  # [B, T, ...] compared at real positions only
        return (ours - theirs).abs()[real].max().item()

    attentions = tr.attentions["decoder"]  # (B, L, H, T, T): real query rows, every key
    hidden = tr.hidden_states["decoder"]  # (B, L+1, T, d)
    return {
        "attentions": max(
            gap(attentions[:, i].transpose(1, 2), ref.attentions[i].transpose(1, 2))
            for i in range(n_layers)
        ),
        # HF's hidden_states: the embeddings, layers 1..L-1, then the last after the final norm.
        "hidden states": max(
            [gap(hidden[:, i], ref.hidden_states[i]) for i in range(n_layers)]
            + [gap(hidden[:, n_layers], captured["last"])]
        ),
        "outputs": gap(tr.outputs["decoder"], ref.hidden_states[n_layers]),
        "logits": gap(tr.logits, ref.logits),
    }


@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_every_attention_hidden_state_and_logit_matches_transformers(loaded, padding_side):
    _, net, tok, hf = loaded
    gaps = differences(net, tok, hf, TEXTS, padding_side)
    assert max(gaps.values()) < TOL, gaps


def test_one_text_without_padding_matches_too(loaded):
    _, net, tok, hf = loaded
    gaps = differences(net, tok, hf, [TEXTS[0]])
    assert max(gaps.values()) < TOL, gaps


def test_the_config_says_what_the_checkpoint_is(loaded):
    case, net, _, hf = loaded
    cfg, hf_cfg = net.config, hf.config
    assert cfg.arch == "decoder" and cfg.norm == "pre" and cfg.final_norm and cfg.lm_head
    assert cfg.tie_lm_head == hf_cfg.tie_word_embeddings
    if cfg.tie_lm_head:
        assert net.lm_head.weight is net.embedding.tok_emb.weight
    else:
        assert net.lm_head.weight.data_ptr() != net.embedding.tok_emb.weight.data_ptr()
    assert sum(net.param_counts().values()) == net.get_num_params()
    assert net.get_num_params() == sum(p.numel() for p in hf.parameters())
    if case.startswith("gpt2"):
        assert (cfg.norm_kind, cfg.positions, cfg.mlp) == ("layer", "learned", "ffn")
        assert cfg.activation == {"gpt2": "gelu_tanh", "gpt2-untied": "gelu"}[case]
        return
    assert (cfg.norm_kind, cfg.positions, cfg.mlp) == ("rms", "rotary", "gated")
    assert cfg.qk_norm == (case in ("qwen3", "gemma3"))
    assert (cfg.rope_llama3 is not None) == (case == "llama3-rope")
    if case == "gemma3":  # each layer kind its own RoPE base; the sliding band in two layers
        rope = hf_cfg.rope_parameters
        assert cfg.rope_theta == rope["full_attention"]["rope_theta"] == 1e6
        assert cfg.rope_local_theta == rope["sliding_attention"]["rope_theta"] == 1e4
        assert [cfg.is_local(i) for i in range(3)] == [True, False, True]
        assert cfg.sandwich_norm and cfg.norm_offset and cfg.embed_scale and cfg.d_head == 32
        rotary = hf.base_model.rotary_emb
        torch.testing.assert_close(
            net.embedding.rotary_local.inv_freq, rotary.sliding_attention_inv_freq
        )
        return
    assert cfg.rope_theta == hf_cfg.rope_parameters["rope_theta"]
    torch.testing.assert_close(net.embedding.rotary.inv_freq, hf.base_model.rotary_emb.inv_freq)
    assert cfg.kv_heads == hf_cfg.num_key_value_heads
    assert (cfg.attn_bias, cfg.attn_out_bias) == {
        "qwen2": (True, False),
        "llama-biases": (True, True),
    }.get(case, (False, False))
    assert cfg.sliding_window == (4 if case == "mistral" else None)


def test_the_mistral_window_is_a_band_of_the_last_keys(loaded):
    case, net, tok, _ = loaded
    if case != "mistral":
        pytest.skip("Mistral only")
    enc = tok([TEXTS[0]], return_tensors="pt")
    tr = net.trace(enc["input_ids"])
    n = enc["input_ids"].shape[1]
    assert n > 2 * net.config.sliding_window
    for i in range(n):
        seen = tr.attentions["decoder"][0, :, :, i] > 0  # (L, H, T_k)
        assert seen.any(dim=(0, 1)).nonzero().flatten().tolist() == list(
            range(max(0, i - 3), i + 1)
        )


def test_queries_and_keys_are_what_the_scores_are_made_of(loaded):
    """Rotary models: queries/keys after RoPE give the scores and the attention; the pre-RoPE
    fields equal HF's q_proj/k_proj outputs; GQA repeats a key/value head for its group."""
    case, net, tok, hf = loaded
    enc = tok([TEXTS[0]], return_tensors="pt")
    tr = net.trace(enc["input_ids"])
    cfg = net.config
    layers = range(cfg.n_layers)  # each layer's own mask: Gemma 3's local ones band the keys
    mask = torch.stack([tr.layer_mask("decoder", i) for i in layers], 1)[:, :, None]
    pattern = torch.softmax(tr.scores["decoder"].masked_fill(~mask, float("-inf")), dim=-1)
    torch.testing.assert_close(pattern, tr.attentions["decoder"], atol=1e-6, rtol=0)
    keys = tr.keys["decoder"]  # (B, L, H, T, d_head)
    for head in range(cfg.n_heads):
        first = cfg.kv_head_of(head) * (cfg.n_heads // cfg.kv_heads)
        assert torch.equal(keys[:, :, head], keys[:, :, first])
    if cfg.positions != "rotary":
        assert "decoder" not in tr.queries_pre_rope and len(tr.keys_pre_rope) == 0
        return
    seen = {}
    attn = hf.base_model.layers[1].self_attn
    # before RoPE: the projections, or with QK-norm (Qwen3, Gemma 3) what their norms give
    qk_norm = "norm" if getattr(attn, "q_norm", None) is not None else "proj"
    hooks = [
        getattr(attn, f"{kind}_{qk_norm}").register_forward_hook(
            lambda m, args, out, kind=kind: seen.__setitem__(kind, out)
        )
        for kind in ("q", "k")
    ]
    with torch.no_grad():
        hf(**enc)
    for hook in hooks:
        hook.remove()
    d_head = cfg.d_head
    q, k = seen["q"], seen["k"]  # Gemma's norms' outputs: (B, H or H_kv, T, d_head) already
    if qk_norm == "norm" and q.shape[1] != cfg.n_heads:  # Qwen3 norms (B, T, H, d_head)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    if qk_norm == "proj":
        q = q.view(1, -1, cfg.n_heads, d_head).transpose(1, 2)  # (B, H, T, d_head)
        k = k.view(1, -1, cfg.kv_heads, d_head).transpose(1, 2)  # (B, H_kv, T, d_head)
    torch.testing.assert_close(
        tr.layer_field("queries_pre_rope", "decoder", 1), q, atol=TOL, rtol=0
    )
    torch.testing.assert_close(
        tr.keys_pre_rope["decoder"][:, 1, :: cfg.n_heads // cfg.kv_heads], k, atol=TOL, rtol=0
    )
    # The turn keeps each pair's length and moves position 0 nowhere.
    before, after = tr.queries_pre_rope["decoder"], tr.queries["decoder"]
    torch.testing.assert_close(before.norm(dim=-1), after.norm(dim=-1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(before[..., 0, :], after[..., 0, :])


def test_sublayer_outputs_match_the_hf_mlp(loaded):
    _, net, tok, hf = loaded
    enc = tok([TEXTS[0]], return_tensors="pt")
    tr = net.trace(enc["input_ids"])
    seen = {}
    block = last_layer_output(hf)
    # the MLP's output as it reaches the stream: after Gemma's second norm, where there is one
    after = getattr(block, "post_feedforward_layernorm", block.mlp)
    hook = after.register_forward_hook(lambda m, args, out: seen.__setitem__("mlp", out))
    with torch.no_grad():
        hf(**enc)
    hook.remove()
    last = net.config.n_layers - 1
    torch.testing.assert_close(tr.mlp_out["decoder"][:, last], seen["mlp"], atol=TOL, rtol=0)
    layer = tr.layer_field("mlp_out", "decoder", last)  # one layer replayed alone
    torch.testing.assert_close(layer, seen["mlp"], atol=TOL, rtol=0)


def test_greedy_generation_matches_transformers(loaded):
    _, net, tok, hf = loaded
    ids = tok(["The cat"], return_tensors="pt")["input_ids"]
    ours = net.generate(ids, max_new_tokens=6)
    with torch.no_grad():
        theirs = hf.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False,
            eos_token_id=None, pad_token_id=0,
        )  # fmt: skip
    assert ours.tolist() == theirs.tolist()


def test_a_cached_continuation_writes_what_the_whole_text_pass_writes(loaded):
    """The key/value cache keeps Mistral's band and Gemma 3's local layers' band (slots are
    not positions there): a batch of two prompts, one padded, continued past the window."""
    _, net, tok, _ = loaded
    tok.padding_side = "right"
    enc = tok(["The cat sat on the mat", "hello"], return_tensors="pt", padding=True)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    cached = net.generate(ids, 8, mask, use_cache=True)
    assert cached.tolist() == net.generate(ids, 8, mask, use_cache=False).tolist()


def test_positions_off_keeps_queries_unturned(loaded):
    case, net, tok, _ = loaded
    enc = tok([TEXTS[0]], return_tensors="pt")
    on, off = net.trace(enc["input_ids"]), net.trace(enc["input_ids"], positions=False)
    assert not torch.allclose(on.attentions["decoder"], off.attentions["decoder"])
    assert torch.count_nonzero(off.embeddings["decoder"]["position"]) == 0
    if net.config.positions == "rotary":
        assert torch.count_nonzero(on.embeddings["decoder"]["position"]) == 0
        torch.testing.assert_close(off.queries["decoder"], off.queries_pre_rope["decoder"])


def test_head_mask_removes_a_query_head_of_a_group(loaded):
    _, net, tok, _ = loaded
    cfg = net.config
    enc = tok([TEXTS[0]], return_tensors="pt")
    keep = torch.ones(cfg.n_layers, cfg.n_heads)
    keep[0, 1] = 0  # one query head; the key/value head it shares serves the others still
    plain, masked = net.trace(enc["input_ids"]), net.trace(enc["input_ids"], head_mask=keep)
    first = plain.attentions["decoder"][:, 0]
    assert torch.equal(first, masked.attentions["decoder"][:, 0])  # still reported
    after = plain.hidden_states["decoder"][:, 1], masked.hidden_states["decoder"][:, 1]
    assert not torch.allclose(*after)
    z = plain.attn_out["decoder"][:, 0] - masked.attn_out["decoder"][:, 0]  # (B, T, d_model)
    head = plain.values["decoder"][:, 0, 1].unsqueeze(1)  # (B, 1, T, d_head)
    context = (first[:, 1:2] @ head).squeeze(1)  # (B, T, d_head): the removed head's z
    w_o = net.decoder.layers[0].self_attn.w_o.weight[:, cfg.d_head : 2 * cfg.d_head]
    if cfg.sandwich_norm:  # the second norm is not linear: the head's share is read before it
        return
    torch.testing.assert_close(z, context @ w_o.T, atol=1e-5, rtol=0)


def test_a_pytorch_bin_checkpoint_loads_the_same(tmp_path):
    """pytorch_model.bin (HF's state dict, the tied head's copy included) through
    torch.load(weights_only=True, mmap=True)."""
    hf = build_hf("gpt2")
    hf.config.save_pretrained(str(tmp_path))
    torch.save(hf.state_dict(), tmp_path / "pytorch_model.bin")
    save_tokenizer(tmp_path)
    net, tok = load_lm(tmp_path)
    assert max(differences(net, tok, hf, TEXTS).values()) < TOL


def test_safetensors_is_preferred_to_a_bin_beside_it(tmp_path):
    hf = save_checkpoint(tmp_path, "llama")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not a pickle")
    net, tok = load_lm(str(tmp_path))
    assert max(differences(net, tok, hf, TEXTS).values()) < TOL


def test_a_gpt2_tokenizer_without_padding_pads_with_end_of_text(loaded):
    _, net, tok, _ = loaded
    assert tok.pad_token == "<|endoftext|>" and net.config.pad_id == tok.pad_token_id
    assert tok.model_max_length <= net.config.max_len
    assert net.tokenizer is tok and isinstance(net, Transformer) and not net.training


def test_a_local_layers_mask_is_its_band_in_the_masks_tab(loaded):
    """Gemma 3: the score steps of a sliding layer hide the keys outside its window, a full
    layer's only the future; the Model tab names the sliding layers."""
    case, net, tok, _ = loaded
    if case != "gemma3":
        pytest.skip("Gemma 3 only")
    from viz.masks import _step_maps
    from viz.model_info import _rotary

    tr = net.trace(tok([TEXTS[0]], return_tensors="pt")["input_ids"])
    t = tr.input_ids.shape[1]
    causal = torch.ones(t, t).tril()
    band = causal * torch.ones(t, t).triu(-(net.config.sliding_window - 1))
    assert torch.equal(_step_maps(tr, "decoder", 0, 0, 0, 1, 1)[3], band)  # sliding
    assert torch.equal(_step_maps(tr, "decoder", 1, 0, 0, 1, 1)[3], causal)  # full
    assert "in layers 0, 2, each query sees its last 3 keys" in " ".join(_rotary(net.config))
