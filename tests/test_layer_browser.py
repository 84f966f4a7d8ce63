"""The Inside-a-layer tab in Chromium (issue 29): a step switch is drawn in the browser with no
request and shows exactly the figure the server draws for that step; presentation mode steps
through the cards one step a slide with PageDown at 1920×1080, on a phone (390×844) and on the
Chinese page, the address following; a lecture deck's slide holds one step."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlencode

import pytest

from analysis.layer_steps import layer_steps
from tests.apphost import CHROMIUM, record_requests

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian chromium is not installed"),
]

TEXT = "the lecturer walks the class through one layer of the model"
FIGURE = "document.querySelector('#layer-step-plot .js-plotly-plot')"
# The figure and the cards show step `n` (the figure's meta, the chosen card, the heading).
SHOWS = f"""(n) => {{
  const gd = {FIGURE};
  const chosen = document.querySelector('#layer-cards .ta-step-chosen');
  const now = document.querySelector('#layer-cards .ta-step-now');
  return !!(gd && gd.layout && gd.layout.meta && gd.layout.meta.step === n && chosen
    && chosen.dataset.step === String(n) && now && now.textContent === String(n)
    && gd.querySelector('.main-svg'));
}}"""


@pytest.fixture(scope="module")
def demo():
    import app

    return app.build_demo(public=False)


@pytest.fixture(scope="module")
def served(demo):
    from tests.inprocess import serve_demo

    with serve_demo(demo) as url:
        yield url, demo


def steps_of(demo, text=TEXT, layer=1):
    analysis = demo.views.engine.analyse(text, "bert")
    return layer_steps(analysis.trace, "encoder", layer)


def open_layer(page, url, **params):
    query = {"text": TEXT, "tab": "layer", "layer": 1, "token": 3, "step": 0, **params}
    page.goto(url + "?" + urlencode(query))
    page.wait_for_function(SHOWS, arg=int(query["step"]), timeout=60_000)


def figure_of(page) -> dict:
    """The drawn figure's title, z (as drawn: Plotly's decoded arrays), axes, margins, size,
    colours and meta (what the server laid it out as)."""
    return page.evaluate(
        f"""() => {{
      const gd = {FIGURE}, t = gd._fullData[0], l = gd._fullLayout;
      const rows = (z) => Array.from(z || [], (r) => Array.from(r.length === undefined ? [r] : r));
      return {{title: gd.layout.title.text, type: t.type,
        z: t.type === 'bar' ? Array.from(t.y) : rows(t.z), x: Array.from(t.x || []).slice(0, 50),
        y: Array.from(t.y || []).slice(0, 50), margin: [l.margin.l, l.margin.b, l.margin.t],
        height: l.height, width: l.width, shapes: (gd.layout.shapes || []).length,
        title_font: l.title.font.size, meta: gd.layout.meta,
        colours: JSON.stringify(t.colorscale || t.marker?.color), zmid: t.zmid ?? null}};
    }}"""
    )


def set_step(page, n: int) -> None:
    page.fill("#step input[type=number]", str(n))
    page.press("#step input[type=number]", "Enter")


@pytest.mark.parametrize("size", [(1280, 1000), (390, 844)], ids=["desktop", "phone"])
def test_a_step_switch_asks_nothing_and_draws_what_the_server_draws(served, browser, size):
    """On a desktop and on a phone, a step drawn by the switch is the figure the server draws for
    that step on that screen: its title (with the slide's line), margins, size and meta."""
    from tests.test_e2e_browser import shot

    url, demo = served
    steps = steps_of(demo)
    viewport = {"width": size[0], "height": size[1]}
    page = browser.new_page(viewport=viewport)
    open_layer(page, url)
    requests = record_requests(page)
    drawn = {}
    for n in (3, 9, 14, len(steps) - 1, 0, 16):
        set_step(page, n)
        page.wait_for_function(SHOWS, arg=n, timeout=10_000)
        drawn[n] = figure_of(page)
        assert drawn[n]["title"].startswith(steps[n].name.replace("&", "&amp;")), drawn[n]
        assert "<sup>bert · “the lecturer walks" in drawn[n]["title"]
        assert drawn[n]["meta"]["laid_out"] and drawn[n]["meta"]["step"] == n
        page.wait_for_function(f"() => location.search.includes('step={n}')")
        if n == 9:
            page.wait_for_timeout(300)
            shot(page, f"layer_step_switched_{size[0]}x{size[1]}")
    assert requests == [], f"a step switch asked the network: {requests[:5]}"
    if size[0] < 560:  # laid out for the phone: the figure as wide as the phone's card
        assert all(fig["width"] <= size[0] for fig in drawn.values()), drawn
    for n in (9, 16):  # the same step drawn by the server (a link to it) looks the same
        fresh = browser.new_page(viewport=viewport)
        open_layer(fresh, url, step=n)
        assert figure_of(fresh) == drawn[n]
        fresh.close()
    page.close()


def bar_text(page) -> str:
    return page.inner_text("#ta-bar .ta-bar-view")


def present_and_step(page, url, shots: str, asked: list | None = None, **params) -> list[int]:
    """Open the tab presented, press PageDown through a few steps and PageUp once; return the
    steps the address named after each key (and put the server events asked meanwhile into
    ``asked``)."""
    from tests.test_e2e_browser import shot

    open_layer(page, url, present=1, **params)
    page.wait_for_function("() => document.querySelector('[data-ta-shown]')")
    if asked is not None:
        page.on("request", lambda r: asked.append(r.url) if "/queue/join" in r.url else None)
    seen = []
    for key, n in (("PageDown", 1), ("PageDown", 2), ("PageDown", 3), ("PageUp", 2)):
        page.keyboard.press(key)
        page.wait_for_function(SHOWS, arg=n, timeout=10_000)
        page.wait_for_function(f"() => location.search.includes('step={n}')")
        seen.append(int(re.search(r"step=(\d+)", page.evaluate("location.search"))[1]))
    for _ in range(7):  # on to "attention weights"
        page.keyboard.press("PageDown")
    page.wait_for_function(SHOWS, arg=9, timeout=10_000)
    page.wait_for_timeout(400)
    shot(page, shots, full_page=False)
    return seen


def test_presentation_steps_one_card_a_slide_at_1920x1080(served, browser):
    url, demo = served
    page = browser.new_page(viewport={"width": 1920, "height": 1080})
    queued: list[str] = []
    assert present_and_step(page, url, "layer_present_1920x1080", queued) == [1, 2, 3, 2]
    box = page.evaluate(f"() => {FIGURE}.getBoundingClientRect().toJSON()")
    card = page.evaluate(
        "() => document.querySelector('#layer-cards .ta-step-chosen').getBoundingClientRect()"
        ".toJSON()"
    )
    assert box["width"] > 1800 and box["height"] > 600  # the figure fills the room
    assert card["bottom"] <= 1080 - 48 and card["top"] >= box["top"]  # its card above the bar
    assert "attention weights" in page.inner_text("#layer-cards .ta-step-chosen")
    assert "step 9" in bar_text(page)
    assert queued == [], f"PageDown asked the server: {queued[:3]}"
    page.close()


def test_presentation_on_a_phone_and_in_chinese(served, browser):
    url, demo = served
    phone = browser.new_page(viewport={"width": 390, "height": 844})
    assert present_and_step(phone, url, "layer_present_phone_390x844") == [1, 2, 3, 2]
    card = phone.evaluate(
        "() => document.querySelector('#layer-cards .ta-step-chosen').getBoundingClientRect()"
        ".toJSON()"
    )
    assert card["left"] >= 0 and card["right"] <= 390 and card["bottom"] <= 844 - 48
    phone.close()
    zh = browser.new_page(viewport={"width": 1920, "height": 1080})
    assert present_and_step(zh, url, "layer_present_zh-CN", lang="zh-CN") == [1, 2, 3, 2]
    assert "注意力权重" in zh.inner_text("#layer-cards .ta-step-chosen")
    assert "注意力权重" in zh.evaluate(f"() => {FIGURE}.layout.title.text")
    assert "步" in bar_text(zh)
    zh.close()


def test_a_deck_slide_holds_one_step(served, browser):
    """A view of the tab at a step added to the deck opens at that step, presented; the deck's
    offline file draws that step's figure with its card."""
    from ui.deck import deck_file

    url, demo = served
    page = browser.new_page(viewport={"width": 1600, "height": 900})
    open_layer(page, url)
    set_step(page, 14)
    page.wait_for_function(SHOWS, arg=14)
    page.wait_for_function("() => location.search.includes('step=14')")
    page.click("#ta-deck-open")
    page.click("#ta-deck .ta-deck-actions button >> nth=0")  # Add this view
    set_step(page, 5)
    page.wait_for_function(SHOWS, arg=5)
    page.wait_for_function("() => location.search.includes('step=5')")
    page.click("#ta-deck .ta-deck-actions button >> nth=0")
    deck = page.evaluate("() => ta.deckLink()")
    slides = page.evaluate("() => ta.deck.slides.map((s) => s.q)")
    assert ["step=14" in slides[0], "step=5" in slides[1]] == [True, True]
    page.goto(deck)
    page.wait_for_function(SHOWS, arg=14, timeout=60_000)
    page.wait_for_function("() => document.querySelector('[data-ta-shown]')")
    page.keyboard.press("PageDown")  # the deck's next slide: the other step
    page.wait_for_function(SHOWS, arg=5, timeout=60_000)
    page.close()
    made = deck_file(demo.views, json.dumps([[q, ""] for q in slides]))
    html = Path(made["deck_file"]["value"]).read_text(encoding="utf-8")
    steps = steps_of(demo)
    assert html.count('class="ta-step ta-step-chosen"') == 2
    assert f"<b>14</b> · {steps[14].name}" in html and f"<b>5</b> · {steps[5].name}" in html
    assert "L1 H0 · step 14 · " in html
    assert steps[14].seed_line.split("\n")[0] in html


GEMMA = {"text": "The capital of France is Paris, and the capital of Italy is"}
GEMMA.update(model="gemma-3-270m", layer=5, token=6, head=3, step=9)
GEMMA_SAYS = {  # the chosen card's name and source, the figure's shared head, per language
    "en": (
        "QK-norm on K",
        "transformers' modeling_gemma3.py, line 330, 132",
        "key/value head 0, shared by query heads 0–3",
        "RMSNorm on attention output",
    ),
    "zh-CN": (
        "对 K 做 QK 归一化",
        "transformers 的 modeling_gemma3.py 第 330, 132 行",
        "第 0 个键/值头，由查询头 0–3 共用",
        "注意力输出上的 RMSNorm",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_gemma_3s_layer_shows_qk_norm_and_its_sandwich_at_1280x720(served, browser, lang):
    """The real Gemma 3 270M's full layer 5 in English and Chinese: the key heads' QK-norm
    quotes Gemma's own lines and draws the one key/value head query head 3 reads; the step
    switch goes on to the norm after W_O, the sandwich's first half."""
    import importlib.util

    from model.registry import REGISTRY
    from tests.test_e2e_browser import shot

    if importlib.util.find_spec(REGISTRY["gemma-3-270m"].package) is None:
        pytest.skip("Gemma 3 270M's package is not installed")
    url, _ = served
    name, source, head, post = GEMMA_SAYS[lang]
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    query = GEMMA if lang == "en" else {**GEMMA, "lang": lang}
    page.goto(url + "?" + urlencode({"tab": "layer", **query}))
    page.wait_for_function(SHOWS, arg=9, timeout=180_000)
    card = page.inner_text("#layer-cards .ta-step-chosen")
    assert name in card and source in card and "self.k_norm(key_states)" in card
    assert head in page.evaluate(f"() => {FIGURE}.layout.title.text")
    assert page.locator("#layer-cards .ta-step").count() == 30
    page.locator("#layer-step-plot").scroll_into_view_if_needed()
    page.wait_for_timeout(400)
    shot(page, f"layer_gemma_1280x720_{lang}", full_page=False)
    set_step(page, 20)
    page.wait_for_function(SHOWS, arg=20, timeout=10_000)
    assert post in page.inner_text("#layer-cards .ta-step-chosen")
    page.close()
