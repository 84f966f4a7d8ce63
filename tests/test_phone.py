"""A student's phone (390 × 844, touch), in both languages: every panel of every figure of every
tab shows without sideways scrolling, and no title, tick label or point label lies over another
(the bounding boxes of every figure's texts, measured in Debian Chromium against `python app.py`).
Screenshots go to artifacts/screenshots (docs/screenshots with UPDATE_DOC_SCREENSHOTS=1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import DRAWN_JS, TAB_PLOTS, shot, wait_tab

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
READY = "() => window.ta?.ready === true && !window.ta.opening"
FIGURE_TABS = ("embeddings", "attention", "layer", "heads", "masks", "output", "hidden")

# Every figure of the visible tab: whether it (and each plot area) lies inside the screen's width,
# and every pair of its texts (titles, panel titles, axis titles, tick labels, colour-bar labels,
# point labels) whose boxes overlap by more than a sliver.
MEASURE_JS = """(asked) => {
  // a tab's id, or {tab, legends: true}: each legend's box is read as one more text too
  const {tab, legends} = typeof asked === 'string' ? {tab: asked, legends: false} : asked;
  const W = document.documentElement.clientWidth;
  const out = {outside: [], overlaps: [], figures: 0};
  const panel = document.getElementById('tab-' + tab);
  for (const gd of panel.querySelectorAll('.js-plotly-plot')) {
    if (!gd.offsetParent) continue;
    out.figures += 1;
    const name = gd.closest('.block[id]')?.id || '?';
    const boxes = [gd, ...gd.querySelectorAll('.nsewdrag')].map((e) => e.getBoundingClientRect());
    for (const r of boxes) {
      if (r.width && (r.left < -1 || r.right > W + 1)) {
        out.outside.push([name, Math.round(r.left), Math.round(r.right)]);
      }
    }
    const texts = [...gd.querySelectorAll(
      'text.gtitle, .annotation-text, .g-xtitle text, .g-ytitle text, .xtick text, .ytick text,'
      + ' .colorbar text, .textpoint text')]
      .filter((t) => t.textContent.trim() && getComputedStyle(t).visibility !== 'hidden'
        && getComputedStyle(t).opacity !== '0')
      .map((t) => ({t: t.textContent.trim().slice(0, 30), r: t.getBoundingClientRect()}))
      .concat(legends ? [...gd.querySelectorAll('.legend')].map((g) => ({
        t: 'legend: ' + (g.querySelector('.legendtext')?.textContent || '').slice(0, 22),
        r: (g.querySelector('rect.bg') || g).getBoundingClientRect()})) : [])
      .filter((x) => x.r.width > 0 && x.r.height > 0);
    for (const x of texts) {
      if (x.r.left < -1 || x.r.right > W + 1) {
        out.outside.push([name, x.t, Math.round(x.r.left), Math.round(x.r.right)]);
      }
    }
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i].r, b = texts[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 2 && h > 2) out.overlaps.push([name, texts[i].t, texts[j].t]);
      }
    }
  }
  out.pageWider = document.documentElement.scrollWidth > W + 1;
  return out;
}"""


DRAWN_ALL = """(tab) => {
  const plots = [...document.querySelectorAll(`#tab-${tab} .js-plotly-plot`)]
    .filter((gd) => gd.offsetParent);
  return plots.every((gd) => gd._fullLayout && gd.querySelector(".main-svg"));
}"""


def assert_fits(found: dict, name: str) -> None:
    """No figure of any tab outside the screen or with a text over another, and no page wider
    than the screen; the whole finding is written for a reader of the CI log's artifact."""
    problems = {
        tab: {k: v for k, v in seen.items() if k in ("outside", "overlaps", "pageWider") and v}
        for tab, seen in found.items()
    }
    problems = {tab: p for tab, p in problems.items() if p}
    if problems:
        import json

        out = Path("artifacts") / f"phone_problems_{name}.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(problems, ensure_ascii=False, indent=1), encoding="utf-8")
    assert not problems, problems


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def phone(browser):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True,
        device_scale_factor=2,
    )  # fmt: skip
    return context, context.new_page()


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
@pytest.mark.parametrize(
    ("model", "text"),
    [("", "The animal didn't cross the street because it was too tired"),
     ("induction", "hello hello")],
)  # fmt: skip
def test_every_figure_fits_a_phone_and_no_text_lies_over_another(
    app_url, browser, lang, model, text
):
    from urllib.parse import quote

    context, page = phone(browser)
    found = {}
    for tab in FIGURE_TABS:
        query = f"tab={tab}&lang={lang}&text={quote(text)}" + (f"&model={model}" if model else "")
        page.goto(f"{app_url}?{query}")
        page.wait_for_function(READY, timeout=60_000)
        if tab in TAB_PLOTS:
            wait_tab(page, tab, timeout=60_000)
        else:  # every figure of the tab drawn
            page.wait_for_function(DRAWN_ALL, arg=tab, timeout=60_000)
        page.wait_for_timeout(800)  # the frames after the draw: stacked panels, spaced labels
        seen = page.evaluate(MEASURE_JS, tab)
        found[tab] = seen
        shot(page, f"phone_{tab}_{model or 'bert'}_{lang}")
    assert_fits(found, f"{model or 'bert'}_{lang}")
    assert sum(seen["figures"] for seen in found.values()) >= 8
    context.close()


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory) -> str:
    """A tiny GPT-2 written by transformers' own GPT2Config and model with random weights, and a
    byte-level BPE (tests/test_lm.py's "gpt2" case: 3 layers × 4 heads, d_model 64)."""
    from tests.test_lm import save_checkpoint

    folder = tmp_path_factory.mktemp("phone-lm") / "gpt2"
    save_checkpoint(folder, "gpt2")
    return str(folder)


@pytest.mark.slow
def test_a_language_model_fits_a_phone_too(app_url, browser, gpt2_folder):
    """The same checks for a language model opened in the page as a custom checkpoint (the
    model list's "Custom checkpoint…" and the folder), each tab tapped on the phone after one
    Run: its decoder-only views (causal masks, the logit lens, next-token predictions, byte-level
    pieces) fit the screen too. English only: the labels' lengths are the other language's
    test's, with the bundled models."""
    from tests.test_lm_page import PLOTS, open_checkpoint

    context, page = phone(browser)
    page.goto(f"{app_url}?lang=en")
    page.wait_for_function(READY, timeout=60_000)
    page.wait_for_selector("#token-chips .ta-chip", timeout=60_000)
    open_checkpoint(page, gpt2_folder)
    page.wait_for_function(
        "() => document.querySelector('#status')?.innerText.includes('GPT-2 checkpoint')",
        timeout=60_000,
    )
    run = page.get_attribute("#token-chips .ta-run", "data-run")
    assert run
    found = {}
    for tab in FIGURE_TABS:
        page.locator(f'#tabs [role=tab][data-tab-id="{tab}"]').tap()
        page.wait_for_function(DRAWN_JS, arg=[PLOTS[tab], run], timeout=60_000)
        page.wait_for_function(DRAWN_ALL, arg=tab, timeout=60_000)
        page.wait_for_timeout(800)  # the frames after the draw: stacked panels, spaced labels
        found[tab] = page.evaluate(MEASURE_JS, tab)
        shot(page, f"phone_{tab}_gpt2_en")
    assert_fits(found, "gpt2_en")
    assert sum(seen["figures"] for seen in found.values()) >= 8
    context.close()


# The tab strip as the user sees it, in reading order (row by row, left to right): each tab
# button's id, label, box, whether it is marked selected, and the style that makes it read as a
# tab. Buttons Gradio keeps hidden for measuring (aria-hidden) are not the user's.
STRIP_JS = """() => {
  const W = document.documentElement.clientWidth;
  const buttons = [...document.querySelectorAll('#tabs .tab-wrapper button')]
    .filter((b) => b.offsetParent && !b.closest('[aria-hidden=true]'));
  const seen = buttons.map((b) => {
    const r = b.getBoundingClientRect(), s = getComputedStyle(b);
    const after = getComputedStyle(b, '::after');
    return {
      id: b.dataset.tabId || null, label: b.innerText.trim(), role: b.getAttribute('role'),
      left: r.left, right: r.right, top: Math.round(r.top), height: Math.round(r.height),
      selected: b.getAttribute('aria-selected') === 'true',
      look: [s.fontSize, s.fontWeight, s.paddingLeft, s.paddingRight, Math.round(r.height)]
        .join(' '),
      color: s.color,
      underline: after.content !== 'none' && parseFloat(after.height) >= 2
        && after.backgroundColor !== 'rgba(0, 0, 0, 0)' ? after.backgroundColor : null,
    };
  });
  seen.sort((a, b) => a.top - b.top || a.left - b.left);
  return {W, buttons: seen};
}"""


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_phone_taps_every_tab_in_place(app_url, browser, lang):
    """Issue 34: on a 390 × 844 phone the tab strip wraps onto rows of tabs that all look alike
    (Gradio's "⋯" menu showed inline read as plain text, with no mark of the chosen one, and the
    chosen tab jumped into the first row). Each tab tapped in turn: the strip keeps the desktop
    order (the registry's), exactly the tapped tab is marked (its colour and underline, unlike
    the rest), its panel shows, and every button lies inside the screen's width."""
    from ui.tabs import TAB_IDS

    context, page = phone(browser)
    page.goto(f"{app_url}?lang={lang}")
    page.wait_for_function(READY, timeout=60_000)
    page.wait_for_selector("#token-chips .ta-chip", timeout=60_000)
    order = [*TAB_IDS[1:], TAB_IDS[0]]  # the first is selected as the page opens: tapped last
    for tab in order:
        page.locator(f'#tabs [role=tab][data-tab-id="{tab}"]').tap(timeout=10_000)
        page.wait_for_function("(tab) => window.ta.tab === tab", arg=tab, timeout=15_000)
        page.wait_for_timeout(150)  # Gradio's strip settles on the next frames
        strip = page.evaluate(STRIP_JS)
        buttons = strip["buttons"]
        assert [b["id"] for b in buttons] == list(TAB_IDS), (tab, buttons)  # order kept
        assert all(b["role"] == "tab" and b["label"] for b in buttons), buttons
        assert len({b["look"] for b in buttons}) == 1, buttons  # every row styled alike
        assert len({b["top"] for b in buttons}) > 1  # on a phone the strip wraps: rows
        chosen = [b for b in buttons if b["selected"]]
        assert [b["id"] for b in chosen] == [tab], (tab, chosen)
        others = [b for b in buttons if not b["selected"]]
        assert chosen[0]["underline"] and not any(b["underline"] for b in others), buttons
        assert all(b["color"] != chosen[0]["color"] for b in others), buttons
        outside = [b["id"] for b in buttons if b["left"] < 0 or b["right"] > strip["W"]]
        assert not outside, (tab, outside, strip["W"])
        assert page.locator(f"#tab-{tab}").is_visible(), tab
        if tab == "model":  # a tab in the strip's last row, chosen
            page.locator("#tabs").scroll_into_view_if_needed()
            page.evaluate("() => window.scrollBy(0, -8)")
            shot(page, f"phone_tabs_{lang}", full_page=False)
    context.close()
