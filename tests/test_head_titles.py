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
from viz.measure import title_px, wrap
from viz.screen import TOOLBAR, Screen, boxes

TEXT = "hello hello"
RUNS = {
    "induction": ("induction", TEXT, "decoder"),
    "dates": ("dates", "22 November 2026", "encoder"),
}
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


def drawn(
    trace, layer: int, head: int, scale: str, screen: str, note: str = "", run=RUNS["induction"]
) -> dict:
    """The head view of (layer, head) as the server sends it to a page with ``screen``: titled
    for a slide, any note of the tab's under the head's part, laid out. ``run``: (model, text,
    stack)."""
    model, text, stack = run
    fig = attention.head_figure(trace, stack, layer, head, scale=scale)
    if note:  # as the Attention tab says words, norms or random weights (ui/tabs/attention.py)
        fig.layout.title.text = f"{fig.layout.title.text}<br><sup>{note}</sup>"
    return slide_figure(fig, model, text, Screen.parse(screen))["layout"]


@pytest.fixture(scope="module")
def dates():
    """The dates model's encoder on a date: two of its eight heads faint on "auto" (a title line
    more: two in English on a phone), six strong."""
    from engine import Engine

    return Engine(device="cpu").analyse(RUNS["dates"][1], "dates").trace


def layout_of_title(layout: dict) -> tuple:
    """What places a head view's title and map: the top margin, the height, the title's y."""
    return layout["margin"]["t"], layout["height"], round(layout["title"]["y"], 6)


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
@pytest.mark.parametrize("screen", SCREENS)
@pytest.mark.parametrize("scale", ["auto", "head"])
def test_every_head_of_a_text_is_laid_out_alike_with_room_for_its_title(dates, lang, screen, scale):
    """Faint heads' titles have a line (or two, wrapped on a phone) that strong heads' have not:
    the server keeps room for the tallest title any head of the text can have, so every head's
    layout is the first one's, and the browser's head switch, which draws another head in the
    layout of the first, draws each exactly as the server lays that head out (issue 52: a faint
    head's line lay over the map's top labels on a phone)."""
    with speaking(lang):
        lays = [drawn(dates, lay, h, scale, screen, run=RUNS["dates"]) for lay in range(2)
                for h in range(4)]  # fmt: skip
    lines = {lay["title"]["text"].count("<br>") for lay in lays}
    assert len(lines) == (2 if scale == "auto" else 1), lines  # faint and strong heads
    assert len({layout_of_title(lay) for lay in lays}) == 1
    box = boxes(Screen.parse(screen))[0]
    band = 0 if box.phone else TOOLBAR
    for lay in lays:  # each title clear of the map: the top holds every title's lines
        assert title_px(lay["title"]["text"], box.title) + 14 + band <= lay["margin"]["t"] + 0.5


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


def open_head_view(
    browser, app_url, lang: str, size: str, query: str = "", model="induction", text=TEXT, **options
):
    width, height = map(int, size.split("x"))
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    page = context.new_page()
    page.goto(f"{app_url}?model={model}&tab=attention&lang={lang}&text={quote(text)}{query}")
    page.wait_for_function(READY, timeout=60_000)
    page.wait_for_function(f"() => {HEAD_GD}?.layout?.meta?.head", timeout=60_000)
    page.wait_for_function("() => window.ta.fill?.held", timeout=60_000)  # the run's heads
    return context, page


# The drawn title's lowest point, the highest of the map's row labels and the plot's top (px).
BOXES_JS = f"""() => {{
  const gd = {HEAD_GD}, top = gd.getBoundingClientRect().top + gd._fullLayout._size.t;
  const rows = [...gd.querySelectorAll('.ytick text')].map((t) => t.getBoundingClientRect())
    .filter((r) => r.width);
  return [gd.querySelector('.gtitle').getBoundingClientRect().bottom,
          Math.min(...rows.map((r) => r.top)), top];
}}"""


def assert_titles(page, trace, lang: str, layer: int, head: int, run=RUNS["induction"]) -> None:
    """The figure shows (layer, head), its drawn title names that head, its title is the one the
    server draws for that head on this page's screen, laid out as the server lays that head out,
    and drawn clear of the map's top labels."""
    page.wait_for_function(f"() => {HEAD_GD}.layout.meta.head.join() === '{layer},{head}'")
    _, svg, text = page.evaluate(SHOWN_JS)
    named = re.match(NAMES[lang], svg)
    assert named and named.groups() == (str(layer), str(head)), (layer, head, svg)
    screen = page.evaluate("() => ta.screen()")
    with speaking(lang):
        server = drawn(trace, layer, head, "auto", screen, run=run)
    assert text == server["title"]["text"], (layer, head, screen)
    shown = page.evaluate(f"""() => {{ const gd = {HEAD_GD}, l = gd._fullLayout;
      return {{margin: {{t: l.margin.t}}, height: l.height, title: {{y: l.title.y}},
               big: gd.layout.taBig}};
    }}""")
    laid = server["meta"]["present"]["layout"] if shown["big"] else server  # presented: the room's
    assert layout_of_title(shown) == layout_of_title(laid), (layer, head, screen)
    title_bottom, rows_top, plot_top = page.evaluate(BOXES_JS)
    assert title_bottom <= min(rows_top, plot_top), (layer, head, title_bottom, rows_top)


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
    assert_titles(page, traces["short"], lang, 0, 0)
    steps = [("head", "ArrowRight", 0, 1), ("head", "ArrowRight", 0, 2),
             ("layer", "ArrowRight", 1, 2), ("head", "ArrowRight", 1, 3),
             ("layer", "ArrowRight", 2, 3), ("head", "ArrowLeft", 2, 2)]  # fmt: skip
    for slider, key, layer, head in steps:
        press(page, slider, key)
        assert_titles(page, traces["short"], lang, layer, head)
    for layer, head in ((1, 0), (0, 3)):  # typed into the number fields (the gate's switch)
        for field, value in (("layer", layer), ("head", head)):
            page.fill(f"#{field} input[type=number]", str(value))
            page.press(f"#{field} input[type=number]", "Enter")
        assert_titles(page, traces["short"], lang, layer, head)
    page.locator("#head-plot").scroll_into_view_if_needed()
    shot(page, f"head_title_phone_390x844_{lang}", full_page=False)
    context.close()


@BROWSER
@pytest.mark.browser
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_phones_step_buttons_keep_each_heads_title_clear_of_the_map(
    app_url, browser, dates, lang
):
    """The dates model's encoder on a phone, faint heads (a title line more) and strong ones
    stepped by the head view's own ◀ ▶ buttons (taps) and by the slider's keys: each title is the
    server's, laid out as the server lays that head out, its lowest line above the map's top
    labels (it lay over them: issue 52)."""
    _, text, _ = RUNS["dates"]
    context, page = open_head_view(
        browser, app_url, lang, "390x844", has_touch=True, is_mobile=True, device_scale_factor=2,
        model="dates", text=text,
    )  # fmt: skip
    assert_titles(page, dates, lang, 0, 0, RUNS["dates"])
    buttons = page.locator("#head-steps button")  # ◀ layer, layer ▶, ◀ head, head ▶
    lines = set()
    for index, layer, head in ((3, 0, 1), (3, 0, 2), (3, 0, 3), (1, 1, 3), (2, 1, 2), (2, 1, 1)):
        buttons.nth(index).tap()
        assert_titles(page, dates, lang, layer, head, RUNS["dates"])
        lines.add(page.evaluate(f"() => {HEAD_GD}.layout.title.text").count("<br>"))
    press(page, "layer", "ArrowLeft")
    assert_titles(page, dates, lang, 0, 1, RUNS["dates"])
    assert len(lines) == 2, lines  # faint heads' titles and strong ones', stepped between
    page.locator("#head-plot").scroll_into_view_if_needed()
    shot(page, f"head_title_faint_phone_390x844_{lang}", full_page=False)
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
        assert_titles(page, traces["short"], lang, layer, head)
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
