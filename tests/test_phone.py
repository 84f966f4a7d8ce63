"""A student's phone (390 × 844, touch), in both languages: every panel of every figure of every
tab shows without sideways scrolling, and no title, tick label or point label lies over another
(the bounding boxes of every figure's texts, measured in Debian Chromium against `python app.py`).
Screenshots go to artifacts/screenshots (docs/screenshots with UPDATE_DOC_SCREENSHOTS=1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import TAB_PLOTS, shot, wait_tab

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
READY = "() => window.ta?.ready === true && !window.ta.opening"
FIGURE_TABS = ("embeddings", "attention", "layer", "heads", "masks", "output", "hidden")

# Every figure of the visible tab: whether it (and each plot area) lies inside the screen's width,
# and every pair of its texts (titles, panel titles, axis titles, tick labels, colour-bar labels,
# point labels) whose boxes overlap by more than a sliver.
MEASURE_JS = """(tab) => {
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
    problems = {
        tab: {k: v for k, v in seen.items() if k in ("outside", "overlaps", "pageWider") and v}
        for tab, seen in found.items()
    }
    problems = {tab: p for tab, p in problems.items() if p}
    if problems:  # the whole finding, for a reader of the CI log's artifact
        import json

        out = Path("artifacts") / f"phone_problems_{model or 'bert'}_{lang}.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(problems, ensure_ascii=False, indent=1), encoding="utf-8")
    assert not problems, problems
    assert sum(seen["figures"] for seen in found.values()) >= 8
    context.close()
