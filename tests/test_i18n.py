"""The page's words in English and 简体中文 (ui/i18n.py), without a browser: the page's labels
reach Gradio's i18n, the language switch is wired, Gradio's own words are still its own, and
the API still speaks plain English. (The table of words itself: tests/test_words.py.)"""

from __future__ import annotations

import json
import re

import pytest

import app
import lang
import ui.js as ui_js
from lang import speaking
from ui import i18n


@pytest.fixture(scope="module")
def demo():
    return app.build_demo()


def test_keys_are_stable_and_dotless(demo):
    # Gradio's lookup reads "a.b" as a nested key: keys are hashes, never the text itself;
    # short ones (every page open downloads them), one a word.
    assert all("." not in key for key in i18n.ENGLISH)
    assert len(i18n.ENGLISH) == len(lang.ZH), "two words share a key: lengthen key_of's hash"
    words = i18n.page_i18n(demo).translations
    assert set(words) == {"en", "zh-CN", "zh"}
    assert words["zh"][i18n.key_of("Layer")] == "层"


def test_the_page_downloads_only_the_words_it_names_and_its_chinese_once(demo):
    """Gradio's dictionaries travel with every page open: the table's entries for the page's
    labels and tables' headers, not the server's sentences; our Chinese once, as "zh" (a
    zh-CN page falls back to it), and under "zh-CN" only the words gradio_words.js reads."""
    words = i18n.page_i18n(demo).translations
    ours = {i18n.ENGLISH[k] for k in words["en"] if k in i18n.ENGLISH}
    assert {"Layer", "Lecture deck (offline HTML)", "layer", "{measure}_mean"} <= ours
    assert not {"Link to this view", "step {step}"} & ours  # said by the server, per run
    assert len(ours) < len(lang.ZH) / 3
    assert set(words["zh"]) == {i18n.key_of(en) for en in ours} | set(i18n.GRADIO_ZH["keys"])
    assert set(words["zh-CN"]) == set(i18n.SCRIPT_WORDS) <= set(words["en"])
    assert {k.split("-")[0] for k in words["zh-CN"]} == {"gradio", "plotly"}


def test_a_tables_header_is_said_with_the_words_the_browser_finds():
    assert i18n.header_words("layer") == ["layer"]
    assert i18n.header_words("entropy_mean") == ["{measure}_mean", "entropy"]
    assert i18n.header_words("not a word") == []


def test_text_without_a_translation_stays_a_plain_string():
    assert i18n.t("bertviz") == "bertviz"
    assert str(i18n.t("Layer")).startswith("__i18n__")


def test_the_api_names_every_parameter_in_plain_english(demo):
    info = demo.get_api_info()
    params = info["named_endpoints"]["/run"]["parameters"]
    labels = [p["label"] for p in params]
    assert all(isinstance(label, str) for label in labels), labels
    assert not any("__i18n__" in label or "translation_metadata" in label for label in labels)
    assert labels[:2] == ["Text", "Model"]
    assert "Layer" in labels and "Colour scale" in labels
    assert all(p["parameter_has_default"] for p in params)
    assert "__i18n__" not in json.dumps(info["named_endpoints"]["/run"]["returns"])


def test_example_headers_are_plain_text(demo):
    config = demo.get_config_file()
    dataset = next(
        c for c in config["components"] if c.get("props", {}).get("elem_id") == "examples"
    )
    assert dataset["props"]["headers"][:2] == ["Text", "Model"]


def test_the_switch_changes_the_locale_in_the_browser_and_redraws_privately(demo):
    """The switch changes the page's words in the browser (no request); its one Python event
    draws the visible tab again in the new language and is no API endpoint."""
    config = demo.get_config_file()
    switch = next(c for c in config["components"] if c.get("props", {}).get("elem_id") == "lang")
    deps = [d for d in config["dependencies"] if switch["id"] in [t[0] for t in d["targets"]]]
    deps += [d for d in config["dependencies"] if switch["id"] in d["outputs"]]
    browser = [d for d in deps if not d["backend_fn"]]
    python = [d for d in deps if d["backend_fn"]]
    assert len(browser) == 2 and len(python) == 1  # load + switch in JS; one redraw
    assert python[0]["api_visibility"] == "private" and switch["id"] in python[0]["inputs"]
    language_js = ui_js.source("language.js")
    assert "changeLocale" in language_js and "ta.loadLocale = async" in language_js
    assert "relang-go" in language_js


def test_every_python_event_hears_the_page_language(demo):
    config = demo.get_config_file()
    switch = next(c for c in config["components"] if c.get("props", {}).get("elem_id") == "lang")
    python = [d for d in config["dependencies"] if d["backend_fn"]]
    deaf = [d["id"] for d in python if switch["id"] not in d["inputs"]]
    examples = next(
        c for c in config["components"] if c.get("props", {}).get("elem_id") == "examples"
    )
    # Gradio's own example click only copies the example into the inputs (then Run follows).
    copies = [d["id"] for d in python if d["inputs"] == [examples["id"]]]
    assert len(python) > 20 and deaf == copies, deaf


def test_a_lang_link_is_no_link_error():
    from ui.state import ViewState, parse_link

    default = ViewState("time flies", "bert")
    _, invalid = parse_link("?lang=zh-CN&tab=attention", {"bert"}, ("attention",), default)
    assert invalid == []


def test_gradios_own_words_are_still_gradios():
    """ui/zh_CN_gradio.json says Gradio's own words in Chinese: each fixed word (a pattern's
    fixed part) is still written by the installed Gradio's frontend, and each key is one its
    frontend asks its dictionaries for, so an upgrade that renames one shows here."""
    from pathlib import Path

    import gradio

    assets = Path(gradio.__file__).parent / "templates" / "frontend" / "assets"
    code = "".join(p.read_text(encoding="utf-8", errors="ignore") for p in assets.glob("*.js"))
    for english, chinese in i18n.GRADIO_WORDS.items():
        fixed = re.split(r"\{\w+\}", english)[0] or english
        assert any(q + fixed in code for q in '`"'), f"Gradio no longer writes {english!r}"
        assert re.findall(r"\{\w+\}", english) == re.findall(r"\{\w+\}", chinese), chinese
        assert len(re.findall(r"\{\w+\}", english)) <= 1, english  # one slot (gradio_words.js)
    for english in i18n.GRADIO_ZH["plotly"]:  # the words of Plotly's toolbar, as Gradio's Plotly
        assert f"`{english}`" in code, f"Gradio's Plotly no longer writes {english!r}"
    for key in i18n.GRADIO_ZH["keys"]:
        assert f"`{key}`" in code, f"Gradio no longer asks for {key!r}"


def test_gradios_labels_are_page_words_the_browser_finds_by_kind(demo):
    """Gradio's fixed labels reach the page as words with keys "gradio-…" in both languages
    (ui/js/gradio_words.js finds them so), and the keys Gradio's Chinese lacks are there; an
    empty table's headers stay English in the config, on a Chinese request too, and each is a
    word of the page's dictionaries (ta.relabelHeaders says them in the page's language)."""
    from lang import tr
    from ui.tabs.heads import empty_ablation

    words = i18n.page_i18n(demo).translations
    key = i18n.key_of("Fullscreen", "gradio")
    assert words["en"][key] == "Fullscreen" and words["zh-CN"][key] == "全屏"
    assert i18n.GRADIO_ZH["keys"].items() <= words["zh"].items()
    with speaking("zh-CN"):
        headers = list(i18n.empty_table(empty_ablation).columns)
        said = [tr(header) for header in headers]
    assert headers == ["kind", "layer", "head", "hidden_change"]  # English in the config
    assert [words["zh"][i18n.key_of(header)] for header in headers] == said != headers
