"""The Heads tab's corpus (issue 22, item 1): the handler's table equals analysis.corpus_stats on
the same sentences, every refusal and hostile value is one sentence, uploads are closed in public
mode, and in Debian Chromium five pasted sentences give the table."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.corpus import MAX_SENTENCES, corpus_stats, parse_corpus
from app import handlers
from engine import Engine, InputError
from lang import speaking
from tests.apphost import CHROMIUM, serve_app
from ui.corpus_handlers import Corpus
from ui.handlers import Ask
from ui.state import Selection, ViewState
from ui.status import sentence

ROOT = Path(__file__).resolve().parents[1]
FIVE = [
    "The cat sat on the mat.",
    "A dog barked at the cat.",
    "Rain again today, and again tomorrow.",
    "She said that she would come.",
    "The old man the boats.",
]


@pytest.fixture(scope="module")
def peers():
    return handlers(Engine(device="cpu"), ViewState("time flies like an arrow", "bert"), {"bert"})


@pytest.mark.slow
def test_the_english_sample_gives_one_row_per_head_as_corpus_stats_does(peers):
    peers.corpus.cache.clear()
    out = peers.corpus.run(Ask(page="corpus-en"), "", "en", None)
    table = out["corpus_table"]
    assert table.shape[0] == 6 * 12  # one row per (layer, head) of the bundled BERT
    assert list(table.columns[:2]) == ["layer", "head"]
    said = out["corpus_said"]
    assert "202 sentences (the English sample)" in said and "cut at 32 tokens" in said
    assert "from the cache" not in said
    # The same sentences through the lower floor, computed afresh (another batch size).
    net, tok = peers.views.engine.model("bert").net, peers.views.engine.model("bert").tokenizer
    sentences = parse_corpus((ROOT / "assets" / "corpus" / "en.txt").read_text(encoding="utf-8"))
    expected = corpus_stats(net, tok, sentences, max_tokens=32, batch_size=101).stats
    means = [c for c in expected.columns if c.endswith("_mean")]
    assert {"entropy_mean", "induction_mean", "norm_mean", "norm_share_std"} <= set(expected)
    assert list(table.columns[2:]) == list(expected.columns[2:])
    for column in [*means, *(c.replace("_mean", "_std") for c in means)]:
        np.testing.assert_allclose(table[column], expected[column], atol=6e-4, equal_nan=True)
    csv = pd.read_csv(out["corpus_csv"])
    assert (csv["sentences"] == 202).all()
    np.testing.assert_allclose(csv["entropy_mean"], expected["entropy_mean"], rtol=1e-5)
    assert Path(out["corpus_npz"]).suffix == ".npz"
    # Asked again: from the cache, at once.
    again = peers.corpus.run(Ask(page="corpus-en"), "", "en", None)
    assert "from the cache" in again["corpus_said"]


def test_pasted_sentences_on_a_decoder_and_an_encoder_decoder(peers):
    for model, stack in (("induction", "decoder"), ("dates", "cross")):
        peers.views.sessions.of(f"corpus-{model}").run = ViewState("abc", model)
        ask = Ask(page=f"corpus-{model}", sel=Selection(stack=stack))
        out = peers.corpus.run(ask, "abcabc\nxyzxyz\nqwq", "none", None)
        config = peers.views.engine.model(model).net.config
        assert out["corpus_table"].shape[0] == config.n_layers * config.n_heads, model
        assert "3 sentences (pasted)" in out["corpus_said"]
    assert "the encoder's self-attention is measured" in out["corpus_said"]  # dates, cross


def test_too_many_lines_or_none_or_too_long_are_one_sentence(peers):
    too_many = "\n".join(f"sentence {i}" for i in range(MAX_SENTENCES + 1))
    with pytest.raises(InputError) as refused:
        peers.corpus.run(Ask(page="corpus-refused"), too_many, "none", None)
    assert sentence(refused.value).startswith(f"The corpus has {MAX_SENTENCES + 1} sentences")
    with speaking("zh-CN"):
        assert "语料有" in sentence(refused.value)
    with pytest.raises(InputError, match="The corpus is empty"):
        peers.corpus.run(Ask(page="corpus-refused"), " \n\t\n", "none", None)
    with pytest.raises(InputError, match="Sentence 2 has 501 characters"):
        peers.corpus.run(Ask(page="corpus-refused"), "short\n" + "x" * 501, "none", None)


HOSTILE = [None, -1e308, 1e308, "NaN", {"a": 1}, [1, [2]], "x" * 30_000, "../../etc/passwd"]


def test_any_value_in_any_field_is_an_answer_or_one_sentence(peers):
    for value in HOSTILE:
        for args in ((value, "none", None), ("", value, None), ("", "none", value)):
            try:
                out = peers.corpus.run(Ask(page="corpus-hostile"), *args)
            except InputError as exc:
                assert sentence(exc) and "could not be analysed" not in sentence(exc)
            else:
                assert "corpus_table" in out, args


def test_uploads_are_read_and_closed_in_public_mode(peers, tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\ufeff" + "\n".join(FIVE) + "\n", encoding="utf-8")
    out = peers.corpus.run(Ask(page="corpus-upload"), "", "none", str(path))
    assert "5 sentences (uploaded)" in out["corpus_said"]
    public = SimpleNamespace(engine=SimpleNamespace(public=True))
    with pytest.raises(InputError, match="Uploads are closed"):
        Corpus.source(public, "", "none", str(path))
    assert Corpus.source(public, "one\ntwo", "none", None) == ("one\ntwo", "pasted")
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError, match="not UTF-8"):
        peers.corpus.run(Ask(page="corpus-upload"), "", "none", str(binary))


def test_public_pages_show_no_upload():
    import app

    config = app.build_demo(Engine(device="cpu"), public=True).get_config_file()
    upload = next(
        c for c in config["components"] if c.get("props", {}).get("elem_id") == "corpus-upload"
    )
    assert upload["props"]["visible"] is False
    assert app.launch_kwargs(True)["max_file_size"] == "1kb"
    assert app.launch_kwargs(False)["max_file_size"] == app.CORPUS_FILE_SIZE


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_five_pasted_sentences_give_the_table_in_the_browser(page, tmp_path):
    with serve_app() as (url, _):
        page.goto(f"{url}?tab=heads")
        page.wait_for_selector("#corpus-run")
        page.fill("#corpus-text textarea", "\n".join(FIVE))
        page.click("#corpus-run")
        page.wait_for_function(
            "() => /5 sentences/.test(document.querySelector('#corpus-said')?.innerText || '')",
            timeout=60_000,
        )
        count = "() => +document.querySelector('#corpus-table [role=grid]')"
        count += "?.getAttribute('aria-rowcount')"
        page.wait_for_function(f"() => ({count})() === 73")  # a header and 6 × 12 heads
        header = page.locator("#corpus-table [role=row]").first.inner_text()
        assert "entropy_mean" in header and "entropy_std" in header
        # ... and the same sentences uploaded as a .txt (uploads are open: not public).
        upload = tmp_path / "five.txt"
        upload.write_text("\n".join(FIVE[:4]) + "\n", encoding="utf-8")
        page.set_input_files("#corpus-upload input[type=file]", str(upload))
        page.wait_for_selector("#corpus-upload a[href], #corpus-upload .file-name", timeout=20_000)
        page.click("#corpus-run")
        page.wait_for_function(
            "() => /4 sentences \\(uploaded\\)/"
            ".test(document.querySelector('#corpus-said')?.innerText || '')",
            timeout=60_000,
        )


def test_the_table_speaks_the_pages_language_and_the_csv_keeps_its_names(peers):
    from tests.test_server_language import english_words, figure_texts

    with speaking("zh-CN"):
        out = peers.corpus.run(Ask(page="corpus-zh"), "\n".join(FIVE), "none", None)
    headers = list(out["corpus_table"].columns)
    assert headers[:4] == ["层", "头", "熵（均值）", "熵（标准差）"]
    assert "范数占比（均值）" in headers and "归纳模式（标准差）" in headers
    texts = [*headers, *figure_texts(out["corpus_distance_plot"])]
    assert [w for text in texts for w in english_words(text, set())] == []
    csv = pd.read_csv(out["corpus_csv"])
    assert {"layer", "head", "entropy_mean", "entropy_std", "norm_share_mean"} <= set(csv)
    english = peers.corpus.run(Ask(page="corpus-zh"), "\n".join(FIVE), "none", None)
    assert list(english["corpus_table"].columns[:4]) == [
        "layer",
        "head",
        "entropy_mean",
        "entropy_std",
    ]


def test_a_corpus_row_and_a_point_of_its_map_open_that_head(peers):
    from analysis import mds_2d

    out = peers.corpus.run(Ask(page="corpus-pick", tab="heads"), "\n".join(FIVE), "none", None)
    table, fig = out["corpus_table"], out["corpus_distance_plot"]
    assert "over 5 sentences" in fig.layout.title.text
    points = fig.data[0]
    assert [list(c) for c in points.customdata] == [[la, h] for la in range(6) for h in range(12)]
    # the map of the corpus's mean distances (the one-text map's drawing, other distances)
    net, tok = peers.views.engine.model("bert").net, peers.views.engine.model("bert").tokenizer
    expected = mds_2d(corpus_stats(net, tok, FIVE, max_tokens=32).distances).numpy()
    np.testing.assert_allclose(points.x, expected[:, 0], atol=1e-5)
    # a row as the page sends it (layer, head, then the values): that head everywhere
    row = table.iloc[40].tolist()
    picked = peers.views.row_pick(
        Ask(page="corpus-pick", tab="heads"), [int(row[0]), int(row[1]), *row[2:]]
    )
    assert (picked["layer"], picked["head"]) == (3, 4)
    assert "Layer 3, head 4" in picked["breakdown"]
    # a point of the map: its "layer,head,time" (ta.tilePicker), as the one-text map's
    picked = peers.views.pick(Ask(page="corpus-pick", tab="heads"), "5,11,1700000000000")
    assert (picked["layer"], picked["head"]) == (5, 11)


def test_a_link_names_a_shipped_corpus_and_the_status_link_carries_it():
    from ui.state import parse_link, share_link
    from ui.tabs import TAB_IDS

    default = ViewState("time flies like an arrow", "bert")
    state, invalid = parse_link("?corpus=zh", {"bert"}, TAB_IDS, default)
    assert (state.corpus, state.tab, invalid) == ("zh", "heads", [])  # the Heads tab by default
    state, _ = parse_link("?corpus=en&tab=attention", {"bert"}, TAB_IDS, default)
    assert (state.corpus, state.tab) == ("en", "attention")  # ... or the tab the link names
    state, invalid = parse_link("?corpus=../../etc/passwd", {"bert"}, TAB_IDS, default)
    assert (state.corpus, state.tab) == ("", "tokens")
    assert invalid == ["corpus='../../etc/passwd' is not en or zh (a shipped sample)"]
    with speaking("zh-CN"):
        said = parse_link("?corpus=fr", {"bert"}, TAB_IDS, default)[1][0]
    assert said == "corpus='fr' 不是 en 或 zh（自带的样例）"
    assert "corpus=zh" in share_link(replace(default, corpus="zh"))
    assert "corpus" not in share_link(default)


def test_opening_a_linked_corpus_measures_it_and_the_status_link_keeps_it_on_that_model():
    peers = handlers(
        Engine(device="cpu"),
        ViewState("time flies like an arrow", "bert"),
        {"bert", "seed004-encoder"},
    )
    ask = Ask(page="corpus-link")
    assert peers.corpus.link(ask) == {}  # no link named one: nothing
    opened = peers.views.deeplink(ask, "?text=hello%20world&model=seed004-encoder&corpus=zh")
    assert opened["tabs"].selected == "heads" and "corpus=" not in opened["status"]
    out = peers.corpus.link(replace(ask, tab="heads"))
    assert out["corpus_sample"] == "zh"
    assert out["corpus_table"].shape[0] == 2 * 4  # seed004-encoder: 2 layers × 4 heads
    assert "201 sentences (the Chinese sample)" in out["corpus_said"]
    assert "over 201 sentences" in out["corpus_distance_plot"].layout.title.text
    assert "corpus=zh" in out["status"] and "model=seed004-encoder" in out["status"]
    assert peers.corpus.link(replace(ask, tab="heads")) == {}  # once per link
    # Another layer on the same model: still in the link; another model: not any more.
    heads = replace(ask, tab="heads", sel=Selection(layer=1))
    assert "corpus=zh" in peers.views.selection(heads, "layer")["status"]
    rerun = peers.views.run(heads, "hello world", "bert", "", "", "", "final", True)
    assert "corpus=" not in rerun["status"]
    # A pasted corpus is never put into a link.
    pasted = peers.corpus.run(heads, "\n".join(FIVE), "none", None)
    assert "corpus=" not in pasted["status"]
    # An unknown sample in a link: named under the status line, nothing measured.
    bad = peers.views.deeplink(ask, "?text=hello&corpus=fr")
    assert "corpus='fr' is not en or zh" in bad["link_notes"]
    assert peers.corpus.link(replace(ask, tab="heads")) == {}


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_a_linked_corpus_in_chinese_its_rows_and_its_map_open_heads(page):
    from tests.test_e2e_browser import shot
    from tests.test_research_views import farthest_point

    link = "?text=hello%20world&model=seed004-encoder&corpus=zh&lang=zh-CN&layer=1&head=3"
    with serve_app() as (url, _):
        page.set_viewport_size({"width": 1280, "height": 1300})
        page.goto(url + link)
        # The link opens the Heads tab, then measures the Chinese sample (2 layers × 4 heads).
        count = "() => +document.querySelector('#corpus-table [role=grid]')"
        count += "?.getAttribute('aria-rowcount')"
        page.wait_for_function(f"() => ({count})() === 9", timeout=90_000)
        page.wait_for_selector("#corpus-distance-plot .scatterlayer .point", timeout=30_000)
        assert page.locator("#tab-heads").is_visible()
        header = page.locator("#corpus-table [role=row]").first.inner_text()
        assert "熵（均值）" in header and "熵（标准差）" in header and "entropy" not in header
        assert "201" in page.locator("#corpus-said").inner_text()
        plot = "document.querySelector('#corpus-distance-plot .js-plotly-plot')"
        title = page.evaluate(f"() => {plot}.layout.title.text")
        assert "201 句上平均" in title
        assert page.evaluate("() => document.querySelector('#corpus-sample input:checked')?.value")
        assert "corpus=zh" in page.locator("#status a").first.get_attribute("href")
        page.evaluate("() => document.querySelector('#corpus-said').scrollIntoView()")
        shot(page, "heads_corpus_zh-CN", full_page=False)

        def shown(layer: int, head: int) -> None:
            page.wait_for_function(
                f"() => document.querySelector('#layer input[type=number]').value === '{layer}'"
                f" && document.querySelector('#head input[type=number]').value === '{head}'",
                timeout=30_000,
            )

        shown(1, 3)
        # A row of the corpus table (layer 0, head 2) opens that head.
        page.locator("#corpus-table [role=row]").nth(3).locator(":scope > *").nth(2).click()
        shown(0, 2)
        # A point of the corpus's map: the head farthest from the others, not the one shown.
        x, y, layer, head = farthest_point(page, "corpus-distance-plot", but=(0, 2))
        page.mouse.click(x, y)
        shown(layer, head)
        # The English sample by hand: the status line's link and the address then name it.
        page.locator("#corpus-sample label").nth(1).click()
        page.click("#corpus-run")
        page.wait_for_function(
            "() => /202/.test(document.querySelector('#corpus-said')?.innerText || '')",
            timeout=90_000,
        )
        page.wait_for_function("() => /corpus=en/.test(location.search)", timeout=10_000)
        assert "corpus=en" in page.locator("#status a").first.get_attribute("href")
