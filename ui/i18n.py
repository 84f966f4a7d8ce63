"""The page's words in English and 简体中文, through Gradio's own i18n (gr.I18n).

Code keeps its English text where it is and wraps it: ``label=t("Layer")``. The Chinese is in the
one table of our words (``ui/zh_CN.json``, ``lang.ZH``), the same the server's ``lang.tr`` reads;
``t`` returns a ``gr.I18n`` marker whose key is a short hash of the English, so the browser shows
the page in its own language (zh-CN / zh-* → 简体中文, anything else English). Text with no entry
stays English. Gradio's dictionaries hold only the words the built page asks the browser to say
(its labels and its tables' headers, ``page_i18n``), chosen from the table when ``Blocks.launch``
hands them to Gradio; nothing is added to the table. Our Chinese is sent once, as "zh":
Gradio's frontend falls back from zh-CN (or zh-TW …) to it.

The language switch (``LANG_SWITCH``) and ``?lang=zh-CN`` change the locale in the browser with
Gradio's ``changeLocale`` (the same call as the footer's Settings panel); the choice is kept in
localStorage. The switch is also an input of every Python event, so the server says what it
writes per run (the status line, figure titles, tables) in the same language (``lang.py``).

Gradio's examples table never translates its column headers and choice names (a marker shows
raw): they stay English in the config (``plain_headers``) and ``relabel_examples`` names them in
the browser from the same dictionaries, again after each switch and page turn. A table's headers
are no marker either: the tables drawn only on demand show their empty value's headers in English
in the config (``empty_table``), and the browser names them in the page's language from the same
dictionaries until they are drawn (ta.relabelHeaders in ui/js/language.js).

Gradio's own words: its dictionaries lack a few keys in Chinese (the footer's "Runs", a queue's
"In queue: 2 of 5"), and its frontend writes some words as fixed English: labels ("Fullscreen",
"Copy table data", "number input for Layer") and its status line's "processing |" and "queue:
3/5 |". ``ui/zh_CN_gradio.json`` says them in Chinese: the missing keys under Gradio's own names,
the fixed words as page words (keys ``gradio-…``, under "zh-CN") that ui/js/gradio_words.js puts
in place of Gradio's English on a Chinese page; the figures' Plotly toolbar ("Zoom", "Reset
axes") as words with keys ``plotly-…``, a Plotly locale for the figures a Chinese page draws.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import gradio as gr
import pandas as pd
from gradio.i18n import I18nData

from lang import USED, ZH, speaking

GRADIO_FILE = Path(__file__).with_name("zh_CN_gradio.json")
GRADIO_ZH: dict[str, dict[str, str]] = json.loads(GRADIO_FILE.read_text(encoding="utf-8"))
LOCALES = (("English", "en"), ("简体中文", "zh-CN"))
PAGES = "Pages:"  # Gradio's own word before an examples table's page numbers
LABELS: set[str] = set()  # the English of every label t made (as a module loads, as pages build)


def key_of(english: str, kind: str = "ta") -> str:
    """A stable translation key: Gradio's lookup splits keys at dots, so no text as key; 8 hex
    digits of a hash, as every page open downloads each key twice. The browser finds some words
    by their kind: ``ta`` ours, ``gradio`` Gradio's own word, ``plotly`` a figure toolbar's."""
    return f"{kind}-" + hashlib.sha1(english.encode("utf-8")).hexdigest()[:8]


def t(english: str) -> I18nData | str:
    """The English text as a marker the browser says in the page's language, or as is when the
    table has no entry for it."""
    USED.add(english)
    LABELS.add(english)
    return gr.I18n()(key_of(english)) if english in ZH else english


def english(value):
    """The English text behind a marker (what API clients see); anything else unchanged."""
    if isinstance(value, I18nData):
        return ENGLISH.get(value.key, value.key)
    if isinstance(value, dict) and value.get("__type__") == "translation_metadata":
        return ENGLISH.get(value.get("key"), value.get("key"))
    return value


def plain_headers(dataset: gr.Dataset) -> list[str]:
    """An examples table's column headers and choice names in English: Gradio copies the inputs'
    labels and choices there and shows a marker untranslated (``__i18n__{…}``). Returns the
    translation keys of those words (and of Gradio's "Pages:" under the table), for
    ``relabel_examples`` to name them in the page's language in the browser."""
    t(PAGES)  # a page word with a translation, like any other
    keys = [key_of(PAGES)] if PAGES in ZH else []

    def plain(value):
        if isinstance(value, I18nData):
            keys.append(value.key)
        return english(value)

    dataset.headers = [plain(header) for header in dataset.headers]
    for props in dataset.component_props:
        if props.get("choices"):
            props["choices"] = [(plain(label), value) for label, value in props["choices"]]
    return keys


def relabel_examples(elem_id: str, keys: list[str]) -> str:
    """A load event's JS: the examples table ``#elem_id`` names its headers and models (``keys``,
    from ``plain_headers``) in the page's language, and again whenever the language changes or
    the table redraws (a page turn; ta.relabelExamples in ui/js/language.js)."""
    return f"() => ta.relabelExamples({json.dumps(elem_id)}, {json.dumps(keys)})"


ENGLISH = {key_of(en): en for en in ZH}  # a marker's key back to its English (``english``)
# Gradio's fixed English (its labels, its status line's words) and the figures' Plotly toolbar
# ("Zoom", "Reset axes"): ui/js/gradio_words.js reads them by their kind, in "en" and "zh-CN".
GRADIO_WORDS = GRADIO_ZH["labels"] | GRADIO_ZH["status"]
SCRIPT_WORDS = {key_of(en, "gradio"): (en, zh) for en, zh in GRADIO_WORDS.items()} | {
    key_of(en, "plotly"): (en, zh) for en, zh in GRADIO_ZH["plotly"].items()
}


ONE_FIELD = [  # (pattern, before, after): a word of one field its Chinese keeps, "{measure}_mean"
    (en, m[1], m[3])
    for en, zh in ZH.items()
    if (m := re.fullmatch(r"([^{}]*)(\{\w+\})([^{}]*)", en)) and m[2] in zh
]


def header_words(header: str) -> list[str]:
    """The table's words a table header is said with, as ta.relabelHeaders finds them: a word of
    its own ("layer"), or a pattern of one field and the word in it ("entropy_mean" is
    "{measure}_mean" with "entropy"); none for a header the table does not say."""
    if header in ZH:
        return [header]
    for pattern, before, after in ONE_FIELD:
        inner = header[len(before) : len(header) - len(after)]
        if before + inner + after == header and inner in ZH:
            return [pattern, inner]
    return []


def page_i18n(demo: gr.Blocks) -> gr.I18n:
    """Gradio's dictionaries for a built page: the table's entries for its labels (LABELS) and
    its tables' headers (the empty tables' and the first view's, ``header_words``), Gradio's
    words its Chinese lacks, and SCRIPT_WORDS. Every page open downloads them: not the server's
    words (figure titles, status sentences), which the page's config never names."""
    tables = [b.value for b in demo.blocks.values() if isinstance(b, gr.Dataframe)]
    headers = [h for value in tables if isinstance(value, dict) for h in value.get("headers", [])]
    asked = LABELS | {word for header in headers for word in header_words(str(header))}
    ours = sorted(asked & ZH.keys())
    return gr.I18n(
        # Gradio shows messages verbatim (no ICU formatting): braces and quotes need no escaping.
        en={key_of(en): en for en in ours} | {k: en for k, (en, _) in SCRIPT_WORDS.items()},
        # One Chinese copy: Gradio's frontend (svelte-i18n) looks a word up in the page's locale,
        # then its base language, then English, so zh-CN, zh-TW and zh-HK all find it here.
        zh={key_of(en): ZH[en] for en in ours} | GRADIO_ZH["keys"],  # bold as <b> (lang.ZH)
        # ui/js/gradio_words.js reads Gradio's labels and Plotly's toolbar as "zh-CN".
        **{"zh-CN": {k: zh for k, (_, zh) in SCRIPT_WORDS.items()}},
    )


def empty_table(make: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """A table's value before it is drawn: ``make()`` (its headers through ``lang.tr``) in
    English, for the config; the browser says the headers in the page's language from the same
    table, as the page opens and after a switch (ta.relabelHeaders)."""
    with speaking("en"):
        return make()


class Blocks(gr.Blocks):
    """gr.Blocks that launches with the words of the page it built (``page_i18n``), and whose
    API description names inputs and outputs in English, never by an i18n marker
    (``/gradio_api/info`` and gradio_client's ``view_api`` would otherwise show a
    ``{key, _type}`` object as a parameter's label)."""

    def launch(self, *args, **kwargs):
        return super().launch(*args, **{"i18n": page_i18n(self), **kwargs})

    def get_api_info(self, all_endpoints: bool = False, page: str | None = None):
        info = super().get_api_info(all_endpoints=all_endpoints, page=page)
        for kind in ("named_endpoints", "unnamed_endpoints"):
            for endpoint in info.get(kind, {}).values():
                for item in [*endpoint.get("parameters", []), *endpoint.get("returns", [])]:
                    item["label"] = english(item.get("label"))
        return info


class Radio(gr.Radio):
    """A choice (named Radio: Gradio finds the browser component by the class name) that passes
    any text through: a hostile value becomes English in the handler
    (ui.events.ask_of), not a bare "Error" and a traceback from Gradio's own check."""

    def preprocess(self, payload):
        return payload if isinstance(payload, str) else None


def language_switch() -> gr.Radio:
    """The visible switch: English | 简体中文 (wired by ``wire_language``)."""
    return Radio(
        [(name, code) for name, code in LOCALES],
        value="en",
        label=t("Language"),  # the API's name (English) and screen readers' (the page's words)
        show_label=False,
        container=False,
        elem_id="lang",
        elem_classes="ta-lang",
    )


def wire_language(demo: gr.Blocks, switch: gr.Radio) -> None:
    """Browser-only events (no request, not in the API): apply ?lang / the saved choice on load,
    and change the locale when the switch is used. The page's script names the tab buttons
    Gradio leaves alone by the tabs' own keys: one Chinese word says several English ones (the
    Tokens tab's also says "token" and "word")."""
    tabs = [b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)]
    keys = [label.key for label in tabs if isinstance(label, I18nData)]
    demo.load(fn=None, js=f"() => ta.loadLocale({json.dumps(keys)})", outputs=[switch])
    switch.input(fn=None, js="(lang) => ta.setLocale(lang)", inputs=[switch])
