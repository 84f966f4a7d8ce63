"""Activation patching equals patching done by hand with forward hooks, one run at a time.

analysis.patch_heads / patch_residual run every patched forward pass batched, with the patch an
argument of the call and the layers before the patched one skipped (model/patch.py). The
references here patch the unbatched full model the way a notebook does: a forward pre-hook on
W_O's input (our ``w_o``, BERT's ``output.dense``, GPT-2's ``c_proj``, LLaMA's ``o_proj``)
replaces one head's slice with the clean run's, a pre-hook on a layer replaces one position of
the stream entering it. Our models are checked against their own modules so patched; BERT,
GPT-2, LLaMA, Qwen2 and Mistral against transformers' models on the same weights, and the
language models also against TransformerLens's ``patching`` functions when it is installed.
"""

from __future__ import annotations

import pytest
import torch

import analysis
import model
from model import PRESETS, Transformer, load_lm
from model.patch import Patch
from tests.test_lm import TEXTS, save_checkpoint

TOL = 1e-4


def by_hooks(run, clean_in, corrupt_in, o_projs, blocks, n_heads):
    """(heads [L, H], resid [L, T]) patched by hooks, one full unbatched run each.

    run(inputs) -> the metric of one forward pass; o_projs: each layer's W_O (its input is the
    heads' contexts side by side); blocks: each layer (its first input is the stream).
    """
    zs, streams = {}, {}

    def keep(store, i):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs["hidden_states"]
            store[i] = x.detach().clone()

        return hook

    handles = [
        m.register_forward_pre_hook(keep(zs, i), with_kwargs=True) for i, m in enumerate(o_projs)
    ]
    handles += [
        b.register_forward_pre_hook(keep(streams, i), with_kwargs=True)
        for i, b in enumerate(blocks)
    ]
    m_clean = run(clean_in)
    for h in handles:
        h.remove()
    m_corrupt = run(corrupt_in)

    def patched(module, index, value):
        def hook(mod, args, kwargs):
            if args:
                x = args[0].clone()
                x[index] = value
                return (x, *args[1:]), kwargs
            x = kwargs["hidden_states"].clone()
            x[index] = value
            return args, {**kwargs, "hidden_states": x}

        handle = module.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            return (run(corrupt_in) - m_corrupt) / (m_clean - m_corrupt)
        finally:
            handle.remove()

    n_layers, t = len(blocks), streams[0].shape[1]
    d_head = zs[0].shape[-1] // n_heads
    heads = torch.zeros(n_layers, n_heads)
    resid = torch.zeros(n_layers, t)
    for layer in range(n_layers):
        for head in range(n_heads):
            cut = (0, slice(None), slice(head * d_head, (head + 1) * d_head))
            heads[layer, head] = patched(o_projs[layer], cut, zs[layer][cut])
        for pos in range(t):
            resid[layer, pos] = patched(blocks[layer], (0, pos), streams[layer][0, pos])
    return heads, resid


def split(enc, texts=2):
    """A tokenizer's batch of two texts as (clean, corrupt) encodings of one text each."""
    return tuple({k: v[i : i + 1] for k, v in enc.items()} for i in range(texts))


def ours_by_hooks(net, clean, corrupt, metric, stack):
    """by_hooks on our own model's modules, the metric read from a full trace."""
    layers = getattr(net, "decoder" if stack == "cross" else stack).layers
    attn = "cross_attn" if stack == "cross" else "self_attn"
    o_projs = [getattr(layer, attn).w_o for layer in layers]

    def run(inputs):  # the pass patch_heads makes: the fused attention, as patched runs
        return float(metric(net.patched(patch=None, **inputs))[0])

    return by_hooks(run, clean, corrupt, o_projs, list(layers), net.config.n_heads)


def answer_pair(net, clean, corrupt, position=-1, labels=False):
    """(answer, wrong): the clean run's top prediction, and the token the corrupt text raises most
    against the clean one (so that the two metrics differ by more than rounding)."""
    out = [net.trace(**enc, with_logits=True) for enc in (clean, corrupt)]
    logits = [(tr.label_logits if labels else tr.logits)[0, position] for tr in out]
    answer = int(logits[0].argmax())
    raised = logits[1] - logits[0]
    raised[answer] = -float("inf")
    return answer, int(raised.argmax())


def share_resolution(net, clean, corrupt, metric) -> float:
    """What a share can tell apart in float32: 8 rounding steps of the metric over the gap.
    A cosine of 0.9999 against 1 (a gap of 1e-4) resolves shares to ~1e-2 only: a batched run
    and a run of one text round differently there (the fused attention, matmuls' blocking)."""
    m_clean, m_corrupt = (float(metric(net.patched(patch=None, **x))[0]) for x in (clean, corrupt))
    eps = torch.finfo(torch.float32).eps * max(1.0, abs(m_clean))
    return 8 * eps / abs(m_clean - m_corrupt)


def assert_grids_equal(net, clean, corrupt, metric, stack=None):
    heads = analysis.patch_heads(net, clean, corrupt, metric, stack=stack)
    resid = analysis.patch_residual(net, clean, corrupt, metric, stack=stack)
    name = stack or ("encoder" if net.config.has_encoder else "decoder")
    ref_heads, ref_resid = ours_by_hooks(net, clean, corrupt, metric, name)
    cfg = net.config
    assert heads.shape == (cfg.n_layers, cfg.n_heads) and resid.shape == ref_resid.shape
    tol = max(TOL, share_resolution(net, clean, corrupt, metric))
    torch.testing.assert_close(heads, ref_heads, atol=tol, rtol=0)
    torch.testing.assert_close(resid, ref_resid, atol=tol, rtol=0)
    return heads, resid


# ---- our own models ------------------------------------------------------------------------------
def far_from_init(config) -> Transformer:
    """A preset with weights moved far from their N(0, 0.02) init (sharp attention, texts that
    differ in their outputs), so that a patch changes the metric by more than rounding."""
    net = Transformer(config)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.3)
    return net


def char_pair(net, clean_text, corrupt_text, **extra):
    enc = net.tokenizer([clean_text, corrupt_text])
    clean, corrupt = split(enc)
    for key, value in extra.items():
        clean[key], corrupt[key] = value, value
    return clean, corrupt


@pytest.mark.parametrize("name", ["seed002-encoder", "seed004-encoder"])
def test_encoder_presets_equal_hooks_with_a_cosine_metric(name):
    net = far_from_init(PRESETS[name])
    clean, corrupt = char_pair(net, "the cat sat", "the dog sat")
    clean_tr = net.trace(**clean)
    assert_grids_equal(net, clean, corrupt, analysis.cosine_to(clean_tr, position=5))


def test_our_default_encoder_equals_hooks():
    net = far_from_init(model.TransformerConfig(n_layers=3))
    clean, corrupt = char_pair(net, "time flies", "fime tlies")
    assert_grids_equal(net, clean, corrupt, analysis.cosine_to(net.trace(**clean), position=-1))


def test_a_decoder_preset_equals_hooks_with_logit_diff():
    net = far_from_init(PRESETS["seed001-decoder"])
    clean, corrupt = char_pair(net, "abcab", "xbcab")
    assert_grids_equal(net, clean, corrupt, analysis.logit_diff(*answer_pair(net, clean, corrupt)))


@pytest.mark.parametrize("stack", ["encoder", "cross", "decoder"])
def test_an_encoder_decoder_patches_each_of_its_stacks(stack):
    net = far_from_init(PRESETS["seed000-tiny"])
    tgt = net.tokenizer(["abc"])
    clean, corrupt = char_pair(
        net, "hello", "jelly", tgt_ids=tgt["input_ids"], tgt_attention_mask=tgt["attention_mask"]
    )
    metric = analysis.logit_diff(*answer_pair(net, clean, corrupt))
    assert_grids_equal(net, clean, corrupt, metric, stack=stack)


def test_the_trained_dates_model_equals_hooks():
    net = model.load_trained("dates")
    tgt = net.tokenizer(["2026-11"])
    extra = {"tgt_ids": tgt["input_ids"], "tgt_attention_mask": tgt["attention_mask"]}
    clean, corrupt = char_pair(net, "2026-11-22", "2025-11-22", **extra)
    metric = analysis.logit_diff(*answer_pair(net, clean, corrupt, position=3))
    metric = analysis.logit_diff(*answer_pair(net, clean, corrupt, position=3), position=3)
    assert_grids_equal(net, clean, corrupt, metric, stack="encoder")


def test_the_trained_roles_tagger_equals_hooks_on_its_labels_and_its_outputs():
    net = model.load_trained("roles")
    clean, corrupt = char_pair(net, "the cat chased the dog", "the dog chased the cat")
    answer, wrong = answer_pair(net, clean, corrupt, position=4, labels=True)
    assert_grids_equal(net, clean, corrupt, analysis.logit_diff(answer, wrong, position=4))
    cosine = analysis.cosine_to(net.trace(**clean), position=4)
    assert_grids_equal(net, clean, corrupt, cosine)


@pytest.fixture(scope="module")
def induction():
    net = model.load_trained("induction")
    clean, corrupt = char_pair(net, "qzxwv qzxw", "bhmtk qzxw")
    return net, clean, corrupt


def test_the_trained_induction_model_equals_hooks(induction):
    net, clean, corrupt = induction
    assert_grids_equal(net, clean, corrupt, analysis.logit_diff(*answer_pair(net, clean, corrupt)))


def test_the_copy_is_restored_through_the_previous_token_and_induction_heads(induction):
    """The lesson: on a copy pair the heads that restore the copy are the Heads table's."""
    net, clean, corrupt = induction
    copied = net.tokenizer(["v"])["input_ids"][0, 0].item()
    answer, wrong = (
        net.trace(**e, with_logits=True).logits[0, -1].argmax() for e in (clean, corrupt)
    )
    assert answer == copied and wrong != copied  # the corrupt text has no "v" to copy
    heads = analysis.patch_heads(net, clean, corrupt, analysis.logit_diff(answer, wrong))
    patterns = analysis.head_patterns(net.trace(**clean), "decoder")
    n_heads = net.config.n_heads
    top = {divmod(int(i), n_heads) for i in heads.flatten().argsort(descending=True)[:4]}
    previous = patterns.loc[patterns["previous_token"].idxmax(), ["layer", "head"]]
    induction_heads = patterns.nlargest(3, "induction")[["layer", "head"]]
    assert tuple(previous) in top
    assert top & {tuple(row) for row in induction_heads.itertuples(index=False)}
    assert heads.max() > 0.3


def test_a_pair_is_traced_once_per_text_and_its_grids_equal_the_separate_ones(
    induction, monkeypatch
):
    """patch_pair's grids come from its own two traces (the heads' and the positions' patches
    read them, not runs traced again), and equal patch_heads' and patch_residual's."""
    net, clean, corrupt = induction
    traced = []
    trace = type(net).trace

    def counted(self, *args, **kwargs):
        traced.append(1)
        return trace(self, *args, **kwargs)

    monkeypatch.setattr(type(net), "trace", counted)
    found = analysis.patch_pair(net, clean, corrupt)
    assert len(traced) == 2
    metric = analysis.logit_diff(found.answer, found.wrong, found.position)
    torch.testing.assert_close(found.heads, analysis.patch_heads(net, clean, corrupt, metric))
    torch.testing.assert_close(
        found.positions, analysis.patch_residual(net, clean, corrupt, metric)
    )


def test_a_pair_reports_its_patched_runs_as_they_are_done(induction, monkeypatch):
    """patch_pair's progress: (runs done, of how many) after each batched call, rising to every
    head and every (layer, position) of the stream, with the grids unchanged; the chunks kept
    small here so that there are several calls to report."""
    net, clean, corrupt = induction
    plain = analysis.patch_pair(net, clean, corrupt)
    monkeypatch.setattr(analysis.patching, "CHUNK_TOKENS", 20)
    seen = []
    found = analysis.patch_pair(net, clean, corrupt, progress=lambda *d: seen.append(d))
    cfg, length = net.config, clean["input_ids"].shape[1]
    total = cfg.n_layers * (cfg.n_heads + length)
    assert len(seen) > cfg.n_layers and {t for _, t in seen} == {total}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == total and len(set(done)) == len(done)
    torch.testing.assert_close(found.heads, plain.heads)
    torch.testing.assert_close(found.positions, plain.positions)


# ---- the contract ------------------------------------------------------------------------------
def test_pairs_of_different_lengths_are_refused_with_a_sentence(induction):
    net, clean, _ = induction
    shorter = {k: v[:, :-2] for k, v in clean.items()}
    with pytest.raises(ValueError, match="same number of tokens") as err:
        analysis.patch_heads(net, clean, shorter, analysis.logit_diff(1, 2))
    assert err.value.args[0].pattern.startswith("The two texts")  # a lang.Msg


def test_a_metric_equal_on_both_texts_is_refused(induction):
    net, clean, _ = induction
    with pytest.raises(ValueError, match="nothing for a patch to restore"):
        analysis.patch_residual(net, clean, dict(clean), analysis.logit_diff(1, 2))


def test_a_metric_of_one_number_is_asked_per_item(induction):
    net, clean, corrupt = induction
    metric = analysis.logit_diff(*answer_pair(net, clean, corrupt))
    one = analysis.patch_heads(net, clean, corrupt, lambda tr: float(metric(tr)[0]))
    torch.testing.assert_close(one, analysis.patch_heads(net, clean, corrupt, metric))


def test_a_patched_run_skips_no_number_a_full_trace_has(induction):
    """patched() skips the layers before a whole-stream patch; trace() runs them all."""
    net, clean, corrupt = induction
    tr_clean, tr_corrupt = (net.trace(**e, with_logits=True) for e in (clean, corrupt))
    z = (tr_clean.attentions["decoder"] @ tr_clean.values["decoder"])[0]  # (L, H, T, d_head)
    which = torch.tensor([[False, True, False, False]])
    stream = tr_corrupt.hidden_states["decoder"][0, 1]
    everything = torch.ones(1, stream.shape[0], dtype=torch.bool)
    patch = Patch("decoder", z={1: (z[1][None], which)}, resid_pre={1: (stream, everything)})
    assert patch.start == 1
    full = net.trace(**corrupt, patch=patch, with_logits=True)
    fast = net.patched(patch=patch, **corrupt)
    torch.testing.assert_close(fast.logits.full(), full.logits, atol=1e-5, rtol=0)
    # Unembedded where indexed: the same numbers as the full logits'.
    torch.testing.assert_close(fast.logits[:, -1, 3], full.logits[:, -1, 3], atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.logits[0], full.logits[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(fast.logits.softmax(-1), full.logits.softmax(-1), atol=1e-6, rtol=0)
    assert fast.logits.shape == full.logits.shape
    torch.testing.assert_close(net(**corrupt, patch=patch), full.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(
        full.hidden_states["decoder"][:, :2], tr_corrupt.hidden_states["decoder"][:, :2]
    )
    plain = net.trace(**corrupt, patch=None, with_logits=True)
    assert torch.equal(plain.logits, tr_corrupt.logits)


def test_a_patch_naming_a_stack_the_model_lacks_is_refused(induction):
    net, clean, _ = induction
    with pytest.raises(ValueError, match="this model's are"):
        net.trace(**clean, patch=Patch("encoder"))


# ---- BERT against transformers' BertModel --------------------------------------------------------
def test_the_bundled_bert_equals_transformers_hooks(bert, hf_bert):
    net, tok = bert
    texts = ["the trophy did not fit: it was too big", "the trophy did not fit: it was too small"]
    clean, corrupt = split(tok(texts, return_tensors="pt"))
    position = -3  # "big" / "small"
    clean_tr = net.trace(**clean)
    metric = analysis.cosine_to(clean_tr, position)
    heads = analysis.patch_heads(net, clean, corrupt, metric)
    resid = analysis.patch_residual(net, clean, corrupt, metric)
    ref_out = hf_bert(**clean).last_hidden_state[0, position].detach()

    def run(inputs):
        with torch.no_grad():
            out = hf_bert(**inputs).last_hidden_state[0, position]
        return float(torch.nn.functional.cosine_similarity(out, ref_out, dim=0))

    layers = hf_bert.encoder.layer
    o_projs = [layer.attention.output.dense for layer in layers]
    ref_heads, ref_resid = by_hooks(run, clean, corrupt, o_projs, list(layers), net.config.n_heads)
    torch.testing.assert_close(heads, ref_heads, atol=TOL, rtol=0)
    torch.testing.assert_close(resid, ref_resid, atol=TOL, rtol=0)


# ---- language models against transformers (and TransformerLens) --------------------------------
@pytest.fixture(scope="module", params=["gpt2", "llama", "qwen2", "mistral"])
def lm(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    hf = save_checkpoint(folder, request.param)
    net, tok = load_lm(folder, device="cpu")
    clean = dict(tok([TEXTS[0]], return_tensors="pt"))
    corrupt = {k: v.clone() for k, v in clean.items()}
    corrupt["input_ids"][0, -3:-1] = torch.tensor([40, 41])  # two tokens changed, near the end
    # (Mistral's window of 4 keys, 2 layers: the last token reads only the last 7)
    answer, wrong = answer_pair(net, clean, corrupt)
    return request.param, net, tok, hf, folder, clean, corrupt, answer, wrong


def hf_blocks(hf):
    base = hf.base_model
    if hasattr(base, "h"):  # GPT-2
        return list(base.h), [block.attn.c_proj for block in base.h]
    return list(base.layers), [layer.self_attn.o_proj for layer in base.layers]


def test_language_models_equal_transformers_hooks(lm):
    case, net, _, hf, _, clean, corrupt, answer, wrong = lm
    metric = analysis.logit_diff(answer, wrong)
    heads = analysis.patch_heads(net, clean, corrupt, metric)
    resid = analysis.patch_residual(net, clean, corrupt, metric)

    def run(inputs):
        with torch.no_grad():
            logits = hf(**inputs).logits[0, -1]
        return float(logits[answer] - logits[wrong])

    blocks, o_projs = hf_blocks(hf)
    ref_heads, ref_resid = by_hooks(run, clean, corrupt, o_projs, blocks, net.config.n_heads)
    if case != "gpt2":
        assert net.config.kv_heads < net.config.n_heads  # grouped-query: z per query head
    torch.testing.assert_close(heads, ref_heads, atol=TOL, rtol=0)
    torch.testing.assert_close(resid, ref_resid, atol=TOL, rtol=0)


def test_language_models_equal_transformer_lens_patching(lm):
    patching = pytest.importorskip("transformer_lens.patching")
    from transformer_lens.model_bridge import TransformerBridge

    _, net, tok, hf, folder, clean, corrupt, answer, wrong = lm
    bridge = TransformerBridge.boot_transformers(str(folder), hf_model=hf, tokenizer=tok)
    clean_logits, cache = bridge.run_with_cache(clean["input_ids"])
    corrupt_logits = bridge(corrupt["input_ids"])

    def diff(logits):
        return logits[0, -1, answer] - logits[0, -1, wrong]

    m_clean, m_corrupt = diff(clean_logits), diff(corrupt_logits)

    def share(logits):
        return (diff(logits) - m_corrupt) / (m_clean - m_corrupt)

    ids = corrupt["input_ids"]
    theirs_heads = patching.get_act_patch_attn_head_out_all_pos(bridge, ids, cache, share)
    theirs_resid = patching.get_act_patch_resid_pre(bridge, ids, cache, share)
    metric = analysis.logit_diff(answer, wrong)
    ours_heads = analysis.patch_heads(net, clean, corrupt, metric)
    ours_resid = analysis.patch_residual(net, clean, corrupt, metric)
    torch.testing.assert_close(ours_heads, theirs_heads.detach().float(), atol=TOL, rtol=0)
    torch.testing.assert_close(ours_resid, theirs_resid.detach().float(), atol=TOL, rtol=0)


# ---- direct logit attribution ----------------------------------------------------------------
def dla_total(parts):
    return (
        parts["embed"]
        + parts["heads"].sum()
        + parts["attn_bias"].sum()
        + parts["mlp"].sum()
        + parts["bias"]
    )


def test_direct_logit_attribution_sums_to_the_logit_difference(lm):
    case, net, _, hf, _, clean, _, answer, wrong = lm
    tr = net.trace(**clean, with_logits=True)
    parts = analysis.direct_logit_attribution(net, tr, answer, wrong)
    own = tr.logits[0, -1, answer] - tr.logits[0, -1, wrong]
    with torch.no_grad():
        theirs = hf(**clean).logits[0, -1]
    assert parts["heads"].shape == (net.config.n_layers, net.config.n_heads)
    assert abs(float(parts["logit_diff"] - own)) < TOL
    assert abs(float(dla_total(parts) - own)) < TOL
    assert abs(float(dla_total(parts) - (theirs[answer] - theirs[wrong]))) < TOL
    assert case != "gpt2" or parts["attn_bias"].abs().sum() > 0  # GPT-2's W_O has a bias


def test_direct_logit_attribution_on_the_induction_model_names_its_induction_head(induction):
    net, clean, corrupt = induction
    answer, wrong = answer_pair(net, clean, corrupt)
    tr = net.trace(**clean, with_logits=True)
    parts = analysis.direct_logit_attribution(net, tr, answer, wrong)
    assert abs(float(dla_total(parts) - parts["logit_diff"])) < TOL
    patterns = analysis.head_patterns(tr, "decoder")
    best = divmod(int(parts["heads"].argmax()), net.config.n_heads)
    assert best in {
        tuple(r)
        for r in patterns.nlargest(3, "induction")[["layer", "head"]].itertuples(index=False)
    }


def test_direct_logit_attribution_refuses_an_encoder():
    net = model.load_trained("roles")
    tr = net.trace(**net.tokenizer(["the cat chased the dog"]))
    with pytest.raises(ValueError, match="pre-norm decoder"):
        analysis.direct_logit_attribution(net, tr, 0, 1)


def test_the_api_doc_example_runs_as_written():
    from pathlib import Path

    from tests.test_readme import python_examples, run_example

    api = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    example = next(e for e in python_examples(api) if "patch_heads" in e)
    found = run_example(example, "docs/api.md")
    assert found["heads"].shape == (3, 4)
    assert found["resid"].shape == (3, 11)  # "<s>" and 10 characters, as the page reads them
    assert abs(float(found["heads"][0, 1]) - 0.62) < 0.01  # the lesson's numbers (research.md)
    parts = found["parts"]
    assert abs(float(parts["heads"][1, 1]) - 11.13) < 0.01
