"""Our words in the page's language, English or 简体中文: the one table and the one lookup.

Code keeps its English where it is and says it through ``tr``: ``tr("Layer {layer}", layer=2)``.
The English pattern is the key; ``ui/zh_CN.json``, the one table of our words, maps it to Chinese
with the same ``{fields}``. Text with no entry stays English; tokens, numbers and model ids are
fields, never translated. The same table names the page's labels (``ui.i18n.t`` hands them to
Gradio's i18n, which says them in the browser) and the words of the page's scripts
(``ta.t('…')``, ui/js/__init__.py); only Gradio's own words keep a file of their own
(``ui/zh_CN_gradio.json``).

The language is a context variable, set once per request where the event enters the app
(``speaking(lang)`` in app.App) and reset when it leaves, so every function below it, viz
included, speaks that language with no ``lang`` argument. Its default is English: a notebook
calling viz gets the figures it always got.

Text made before anyone knows the language (an engine notice, cached with its trace) is a
``Msg``: a plain English ``str`` that remembers its pattern, so ``tr(msg)`` says it again later in
the language of whoever reads it.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

WORDS_FILE = Path(__file__).resolve().parent / "ui" / "zh_CN.json"
BOLD = re.compile(r"\*\*(.+?)\*\*", re.S)


def bold_tags(text: str) -> str:
    """Markdown bold as <b> tags: CommonMark leaves ``**`` literal beside CJK punctuation
    (``**模型输出什么。**模型…`` shows its stars), while a tag is bold in Markdown and in Plotly."""
    return BOLD.sub(r"<b>\1</b>", text)


ZH: dict[str, str] = {
    en: bold_tags(zh) for en, zh in json.loads(WORDS_FILE.read_text(encoding="utf-8")).items()
}
LOCALE: ContextVar[str] = ContextVar("transformer_anatomy_locale", default="en")
USED: set[str] = set()  # the English tr() and ui.i18n.t were asked for (tests find missing words)


def locale_of(value: object) -> str:
    """ "zh-CN", "zh", "zh-Hans", "zh-TW" … → "zh-CN" (the one Chinese we have); else "en"."""
    return "zh-CN" if isinstance(value, str) and value.lower().startswith("zh") else "en"


@contextlib.contextmanager
def speaking(lang: object) -> Iterator[str]:
    """Say everything inside the block in ``lang`` (this thread or task only), then restore."""
    token = LOCALE.set(locale_of(lang))
    try:
        yield LOCALE.get()
    finally:
        LOCALE.reset(token)


class Msg(str):
    """English text (a ``str``, as before) that can be said again in another language by ``tr``."""

    pattern: str
    fields: dict

    def __new__(cls, pattern: str, /, **fields) -> Msg:
        text = super().__new__(cls, pattern.format(**fields) if fields else pattern)
        text.pattern, text.fields = pattern, fields
        return text


class Note(Msg):
    """A Msg that informs (what the model did, a switch the user chose): the status line shows
    it without the warning sign it gives what went wrong or was cut."""


def tr(text: str, /, **fields) -> str:
    """``text`` in the current language, its ``{fields}`` filled in (a Msg keeps its own)."""
    if isinstance(text, Msg):
        fields = {k: tr(v) if isinstance(v, Msg) else v for k, v in text.fields.items()} | fields
        text = text.pattern
    if len(USED) < 10_000:  # dynamic text (an exception's words) must not grow it forever
        USED.add(text)
    pattern = ZH.get(text, text) if LOCALE.get() == "zh-CN" else text
    return pattern.format(**fields) if fields else pattern


def message_of(exc: BaseException) -> str:
    """An exception's message: our own (raised with a ``Msg``) in the current language, a
    library's as it wrote it."""
    first = exc.args[0] if len(exc.args) == 1 else None
    return tr(first) if isinstance(first, Msg) else str(exc)


def ordinal(n: int) -> str:
    """ "3rd" in English, "3" in Chinese (where the words around it say the rest)."""
    if LOCALE.get() != "en":
        return str(n)
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
