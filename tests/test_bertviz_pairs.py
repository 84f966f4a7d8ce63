"""bertviz for two sentences: a [SEP] the user typed splits the text, and the bertviz tab passes
that split to bertviz, which then offers its sentence-pair filters (All, A → A, B → B, A → B,
B → A)."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest

from engine import BUNDLED, Engine
from tests.apphost import CHROMIUM, serve_app
from ui.state import Selection
from ui.tabs.bertviz import makers, sentence_b_start

PAIR = "the cat sat [SEP] it was tired"
ONE = "the cat sat on the mat"


@pytest.fixture(scope="module")
def eng():
    return Engine(device="cpu")


def _params(frame: str) -> tuple[dict, str]:
    """The parameters bertviz_document embeds for bertviz's loader (``bv-params``)."""
    m = re.fullmatch(r'<iframe sandbox="allow-scripts" [^<>]*srcdoc="([^"]*)"></iframe>', frame)
    assert m, frame[:300]
    doc = html.unescape(m.group(1))
    p = re.search(r'<script type="application/json" id="bv-params">(.*?)</script>', doc, re.S)
    assert p
    return json.loads(p.group(1)), doc


def _drawn(eng, text: str, **sel) -> tuple[list[str], dict, str]:
    analysis = eng.analyse(text, BUNDLED)
    view = SimpleNamespace(analysis=analysis, sel=Selection(**sel))
    params, doc = _params(makers(view)["bertviz_html"]())
    return analysis.trace.tokens[0], params, doc


@pytest.mark.parametrize(
    ("tokens", "start"),
    [
        (["[CLS]", "the", "cat", "sat", "[SEP]", "it", "was", "tired", "[SEP]"], 5),
        (["[CLS]", "the", "cat", "sat", "[SEP]"], None),  # one sentence
        (["[CLS]", "the", "cat", "sat", "[SEP]", "[SEP]"], None),  # a trailing [SEP] typed
        (["[CLS]", "a", "[SEP]", "[SEP]", "b", "[SEP]"], 3),  # sentence B: after the first
        (["<s>", "a", "</s>", "b", "</s>"], 3),  # RoBERTa / BART separators
        (["[CLS]", "a", "[SEP]", "b", "[SEP]", "[PAD]", "[PAD]"], 3),
        (["a", "b"], None),  # no separator at all (a decoder's text)
        ([], None),
    ],
)
def test_sentence_b_starts_after_a_typed_separator(tokens, start):
    assert sentence_b_start(tokens) == start


def test_bundled_tokenizer_keeps_a_typed_sep(eng):
    tokens = eng.analyse(PAIR, BUNDLED).trace.tokens[0]
    assert tokens == ["[CLS]", "the", "cat", "sat", "[SEP]", "it", "was", "tired", "[SEP]"]


@pytest.mark.parametrize("view", ["head", "model"])
def test_the_tab_passes_the_pair_split_to_bertviz(eng, view):
    tokens, params, doc = _drawn(eng, PAIR, bertviz_view=view)
    assert params["tokens"] == tokens
    assert params["sentence_b_start"] == 5  # "it": just after the typed [SEP]
    assert '<select id="filter">' in doc and doc.count("<option value=") == 5
    for name in ("All", "Sentence A -&gt; Sentence B", "Sentence B -&gt; Sentence A"):
        assert name in doc


def test_one_sentence_has_no_pair_filter(eng):
    _, params, doc = _drawn(eng, ONE)
    assert params["sentence_b_start"] is None
    assert 'id="filter"' not in doc and "<option value=" not in doc


def test_the_filter_is_named_in_chinese(eng):
    from lang import speaking

    with speaking("zh-CN"):
        _, _, doc = _drawn(eng, PAIR)
    assert "注意力：" in doc and "句子 A → 句子 B" in doc


def test_the_caption_says_how_to_get_the_pair_filters():
    from lang import ZH

    source = Path(__file__).resolve().parents[1].joinpath("ui", "tabs", "bertviz.py")
    text = source.read_text(encoding="utf-8")
    assert "Type `[SEP]` between two sentences" in text
    caption = next(en for en in ZH if "Type `[SEP]` between two sentences" in en)
    assert "`[SEP]`" in ZH[caption] and "句对" in ZH[caption]


@pytest.mark.browser
@pytest.mark.skipif(
    not Path(CHROMIUM).exists() and not os.environ.get("CI"),
    reason="Debian chromium is not installed",
)
def test_bertviz_tab_offers_the_sentence_pair_filter(page):
    with serve_app() as (url, _):
        page.goto(f"{url}?tab=bertviz&text={quote(PAIR)}")
        page.wait_for_selector("#bertviz-html iframe", timeout=60_000)
        frame = page.frame_locator("#bertviz-html iframe")
        select = frame.locator("#filter")  # only the pair's frame has one
        select.wait_for(state="attached", timeout=60_000)
        frame.locator("#vis svg").first.wait_for(state="attached", timeout=30_000)
        assert select.count() == 1
        assert select.locator("option").all_text_contents() == [
            "All",
            "Sentence A -> Sentence A",
            "Sentence B -> Sentence B",
            "Sentence A -> Sentence B",
            "Sentence B -> Sentence A",
        ]
        # bertviz redraws with the A → B block: sentence A's 5 tokens left, sentence B's 4 right
        frame.locator("#filter").select_option("3")
        frame.locator("#left text").nth(4).wait_for(state="attached")
        assert frame.locator("#left text").all_text_contents() == [
            "[CLS]",
            "the",
            "cat",
            "sat",
            "[SEP]",
        ]
        assert frame.locator("#right text").all_text_contents() == ["it", "was", "tired", "[SEP]"]
        assert (frame.locator("#bv-error").text_content() or "") == ""
