"""In front of a class (issue 20): presentation mode on a projector, the lecture deck and its
offline file, slides without cropping, a phone and a tablet that show every tab — in Debian
Chromium against `python app.py`, at 1920×1080, 1280×720, 768×1024 and 390×844, in English and
Chinese. Screenshots go to artifacts/screenshots (and docs/screenshots with
UPDATE_DOC_SCREENSHOTS=1)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import shot, wait_status, wait_tab
from tests.test_phone import MEASURE_JS
from tests.test_screen import PARAGRAPH
from ui.tabs import TAB_IDS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
READY = "() => window.ta?.ready === true && !window.ta.opening"
# Whether the text box can be clicked (not under the presented figure).
TEXT_REACHABLE = """() => {
  const r = document.querySelector('#text textarea').getBoundingClientRect();
  const el = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return !!el && !!el.closest('#text');
}"""
HEAD_GD = "document.querySelector('#head-plot .js-plotly-plot')"
SHOWN = "document.querySelector('[data-ta-shown]')?.id"
KEYS = {"en": "←/→ head", "zh-CN": "←/→ 切换头"}
ADD = {"en": "Add this view", "zh-CN": "添加当前视图"}


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def open_page(browser, size: str, **options):
    width, height = map(int, size.split("x"))
    context = browser.new_context(viewport={"width": width, "height": height}, **options)
    return context, context.new_page()


def shown(page) -> dict:
    """The presented block: its id and box, the union of its plot areas, its tick font size."""
    return page.evaluate(
        """() => {
          const block = document.querySelector('[data-ta-shown]');
          if (!block) return null;
          const r = block.getBoundingClientRect();
          const areas = [...block.querySelectorAll('.nsewdrag')]
            .map((e) => e.getBoundingClientRect());
          const top = Math.min(...areas.map((a) => a.top));
          const bottom = Math.max(...areas.map((a) => a.bottom));
          const tick = block.querySelector('.ytick text, .xtick text');
          return {id: block.id, top: r.top, bottom: r.bottom, plot: areas.length ? bottom - top : 0,
                  plotTop: top, plotBottom: bottom,
                  font: tick ? parseFloat(getComputedStyle(tick).fontSize) : 0};
        }"""
    )


@pytest.mark.parametrize("size", ["1920x1080", "1280x720"])
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_presentation_fills_the_screen_and_the_arrow_keys_switch_heads(
    app_url, browser, size, lang
):
    height = int(size.split("x")[1])
    context, page = open_page(browser, size)
    page.goto(f"{app_url}?tab=attention&present=1&lang={lang}")
    wait_tab(page, "attention")
    page.wait_for_function(READY)
    page.wait_for_function(f"() => {SHOWN} === 'head-plot'")
    page.wait_for_timeout(300)
    box = shown(page)
    assert box["top"] >= 0 and box["bottom"] <= height  # in view when the link opens
    assert box["plotTop"] >= 0 and box["plotBottom"] <= height
    assert box["plot"] >= 0.65 * height, box  # the heatmap's plot area
    # tick labels readable from the back of the room: 1/60 of the screen's height at least
    assert box["font"] >= (18 if height >= 1080 else 13), box
    bar = page.inner_text("#ta-bar")
    assert KEYS[lang] in bar
    assert not page.evaluate(TEXT_REACHABLE)  # the page is under the figure
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => {HEAD_GD}.layout.meta.head.join() === '0,1'")
    page.keyboard.press("ArrowUp")
    page.wait_for_function(f"() => {HEAD_GD}.layout.meta.head.join() === '1,1'")
    assert page.input_value("#head input[type=number]") == "1"
    shot(page, f"presentation_{size}_{lang}", full_page=False)
    page.keyboard.press("PageDown")  # the tab's next figure
    page.wait_for_function(f"() => {SHOWN} === 'overview-plot'")
    page.keyboard.press("Escape")  # the whole page, one key away
    page.wait_for_function("() => document.body.classList.contains('ta-paused')")
    page.evaluate("() => window.scrollTo(0, 0)")
    assert page.evaluate(TEXT_REACHABLE)
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.body.classList.contains('ta-paused')")
    context.close()


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_present_alone_opens_on_the_head_view_and_the_bar_names_what_the_keys_change(
    app_url, browser, lang
):
    context, page = open_page(browser, "1280x720")
    page.goto(f"{app_url}?present=1&lang={lang}")
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function(f"() => {SHOWN} === 'head-plot'", timeout=30_000)
    assert "tab=attention" in page.url and "present=1" in page.url
    bar = page.inner_text("#ta-bar")
    assert KEYS[lang] in bar
    words = {"en": ("layer 0", "head 0"), "zh-CN": ("层 0", "头 0")}[lang]
    assert all(w in bar for w in words), bar  # what the arrow keys change, on screen
    page.keyboard.press("ArrowRight")
    page.wait_for_function(f"() => {HEAD_GD}.layout.meta.head.join() === '0,1'")
    page.wait_for_function("() => document.querySelector('#ta-bar').innerText.includes('1')")
    assert words[1].replace("0", "1") in page.inner_text("#ta-bar")
    page.wait_for_function("() => new URLSearchParams(location.search).get('head') === '1'")
    # Redrawn for the room, the figure keeps the server's toolbar: no Plotly camera saving
    # "newplot.png", and the download named after the view.
    config = page.evaluate(f"() => {HEAD_GD}._context.toImageButtonOptions")
    assert config["filename"].startswith("head_"), config
    cameras = page.locator("#head-plot .modebar-btn[data-val='toImage'], "
                           "#head-plot .modebar-btn[data-title*='PNG' i]")  # fmt: skip
    assert cameras.count() == 0
    context.close()


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_long_sentence_presented_at_720p_keeps_two_thirds_of_the_height(app_url, browser, lang):
    """Upright key labels (a long sentence's) take height from the plot area."""
    text = quote("The animal didn't cross the street because it was too tired")
    context, page = open_page(browser, "1280x720")
    page.goto(f"{app_url}?tab=attention&present=1&lang={lang}&text={text}")
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function(f"() => {SHOWN} === 'head-plot'", timeout=30_000)
    page.wait_for_timeout(500)
    box = shown(page)
    assert box["plot"] >= 0.65 * 720, box
    assert box["plotBottom"] <= 720 - 48, box  # above the bar
    shot(page, f"presentation_long_1280x720_{lang}", full_page=False)
    context.close()


@pytest.mark.parametrize(
    ("query", "block"),
    [
        ("tab=attention&fig=overview", "overview-plot"),
        ("tab=attention&fig=compare", "compare-plot"),
        ("tab=masks", "padding-mask-plot"),
        ("tab=embeddings", "embedding-plot"),
        (f"tab=output&model=dates&text={quote('2026年11月22日')}", "steps-plot"),
    ],
)
def test_other_views_present_as_well(app_url, browser, query, block):
    context, page = open_page(browser, "1920x1080")
    page.goto(f"{app_url}?{query}&present=1")
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function(
        f"() => document.querySelector('[data-ta-shown]')?.id === '{block}'", timeout=30_000
    )
    page.wait_for_timeout(500)
    box = shown(page)
    assert box["top"] >= 0 and box["bottom"] <= 1080
    assert box["bottom"] - box["top"] >= 0.9 * 1080 - 60, box  # the figure fills the window
    # the padding masks' four square maps stand in one row (viz.present._one_row): each map
    # is the plot's height, a third of the window; the other views' plots half of it or more
    assert box["plot"] >= (0.3 if block == "padding-mask-plot" else 0.5) * 1080, box
    assert box["font"] >= 18, box
    shot(page, f"presentation_{block}", full_page=False)
    context.close()


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_deck_steps_with_page_down_survives_reload_and_its_file_opens_offline(
    app_url, browser, lang, tmp_path
):
    context, page = open_page(browser, "1280x720", accept_downloads=True)
    page.goto(f"{app_url}?tab=attention&lang={lang}")
    wait_tab(page, "attention")
    page.wait_for_function(READY)
    page.click("#ta-deck-open")
    add = page.locator("#ta-deck button", has_text=ADD[lang])
    add.click()  # slide 1: head 0:0
    page.fill("#head input[type=number]", "5")
    page.press("#head input[type=number]", "Enter")
    page.wait_for_function(f"() => {HEAD_GD}.layout.meta.head.join() === '0,5'")
    page.wait_for_function("() => document.querySelector('#status a').href.includes('head=5')")
    add.click()  # slide 2: head 0:5
    page.locator("#tabs [role=tab]", has_text={"en": "Masks", "zh-CN": "掩码"}[lang]).click()
    wait_tab(page, "masks")
    add.click()  # slide 3: the masks
    items = page.locator("#ta-deck li")
    assert items.count() == 3
    assert "L0 H5" in items.nth(1).inner_text()  # the head view names its head
    assert not re.search(r"\bL\d+ H\d+", items.nth(2).inner_text())  # masks have no head
    items.nth(2).locator("button").nth(0).click()  # the masks move up to slide 2
    assert "L0 H5" in items.nth(2).inner_text()
    items.nth(0).locator("button").nth(2).click()  # slide 1 removed
    assert items.count() == 2
    link = page.evaluate("() => ta.deckLink()")
    assert "deck=" in link and "present=1" in link
    with page.expect_download(timeout=60_000) as got:
        page.locator("#ta-deck button", has_text={"en": "Download", "zh-CN": "下载"}[lang]).click()
    assert got.value.suggested_filename == f"deck_{dt.date.today().isoformat()}.html"
    offline_file = tmp_path / got.value.suggested_filename
    got.value.save_as(offline_file)

    page.goto(link)  # the deck's link, on another page
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function("() => document.querySelector('#ta-bar')?.innerText.includes('1 / 2')")
    wait_tab(page, "masks")
    page.keyboard.press("PageDown")
    page.wait_for_function("() => document.querySelector('#ta-bar').innerText.includes('2 / 2')")
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function(f"() => {HEAD_GD}?.layout?.meta?.head?.join() === '0,5'")
    assert "slide=2" in page.url
    shot(page, f"deck_slide_{lang}", full_page=False)
    page.reload()  # the deck and its slide survive
    page.wait_for_function("() => document.querySelector('#ta-bar')?.innerText.includes('2 / 2')")
    page.wait_for_function(f"() => {HEAD_GD}?.layout?.meta?.head?.join() === '0,5'")
    page.keyboard.press("PageUp")
    page.wait_for_function("() => document.querySelector('#ta-bar').innerText.includes('1 / 2')")
    context.close()

    # The file, on a lecture-room PC with no network: nothing but the file is fetched.
    context, page = open_page(browser, "1920x1080", offline=True)
    fetched = []
    page.on("request", lambda r: fetched.append(r.url))
    page.goto(offline_file.as_uri())
    page.wait_for_function("() => document.querySelector('.slide.on .nsewdrag') !== null")
    assert page.inner_text("#count") == "1 / 2"
    plot = page.evaluate(
        """() => {
          const r = [...document.querySelectorAll('.slide.on .nsewdrag')]
            .map((e) => e.getBoundingClientRect());
          return Math.max(...r.map((a) => a.bottom)) - Math.min(...r.map((a) => a.top));
        }"""
    )
    # slide 1 is the masks: their four square maps in one row (viz.present._one_row), each
    # more than a quarter of the screen's height
    assert plot >= 0.25 * 1080
    page.keyboard.press("PageDown")
    page.wait_for_function("() => document.querySelector('#count').innerText === '2 / 2'")
    title = page.evaluate(
        "() => document.querySelector('.slide.on .js-plotly-plot').layout.title.text"
    )
    assert title.startswith("Layer 0, head 5") or title.startswith("第 0 层，第 5 个头")
    shot(page, f"deck_offline_{lang}")
    assert all(u.startswith("file:") for u in fetched), fetched
    context.close()


def test_slide_exports_are_cropped_to_the_figure_and_named_for_it(app_url, browser):
    context, page = open_page(browser, "1280x1000", accept_downloads=True)
    page.goto(f"{app_url}?tab=attention&layer=2&head=4")
    wait_tab(page, "attention")
    page.wait_for_function(READY)
    head = page.evaluate("() => ta.saveImage('head-plot', 'png', false)")
    assert head["name"] == "head_bert_L2H4"
    assert head["plot"][0] * head["plot"][1] >= 0.5 * head["width"] * head["height"], head
    compare = page.evaluate("() => ta.saveImage('compare-plot', 'svg', false)")
    assert compare["name"] == "compare_bert_L2H4-L2H5"
    assert (compare["width"], compare["height"]) == (1600, 900)  # 16:9
    with page.expect_download() as got:
        page.click("#compare-plot button:has-text('SVG')")
    assert got.value.suggested_filename == "compare_bert_L2H4-L2H5.svg"
    svg = Path(got.value.path()).read_text(encoding="utf-8")
    assert re.search(r'width="1600"', svg) and re.search(r'height="900"', svg)
    sizes = [float(v) for v in re.findall(r"font-size: ?([\d.]+)px", svg)]
    assert sizes and min(sizes) >= 18  # text large enough for a slide
    context.close()


def tab_buttons(page) -> dict:
    """Every visible button that opens a tab: its label, by tab id. The strip wraps onto rows
    (gr.Tabs(overflow_behavior="wrap")): Gradio folds none into its "⋯" menu."""
    return page.evaluate(
        """() => {
          const found = {};
          for (const b of document.querySelectorAll('#tabs [role=tab]')) {
            if (b.offsetParent) found[b.dataset.tabId] = b.innerText.trim();
          }
          return found;
        }"""
    )


@pytest.mark.parametrize("size", ["390x844", "768x1024"])
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_phone_and_a_tablet_show_every_tab_and_nothing_overlaps(app_url, browser, size, lang):
    width = int(size.split("x")[0])
    context, page = open_page(browser, size, is_mobile=True, has_touch=True)
    text = quote("二〇二六年十一月二十二日")
    page.goto(f"{app_url}?model=dates&tab=output&text={text}&lang={lang}")
    wait_status(page, "dates")
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_selector("#steps-plot .nsewdrag", timeout=30_000)
    page.wait_for_selector("#steps-table thead th", timeout=30_000)
    page.wait_for_timeout(300)  # crowded labels are spaced the frame after the draw
    buttons = tab_buttons(page)
    labels = list(buttons.values())
    assert list(buttons) == list(TAB_IDS), buttons  # every tab: a visible, labelled button
    assert all(label and label != "⋯" for label in labels)
    if lang == "zh-CN":  # in the page's language, also those Gradio never opened
        assert {"Heads", "Masks", "Hidden states", "Model"}.isdisjoint(labels), labels
    assert page.locator("#tabs .overflow-menu").count() == 0  # no unlabelled "⋯"
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    rows = page.locator("#examples tbody tr")
    assert max(rows.nth(i).bounding_box()["height"] for i in range(rows.count())) < 90
    heads = page.locator("#steps-table thead th")
    line = max(heads.nth(i).bounding_box()["height"] for i in range(heads.count()))
    assert line < 48  # headers read horizontally, on one line
    overlaps = page.evaluate(
        """() => {
          const labels = [...document.querySelectorAll('#steps-plot .xtick text')]
            .map((t) => t.getBoundingClientRect()).filter((r) => r.width > 0);
          let n = 0;
          for (let i = 1; i < labels.length; i++) {
            const a = labels[i - 1], b = labels[i];
            if (a.right > b.left + 1 && a.left < b.right - 1 && a.bottom > b.top + 1
                && a.top < b.bottom - 1) n += 1;
          }
          return [n, labels.length];
        }"""
    )
    assert overlaps[0] == 0 and overlaps[1] > 0, overlaps
    shot(page, f"phone_{size}_{lang}")
    page.locator(f'#tabs [role=tab][data-tab-id="{TAB_IDS[-1]}"]').tap()  # the last row's
    page.wait_for_function("(tab) => window.ta.tab === tab", arg=TAB_IDS[-1], timeout=15_000)
    context.close()


# Everything under the deck's button: at its centre and corners, each element the point meets
# is the button, its row, or a container of the row (no control, label or figure beneath it).
UNDER_DECK_JS = """() => {
  const button = document.getElementById('ta-deck-open');
  const row = document.getElementById('ta-deck-row');
  const r = button.getBoundingClientRect();
  if (!r.width || r.bottom < 0 || r.top > innerHeight) return [];  /* scrolled out of view */
  const points = [[r.left + r.width / 2, r.top + r.height / 2], [r.left + 1, r.top + 1],
    [r.right - 1, r.top + 1], [r.left + 1, r.bottom - 1], [r.right - 1, r.bottom - 1]];
  const under = [];
  for (const [x, y] of points) {
    for (const el of document.elementsFromPoint(x, y)) {
      if (row.contains(el) || el.contains(row)) continue;
      under.push(el.id || el.className?.baseVal || el.className || el.tagName);
    }
  }
  return under;
}"""


@pytest.mark.parametrize("size", ["390x844", "1280x720", "1920x1080"])
def test_the_deck_button_covers_nothing_also_while_scrolled(app_url, browser, size):
    context, page = open_page(browser, size, has_touch=size == "390x844")
    for tab in ("attention", "layer", "masks", "train"):
        page.goto(f"{app_url}?tab={tab}")
        page.wait_for_function(READY, timeout=30_000)
        if tab != "train":
            wait_tab(page, tab)
        page.wait_for_selector("#ta-deck-open")
        height = page.evaluate("() => document.documentElement.scrollHeight")
        for y in range(0, height, max(200, height // 8)):
            page.evaluate(f"() => window.scrollTo(0, {y})")
            page.wait_for_timeout(50)
            assert page.evaluate(UNDER_DECK_JS) == [], (tab, y)
    shot(page, f"deck_button_{size}", full_page=False)
    context.close()


CARD_JS = """() => {
  const c = document.querySelector('#layer-cards .ta-step-chosen');
  const bar = document.getElementById('ta-bar');
  if (!c || !bar) return null;
  const r = c.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, bar: bar.getBoundingClientRect().top,
          steps: +document.querySelector('#layer-cards .ta-steps').dataset.steps};
}"""


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_inside_a_layer_and_the_masks_presented_at_720p_give_their_figure_three_fifths(
    app_url, browser, lang
):
    context, page = open_page(browser, "1280x720")
    # the padding masks of a real paragraph (125 tokens): the four maps side by side, each
    # about a quarter of the height (in two rows, 78 px each), their titles and labels apart
    page.goto(f"{app_url}?tab=masks&present=1&lang={lang}&text={quote(PARAGRAPH)}")
    page.wait_for_function(READY, timeout=60_000)
    page.wait_for_function(f"() => {SHOWN} === 'padding-mask-plot'", timeout=60_000)
    page.wait_for_timeout(500)
    maps = page.evaluate(
        """() => [...document.querySelectorAll('#padding-mask-plot .nsewdrag')]
          .map((e) => e.getBoundingClientRect().toJSON())"""
    )
    assert len(maps) == 4 and len({round(m["top"]) for m in maps}) == 1, maps
    assert all(m["width"] >= 0.22 * 720 and m["height"] >= 0.22 * 720 for m in maps), maps
    seen = page.evaluate(MEASURE_JS, "masks")
    assert not [o for o in seen["overlaps"] if o[0] == "padding-mask-plot"], seen["overlaps"]
    assert not [o for o in seen["outside"] if o[0] == "padding-mask-plot"], seen["outside"]
    shot(page, f"presentation_masks_1280x720_{lang}", full_page=False)
    page.goto(f"{app_url}?tab=layer&present=1&lang={lang}")
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function(f"() => {SHOWN} === 'layer-step-plot'", timeout=30_000)
    last = page.evaluate(CARD_JS)["steps"] - 1
    for step in (0, 9, last):  # the attention weights' card; the last (the FFN's) among them
        page.goto(f"{app_url}?tab=layer&present=1&lang={lang}&step={step}")
        page.wait_for_function(READY, timeout=30_000)
        page.wait_for_function(f"() => {SHOWN} === 'layer-step-plot'", timeout=30_000)
        page.wait_for_timeout(500)
        box, card = shown(page), page.evaluate(CARD_JS)
        assert box["plot"] >= 0.6 * 720, (step, box)
        assert box["plotBottom"] <= card["top"], (step, box, card)  # the card under the figure
        assert card["bottom"] <= card["bar"], (step, card)  # and clear of the bar
    shot(page, f"presentation_layer_1280x720_{lang}", full_page=False)
    context.close()


def test_the_keys_present_again_after_the_language_switch_and_a_tab(app_url, browser):
    """Esc, a control of the page (the language switch, then the tabs), Esc: the control the
    presenter touched kept the keyboard's focus, and a radio button takes the arrows as its own;
    presenting again, ←/→ and ↑/↓ still step the head and the layer (issue 52)."""
    context, page = open_page(browser, "1280x720")
    page.goto(f"{app_url}?tab=attention&present=1&layer=2&head=3")
    page.wait_for_function(READY, timeout=30_000)
    page.wait_for_function(f"() => {SHOWN} === 'head-plot'", timeout=30_000)
    page.wait_for_function(f"() => {HEAD_GD}.layout.meta.head.join() === '2,3'")

    def keys_step(layer: int, head: int) -> None:  # → and ↓: the next head, the layer below
        page.keyboard.press("Escape")
        page.wait_for_function("() => !document.body.classList.contains('ta-paused')")
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowDown")
        page.wait_for_function(f"() => {HEAD_GD}.layout.meta.head.join() === '{layer},{head}'")
        assert page.input_value("#layer input[type=number]") == str(layer)
        assert page.input_value("#head input[type=number]") == str(head)
        bar = page.inner_text("#ta-bar .ta-bar-view")
        assert f"层 {layer}" in bar and f"头 {head}" in bar, bar

    page.keyboard.press("Escape")
    page.wait_for_function("() => document.body.classList.contains('ta-paused')")
    page.click("#lang label:has-text('简体中文')")
    page.wait_for_function(f"() => {HEAD_GD}?.layout?.title?.text?.startsWith('第 2 层')")
    keys_step(1, 4)
    page.keyboard.press("Escape")
    page.wait_for_function("() => document.body.classList.contains('ta-paused')")
    page.click("#tab-masks-button")
    wait_tab(page, "masks")
    page.click("#tab-attention-button")
    wait_tab(page, "attention")
    keys_step(0, 5)
    assert page.evaluate("() => ta.lang()") == "zh-CN"  # the arrows never reached the switch
    context.close()
