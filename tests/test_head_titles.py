"""The head view's title names the head it draws (issue 52): a head switched in the browser gets
its title built from that head — its part of the title (the switch payload's) wrapped as the page
wraps it, then the rest of the title as drawn (viz.screen.head_titles) — never by replacing words
in the title shown, which a phone breaks over lines. The server's side without a browser; then
a decoder model on a phone (390 × 844) and presented, in English and Chinese, in Debian Chromium
against `python app.py`. Screenshots go to artifacts/screenshots."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

from lang import speaking
from tests.apphost import CHROMIUM, serve_app
from tests.conftest import LONG_TEXT
from tests.test_e2e_browser import shot
from ui.render import slide_figure
from viz import attention
from viz.measure import wrap
from viz.screen import Screen

TEXT = "hello hello"
# a phone's figure at two widths, a narrow page, a wide one, and a wide one presenting
SCREENS = ("326x390x844", "366x390x844", "600x620x800", "1220x1280x720", "1220x1280x720xp")


@pytest.fixture(scope="module")
def traces():
    """The induction model (a decoder) on a short text and on a long one (pooled: its title says
    so, and most heads are faint)."""
    from engine import Engine

    engine = Engine(device="cpu")
    texts = {"short": TEXT, "long": LONG_TEXT}
    return {name: engine.analyse(text, "induction").trace for name, text in texts.items()}


def drawn(trace, layer: int, head: int, scale: str, screen: str, note: str = "") -> dict:
    """The head view of (layer, head) as the server sends it to a page with ``screen``: titled
    for a slide, any note of the tab's under the head's part, laid out."""
    fig = attention.head_figure(trace, "decoder", layer, head, scale=scale)
    if note:  # as the Attention tab says words, norms or random weights (ui/tabs/attention.py)
        fig.layout.title.text = f"{fig.layout.title.text}<br><sup>{note}</sup>"
    return slide_figure(fig, "induction", TEXT, Screen.parse(screen))["layout"]


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize(
    ("text", "scale"), [("short", "auto"), ("short", "head"), ("long", "auto")]
)
def test_every_heads_title_is_its_part_wrapped_then_the_rest(traces, lang, screen, text, scale):
    """What the page builds another head's title from gives, for every head, exactly the title
    the server draws for that head on that screen."""
    trace = traces[text]
    with speaking(lang):
        payload = attention.head_switch_data(trace, "decoder", scale=scale)
        note = "over words: a note of the tab's" if scale == "head" else ""
        shown = drawn(trace, 1, 2, scale, screen, note)
        meta = shown["meta"]
        assert "title_head" not in meta  # what the page needs is made of it
        room, size = meta["title_wrap"]
        for layer in range(payload["layers"]):
            for head in range(payload["heads"]):
                part = payload["titles"][layer][head]
                own = drawn(trace, layer, head, scale, screen, note)["title"]["text"]
                assert wrap(part, room, size) + meta["title_rest"] == own, (layer, head)
    if screen == SCREENS[0]:  # a phone's: the head's part broken over lines (where replacing
        # the old head's words in the title shown found none of them)
        assert shown["title"]["text"].count("<br>") > payload["titles"][1][2].count("<br>") + 1


def test_an_api_client_gets_the_figure_as_built(traces):
    """No screen, no layout: the figure keeps the head's part of its title in its meta."""
    fig = attention.head_figure(traces["short"], "decoder", 1, 2)
    layout = slide_figure(fig, "induction", TEXT, None)["layout"]
    assert layout["title"]["text"].startswith(layout["meta"]["title_head"])
    assert "title_rest" not in layout["meta"]


# ---------------------------------------------------------------- in Chromium

BROWSER = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
READY = "() => window.ta?.ready === true && !window.ta.opening"
HEAD_GD = "document.querySelector('#head-plot .js-plotly-plot')"
# The head the figure shows, its title's text as drawn (Plotly's SVG) and as laid out.
SHOWN_JS = f"""() => {{
  const gd = {HEAD_GD};
  return [gd.layout.meta.head, gd.querySelector('.gtitle').textContent, gd.layout.title.text];
}}"""
NAMES = {"en": r"Layer (\d+), head (\d+) — ", "zh-CN": r"第 (\d+) 层，第 (\d+) 个头："}


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def open_head_view(browser, app_url, lang: str, size: str, query: str = "", **options):
    width, height = map(int, size.split("x"))
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    page = context.new_page()
    text = quote(TEXT)
    page.goto(f"{app_url}?model=induction&tab=attention&lang={lang}&text={text}{query}")
    page.wait_for_function(READY, timeout=60_000)
    page.wait_for_function(f"() => {HEAD_GD}?.layout?.meta?.head", timeout=60_000)
    page.wait_for_function("() => window.ta.fill?.held", timeout=60_000)  # the run's heads
    return context, page


def assert_titles(page, traces, lang: str, layer: int, head: int) -> None:
    """The figure shows (layer, head), its drawn title names that head, and its title is the one
    the server draws for that head on this page's screen."""
    page.wait_for_function(f"() => {HEAD_GD}.layout.meta.head.join() === '{layer},{head}'")
    _, svg, text = page.evaluate(SHOWN_JS)
    named = re.match(NAMES[lang], svg)
    assert named and named.groups() == (str(layer), str(head)), (layer, head, svg)
    screen = page.evaluate("() => ta.screen()")
    with speaking(lang):
        server = drawn(traces["short"], layer, head, "auto", screen)["title"]["text"]
    assert text == server, (layer, head, screen)


def press(page, slider: str, key: str) -> None:
    """A key on a slider, as a student steps it (the browser draws the head: no request)."""
    page.focus(f"#{slider} input[type=range]")
    page.keyboard.press(key)


@BROWSER
@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_phone_head_switch_titles_the_head_it_draws(app_url, browser, traces, lang):
    """On a phone the title is broken over lines; stepping the head and the layer, by the keys
    and by the number fields, every drawn title names the head drawn."""
    context, page = open_head_view(
        browser, app_url, lang, "390x844", has_touch=True, is_mobile=True, device_scale_factor=2
    )
    assert page.evaluate(f"() => {HEAD_GD}.layout.title.text").count("<br>") >= 2  # wrapped
    assert_titles(page, traces, lang, 0, 0)
    steps = [("head", "ArrowRight", 0, 1), ("head", "ArrowRight", 0, 2),
             ("layer", "ArrowRight", 1, 2), ("head", "ArrowRight", 1, 3),
             ("layer", "ArrowRight", 2, 3), ("head", "ArrowLeft", 2, 2)]  # fmt: skip
    for slider, key, layer, head in steps:
        press(page, slider, key)
        assert_titles(page, traces, lang, layer, head)
    for layer, head in ((1, 0), (0, 3)):  # typed into the number fields (the gate's switch)
        for field, value in (("layer", layer), ("head", head)):
            page.fill(f"#{field} input[type=number]", str(value))
            page.press(f"#{field} input[type=number]", "Enter")
        assert_titles(page, traces, lang, layer, head)
    page.locator("#head-plot").scroll_into_view_if_needed()
    shot(page, f"head_title_phone_390x844_{lang}", full_page=False)
    context.close()


@BROWSER
@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_presented_head_switch_titles_the_head_it_draws(app_url, browser, traces, lang):
    """Presented, the arrow keys step heads and layers; each title drawn names its head."""
    context, page = open_head_view(browser, app_url, lang, "1280x720", "&present=1")
    page.wait_for_function("() => document.querySelector('[data-ta-shown]')?.id === 'head-plot'")
    for key, layer, head in (("ArrowRight", 0, 1), ("ArrowUp", 1, 1), ("ArrowRight", 1, 2),
                             ("ArrowUp", 2, 2), ("ArrowLeft", 2, 1)):  # fmt: skip
        page.keyboard.press(key)
        assert_titles(page, traces, lang, layer, head)
    assert page.evaluate(f"() => {HEAD_GD}.layout.taBig") is True  # the room's layout
    context.close()


@BROWSER
@pytest.mark.browser
def test_the_pages_title_wrap_is_the_servers(app_url, browser, traces):
    """ta.wrapTitle (ui/js/head_switch.js) breaks every head's title where viz.measure.wrap
    does, at a phone's room and others, in both languages (and a few texts of other scripts)."""
    titles = ["Layer 10, head 11 (kv 2) — a <sup>small</sup> part · 第 1 层 x",
              "<sup>colours 0–0.0123, this head's largest weight</sup>",
              "Ünïcödé ÀB 한국어 テキスト ｶﾀｶﾅ 😀 “quoted” &amp; &lt;tag&gt; ‖α·f(x)‖"]  # fmt: skip
    for lang in ("en", "zh-CN"):
        with speaking(lang):
            for trace in traces.values():
                for scale in ("auto", "head"):
                    payload = attention.head_switch_data(trace, "decoder", scale=scale)
                    titles += [t for row in payload["titles"] for t in row]
    cases = [[t, room, size] for t in dict.fromkeys(titles)
             for room in (60, 150, 0.98 * 326 - 12, 400) for size in (12, 15)]  # fmt: skip
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(app_url)
    page.wait_for_function(READY, timeout=60_000)
    page_wraps = page.evaluate("(cases) => cases.map((c) => ta.wrapTitle(...c))", cases)
    for (text, room, size), got in zip(cases, page_wraps, strict=True):
        assert got == wrap(text, room, size), (text, room, size)
    context.close()
