"""The walk a Chinese class takes on a phone (issue 52), in Debian Chromium against `python app.py`
at 390 × 844 with touch, the page in Chinese: the Model tab, then Train — the induction task
trained on the page until its lesson's accuracy — and its model used in every tab; Which heads
matter with the trained model's shipped pair; How the heads connect; Find the circuit. Every step
is a tap where the student sees the control; the lesson's key edge (the previous-token head's
strongest edge into a key, L0H1 → L1H0.k) is named under the graph and drawn on the screen, and
no figure, text or table the lesson needs lies past the screen's edge without a swipe hint.
Screenshots (artifacts/screenshots): phone_class_1_model … phone_class_5_graph."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_circuits_browser import DRAWN, GRAPH_SEEN, NODE, wait_for
from tests.test_e2e_browser import shot
from tests.test_phone import MEASURE_JS, READY, phone

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,  # the training: ~35 s on a quiet 2-core machine, ~90 s at load 6
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
LANG = "zh-CN"
KEY_EDGE = "L0H1 → L1H0.k"

# Every tab button the student sees: its centre on the screen.
TAB_CENTRES = """() => Object.fromEntries([...document.querySelectorAll('#tabs [role=tab]')]
  .filter((b) => b.offsetParent && b.dataset.tabId && !b.closest('[aria-hidden=true]'))
  .map((b) => { const r = b.getBoundingClientRect();
                return [b.dataset.tabId, [r.x + r.width / 2, r.y + r.height / 2]]; }))"""
# What lies past the screen's right edge on the visible tab, a figure's excepted (MEASURE_JS):
# a block of text or a control wider than the screen, or a table wider than its box whose block
# says nothing of a swipe (ui/js/phone.js).
OFF_SCREEN = """(tab) => {
  const W = document.documentElement.clientWidth, out = [];
  const panel = document.getElementById('tab-' + tab);
  for (const el of panel.querySelectorAll('.prose, button, input, textarea, label')) {
    if (!el.offsetParent || el.closest('.js-plotly-plot, .virtual-table-viewport')) continue;
    const r = el.getBoundingClientRect();
    if (r.width && (r.left < -1 || r.right > W + 1)) out.push(el.textContent.trim().slice(0, 40));
  }
  for (const box of panel.querySelectorAll('.virtual-table-viewport')) {
    if (!box.offsetParent || box.scrollWidth <= box.clientWidth + 2) continue;
    if (!box.closest('.block')?.dataset.taSwipe) out.push('table without a swipe hint');
  }
  return out;
}"""


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def tap_tab(page, tab: str) -> None:
    """The student scrolls to the tab strip and taps the tab where it is drawn."""
    page.evaluate(
        "() => window.scrollTo(0, document.querySelector('#tabs').getBoundingClientRect().top"
        " + window.scrollY - 4)"
    )
    page.wait_for_timeout(300)
    page.touchscreen.tap(*page.evaluate(TAB_CENTRES)[tab])
    shown = f"() => ta.tab === '{tab}' && !ta.opening"
    try:
        page.wait_for_function(shown, timeout=10_000)
    except Exception:  # a lost tap (issue 52, open: 2 of 4 runs here lost the first tap on
        # Model; the tab sat where it was drawn, the page ready; cause not yet found): again
        LOST_TAPS.append(tab)
        page.touchscreen.tap(*page.evaluate(TAB_CENTRES)[tab])
    wait_for(page, shown, timeout=60_000)


LOST_TAPS: list[str] = []  # tabs whose first tap did nothing (printed by the test)


def assert_on_screen(page, tab: str) -> None:
    """Nothing of the tab past the screen's edge but behind a swipe hint; no text over another
    in its figures."""
    seen = page.evaluate(MEASURE_JS, tab)
    assert not seen["outside"] and not seen["overlaps"] and not seen["pageWider"], seen
    hinted = f"(tab) => ({OFF_SCREEN})(tab).length === 0"
    with contextlib.suppress(Exception):  # the swipe hints come once the tables are drawn
        page.wait_for_function(hinted, arg=tab, timeout=10_000)
    assert not page.evaluate(OFF_SCREEN, tab), page.evaluate(OFF_SCREEN, tab)


def train_to_the_lesson(page) -> str:
    """Train the induction task (its radio item, then Train) until the page offers its model;
    returns the status line."""
    page.locator("#train-task label").filter(has=page.locator("input[value=induction]")).tap()
    wait_for(page, "() => document.querySelector('#train-task input[value=induction]').checked")
    page.locator("#train-start").tap()
    page.wait_for_selector("#train-use", state="visible", timeout=240_000)
    page.locator("#train-status").scroll_into_view_if_needed()
    return page.inner_text("#train-status")


def test_a_chinese_class_trains_the_induction_model_and_finds_its_circuit(app_url, browser):
    context, page = phone(browser)
    page.goto(f"{app_url}?lang={LANG}")
    page.wait_for_function(READY, timeout=120_000)
    tap_tab(page, "model")
    assert_on_screen(page, "model")
    shot(page, "phone_class_1_model", full_page=False)

    tap_tab(page, "train")
    status = train_to_the_lesson(page)
    score, lesson = (int(p) for p in re.findall(r"(\d+)%", status)[-2:])
    assert score >= lesson >= 90, status  # the copy accuracy its lesson needs, reached
    assert_on_screen(page, "train")
    shot(page, "phone_class_2_trained", full_page=False)
    page.locator("#train-use").tap()
    wait_for(page, "() => ta.tab === 'output'", timeout=60_000)

    tap_tab(page, "patching")
    page.locator("#pair-example input").tap()
    options = page.locator("#pair-example [role=option]")
    options.first.wait_for(timeout=30_000)
    assert options.count() >= 1  # the trained model's task has its shipped pair
    options.first.tap()
    wait_for(page, DRAWN, ["patch-heads-plot"])
    page.wait_for_timeout(800)
    said = page.inner_text("#patch-said")
    assert "L1 H" in said and "Olsson" in said, said  # the heads restored, the lesson
    page.locator("#patch-said").scroll_into_view_if_needed()
    assert_on_screen(page, "patching")
    shot(page, "phone_class_3_patched", full_page=False)

    tap_tab(page, "circuits")
    wait_for(page, DRAWN, ["circuit-attr-plot"])
    page.locator("#circuit-run").scroll_into_view_if_needed()
    page.locator("#circuit-run").tap()
    wait_for(page, DRAWN, ["circuit-graph-plot"])
    page.wait_for_timeout(800)
    edges = page.inner_text("#circuit-edges-said")
    assert KEY_EDGE in edges and "Olsson" in edges, edges  # the lesson, named
    page.locator("#circuit-edges-said").scroll_into_view_if_needed()
    shot(page, "phone_class_4_found", full_page=False)
    page.evaluate(
        "() => document.querySelector('#circuit-graph-plot').scrollIntoView({block: 'center'})"
    )
    page.wait_for_timeout(500)
    graph = page.evaluate(GRAPH_SEEN)
    assert graph["widths"][KEY_EDGE] >= 2.5, graph["widths"]  # drawn, as thick as it reads
    for node in ("L0H1", "L1H0"):  # both ends on the screen, where the student looks
        x, y = page.evaluate(NODE, node)
        assert 0 < x < 390 and 0 < y < 844, (node, x, y)
    assert not graph["over"] and graph["arrows"] == len(graph["widths"]), graph
    assert_on_screen(page, "circuits")
    shot(page, "phone_class_5_graph", full_page=False)
    context.close()
    print(f"tab taps lost and tapped again: {LOST_TAPS or 'none'}")
