"""A classroom's screens in Debian Chromium (issue 9): the page in 简体中文 and its language switch,
a 390 px phone and a laptop at 150 % zoom with nothing overlapping. One server for the module;
screenshots go to artifacts/screenshots/ (language_*, phone_*, zoom150_*)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import run_of, shot, wait_status, wait_tab

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists() and not os.environ.get("CI"),
        reason="Debian chromium is not installed (the README's test command installs it)",
    ),
]

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
PHONE["device_scale_factor"] = 2
# Browser zoom at 150 % on a 1280 × 800 laptop: the page lays out in 853 × 533 CSS px at DPR 1.5.
ZOOM_150 = {"viewport": {"width": 853, "height": 533}, "device_scale_factor": 1.5}
LINK = f"?model=roles&text={quote('我喜欢你')}"  # short CJK tokens: labels to read, fast to draw

# Boxes (CSS px) of what a figure draws: subplot areas, colour bars, panel titles, the title, and
# what floats over the figure (Plotly's toolbar, the SVG button).
FIGURE_BOXES_JS = """(id) => {
  const gd = document.querySelector(`#${id} .js-plotly-plot`);
  const box = (e) => { if (!e) return null; const b = e.getBoundingClientRect();
    return b.width && b.height ? [b.left, b.top, b.right, b.bottom] : null; };
  const all = (sel, root = gd) => [...root.querySelectorAll(sel)].map(box).filter(Boolean);
  return {panels: all('.draglayer .nsewdrag'), bars: all('g.colorbar'),
          titles: all('.annotation'), title: box(gd.querySelector('.gtitle')),
          ticks: all('g.xtick text, g.ytick text'),
          floating: [...all('.modebar'), ...all('.icon-button-wrapper',
                                                   document.querySelector(`#${id}`))]};
}"""
# Every visible block, the page's width, and the widest thing inside the viewport's width.
PAGE_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const out = [...document.querySelectorAll('.block, .js-plotly-plot')]
    .filter((e) => e.offsetParent !== null && e.getBoundingClientRect().width > 0)
    .filter((e) => !e.parentElement.closest('#compare-plot, #score-steps-plot, '
                                              + '#padding-mask-plot, #embedding-plot'))
    .map((e) => ({id: e.id || e.className.toString().slice(0, 40),
                  l: e.getBoundingClientRect().left, r: e.getBoundingClientRect().right}))
    .filter((b) => b.l < -1 || b.r > vw + 1);
  return {vw, scroll: document.documentElement.scrollWidth, outside: out};
}"""
TEXTS_JS = """() => ({lang: document.documentElement.lang,
  tabs: [...document.querySelectorAll('#tabs [role="tab"]')].map((e) => e.innerText.trim()),
  text: document.querySelector('#text label')?.innerText.trim(),
  run: document.querySelector('#run')?.innerText.trim(),
  intro: document.querySelector('#intro')?.innerText,
  body: document.body.innerText})"""


def overlap(a, b, slack: float = 1.0) -> bool:
    across = a[0] < b[2] - slack and b[0] < a[2] - slack
    return across and a[1] < b[3] - slack and b[1] < a[3] - slack


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def open_page(browser, url: str, **context):
    ctx = browser.new_context(**context)
    page = ctx.new_page()
    page.goto(url)
    page.wait_for_function("() => window.ta?.ready === true", timeout=60_000)
    page.wait_for_function(  # a status line, in either language
        "() => /tokens|词元/.test(document.querySelector('#status')?.innerText || '')",
        timeout=60_000,
    )
    return ctx, page


def texts(page) -> dict:
    return page.evaluate(TEXTS_JS)


def assert_chinese(page) -> None:
    page.wait_for_function(  # a switch re-renders the components a moment after <html lang>
        "() => [...document.querySelectorAll('#tabs [role=\"tab\"]')]"
        ".some((e) => e.innerText.includes('注意力'))",
        timeout=10_000,
    )
    seen = texts(page)
    assert seen["lang"] == "zh-CN"
    assert {"词元", "注意力", "掩码"} <= set(seen["tabs"]), seen["tabs"]
    assert seen["text"] == "文本" and seen["run"] == "运行"
    assert "Transformer 解剖" in seen["intro"]
    assert "__i18n__" not in seen["body"] and "translation_metadata" not in seen["body"]


def test_the_page_is_in_chinese_for_a_chinese_browser(app_url, browser):
    ctx, page = open_page(browser, app_url + "?tab=attention", locale="zh-CN")
    try:
        assert_chinese(page)
        wait_tab(page, "attention", timeout=60_000)
        captions = page.locator("#tab-attention .ta-caption").all_inner_texts()
        assert any("softmax(QKᵀ/√d_k)" in c and "每一行" in c for c in captions), captions
        labels = page.locator("#scale").inner_text()
        assert "颜色范围" in labels and "该头的最大值" in labels
        assert "编码器自注意力" in page.locator("#stack").inner_text()
        assert_examples_speak(page, "zh-CN")
        shot(page, "language_zh_attention")
    finally:
        ctx.close()


EXAMPLES_JS = """() => {
  const box = document.querySelector('#examples');
  return {headers: [...box.querySelectorAll('thead th')].map((th) => th.innerText.trim()),
          models: [...box.querySelectorAll('tbody tr')]
            .map((tr) => tr.children[1]?.innerText.trim()),
          pages: box.querySelector('.paginate')?.innerText.trim() || '',
          text: box.innerText};
}"""
EXAMPLE_WORDS = {  # headers (Text, Model), the bundled BERT's name, the word before page numbers
    "en": ["Text", "Model", "BERT weights (all-MiniLM-L6-v2, bundled)", "Pages:"],
    "zh-CN": ["文本", "模型", "BERT 权重（all-MiniLM-L6-v2，内置）", "页："],
}


def assert_examples_speak(page, lang: str) -> None:
    """The examples table's column headers, model names and page word are in ``lang``: Gradio's
    Dataset shows them as plain text, named in the page's language in the browser."""
    text, model, bert, pages = EXAMPLE_WORDS[lang]
    page.wait_for_function(
        "([id, h]) => [...document.querySelectorAll(`#${id} thead th`)]"
        ".some((th) => th.innerText.trim() === h)",
        arg=["examples", text],
        timeout=10_000,
    )
    seen = page.evaluate(EXAMPLES_JS)
    assert seen["headers"][:2] == [text, model], seen
    assert bert in seen["models"] and seen["pages"].startswith(pages), seen
    other = EXAMPLE_WORDS["en" if lang != "en" else "zh-CN"]
    assert not [word for word in other if word in seen["text"]], seen
    assert "__i18n__" not in seen["text"], seen
    if lang != "en":  # every model a Chinese example table names is said in Chinese
        assert all(re.search(r"[\u4e00-\u9fff]", name) for name in seen["models"]), seen


def test_the_switch_changes_the_language_and_is_remembered(app_url, browser):
    ctx, page = open_page(browser, app_url, locale="zh-CN")
    try:
        assert_examples_speak(page, "zh-CN")  # Gradio chose Chinese from the browser
        page.click("#lang label:has-text('English')")
        page.wait_for_function("() => document.documentElement.lang === 'en'")
        page.wait_for_function(  # the tabs not yet opened are named a moment later
            "() => [...document.querySelectorAll('#tabs [role=\"tab\"]')]"
            ".some((e) => e.innerText.includes('Embeddings'))",
            timeout=10_000,
        )
        seen = texts(page)
        assert seen["run"] == "Run" and seen["text"] == "Text"
        # Every tab's name, opened or not (the switch names the tabs Gradio leaves alone).
        assert seen["tabs"][:5] == ["Tokens", "Embeddings", "Attention", "Inside a layer", "Heads"]
        assert_examples_speak(page, "en")  # no reload: the table is renamed in place
        page.click("#examples .paginate button:has-text('2')")  # a page turn redraws the rows
        page.wait_for_timeout(300)
        assert_examples_speak(page, "en")
        page.reload()
        page.wait_for_function("() => window.ta?.ready === true", timeout=60_000)
        page.wait_for_selector("#run")
        page.wait_for_function("() => document.documentElement.lang === 'en'", timeout=10_000)
        assert texts(page)["run"] == "Run"  # the choice outlives a reload
        assert page.is_checked("#lang input[value='en']")
        page.click("#lang label:has-text('简体中文')")
        page.wait_for_function("() => document.documentElement.lang === 'zh-CN'")
        assert_chinese(page)
        assert_examples_speak(page, "zh-CN")
        page.click("#examples .paginate button:has-text('2')")
        page.wait_for_timeout(300)
        assert_examples_speak(page, "zh-CN")
        shot(page, "language_zh_examples")
    finally:
        ctx.close()


def test_a_lang_link_opens_the_page_in_chinese(app_url, browser):
    ctx, page = open_page(browser, app_url + "?lang=zh-CN", locale="en-US")
    try:
        page.wait_for_function("() => document.documentElement.lang === 'zh-CN'")
        assert_chinese(page)
        assert texts(page)["tabs"][:5] == ["词元", "嵌入", "注意力", "层内部", "注意力头"]
        assert page.is_checked("#lang input[value='zh-CN']")
        notes = page.evaluate("() => document.querySelector('#link-notes')?.innerText || ''")
        assert "lang" not in notes  # a language link is no deep-link error
        shot(page, "language_zh_link")
    finally:
        ctx.close()


def assert_figure_clear(page, plot_id: str) -> None:
    """Nothing a figure draws covers another part of it, nor do the buttons over it."""
    boxes = page.evaluate(FIGURE_BOXES_JS, plot_id)
    assert boxes["panels"], f"{plot_id}: no subplot drawn"
    for bar in boxes["bars"]:
        for panel in boxes["panels"]:
            assert not overlap(bar, panel), f"{plot_id}: a colour bar covers a panel {boxes}"
    for i, a in enumerate(boxes["bars"]):
        for b in boxes["bars"][i + 1 :]:
            assert not overlap(a, b), f"{plot_id}: colour bars collide {boxes}"
    for i, a in enumerate(boxes["titles"]):
        for b in boxes["titles"][i + 1 :]:
            assert not overlap(a, b), f"{plot_id}: panel titles collide {boxes}"
    if boxes["title"]:
        for thing in boxes["floating"]:
            assert not overlap(thing, boxes["title"]), f"{plot_id}: a button covers the title"
        for tick in boxes["ticks"]:  # the overview's top labels once ran into its title
            assert not overlap(tick, boxes["title"]), f"{plot_id}: a tick label covers the title"


def assert_page_fits(page) -> None:
    fit = page.evaluate(PAGE_JS)
    assert fit["scroll"] <= fit["vw"], f"the page scrolls sideways: {fit}"
    assert fit["outside"] == [], f"blocks beyond the viewport: {fit['outside']}"


@pytest.mark.parametrize("screen", ["phone", "zoom150"])
def test_small_screens_show_the_attention_tab_without_overlap(app_url, browser, screen):
    context = PHONE if screen == "phone" else ZOOM_150
    ctx, page = open_page(browser, app_url + LINK + "&tab=attention", **context)
    try:
        wait_tab(page, "attention", timeout=60_000)
        page.wait_for_timeout(300)  # Plotly's resize after the tab shows
        assert_page_fits(page)
        for plot_id in ("head-plot", "overview-plot", "compare-plot"):
            assert_figure_clear(page, plot_id)
        if screen == "phone":  # the overview's square tiles leave no empty band under them
            spare = page.evaluate(
                """() => { const f = document.querySelector('#overview-plot .js-plotly-plot')
                  ._fullLayout; return f.height - f.margin.t - f.margin.b - f.yaxis._length; }"""
            )
            assert spare <= 40, f"the overview is {spare} px taller than its plot on a phone"
        if screen == "zoom150":  # wide enough: every figure fits the viewport, no inner scroll
            widths = page.evaluate(
                "() => [...document.querySelectorAll('#tab-attention .js-plotly-plot')]"
                ".map((e) => e.getBoundingClientRect().right)"
            )
            assert max(widths) <= 853, widths
        # The selection row wraps: each control is inside the viewport.
        for control in ("#stack", "#layer", "#head", "#layer-b", "#head-b"):
            right = page.eval_on_selector(control, "(e) => e.getBoundingClientRect().right")
            assert right <= context["viewport"]["width"] + 1, control
        shot(page, f"{screen}_attention")
        if screen == "zoom150":
            page.click("#tab-masks-button")
            wait_tab(page, "masks", timeout=60_000)
            page.wait_for_timeout(300)
            assert_figure_clear(page, "score-steps-plot")
            assert_page_fits(page)
            shot(page, f"{screen}_masks")
    finally:
        ctx.close()


# Each line of a figure's title (the slide caption "model · “text”" is the last) and each panel
# title over its top row ("A = L3 H0").
TITLE_LINES_JS = """(id) => {
  const gd = document.querySelector(`#${id} .js-plotly-plot`);
  const box = (e) => { const b = e.getBoundingClientRect();
    return [b.left, b.top, b.right, b.bottom]; };
  return {lines: [...gd.querySelectorAll('.gtitle tspan.line')].map((e) => [e.textContent, box(e)]),
          panels: [...gd.querySelectorAll('.annotation')].map((e) => [e.textContent, box(e)])};
}"""
DESKTOP = {"viewport": {"width": 1280, "height": 900}}
SCREENS = {"desktop": DESKTOP, "zoom150": ZOOM_150, "phone": PHONE}


@pytest.mark.parametrize("screen", list(SCREENS))
def test_the_slide_caption_never_touches_the_compare_panel_titles(app_url, browser, screen):
    """The compare figure's title, its slide caption (model · “text”) last, stays clear of the
    panel titles "A = L0 H0", "B = …", "A − B" under it, with a long text, on every screen."""
    text = "我喜欢你，你喜欢我，她帮助他，他帮助她"
    link = f"?model=roles&text={quote(text)}&tab=attention&lang=zh-CN"
    ctx, page = open_page(browser, app_url + link, **SCREENS[screen])
    try:
        wait_tab(page, "attention", timeout=60_000, run=run_of(text, "roles"))
        page.wait_for_timeout(1500)  # a phone's title wrap runs after the draw
        seen = page.evaluate(TITLE_LINES_JS, "compare-plot")
        caption, panels = seen["lines"][-1], seen["panels"]
        assert caption[0].strip("\u200b").startswith("roles · “我喜欢你"), seen
        assert [name for name, _ in panels][:2] == ["A = L0 H0", "B = L0 H1"], seen
        for line, line_box in seen["lines"]:
            for name, panel_box in panels:
                assert not overlap(line_box, panel_box, slack=-2), (line, name, seen)
        assert max(b[3] for _, b in seen["lines"]) < min(b[1] for _, b in panels), seen
        shot(page, f"{screen}_compare_caption")
    finally:
        ctx.close()


def test_phone_tokens_and_tables_scroll_inside_their_boxes(app_url, browser):
    long_text = "The quokka grinned at the flabbergasted photographer. " * 6
    ctx, page = open_page(browser, app_url + f"?text={quote(long_text)}", **PHONE)
    try:
        wait_tab(page, "tokens", timeout=60_000, run=run_of(long_text))
        assert_page_fits(page)
        chips = page.eval_on_selector(
            "#token-chips",
            "(e) => ({r: e.getBoundingClientRect().right, h: e.clientHeight,"
            " sh: e.scrollHeight, o: getComputedStyle(e).overflowY})",
        )
        assert chips["r"] <= 391 and chips["o"] in ("auto", "scroll")
        assert chips["h"] <= 420 < chips["sh"]  # many chips: the box scrolls, the page does not
        table = page.eval_on_selector("#token-table", "(e) => e.getBoundingClientRect().right")
        assert table <= 391
        shot(page, "phone_tokens")
    finally:
        ctx.close()


HEAD_TITLE_JS = """() => {
  const gd = document.querySelector('#head-plot .js-plotly-plot');
  return {title: gd?.querySelector('.gtitle')?.textContent || '',
          x: gd?.querySelector('.xtitle')?.textContent || '',
          y: gd?.querySelector('.ytitle')?.textContent || '',
          bar: gd?.querySelector('.colorbar .cbtitle')?.textContent || '',
          head: gd?.layout?.meta?.head};
}"""
HEADERS_JS = """(id) => [...document.querySelectorAll(`#${id} thead th`)]
  .map((th) => th.innerText.trim()).filter(Boolean)"""


def set_slider(page, elem_id: str, value: int) -> None:
    page.fill(f"#{elem_id} input[type=number]", str(value))
    page.press(f"#{elem_id} input[type=number]", "Enter")


def test_the_switch_makes_the_server_speak_chinese_too(app_url, browser):
    """简体中文 in the switch: the status line, the figures (title, axes, colour bar) and the
    tables the server draws are Chinese; Run and a head switch in the browser keep them so."""
    ctx, page = open_page(browser, app_url, locale="en-US", viewport={"width": 1280, "height": 900})
    try:
        wait_status(page, "7 tokens")
        assert page.evaluate(HEADERS_JS, "token-table")[:2] == ["position", "token"]
        page.click("#lang label:has-text('简体中文')")
        wait_status(page, "7 个词元", timeout=60_000)  # the visible tab, drawn again
        status = page.inner_text("#status")
        assert "前向传播" in status and "tokens" not in status.split("\n")[0], status
        # Gradio's table renames its header cells over a frame or two: wait for the whole row.
        zh_headers = ["位置", "词元", "id", "类别"]
        page.wait_for_function(
            "([id, want]) => (" + HEADERS_JS + ")(id).join('|') === want.join('|')",
            arg=["token-table", zh_headers],
            timeout=30_000,
        )
        page.fill("#text textarea", "dogs bark")
        page.click("#run")
        wait_status(page, "4 个词元", timeout=60_000)
        page.click("#tab-attention-button")
        wait_tab(page, "attention", timeout=60_000, run=run_of("dogs bark"))
        seen = page.evaluate(HEAD_TITLE_JS)
        assert seen["title"].startswith("第 0 层，第 0 个头：编码器自注意力"), seen
        # the head view names both axes in one line beside the plot (viz/screen.py)
        assert (seen["x"], seen["y"]) == ("", "查询 ↓ · 键 →"), seen
        assert seen["bar"].startswith("权重"), seen
        joins: list[str] = []
        page.on("request", lambda r: joins.append(r.url) if "/queue/join" in r.url else None)
        set_slider(page, "layer", 2)  # drawn in the browser from the run's payload
        page.wait_for_function("() => (" + HEAD_TITLE_JS + ")().head?.[0] === 2", timeout=10_000)
        title = page.evaluate(HEAD_TITLE_JS)["title"]
        assert title.startswith("第 2 层，第 0 个头：编码器自注意力"), title
        assert joins == []  # no request: the browser drew the head, in Chinese
        shot(page, "language_zh_server_attention")
    finally:
        ctx.close()


TITLES_FIT_JS = """() => [...document.querySelectorAll('#tabs .js-plotly-plot')]
  .filter((gd) => gd.offsetParent !== null && gd.querySelector('.gtitle'))
  .map((gd) => { const plot = gd.querySelector('.main-svg').getBoundingClientRect();
    const title = gd.querySelector('.gtitle').getBoundingClientRect();
    return {id: gd.closest('[id]').id, over: title.right - plot.right, left: title.left - plot.left,
            text: gd.querySelector('.gtitle').textContent.slice(0, 80)}; })"""


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_phone_figure_titles_wrap_inside_the_figure(app_url, browser, lang):
    """At 390 px no title or subtitle runs past its figure's right edge (they wrap), in English
    and in Chinese; the head switch then still names the head it shows."""
    long_text = "The quokka grinned at the flabbergasted photographer."
    for tab in ("masks", "embeddings", "attention"):  # a phone's tab bar hides some tabs: links
        link = f"?text={quote(long_text)}&tab={tab}&scale=head&lang={lang}"
        ctx, page = open_page(browser, app_url + link, **PHONE)
        try:
            wait_tab(page, tab, timeout=60_000, run=run_of(long_text))
            page.wait_for_timeout(1500)  # the wrap runs after each draw
            titles = page.evaluate(TITLES_FIT_JS)
            assert titles, tab
            cut = [t for t in titles if t["over"] > 1 or t["left"] < -1]
            assert not cut, f"{tab}: titles beyond their figure {cut}"
            shot(page, f"phone_titles_{lang}_{tab}")
            if tab != "attention":
                continue
            set_slider(page, "layer", 3)
            page.wait_for_function(
                "() => (" + HEAD_TITLE_JS + ")().head?.[0] === 3", timeout=10_000
            )
            page.wait_for_timeout(600)
            title = page.evaluate(HEAD_TITLE_JS)["title"]
            assert ("Layer 3, head 0" if lang == "en" else "第 3 层，第 0 个头") in title, title
            assert not [t for t in page.evaluate(TITLES_FIT_JS) if t["over"] > 1]
        finally:
            ctx.close()
