"""Which heads matter, the page's view (ui/tabs/patching.py): a minimal pair patched for the model
the page has open, through the page's own handlers — the numbers equal analysis.patch_pair's,
the induction lesson holds, a refusal is a sentence, the exports read back, a link keeps the
pair, the button waits in a queue of its own, and one pair asked at once is measured once."""

from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

import analysis
import app
from engine import BUNDLED
from lang import speaking
from ui import patching_measures
from ui.handlers import Ask
from ui.render import DRAWN
from ui.state import Selection, ViewState, parse_link, share_link


@pytest.fixture(scope="module")
def demo():
    return app.build_demo()


def patched(demo, text, model, pair, page="p", lang="en", **sel) -> dict:
    """Run ``text`` on ``model`` as a page would, then press Patch with ``pair``."""
    ask = Ask(tab="patching", sel=Selection(pair=pair, **sel), page=page, lang=lang)
    views = demo.views
    with speaking(lang):
        views.run(ask, text, model, "", "", "", "final", True)
        return views.selection(ask, "patch")


def enc(tok, text):
    ids = [tok.bos_token_id, *tok.encode(text)]
    return {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=int)}


def figure(value) -> dict:
    """A drawn figure's JSON (gr.Plot's PlotData or a go.Figure)."""
    plot = getattr(value, "plot", None)
    return json.loads(plot) if isinstance(plot, str) else value.to_plotly_json()


def z_of(value) -> np.ndarray:
    """The first trace's z of a drawn figure (or of its JSON)."""
    trace = (value if isinstance(value, dict) else figure(value))["data"][0]
    z = trace["z"]
    if isinstance(z, dict):  # a typed array: {"dtype": "f4", "bdata": base64, "shape": "3, 4"}
        import base64

        shape = tuple(int(n) for n in str(z["shape"]).split(","))
        return np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(shape)
    return np.asarray(z, dtype=float)


def test_the_copy_pair_restores_through_the_heads_the_heads_table_names(demo):
    out = patched(demo, "qzxwv qzxw", "induction", "bhmtk qzxw")
    grid = z_of(out["patch_heads_plot"])  # [L, H], shares restored
    net = demo.views.engine.model("induction").net
    tok = net.tokenizer
    direct = analysis.patch_pair(net, enc(tok, "qzxwv qzxw"), enc(tok, "bhmtk qzxw"))
    np.testing.assert_allclose(grid, direct.heads.numpy(), atol=1e-6)
    # The lesson the tab states: the previous-token head of layer 0 and the induction heads of
    # layer 1 restore the copy, and they are the heads the Heads table's columns name.
    assert grid[0, 1] > 0.5 and grid[1, 0] > 0.25 and grid[1, 1] > 0.25
    trace = net.trace(**enc(tok, "qzxwv qzxw qzxwv"))
    table = analysis.head_patterns(trace, "decoder")
    prev = table[table.layer == 0].sort_values("previous_token").iloc[-1]
    assert (int(prev["layer"]), int(prev["head"])) == (0, 1)
    induction = table[table.layer == 1].sort_values("induction").iloc[-2:]
    assert {int(h) for h in induction["head"]} == {0, 1}
    said = out["patch_said"]
    assert "‹v›" in said and "position 10" in said and "L0 H1 62%" in said
    # A decoder's direct logit attribution is drawn beside it, and adds up (its title says so).
    dla = figure(out["patch_dla_plot"])
    assert f"{direct.attribution['logit_diff']:+.2f}" in dla["layout"]["title"]["text"]
    # The answer and wrong boxes list the model's top 5 (the answer first).
    answers = out["patch_answer"]["choices"]
    assert answers[0][1] == "v" and len(answers) == 5


def test_a_head_picked_in_the_grid_is_drawn_on_both_texts(demo):
    patched(demo, "qzxwv qzxw", "induction", "bhmtk qzxw", page="pick")
    ask = Ask(tab="patching", sel=Selection(pair="bhmtk qzxw"), page="pick")
    out = demo.views.pick(ask, "1,1,123")
    assert (out["layer"], out["head"]) == (1, 1)
    fig = figure(out["patch_pair_plot"])
    assert fig["layout"]["title"]["text"].startswith("L1 H1 on both texts")
    assert len(fig["data"]) == 3  # clean, corrupt, clean − corrupt
    net = demo.views.engine.model("induction").net
    clean = net.trace(**enc(net.tokenizer, "qzxwv qzxw"))
    shown = z_of(fig)
    np.testing.assert_allclose(shown, clean.attentions["decoder"][0, 1, 1].numpy(), atol=1e-6)


def test_bert_reads_the_word_a_shipped_pair_names_and_says_its_lesson(demo):
    views = demo.views
    ask = Ask(tab="patching", page="winograd")
    filled = demo.handlers.patching.example(ask, "trophy")
    assert filled["text"].endswith("too big.") and filled["pair"].endswith("too small.")
    tokens = views.engine.model(BUNDLED).tokenizer.tokenize(filled["text"])
    assert tokens[int(filled["read_at"]) - 1] == "it"  # after [CLS]
    sel = Selection(pair=filled["pair"], read_at=filled["read_at"])
    out = views.selection(replace(ask, sel=sel), "patch")
    assert f"cosine to the clean output at position {filled['read_at']}" in out["patch_said"]
    assert "The lesson:" in out["patch_said"]
    assert out["patch_dla_plot"] is None  # an encoder: no logit attribution
    grid = z_of(out["patch_heads_plot"])
    assert grid.shape == (6, 12) and np.isfinite(grid).all()


def test_unequal_texts_get_a_sentence_in_the_pages_language_and_no_figure(demo):
    for lang, words in (("en", "same number of tokens"), ("zh-CN", "词元数必须相同")):
        out = patched(demo, "time flies", BUNDLED, "time flies fast", page=f"u{lang}", lang=lang)
        assert words in out["patch_said"], out["patch_said"]
        assert out["patch_heads_plot"] is None and out["patch_csv"] is None
    out = patched(demo, "time flies", BUNDLED, "", page="empty")
    assert "Write the corrupt text first" in out["patch_said"]
    out = patched(demo, "time flies", BUNDLED, "time flies", page="same")
    assert "nothing for a patch to restore" in out["patch_said"]
    out = patched(demo, "qzxwv qzxw", "induction", "bhmtk qzxw", page="bad", answer="vv")
    assert "is not one token of this model" in out["patch_said"]


def test_exports_read_back_with_the_method_named(demo):
    out = patched(demo, "qzxwv qzxw", "induction", "bhmtk qzxw", page="export")
    grid = z_of(out["patch_heads_plot"])
    df = pd.read_csv(out["patch_csv"])
    heads = df[df.grid == "heads"].sort_values(["layer", "head"])
    np.testing.assert_allclose(heads.value.to_numpy().reshape(grid.shape), grid, atol=1e-5)
    assert set(df.grid) == {"heads", "positions", "attention_shift", "attribution"}
    assert df.method.iloc[0].startswith("activation patching, denoising")
    positions = df[df.grid == "positions"]
    assert len(positions) == 3 * 11 and positions.clean_token.iloc[1] == "q"
    with zipfile.ZipFile(out["patch_npz"]) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        assert manifest["metric"] == "logit_diff" and "Heimersheim" in manifest["papers"]
        assert manifest["tokens"]["corrupt"][:3] == ["<s>", "b", "h"]
        heads_npy = np.load(io.BytesIO(zf.read("heads.npy")))
    np.testing.assert_allclose(heads_npy, grid, atol=1e-6)


def test_a_link_keeps_the_pair_and_reopens_it():
    sel = Selection(pair="bhmtk qzxw", answer="v", read_at="10")
    state = ViewState("qzxwv qzxw", "induction", tab="patching", sel=sel)
    link = share_link(state)
    back, invalid = parse_link(link, {"induction"}, ("patching",), ViewState("x", "induction"))
    assert invalid == []
    assert (back.sel.pair, back.sel.answer, back.sel.read_at) == ("bhmtk qzxw", "v", "10")
    assert back.tab == "patching"


def test_the_patch_button_waits_in_a_queue_of_its_own_and_the_api_names_it(demo):
    config = demo.get_config_file()
    patch = [d for d in config["dependencies"] if d.get("api_name") == "patch"]
    assert len(patch) == 1
    fn = demo.fns[patch[0]["id"]]
    assert fn.concurrency_id == "alone-patch" and fn.concurrency_limit == 1
    run = [d for d in config["dependencies"] if d.get("api_name") == "run"][0]
    assert demo.fns[run["id"]].concurrency_id == "model"  # the other tabs' group, untouched


def test_one_pair_asked_at_once_is_measured_once(demo, monkeypatch):
    calls = []
    real = analysis.patch_pair

    def counted(*args, **kwargs):
        calls.append(1)
        time.sleep(0.2)  # long enough for every other page to arrive while it works
        return real(*args, **kwargs)

    monkeypatch.setattr(analysis, "patch_pair", counted)
    patching_measures.MEASURED.clear()
    DRAWN.clear()  # no page's drawing kept from the tests above either
    results = []

    def ask(i):
        out = patched(demo, "qzxwv qzxw", "induction", "bhmtk qzxw", page=f"class{i}")
        results.append(out["patch_said"])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6 and len(set(results)) == 1 and "L0 H1" in results[0]
    assert len(calls) == 1


@pytest.mark.parametrize("case", ["gpt2", "llama"])
def test_a_language_model_is_patched_with_its_attribution(demo, tmp_path, case):
    """A language model the page opens (random weights, transformers' own config classes; a
    LLaMA with grouped-query heads): the page's grid is analysis.patch_pair's, every query head
    has its row, and direct logit attribution is drawn beside it."""
    from engine import CUSTOM_PREFIX
    from tests.test_lm import save_checkpoint

    folder = tmp_path / case
    save_checkpoint(folder, case)
    model_id = CUSTOM_PREFIX + str(folder)
    clean, corrupt = "The cat sat on the mat.", "The cat sat on the cat."
    out = patched(demo, clean, model_id, corrupt, page=f"lm-{case}")
    loaded = demo.views.engine.model(model_id)
    from engine import text_ids

    ids = [text_ids(loaded, text, True) for text in (clean, corrupt)]
    assert len(ids[0]) == len(ids[1]), "the pair must stay one length in this tokenizer"
    inputs = [
        {"input_ids": torch.tensor([i]), "attention_mask": torch.ones(1, len(i), dtype=int)}
        for i in ids
    ]
    direct = analysis.patch_pair(loaded.net, *inputs)
    grid = z_of(out["patch_heads_plot"])
    assert grid.shape == (loaded.net.config.n_layers, loaded.net.config.n_heads)
    np.testing.assert_allclose(grid, direct.heads.numpy(), atol=1e-5)
    assert out["patch_dla_plot"] is not None
    # The shipped pairs for language models are offered, and one the tokenizer cannot keep
    # one length (or whose answer is no single token) is refused with a sentence.
    listed = demo.views.draw(ViewState(clean, model_id, tab="patching"), {}, force=True)[1][
        "pair_example"
    ]["choices"]
    assert [value for _, value in listed] == ["ioi", "ioi-zh"]


def test_a_deck_slide_of_the_grid_is_patched_for_the_slide(demo):
    """A lecture deck's slide names the view by its link: the grid, drawn on demand in the page,
    is measured for the slide (the offline file holds it, not an empty figure)."""
    from ui.deck import slide_of

    query = share_link(
        ViewState("qzxwv qzxw", "induction", tab="patching", sel=Selection(pair="bhmtk qzxw"))
    )
    slide = slide_of(demo.views, query, "patch-heads")
    grid = z_of(slide.figure)
    assert grid.shape == (3, 4) and grid[0, 1] > 0.5
    assert "Which heads matter" in slide.heading


def test_the_attention_tab_shows_the_pairs_head_on_both_texts_only_for_a_pair(demo):
    views = demo.views
    ask = Ask(tab="patching", sel=Selection(pair="bhmtk qzxw", layer=1, head=1), page="attn")
    views.run(ask, "qzxwv qzxw", "induction", "", "", "", "final", True)
    shown = views.tab(replace(ask, tab="attention"), "attention")
    assert shown["pair_box"]["visible"] is True
    assert figure(shown["pair_plot"])["layout"]["title"]["text"].startswith("L1 H1 on both texts")
    plain = Ask(tab="tokens", page="attn-plain")
    views.run(plain, "qzxwv qzxw", "induction", "", "", "", "final", True)
    shown = views.tab(replace(plain, tab="attention"), "attention")
    assert shown["pair_box"]["visible"] is False and shown["pair_plot"] is None
    # The head switch stays in the browser: the pair's figure is no output a head change redraws.
    from ui.tabs import BY_ID

    attention = BY_ID["attention"]
    assert not attention.server_redraws("head") and not attention.server_redraws("layer")


BOXES = ("answer", "wrong", "read_at")  # what Patch fills with what it measured


def test_coming_back_to_the_tab_keeps_its_patched_pair(demo):
    """A patched pair stays when the page shows another tab and comes back (the tab's redraw
    finds it shows this run already, with the boxes the patch filled), and a new Run clears
    it."""
    views = demo.views
    ask = Ask(tab="patching", sel=Selection(pair="bhmtk qzxw"), page="back")
    views.run(ask, "qzxwv qzxw", "induction", "", "", "", "final", True)
    out = views.selection(ask, "patch")
    assert out["patch_heads_plot"] is not None
    ask = replace(ask, sel=replace(ask.sel, **{f: out[f"patch_{f}"]["value"] for f in BOXES}))
    views.tab(replace(ask, tab="attention"), "attention")
    back = views.tab(ask, "patching")
    assert "patch_heads_plot" not in back and "patch_said" not in back  # left as they were
    again = views.run(ask, "qzxwv qzxv", "induction", "", "", "", "final", True)
    assert again["patch_heads_plot"] is None  # another run: its grids are gone


def test_coming_back_with_the_boxes_the_patch_filled_keeps_its_patched_pair(demo):
    """Patch fills the answer, wrong-token and position boxes with what it measured (the
    defaults it picked): the page's next tab event carries those values, the same measure, and
    the tab stays as it was (a page whose tab event came after the patch lost its grids)."""
    views = demo.views
    ask = Ask(tab="patching", sel=Selection(pair="bhmtk qzxw"), page="filled")
    views.run(ask, "qzxwv qzxw", "induction", "", "", "", "final", True)
    out = views.selection(ask, "patch")
    filled = {f: out[f"patch_{f}"]["value"] for f in BOXES}
    assert filled["answer"] == "v" and filled["read_at"].startswith("10")
    back = views.tab(replace(ask, sel=replace(ask.sel, **filled)), "patching")
    assert "patch_heads_plot" not in back and "patch_said" not in back, sorted(back)
    other = views.tab(replace(ask, sel=replace(ask.sel, **{**filled, "answer": "q"})), "patching")
    assert other["patch_heads_plot"] is None  # another answer: another measure, cleared


def test_the_head_on_both_texts_traces_only_the_corrupt_text(demo, monkeypatch):
    """The pair's figure of the chosen head reads the page's own run for the clean text (the
    same ids): one forward pass of the corrupt text, kept for the next draw."""
    text = "The animal didn't cross the street because it was too tired."
    found = demo.views.engine.analyse(text, BUNDLED)  # the page's run, cached
    loaded = found.model
    traced = []
    trace = type(loaded.net).trace

    def counted(self, *args, **kwargs):
        traced.append(kwargs["input_ids"][0].tolist())
        return trace(self, *args, **kwargs)

    monkeypatch.setattr(type(loaded.net), "trace", counted)
    patching_measures.RUNS.clear()
    sel = Selection(pair=text.replace("tired", "wide"))
    clean, corrupt = patching_measures.pair_runs(loaded, found, sel)
    assert clean is found.trace and len(traced) == 1
    assert patching_measures.pair_runs(loaded, found, sel)[1] is corrupt and len(traced) == 1


def test_a_refused_pair_leaves_no_lock_behind(demo):
    """A pair the measure refuses (the answer is the wrong answer: one metric for both texts)
    says so, and the next page asking for that pair is not kept waiting on a lock."""
    for _ in range(2):
        out = patched(demo, "qzxwv qzxw", "induction", "bhmtk qzxw", page="twice", answer="v",
                      wrong="v")  # fmt: skip
        assert "patch_heads_plot" not in out or out["patch_heads_plot"] is None
    assert patching_measures.MEASURED._making == {}


def test_the_language_switch_draws_the_patched_pair_again_in_the_new_language(demo):
    """The language switch (and a presenting page's new window, which asks the same way) draws
    the tab again: the patched pair comes back in the new language, from the measures kept;
    another answer in the boxes, or a new Run, leaves nothing of it."""
    views = demo.views
    ask = Ask(tab="patching", sel=Selection(pair="bhmtk qzxw"), page="lang")
    views.run(ask, "qzxwv qzxw", "induction", "", "", "", "final", True)
    out = views.selection(ask, "patch")
    ask = replace(ask, sel=replace(ask.sel, **{f: out[f"patch_{f}"]["value"] for f in BOXES}))
    with speaking("zh-CN"):
        again = views.language(replace(ask, lang="zh-CN"))
    assert np.array_equal(z_of(again["patch_heads_plot"]), z_of(out["patch_heads_plot"]))
    assert "这一课" in again["patch_said"] and "干净文本" in again["patch_said"]
    with speaking("zh-CN"):  # and coming back to the tab keeps it
        views.tab(replace(ask, tab="attention", lang="zh-CN"), "attention")
        back = views.tab(replace(ask, lang="zh-CN"), "patching")
    assert "patch_heads_plot" not in back, sorted(back)
    other = replace(ask, sel=replace(ask.sel, answer="q"))
    assert views.language(other)["patch_heads_plot"] is None  # another measure: cleared
    views.run(ask, "qzxwv qzxv", "induction", "", "", "", "final", True)
    assert views.language(ask)["patch_heads_plot"] is None  # another run: cleared
