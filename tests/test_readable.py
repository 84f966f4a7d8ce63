"""The head view readable at every size (issue 41), as Chromium draws it against `python app.py`:
a lecture's 125-token paragraph presented at 1280×720 and 1920×1080 and read on a 390×844 phone,
in English and Chinese — the map's size, tick labels that never overlap, the toolbar uncovered,
Esc back to the presentation after a language switch. Screenshots: artifacts/screenshots."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import TAB_PLOTS, open_tab, shot
from tests.test_screen import PARAGRAPH

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
READY = "() => window.ta?.ready === true && !window.ta.opening"
SHOWN = "() => document.querySelector('[data-ta-shown]')?.id === 'head-plot'"
# The head view as drawn: its plot area, its tick labels (boxes, sizes, overlapping pairs), its
# title, and which of its toolbar's buttons something else covers.
MEASURE = """(block) => {
  const gd = document.querySelector(`${block || '#head-plot'} .js-plotly-plot`);
  if (!gd.closest('[data-ta-shown]')) gd.scrollIntoView({block: 'center'});
  const svg = gd.querySelector('.main-svg').getBoundingClientRect();
  const area = gd.querySelector('.nsewdrag').getBoundingClientRect();
  const labels = [...gd.querySelectorAll('.xtick text, .ytick text')]
    .map((t) => ({box: t.getBoundingClientRect(), size: parseFloat(getComputedStyle(t).fontSize)}))
    .filter((t) => t.box.width);
  let overlaps = 0;
  for (let i = 0; i < labels.length; i++) {
    for (let j = i + 1; j < labels.length; j++) {
      const a = labels[i].box, b = labels[j].box;
      if (Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5
          && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5) overlaps++;
    }
  }
  /* the title's last line (a fallback font's glyph, the masks' ■, draws a box taller than
     its line: the lines above are measured by where the last one stands) */
  const lines = gd.querySelectorAll('.gtitle tspan.line');
  const title = (lines.length ? lines[lines.length - 1] : gd.querySelector('.gtitle'))
    .getBoundingClientRect();
  const titleTop = gd.querySelector('.gtitle').getBoundingClientRect().top;
  const covered = [...gd.querySelectorAll('.modebar-btn')].filter((b) => {
    const r = b.getBoundingClientRect();
    const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return !at || !b.contains(at);
  }).map((b) => b.dataset.title);
  return {width: svg.width, left: svg.left, right: svg.right, plotWidth: area.width,
          plotHeight: area.height, plotTop: area.top, plotBottom: area.bottom,
          labels: labels.length, overlaps, sizes: [...new Set(labels.map((l) => l.size))],
          labelsLeft: Math.min(...labels.map((l) => l.box.left)),
          labelsRight: Math.max(...labels.map((l) => l.box.right)),
          titleTop, titleBottom: title.bottom, covered,
          pageWidth: document.documentElement.scrollWidth, window: innerWidth};
}"""


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def open_view(browser, app_url, size: str, lang: str, present: bool):
    width, height = map(int, size.split("x"))
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    present_q = "&present=1" if present else ""
    page.goto(f"{app_url}?tab=attention&lang={lang}&text={quote(PARAGRAPH)}{present_q}")
    page.wait_for_function(READY, timeout=60_000)
    page.wait_for_function(
        "() => document.querySelector('#head-plot .js-plotly-plot')?.layout?.meta?.laid_out",
        timeout=30_000,
    )
    if present:
        page.wait_for_function(SHOWN, timeout=30_000)
    page.wait_for_timeout(400)
    return context, page


@pytest.mark.parametrize(("size", "least"), [("1280x720", 13), ("1920x1080", 18)])
@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_a_presented_paragraph_fills_the_screen_with_labels_apart(
    app_url, browser, size, least, lang
):
    height = int(size.split("x")[1])
    context, page = open_view(browser, app_url, size, lang, present=True)
    box = page.evaluate(MEASURE)
    assert box["plotHeight"] >= 0.65 * height, box
    assert box["plotBottom"] <= height - 48, box  # above the bar
    assert box["overlaps"] == 0, box
    assert min(box["sizes"]) >= least, box
    assert box["titleTop"] >= 0 and box["titleBottom"] <= box["plotTop"], box
    assert box["covered"] == [], box
    shot(page, f"readable_present_{size}_{lang}", full_page=False)
    context.close()


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_on_a_phone_the_heatmap_takes_the_card_and_nothing_is_cut(app_url, browser, lang):
    context, page = open_view(browser, app_url, "390x844", lang, present=False)
    box = page.evaluate(MEASURE)
    assert box["plotWidth"] >= 0.8 * box["width"], box
    assert box["overlaps"] == 0, box
    assert box["labelsLeft"] >= box["left"] and box["labelsRight"] <= box["right"] + 1, box
    assert box["pageWidth"] <= box["window"], box  # nothing pushes the page sideways
    assert box["titleBottom"] <= box["plotTop"], box
    assert box["covered"] == [], box
    shot(page, f"readable_phone_390x844_{lang}", full_page=False)
    context.close()


@pytest.mark.parametrize(("tab", "fig"), [("masks", "causal-mask"), ("heads", "rollout")])
def test_the_other_square_maps_present_as_the_head_view_does(app_url, browser, tab, fig):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{app_url}?tab={tab}&present=1&fig={fig}&text={quote(PARAGRAPH)}")
    page.wait_for_function(READY, timeout=60_000)
    page.wait_for_function(
        f"() => document.querySelector('[data-ta-shown]')?.id === '{fig}-plot'"
        f" && document.querySelector('#{fig}-plot .js-plotly-plot')?.layout?.meta?.laid_out",
        timeout=30_000,
    )
    page.wait_for_timeout(400)
    box = page.evaluate(MEASURE, f"#{fig}-plot")
    assert box["plotHeight"] >= 0.65 * 720, box
    assert box["overlaps"] == 0, box
    assert min(box["sizes"]) >= 13, box
    assert box["titleBottom"] <= box["plotTop"], box
    shot(page, f"readable_present_1280x720_{fig}", full_page=False)
    context.close()


def test_the_desktop_page_keeps_its_labels_apart_and_its_toolbar_clear(app_url, browser):
    context, page = open_view(browser, app_url, "1920x1080", "en", present=False)
    box = page.evaluate(MEASURE)
    assert box["overlaps"] == 0, box
    assert box["covered"] == [], box
    assert box["labels"] >= 40, box  # thinned, not emptied
    context.close()


def test_esc_returns_to_the_presentation_after_a_language_switch(app_url, browser):
    context, page = open_view(browser, app_url, "1280x720", "en", present=True)
    page.keyboard.press("Escape")  # the page, to switch the language
    page.wait_for_function("() => document.body.classList.contains('ta-paused')")
    page.click("#lang label:has-text('简体中文')")
    page.wait_for_function("() => document.documentElement.lang.startsWith('zh')")
    page.keyboard.press("Escape")  # back to the presentation, the switch still focused
    page.wait_for_function("() => !document.body.classList.contains('ta-paused')")
    page.wait_for_function(SHOWN)
    context.close()


@pytest.mark.parametrize("size", ["390x844", "1920x1080"])
def test_no_page_script_stage_fails_on_any_tab(app_url, browser, size):
    """Every figure-drawing stage of the page's scripts that catches an error reports it
    (ta.fault, ui/js/core.js): after a real paragraph on every tab, on a phone and a desktop,
    none has."""
    context, page = open_view(browser, app_url, size, "en", present=False)
    for tab in TAB_PLOTS:
        if tab != "attention":
            open_tab(page, tab)
    assert page.evaluate("() => window.ta.faults") == []
    # ... and one that fails is seen: a draw hook that throws is reported, the figure drawn
    page.evaluate(
        """async () => {
          ta.drawHooks.push(() => { throw new Error('a broken hook'); });
          const gd = document.querySelector('#head-plot .js-plotly-plot');
          await Plotly.react(gd, gd.data, gd.layout);  /* a redraw: every hook runs */
        }"""
    )
    page.wait_for_function("() => window.ta.faults.length > 0")
    faults = page.evaluate("() => window.ta.faults")
    assert faults and faults[0]["message"] == "a broken hook", faults
    context.close()


def test_no_page_script_replaces_a_function_of_plotly():
    """The page learns that a figure was drawn from Plotly's own events (ui/js/fill.js): no
    script assigns to a member of Plotly or to one of its drawing functions anywhere."""
    from ui.js import FILES, source

    drawing = "react|newPlot|relayout|restyle|update|redraw|purge|setPlotConfig"
    assign = re.compile(rf"\bPlotly\.[A-Za-z_]+\s*=[^=]|\.(?:{drawing})\s*=[^=]")
    found = {name: assign.findall(source(name)) for name in FILES}
    assert not {name: hits for name, hits in found.items() if hits}
