"""The whole model: every preset traces, the Trace contract holds, causality, threads, devices."""

from __future__ import annotations

import threading

import pytest
import torch

from model import PRESETS, CharTokenizer, Trace, Transformer, TransformerConfig

FAST = {name: cfg for name, cfg in PRESETS.items() if name != "seed000-transformer"}


def closed_form_params(cfg: TransformerConfig) -> int:
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    attn, ffn, ln = 4 * (d * d + d), d * f + f + f * d + d, 2 * d
    total = v * d
    total += cfg.max_len * d if cfg.positions == "learned" else 0
    total += cfg.type_vocab_size * d + (ln if cfg.embedding_norm else 0)
    final_ln = ln if cfg.final_norm else 0
    if cfg.has_encoder:
        total += cfg.n_layers * (attn + ffn + 2 * ln) + final_ln
    if cfg.has_decoder:
        cross = cfg.arch == "encoder-decoder"
        total += cfg.n_layers * ((2 if cross else 1) * attn + ffn + (3 if cross else 2) * ln)
        total += final_ln
    if cfg.lm_head:
        total += d * v + (v if cfg.lm_head_bias else 0)
    if cfg.pooler:
        total += d * d + d
    return total


def run_trace(net: Transformer, texts=("我喜欢你", "你喜欢我 too"), tgt=("I love", "x")):
    tok = net.tokenizer
    src = tok(list(texts), padding=True)
    kwargs = {}
    if net.config.arch == "encoder-decoder":
        t = tok(list(tgt), padding=True)
        kwargs = {"tgt_ids": t["input_ids"], "tgt_attention_mask": t["attention_mask"]}
    return net.trace(src["input_ids"], attention_mask=src["attention_mask"], **kwargs)


@pytest.fixture(scope="module")
def nets():
    return {name: Transformer(cfg) for name, cfg in FAST.items()}


@pytest.mark.parametrize("name", FAST)
def test_every_preset_builds_and_traces_with_the_contract_shapes(nets, name):
    net = nets[name]
    cfg = net.config
    tr = run_trace(net)
    B, L, H = 2, cfg.n_layers, cfg.n_heads
    expected = {
        "encoder": ["encoder"],
        "decoder": ["decoder"],
        "encoder-decoder": ["encoder", "decoder", "cross"],
    }[cfg.arch]
    assert tr.stacks == expected
    for stack in expected:
        q_tokens, k_tokens = tr.tokens_for(stack)
        tq, tk = len(q_tokens[0]), len(k_tokens[0])
        assert tr.attentions[stack].shape == (B, L, H, tq, tk)
        assert tr.scores[stack].shape == (B, L, H, tq, tk)
        assert tr.masks[stack].shape == (B, tq, tk) and tr.masks[stack].dtype == torch.bool
        assert tr.queries[stack].shape == (B, L, H, tq, cfg.d_head)
        assert tr.keys[stack].shape == tr.values[stack].shape == (B, L, H, tk, cfg.d_head)
        assert tr.attn_out[stack].shape == (B, L, tq, cfg.d_model)
        allowed = tr.masks[stack][:, None, None]  # (B, 1, 1, T_q, T_k)
        weights = tr.attentions[stack]
        assert torch.all(weights[~allowed.expand_as(weights)] == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(B, L, H, tq))
    for stack in [s for s in expected if s != "cross"]:
        q_tokens, _ = tr.tokens_for(stack)
        t = len(q_tokens[0])
        assert tr.hidden_states[stack].shape == (B, L + 1, t, cfg.d_model)
        assert tr.mlp_out[stack].shape == (B, L, t, cfg.d_model)
        emb = tr.embeddings[stack]
        assert emb["token"].shape == emb["sum"].shape == (B, t, cfg.d_model)
        assert emb["position"].shape == (t, cfg.d_model)
        torch.testing.assert_close(emb["output"], tr.hidden_states[stack][:, 0])


@pytest.mark.parametrize("name", PRESETS)
def test_parameter_counts_match_the_closed_form(name):
    cfg = PRESETS[name]
    net = Transformer(cfg)
    assert net.get_num_params() == closed_form_params(cfg)
    assert sum(net.param_counts().values()) == net.get_num_params()
    assert (
        net.get_num_params(non_embedding=True)
        == net.get_num_params() - cfg.vocab_size * cfg.d_model
    )
    if cfg.positions == "sinusoidal":
        assert net.param_counts()["position embedding"] == 0


def test_same_seed_same_weights_and_traces():
    cfg = PRESETS["seed002-encoder"]
    a, b = Transformer(cfg), Transformer(cfg)
    for (_, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(pa, pb)
    assert not torch.equal(
        Transformer(cfg.replace(seed=1)).embedding.tok_emb.weight, a.embedding.tok_emb.weight
    )


def test_causal_mask_gives_exact_zeros_above_the_diagonal(nets):
    tr = run_trace(nets["seed001-decoder"])
    w = tr.attentions["decoder"]
    t = w.shape[-1]
    upper = torch.ones(t, t, dtype=torch.bool).triu(1)
    assert torch.all(w[..., upper] == 0)


@pytest.mark.parametrize("name", ["seed001-decoder", "seed003-encdec", "seed001-prenorm"])
def test_changing_a_future_token_never_changes_earlier_decoder_states(nets, name):
    net = nets[name]
    tok = net.tokenizer
    a = tok(["abcdef"])["input_ids"]
    b = a.clone()
    b[0, -1] = tok.char_to_id("z")
    src = tok(["source text"])
    kwargs = lambda ids: (  # noqa: E731
        {"input_ids": src["input_ids"], "tgt_ids": ids}
        if net.config.arch == "encoder-decoder"
        else {"input_ids": ids}
    )
    ha = net.trace(**kwargs(a)).hidden_states["decoder"]
    hb = net.trace(**kwargs(b)).hidden_states["decoder"]
    torch.testing.assert_close(ha[:, :, :-1], hb[:, :, :-1], atol=0, rtol=0)
    assert not torch.allclose(ha[:, 1:, -1], hb[:, 1:, -1])


def test_cross_attention_has_target_queries_and_source_keys(nets):
    net = nets["seed003-encdec"]
    src = net.tokenizer(["a longer source", "src"], padding=True)
    tgt = net.tokenizer(["tgt!!", "t"], padding=True)
    tr = net.trace(
        src["input_ids"],
        attention_mask=src["attention_mask"],
        tgt_ids=tgt["input_ids"],
        tgt_attention_mask=tgt["attention_mask"],
    )
    cfg = net.config
    assert tr.attentions["cross"].shape == (2, cfg.n_layers, cfg.n_heads, 5, 15)
    assert torch.all(tr.attentions["cross"][1, ..., 3:] == 0)  # padded source keys of text 2
    # K and V of cross-attention are computed from the encoder output, Q from the decoder.
    layer0 = net.decoder.layers[0].cross_attn
    memory = tr.outputs["encoder"]
    k = layer0.split(layer0.w_k(memory))
    torch.testing.assert_close(tr.keys["cross"][:, 0], k)


def test_query_and_key_padding_variant_gives_zero_rows_not_nan(nets):
    net = nets["seed002-encoder"]
    enc = net.tokenizer(["ab", "abcd"], padding=True)
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"], padding="query_and_key")
    w = tr.attentions["encoder"]
    assert not torch.isnan(w).any()
    assert torch.all(w[0, :, :, 2:] == 0)  # padded query rows of text 1 are empty
    assert tr.masks["encoder"][0].tolist()[3] == [False] * 4


def test_two_threads_on_one_shared_model_each_get_their_own_trace(bert):
    net, tok = bert
    texts = ["the cat sat on the mat", "时间像箭一样飞逝 and fruit flies like a banana"]
    expected = {}
    for text in texts:
        enc = tok([text], return_tensors="pt")
        expected[text] = net.trace(enc["input_ids"])
    results: dict[str, list[Trace]] = {t: [] for t in texts}
    barrier = threading.Barrier(2)

    def worker(text: str) -> None:
        enc = tok([text], return_tensors="pt")
        barrier.wait()
        for _ in range(5):
            results[text].append(net.trace(enc["input_ids"]))

    threads = [threading.Thread(target=worker, args=(t,)) for t in texts]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for text in texts:
        for tr in results[text]:
            assert tr.tokens == expected[text].tokens
            torch.testing.assert_close(
                tr.attentions["encoder"], expected[text].attentions["encoder"]
            )
    for module in net.modules():  # nothing stashed on modules, no hooks registered
        assert not module._forward_hooks and not module._forward_pre_hooks
        assert not any(isinstance(v, torch.Tensor) and v.dim() == 5 for v in vars(module).values())


def test_trace_refuses_training_mode_instead_of_showing_dropout_noise():
    net = Transformer(PRESETS["seed002-encoder"]).train()
    with pytest.raises(RuntimeError, match="eval"):
        net.trace(CharTokenizer()(["hi"])["input_ids"])


def test_cpu_copy_is_float32_on_cpu_and_keeps_masks_bool(nets):
    tr = run_trace(nets["seed003-encdec"]).cpu()
    assert tr.attentions["cross"].device.type == "cpu"
    assert tr.attentions["cross"].dtype == torch.float32
    assert tr.masks["decoder"].dtype == torch.bool
    assert tr.nbytes() > 0


def test_out_of_vocabulary_ids_and_bad_shapes_are_clear_errors(nets):
    net = nets["seed002-encoder"]
    with pytest.raises(ValueError, match="vocabulary"):
        net.trace(torch.tensor([[CharTokenizer.vocab_size]]))
    with pytest.raises(ValueError, match="batch, tokens"):
        net.trace(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="at most 512"):
        net.trace(torch.ones(1, 513, dtype=torch.long))


def test_forward_returns_logits_for_lm_models_and_states_for_encoders(nets):
    ids = CharTokenizer()(["hello"])["input_ids"]
    assert nets["seed001-decoder"](ids).shape == (1, 5, CharTokenizer.vocab_size)
    assert nets["seed002-encoder"](ids).shape == (1, 5, 128)
    out = nets["seed003-encdec"](ids, tgt_ids=ids[:, :3])
    assert out.shape == (1, 3, CharTokenizer.vocab_size)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_trace_runs_on_cuda_and_moves_to_cpu(bert):
    net, tok = bert
    gpu = Transformer(net.config, tokenizer=tok)
    gpu.load_state_dict(net.state_dict())
    gpu = gpu.to("cuda").eval()
    enc = tok(["time flies like an arrow"], return_tensors="pt")
    tr = gpu.trace(enc["input_ids"])
    assert tr.device.startswith("cuda")
    ref = net.trace(enc["input_ids"])
    torch.testing.assert_close(
        tr.cpu().attentions["encoder"], ref.attentions["encoder"], atol=1e-4, rtol=0
    )


def test_trace_owns_its_tensors_not_views_of_the_weights(bert):
    net, tok = bert
    tr = net.trace(tok(["hi there"], return_tensors="pt")["input_ids"])
    position = tr.embeddings["encoder"]["position"]
    assert not position.requires_grad
    assert position.data_ptr() != net.embedding.pos_emb.weight.data_ptr()


def hooked_trace(net: Transformer, **kwargs) -> tuple[Trace, dict]:
    """A trace, and what the forward pass itself computed, caught by hooks (tests only)."""
    seen: dict = {}
    handles = []

    def catch(stack: str, field: str):
        def hook(module, args, output):
            if field == "attn":  # MultiHeadAttention returns (out, {"q", "k", "v", ...})
                out, record = output
                for name, key in (("queries", "q"), ("keys", "k"), ("values", "v")):
                    seen.setdefault((name, stack), []).append(record[key])
                seen.setdefault(("attn_out", stack), []).append(out)
            else:
                seen.setdefault(("mlp_out", stack), []).append(output)

        return hook

    for name in ("encoder", "decoder"):
        module = getattr(net, name)
        for layer in module.layers if module is not None else []:
            handles.append(layer.self_attn.register_forward_hook(catch(name, "attn")))
            handles.append(layer.ffn.register_forward_hook(catch(name, "mlp")))
            if getattr(layer, "cross_attn", None) is not None:
                handles.append(layer.cross_attn.register_forward_hook(catch("cross", "attn")))
    try:
        tr = net.trace(**kwargs)
    finally:
        for handle in handles:
            handle.remove()
    return tr, {key: torch.stack(items, dim=1) for key, items in seen.items()}


@pytest.mark.parametrize("name", FAST)
def test_computed_fields_equal_what_the_forward_pass_computed(nets, name):
    net = nets[name]
    cfg = net.config
    tok = net.tokenizer
    src = tok(["我喜欢你", "你喜欢我 too"], padding=True)
    kwargs = {"input_ids": src["input_ids"], "attention_mask": src["attention_mask"]}
    if cfg.arch == "encoder-decoder":
        tgt = tok(["I love", "x"], padding=True)
        kwargs.update(tgt_ids=tgt["input_ids"], tgt_attention_mask=tgt["attention_mask"])
    keep = torch.ones(cfg.n_layers, cfg.n_heads)
    keep[0, 1], keep[-1, 0] = 0.0, 0.5
    kwargs.update(head_mask=keep, ablation="mean")  # the replay must ablate as the forward did
    tr, seen = hooked_trace(net, **kwargs)
    lean = tr.nbytes()
    for (field, stack), expected in seen.items():  # one layer replayed alone: the same numbers
        for layer in range(expected.shape[1]):
            got = tr.layer_field(field, stack, layer)
            torch.testing.assert_close(got, expected[:, layer], atol=0, rtol=0)
    assert tr.nbytes() == lean  # and nothing kept
    for (field, stack), expected in seen.items():
        torch.testing.assert_close(getattr(tr, field)[stack], expected, atol=0, rtol=0)
    assert tr.nbytes() > lean  # computed fields are kept, and counted, once asked for
    assert sorted(tr.mlp_out) == sorted(s for s in tr.stacks if s != "cross")


def test_a_pickled_trace_is_complete_without_its_model(nets):
    import pickle

    tr = run_trace(nets["seed003-encdec"])
    back = pickle.loads(pickle.dumps(tr))
    assert back._replay is None
    for field in ("queries", "keys", "values", "attn_out", "scores"):
        for stack in tr.stacks:
            assert torch.equal(getattr(back, field)[stack], getattr(tr, field)[stack])


def test_computed_fields_refuse_a_model_whose_weights_changed_since(nets):
    net = Transformer(PRESETS["seed002-encoder"])
    tr = run_trace(net)
    with torch.no_grad():
        net.encoder.layers[0].self_attn.w_q.weight.mul_(2.0)
    with pytest.raises(RuntimeError, match="changed"):
        tr.queries["encoder"]


def test_stack_output_without_final_norm_is_stored_once(nets):
    tr = run_trace(nets["seed002-encoder"])
    hidden = tr.hidden_states["encoder"]
    assert torch.equal(tr.outputs["encoder"], hidden[:, -1])
    assert torch.equal(tr.embeddings["encoder"]["output"], hidden[:, 0])
    held = tr.nbytes()
    tr.outputs = {}
    del tr.embeddings["encoder"]["output"]
    assert tr.nbytes() == held  # both were views of the hidden states, counted once
