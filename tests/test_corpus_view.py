"""The Heads tab's corpus (issue 22, item 1): the handler's table equals analysis.corpus_stats on
the same sentences, every refusal and hostile value is one sentence, uploads are closed in public
mode, and in Debian Chromium five pasted sentences give the table."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from analysis.corpus import CACHE, MAX_SENTENCES, corpus_stats, parse_corpus
from engine import Engine, InputError
from lang import speaking
from tests.apphost import CHROMIUM, serve_app
from ui.handlers import Ask, Views
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
def views():
    return Views(Engine(device="cpu"), ViewState("time flies like an arrow", "bert"), {"bert"})


@pytest.mark.slow
def test_the_english_sample_gives_one_row_per_head_as_corpus_stats_does(views):
    CACHE.clear()
    out = views.corpus_run(Ask(page="corpus-en"), "", "en", None)
    table = out["corpus_table"]
    assert table.shape[0] == 6 * 12  # one row per (layer, head) of the bundled BERT
    assert list(table.columns[:2]) == ["layer", "head"]
    said = out["corpus_said"]
    assert "202 sentences (the English sample)" in said and "cut at 32 tokens" in said
    assert "from the cache" not in said
    # The same sentences through the lower floor, computed afresh (another batch size).
    CACHE.clear()
    net, tok = views.engine.model("bert").net, views.engine.model("bert").tokenizer
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
    again = views.corpus_run(Ask(page="corpus-en"), "", "en", None)
    assert "from the cache" in again["corpus_said"]


def test_pasted_sentences_on_a_decoder_and_an_encoder_decoder(views):
    for model, stack in (("induction", "decoder"), ("dates", "cross")):
        views.sessions.of(f"corpus-{model}").run = ViewState("abc", model)
        ask = Ask(page=f"corpus-{model}", sel=Selection(stack=stack))
        out = views.corpus_run(ask, "abcabc\nxyzxyz\nqwq", "none", None)
        config = views.engine.model(model).net.config
        assert out["corpus_table"].shape[0] == config.n_layers * config.n_heads, model
        assert "3 sentences (pasted)" in out["corpus_said"]
    assert "the encoder's self-attention is measured" in out["corpus_said"]  # dates, cross


def test_too_many_lines_or_none_or_too_long_are_one_sentence(views):
    too_many = "\n".join(f"sentence {i}" for i in range(MAX_SENTENCES + 1))
    with pytest.raises(InputError) as refused:
        views.corpus_run(Ask(page="corpus-refused"), too_many, "none", None)
    assert sentence(refused.value).startswith(f"The corpus has {MAX_SENTENCES + 1} sentences")
    with speaking("zh-CN"):
        assert "语料有" in sentence(refused.value)
    with pytest.raises(InputError, match="The corpus is empty"):
        views.corpus_run(Ask(page="corpus-refused"), " \n\t\n", "none", None)
    with pytest.raises(InputError, match="Sentence 2 has 501 characters"):
        views.corpus_run(Ask(page="corpus-refused"), "short\n" + "x" * 501, "none", None)


HOSTILE = [None, -1e308, 1e308, "NaN", {"a": 1}, [1, [2]], "x" * 30_000, "../../etc/passwd"]


def test_any_value_in_any_field_is_an_answer_or_one_sentence(views):
    for value in HOSTILE:
        for args in ((value, "none", None), ("", value, None), ("", "none", value)):
            try:
                out = views.corpus_run(Ask(page="corpus-hostile"), *args)
            except InputError as exc:
                assert sentence(exc) and "could not be analysed" not in sentence(exc)
            else:
                assert "corpus_table" in out, args


def test_uploads_are_read_and_closed_in_public_mode(views, tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\ufeff" + "\n".join(FIVE) + "\n", encoding="utf-8")
    out = views.corpus_run(Ask(page="corpus-upload"), "", "none", str(path))
    assert "5 sentences (uploaded)" in out["corpus_said"]
    public = SimpleNamespace(engine=SimpleNamespace(public=True))
    with pytest.raises(InputError, match="Uploads are closed"):
        Views.corpus_source(public, "", "none", str(path))
    assert Views.corpus_source(public, "one\ntwo", "none", None) == ("one\ntwo", "pasted")
    binary = tmp_path / "b.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(InputError, match="not UTF-8"):
        views.corpus_run(Ask(page="corpus-upload"), "", "none", str(binary))


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
