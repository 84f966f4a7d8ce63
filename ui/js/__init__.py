"""The page's JavaScript, in real files under one namespace (``ta`` on the page), loaded once.

``HEAD`` is handed to ``launch(head=...)``: the files run in order as the page opens, before
Gradio mounts the app, and define the functions events call by name (a one-line ``js=`` each).

- ``core.js``: the page's id and language, the visible tab, the stale marker, the view in the
  address bar (history), downloads, and Gradio's Plotly chunk fetched as the page opens (its file
  name, ``serve.static.plotly_chunk()``, written before the files).
- ``fill.js``: figures filled from the head switch data, and ``ta.onDraw`` (a figure was drawn).
- ``figures.js``: drawn labels that lie over each other moved or left out; tiles pick a head.
- ``head_switch.js``: the head switch (the server's side: ui/tabs/attention.py), and the gates
  that ask the server only when the browser cannot draw a change itself.
- ``layer_switch.js``: the Inside-a-layer tab's step switch (the server's side: ui/tabs/layer.py).
- ``language.js``: English / 简体中文 through Gradio's own dictionaries, and the words Gradio
  leaves alone (the examples' and the empty tables' headers).
- ``gradio_words.js``: Gradio's own fixed English labels ("Fullscreen", a slider's "number input
  for …", its status line) and the figures' Plotly toolbar said in Chinese on a Chinese page.
- ``slides.js``: a figure drawn with the layout the server made for a room or a slide
  (``layout.meta.present`` / ``layout.meta.slide``: viz/present.py), keeping the words drawn now.
- ``present.js``: presentation mode (one figure fills the screen; keys switch head and layer).
- ``exports.js``: PNG and SVG downloads of a figure as a 16:9 slide.
- ``deck.js``: the lecture deck (a list of views, one link, stepping, the offline file).
- ``lesson.js``: the Output tab's step table opens at the lesson's step (the row marked ▶).
- ``phone.js``: a table wider than its box is marked, and a narrow screen says to swipe it;
  ``ta.stepSlider``, one step of a slider (the head view's step buttons, presentation's keys).
- ``patching.js``: Which heads matter: a clicked head of its grids, a shipped pair, a link.
- ``circuits.js``: How the heads connect: a clicked head of the circuit opens it on the
  Attention tab.

The words these files write go through ``ta.t('English')`` (core.js): the English is the key
of the one table of words the server also reads (``ui/zh_CN.json``, ``lang.ZH``), and
``WORDS`` holds the entries of every ``ta.t`` literal in the files, written before them as
``ta.WORDS``.

``deck_player.js`` is not loaded into the page: ui/deck.py writes it (with Plotly) into the deck's
offline file, where it steps through the slides, each scaled to the window.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from lang import ZH
from serve.static import plotly_chunk

FILES = (
    "core.js",
    "fill.js",
    "figures.js",
    "head_switch.js",
    "layer_switch.js",
    "language.js",
    "gradio_words.js",
    "slides.js",
    "present.js",
    "exports.js",
    "deck.js",
    "lesson.js",
    "phone.js",
    "patching.js",
    "circuits.js",
)
HERE = Path(__file__).resolve().parent


def source(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


# ta.t('English words'): one quoted literal, no escapes (the literal is the table's key).
WORD = re.compile(r"\bta\.t\('([^'\\]*)'\)")


def page_words() -> list[str]:
    """The English of every ta.t('…') in the page's files, in order, once each."""
    return list(dict.fromkeys(w for name in FILES for w in WORD.findall(source(name))))


WORDS = {"zh-CN": {word: ZH[word] for word in page_words() if word in ZH}}
CHUNK = (
    f"(window.ta = window.ta || {{}}).plotlyChunk = {json.dumps(plotly_chunk())};\n"
    f"window.ta.WORDS = {json.dumps(WORDS, ensure_ascii=False)};"
)
HEAD = "\n".join(f"<script>\n{text}</script>" for text in [CHUNK, *map(source, FILES)])
assert "</script" not in CHUNK + "".join(map(source, FILES)), "a file would end its tag"
