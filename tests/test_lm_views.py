"""Real language models on the page, without a browser: the checkpoint box's routing, a public
deployment's allow-list (TA_MODELS), tokens that read as text, RoPE's figures, grouped-query
heads named with their key/value head, the attention-sink column, and the Output tab's
predictions against transformers' own model.

Two tiny checkpoints are written by transformers itself with random weights (tests/test_lm.py's
cases): a GPT-2 (learned positions, LayerNorm, tied head) and a LLaMA with 8 query heads over 2
key/value heads (RMSNorm, RoPE θ = 500000, gated SiLU MLP).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import analysis
from engine import CUSTOM_PREFIX, Engine, InputError, lm_continuation
from model.pieces import BYTES, ReadableTokenizer, readable
from shelf import allowed_checkpoints
from tests.test_lm import save_checkpoint
from ui.render import render
from ui.state import API, Selection
from ui.tabs import BY_ID, View
from viz import attention, model_info, rope
from viz.common import display_token, head_label

TEXT = "The cat sat on the mat. The cat sat"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{"gpt2": folder, "llama": folder} of tiny random-weight checkpoints."""
    root = tmp_path_factory.mktemp("lms")
    for case in ("gpt2", "llama"):
        save_checkpoint(root / case, case)
    return {case: str(root / case) for case in ("gpt2", "llama")}


@pytest.fixture(scope="module")
def eng():
    return Engine(device="cpu", allowed=())


@pytest.fixture(scope="module")
def runs(eng, folders):
    """The analysis of TEXT with each model."""
    return {case: eng.analyse(TEXT, CUSTOM_PREFIX + path) for case, path in folders.items()}


def view_of(analysis_, **sel) -> View:
    return View(analysis_, Selection(**sel).clamp(analysis_), None, API, frozenset())


# ---- which loader opens a checkpoint ------------------------------------------------------------
def test_the_checkpoint_box_opens_gpt2_and_llama_by_their_model_type(runs):
    gpt2, llama = runs["gpt2"].model, runs["llama"].model
    assert (gpt2.family, llama.family) == ("gpt2", "llama")
    assert gpt2.is_lm and not gpt2.is_bert and llama.is_lm
    assert str(gpt2.label) == "GPT-2 checkpoint gpt2"
    assert str(llama.label) == "LLaMA checkpoint llama"
    trace = runs["llama"].trace
    assert list(trace.stacks) == ["decoder"]  # causal, as our own decoders
    mask = trace.masks["decoder"][0]  # (T, T)
    assert torch.equal(mask, torch.ones_like(mask).tril())


def test_a_bert_folder_still_opens_as_bert(eng, tmp_path):
    from tests.test_bert_loading import make_tiny_bert

    loaded = eng.model(CUSTOM_PREFIX + str(make_tiny_bert(tmp_path / "bert")))
    assert loaded.is_bert and not loaded.is_lm and loaded.family == "bert"


def test_another_model_type_is_one_sentence_naming_what_opens(eng, tmp_path):
    from tests.test_checkpoint_guard import with_config

    source = with_config(model_type="t5")(tmp_path / "t5-small")
    with pytest.raises(InputError, match="t5 checkpoint; the app opens BERT, GPT-2, LLaMA"):
        eng.analyse("hi", CUSTOM_PREFIX + source)


def test_a_hub_id_whose_type_cannot_be_read_offline_gets_the_loaders_sentence(eng, monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # read once at import: without this the Hub client tries the network (23 s of timeouts here)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(InputError) as exc:
        eng.analyse("hi", CUSTOM_PREFIX + "nobody-here/no-such-model-xyz")
    assert "Hugging Face Hub" in str(exc.value) and "Traceback" not in str(exc.value)


# ---- a public deployment's allow-list ----------------------------------------------------------
def test_the_allow_list_is_read_from_ta_models(monkeypatch):
    monkeypatch.setenv("TA_MODELS", " gpt2, HuggingFaceTB/SmolLM2-135M,,gpt2 ")
    assert allowed_checkpoints() == ("gpt2", "HuggingFaceTB/SmolLM2-135M")
    assert Engine(device="cpu", public=True).allowed == ("gpt2", "HuggingFaceTB/SmolLM2-135M")
    monkeypatch.delenv("TA_MODELS")
    assert allowed_checkpoints() == ()


def test_public_mode_opens_a_listed_checkpoint_and_refuses_others_with_a_sentence(folders):
    public = Engine(device="cpu", public=True, allowed=(folders["gpt2"] + "/",))
    assert public.analyse("hi there", CUSTOM_PREFIX + folders["gpt2"]).model.family == "gpt2"
    with pytest.raises(InputError) as exc:
        public.analyse("hi there", CUSTOM_PREFIX + folders["llama"])
    assert str(exc.value) == (
        f"This public deployment opens only these checkpoints: {folders['gpt2']}/."
    )
    with pytest.raises(InputError, match="only these checkpoints"):
        public.analyse("hi", CUSTOM_PREFIX + "some-org/some-model")  # nothing fetched first
    with pytest.raises(InputError, match="disabled on this public deployment"):
        Engine(device="cpu", public=True, allowed=()).analyse("hi", CUSTOM_PREFIX + "gpt2")


def test_the_public_page_offers_the_checkpoint_box_only_with_an_allow_list(folders):
    import app

    listed = Engine(device="cpu", public=True, allowed=(folders["gpt2"],))
    page_setup, _ = app.setup(listed, public=True)
    assert app.CUSTOM in [value for _, value in page_setup.choices]
    assert page_setup.allowed == (folders["gpt2"],)
    bare, _ = app.setup(Engine(device="cpu", public=True, allowed=()), public=True)
    assert app.CUSTOM not in [value for _, value in bare.choices]


def test_a_link_opens_a_listed_checkpoint_on_a_public_page_and_no_other(folders):
    import app
    from ui.handlers import CUSTOM, Ask

    listed = folders["gpt2"]
    _, peers = app.setup(Engine(device="cpu", public=True, allowed=(listed,)), public=True)
    opened = peers.views.deeplink(Ask(page="lm-link"), f"?model=checkpoint:{listed}&text=hi")
    assert opened["model"] == CUSTOM and opened["checkpoint"]["value"] == listed
    assert opened["checkpoint"]["visible"] and "GPT-2 checkpoint" in opened["status"]
    other = peers.views.deeplink(
        Ask(page="lm-link-2"), f"?model=checkpoint:{folders['llama']}&text=hi"
    )
    assert "is not a model here" in other["link_notes"]
    assert "LLaMA" not in other["status"]


# ---- tokens that read as text -------------------------------------------------------------------
def test_the_byte_alphabet_is_gpt2s():
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    assert {char: byte for byte, char in bytes_to_unicode().items()} == BYTES


def test_byte_level_pieces_read_as_the_text_they_stand_for(runs):
    tok = runs["gpt2"].model.tokenizer
    assert isinstance(tok, ReadableTokenizer) and tok.byte_level
    text = "我喜欢 cat\nx"
    ids = tok(text)["input_ids"]
    pieces = tok.convert_ids_to_tokens(ids)
    assert tok.hf.convert_ids_to_tokens(ids)[2] == "Ġcat"  # the vocabulary's own piece
    assert "".join(pieces) == text and pieces[2] == " cat" and pieces[3] == "\n"
    assert [display_token(p) for p in pieces[2:4]] == ["␣cat", "⏎"]
    tokens = runs["gpt2"].trace.tokens[0]
    assert tokens[0] == "<|endoftext|>"  # one start token leads a language model's input
    assert "".join(tokens[1:]) == TEXT


def test_words_group_the_pieces_read_as_text_as_they_grouped_the_marked_ones(runs):
    tokens = runs["gpt2"].trace.tokens[0]  # <|endoftext|>, The, ␣cat, ␣sat, ...
    marked = [t if t == "<|endoftext|>" else t.replace(" ", "Ġ") for t in tokens]  # as GPT-2's
    head = runs["gpt2"].trace.attentions["decoder"][0, 0, 0]  # (T, T)
    words, merged = analysis.word_attention(head, tokens)
    assert words[:4] == ["<|endoftext|>", "The", "cat", "sat"]
    assert analysis.word_attention(head, marked)[0] == words
    assert torch.equal(analysis.word_attention(head, marked)[1], merged)


def test_the_readable_tokenizer_copies_and_pickles(runs):
    import copy
    import pickle

    tok = runs["gpt2"].model.tokenizer
    ids = tok("hello cat")["input_ids"]
    for twin in (copy.deepcopy(tok), pickle.loads(pickle.dumps(tok))):
        assert twin.convert_ids_to_tokens(ids) == tok.convert_ids_to_tokens(ids)


def test_half_a_character_and_an_id_past_the_table_are_said_so():
    assert readable("æĪ", True, 5) == "‹\\xE6\\x88›"  # two of 我's three UTF-8 bytes
    assert readable(None, True, 310) == "‹310›"
    assert readable("▁the", False, 5) == " the" and readable("<0x0A>", False, 13) == "\n"


def test_a_continuation_reads_its_pieces_as_the_token_table_does(runs):
    tok = runs["gpt2"].model.tokenizer
    byte = {b: ch for ch, b in BYTES.items()}
    ids = tok.hf.convert_tokens_to_ids([byte[b] for b in "我".encode()])  # 我 over three pieces
    a, broken = tok.hf.convert_tokens_to_ids(["a", byte[0xA8]])  # \xA8 starts no character
    end = tok.hf.convert_tokens_to_ids("<|endoftext|>")
    assert "\ufffd" in tok.hf.decode([broken])  # what the page printed before
    assert tok.text(ids) == "我"  # a character split over pieces is joined
    assert tok.text([broken, *ids, ids[0], a, 315, end]) == "‹\\xA8›我‹\\xE6›a‹315›"
    table = tok.convert_ids_to_tokens([broken, ids[0], 315])
    assert table == ["‹\\xA8›", "‹\\xE6›", "‹315›"]  # each one as the table shows it


def test_a_greedy_continuation_of_broken_bytes_shows_the_tables_pieces(eng, tmp_path):
    """A GPT-2 whose final LayerNorm writes one constant vector and whose head reads it as the
    byte \\xA8 (a UTF-8 continuation byte): it predicts \\xA8 everywhere, and the page prints
    the table's ‹\\xA8›, never U+FFFD (a researcher saw "��{����{����")."""
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path / "bytes"
    hf = save_checkpoint(folder, "gpt2-untied")
    broken = PreTrainedTokenizerFast.from_pretrained(folder).convert_tokens_to_ids("¨")  # \\xA8
    with torch.no_grad():
        bias = torch.randn(hf.config.n_embd)
        hf.transformer.ln_f.weight.zero_()
        hf.transformer.ln_f.bias.copy_(bias)
        hf.lm_head.weight.zero_()
        hf.lm_head.weight[broken] = bias
    hf.save_pretrained(str(folder))
    run = eng.analyse(TEXT, CUSTOM_PREFIX + str(folder))
    assert lm_continuation(run) == "‹\\xA8›" * 12
    out = render("output", run, Selection())
    assert "\ufffd" not in out["prediction"] and "\ufffd" not in str(out["steps_table"])
    assert "“" + "‹\\\\xA8›" * 12 + "”" in out["prediction"]  # Markdown escapes the backslash
    assert set(out["steps_table"]["predicts"]) == {"‹\\xA8›"}  # the table's own piece


# ---- RoPE ---------------------------------------------------------------------------------------
def test_rope_frequencies_are_the_models_and_the_formula(runs):
    cfg = runs["llama"].trace.config
    theta = rope.frequencies(cfg)
    i = np.arange(cfg.d_head // 2)
    assert np.allclose(theta, cfg.rope_theta ** (-2 * i / cfg.d_head), rtol=1e-6)
    model_theta = runs["llama"].model.net.embedding.rotary.inv_freq.double().numpy()
    assert np.array_equal(theta, model_theta)


def test_the_distance_curve_is_the_score_of_the_two_vectors_turned_by_the_model(runs):
    net = runs["llama"].model.net
    cfg = net.config
    torch.manual_seed(3)
    q, k = torch.randn(cfg.d_head), torch.randn(cfg.d_head)
    rotation = net.embedding.rotation(40)  # cos, sin of positions 0..39
    for query_pos, key_pos in ((0, 0), (9, 2), (39, 0), (30, 29)):
        turned_q = rotation(q.view(1, 1, 1, -1).expand(1, 1, 40, -1).contiguous())[0, 0, query_pos]
        turned_k = rotation(k.view(1, 1, 1, -1).expand(1, 1, 40, -1).contiguous())[0, 0, key_pos]
        expected = float(turned_q.double() @ turned_k.double()) / math.sqrt(cfg.d_head)
        got = rope.score_at_distances(q, k, cfg, [query_pos - key_pos])[0]
        assert got == pytest.approx(expected, abs=1e-4), (query_pos, key_pos)


def test_a_rope_model_shows_its_frequencies_and_distances_not_a_position_table(runs):
    made = BY_ID["embeddings"].makers(view_of(runs["llama"]))
    table, curves = made["position_table_plot"](), made["position_curves_plot"]()
    assert "RoPE frequencies" in table.layout.title.text and table.layout.yaxis.type == "log"
    assert "distance" in curves.layout.title.text and len(curves.data) == 2
    panels = [a.text for a in made["embedding_plot"]().layout.annotations]
    assert not any("position P[t]" in p for p in panels)  # nothing is added for RoPE
    shapes = BY_ID["tokens"].makers(view_of(runs["llama"]))
    said = " ".join(str(make()) for make in shapes.values())
    assert "RoPE: no position vector" in said and "position [T, d_model]" not in said
    learned = BY_ID["embeddings"].makers(view_of(runs["gpt2"]))["position_table_plot"]()
    assert "learned positions" in learned.layout.title.text


# ---- grouped-query heads, the sink ---------------------------------------------------------------
def test_grouped_query_heads_are_named_with_their_key_value_head(runs):
    cfg = runs["llama"].trace.config
    assert (cfg.n_heads, cfg.kv_heads) == (8, 2)
    assert head_label(cfg, 5) == "5 (kv 1)" and head_label(cfg, 3) == "3 (kv 0)"
    assert head_label(runs["gpt2"].trace.config, 3) == "3"
    trace = runs["llama"].trace
    assert "head 5 (kv 1)" in attention.head_figure(trace, "decoder", 1, 5).layout.title.text
    overview = attention.overview_figure(trace, "decoder")
    assert overview.layout.xaxis.ticktext[5] == "H5<br>kv1"
    assert overview.data[0].x[0].startswith("H0/kv0 · ")  # the hover names the kv head too
    names = [
        d.hovertemplate for d in attention.compare_figure(trace, "decoder", (0, 1), (1, 6)).data
    ]
    assert any("H1 (kv 0)" in n for n in names) and any("H6 (kv 1)" in n for n in names)


def test_the_sink_column_is_the_first_token_share_of_the_queries_that_may_look_elsewhere(runs):
    trace = runs["llama"].trace
    table = analysis.head_table(trace, "decoder")
    assert list(table.columns[6:9]) == ["first", "sink", "sep"]
    alpha = trace.attentions["decoder"][0].double()  # (L, H, T, T)
    expected = alpha[:, :, 1:, 0].mean(-1).flatten().numpy()  # queries 1.. (0 sees only itself)
    assert np.allclose(table["sink"].to_numpy(), expected)
    assert (table["first"] > table["sink"]).all()  # first counts query 0's forced 1.0


def test_for_bert_the_sink_is_the_cls_columns_share(bert):
    net, tok = bert
    enc = tok(["time flies like an arrow", "I have a dog"], padding=True, return_tensors="pt")
    trace = net.trace(enc["input_ids"], enc["attention_mask"])
    for item in (0, 1):  # the second is padded: its padding is left out
        table = analysis.head_table(trace, "encoder", item)
        assert np.allclose(table["sink"], table["first"])
        n = int(enc["attention_mask"][item].sum())  # its real tokens, [CLS] first
        cls = trace.attentions["encoder"][item, :, :, :n, 0].double().mean(-1).flatten()
        assert np.allclose(table["sink"], cls.numpy())


# ---- Output, Model, the score breakdown --------------------------------------------------------
def hf_model(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


def test_next_token_predictions_and_the_continuation_are_transformers_own(runs, folders):
    for case in ("gpt2", "llama"):
        run, hf = runs[case], hf_model(folders[case])
        ids = run.trace.input_ids
        with torch.no_grad():
            logits = hf(ids).logits[0]  # (T, V)
            mask = torch.ones_like(ids)  # (its start token is also its padding id)
            greedy = hf.generate(
                ids, attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0
            )
        top = analysis.logit_lens_top(run.model.net, run.trace, top=5, rows="last")
        assert torch.equal(top["top_id"][0], logits.topk(5, dim=-1).indices), case
        new = greedy[0, ids.shape[1] :].tolist()
        words = run.model.tokenizer.decode(new, skip_special_tokens=True)
        assert "\ufffd" not in words  # whole UTF-8: the table's reading is the decoder's
        assert lm_continuation(run) == run.model.tokenizer.text(new) == words, case
        out = render("output", run, Selection())
        assert out["steps_table"].shape[0] == ids.shape[1]
        assert "Greedy continuation" in out["prediction"]
        assert "could not be drawn" not in str(out)


def test_the_logit_lens_top_equals_the_full_lens(runs):
    run = runs["llama"]
    net, trace = run.model.net, run.trace
    full = analysis.logit_lens(net, trace)  # (L+1, T, V), through the model's RMSNorm
    answers = [*trace.input_ids[0, 1:].tolist(), None]
    top = analysis.logit_lens_top(net, trace, answers=answers, top=3)
    p, i = full.topk(3, dim=-1)
    assert torch.equal(top["top_id"], i) and torch.allclose(top["top_p"], p)
    right = full[:, torch.arange(len(answers) - 1), trace.input_ids[0, 1:]]
    assert torch.allclose(top["answer_p"][:, :-1], right)
    assert torch.isnan(top["answer_rank"][:, -1]).all()
    tail = analysis.logit_lens_top(net, trace, answers=answers, top=3, first=4)
    assert torch.equal(tail["top_id"], i[:, 4:]) and torch.allclose(tail["top_p"], p[:, 4:])
    normed = net.decoder.final_norm(trace.hidden_states["decoder"][0, -1])
    assert type(net.decoder.final_norm).__name__ == "RMSNorm"
    assert torch.allclose(full[-1], torch.softmax(net.lm_head(normed), -1), atol=1e-6)


def test_a_long_texts_lens_reads_its_last_positions_and_its_continuation_is_shorter(eng, folders):
    from engine import LM_NEW_TOKENS, lm_steps
    from ui.tabs.output import LENS_POSITIONS

    text = " ".join(["the cat sat on the mat"] * 30)
    run = eng.analyse(text, CUSTOM_PREFIX + folders["llama"])  # 2048 positions (GPT-2s: 64)
    n = run.trace.input_ids.shape[1]
    assert n > LENS_POSITIONS and 0 < lm_steps(n) < LM_NEW_TOKENS
    out = render("output", run, Selection())
    lens = out["lens_plot"]
    assert f"the last {LENS_POSITIONS} of {n} positions" in lens.layout.title.text
    assert len(lens.data[0].x) == LENS_POSITIONS and lens.data[0].x[0].startswith(f"{n - 64}·")
    net = run.model.net
    with torch.no_grad():
        generated = net.generate(run.trace.input_ids, max_new_tokens=lm_steps(n))
    words = run.model.tokenizer.text(generated[0, n:].tolist())
    assert lm_continuation(run) == words and "Greedy continuation" in out["prediction"]
    longer = eng.analyse(" ".join([text] * 3), CUSTOM_PREFIX + folders["llama"])
    assert lm_steps(longer.trace.input_ids.shape[1]) == 0 and lm_continuation(longer) is None
    said = render("output", longer, Selection())["prediction"]
    assert "written for texts of up to 384 tokens" in said


def test_a_language_models_text_is_cut_at_512_tokens_with_a_sentence(eng, folders):
    from engine import LM_MAX_TOKENS

    run = eng.analyse("the cat sat " * 400, CUSTOM_PREFIX + folders["llama"])  # reads 2048
    assert run.trace.input_ids.shape[1] == LM_MAX_TOKENS == 512
    assert any("this app reads at most 512 of a language model's 2,048" in n for n in run.notices)


def test_the_model_tab_names_rmsnorm_rope_gqa_and_the_gated_mlp(runs):
    net = runs["llama"].model.net
    text = model_info.architecture_markdown(net.config, "cpu", net.get_num_params())
    for said in ("RMSNorm", "base θ = 500000", "Key/value heads:** 2", "SiLU", "W_gate"):
        assert said in text, said
    table = model_info.param_table(net.param_counts(), net.config)
    names = list(table.iloc[:, 0])
    assert "decoder gated MLP (W_gate, W_up, W_down)" in names
    assert "decoder Add & Norm RMSNorms" in names and "decoder final RMSNorm" in names
    assert table.iloc[-1, 1] == net.get_num_params() == sum(table.iloc[:-1, 1])
    gpt2 = runs["gpt2"].model.net.config
    assert "tied" in model_info.architecture_markdown(gpt2, "cpu", 1)


def test_the_score_breakdown_works_for_both_and_says_why_rope_has_no_split(runs):
    llama = runs["llama"]
    parts = analysis.score_breakdown(llama.trace, "decoder", 0, 5, 4, 1, net=llama.model.net)
    assert not parts["split"]["available"] and "RoPE" in parts["split"]["reason"]
    assert parts["context_check"]["difference"] < 1e-5
    gpt2 = runs["gpt2"]
    parts = analysis.score_breakdown(gpt2.trace, "decoder", 0, 2, 4, 1, net=gpt2.model.net)
    assert parts["split"]["available"] and parts["split"]["difference"] < 1e-4


def test_every_tab_draws_for_both_models(eng, folders, runs):
    for case, path in folders.items():
        batch = eng.analyse(TEXT, CUSTOM_PREFIX + path, second="Dogs bark.")
        for tab in BY_ID:
            if tab == "train":
                continue
            out = render(tab, runs[case], Selection(), batch=batch if tab == "masks" else None)
            assert "could not be drawn" not in str(out), (case, tab)


def test_a_bigger_language_models_text_is_cut_where_its_trace_fits_the_cache(folders):
    """Qwen2.5-0.5B's trace at 512 tokens is 387 MiB, over the trace cache's 384 MiB, and 509
    tokens fit (bench/bench_lm.py): its text is cut where the trace fits, and the notice says so."""
    from types import SimpleNamespace

    from engine import TraceCache, tokens_that_fit

    qwen05 = SimpleNamespace(n_layers=24, n_heads=14, d_model=896)
    assert tokens_that_fit(qwen05, TraceCache().max_bytes) == 508  # 509 fit: never late
    small = Engine(device="cpu", allowed=())
    small.cache = TraceCache(max_bytes=2 * 1024**2)  # a tiny budget: the tiny model's 512 won't fit
    run = small.analyse("the cat sat " * 400, CUSTOM_PREFIX + folders["llama"])
    fit = tokens_that_fit(run.model.net.config, small.cache.max_bytes)
    assert fit < 512 and run.trace.input_ids.shape[1] == fit
    assert run.trace.nbytes() <= small.cache.max_bytes
    assert any(f"this app reads at most {fit:,} of a language model's" in n for n in run.notices)
