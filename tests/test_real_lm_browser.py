"""A real language model's size on the page (issue 51), in Debian Chromium against `python app.py`:
SmolLM2-135M's 30 layers × 9 heads over a ~110-token paragraph. At 1080p the overview sets its
layers out in three blocks side by side, no label of the tab's figures lies over another, and a
click on a tile of the last block opens that head;
presented at 720p its tiles stay over 30 px and no label lies over another. Screenshots go to
artifacts/screenshots (docs/screenshots with UPDATE_DOC_SCREENSHOTS=1)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import shot
from tests.test_phone import MEASURE_JS, READY
from tests.test_real_lm import PARAGRAPH

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
LINK = {"text": PARAGRAPH, "model": "smollm2-135m", "tab": "attention"}
# Each block of the overview: its tile size in px, its first layer, and the page point of the
# tile (that block's first layer, head ``head``).
BLOCKS = """(head) => {
  const gd = document.querySelector('#overview-plot .js-plotly-plot');
  if (!gd || !gd._fullLayout) return null;
  const box = gd.getBoundingClientRect(), L = gd._fullLayout;
  return gd.data.map((t, i) => {
    const xa = L[`xaxis${i ? i + 1 : ''}`], ya = L[`yaxis${i ? i + 1 : ''}`];
    const tile = xa._length / xa.tickvals.length;
    return {tile, first: ya.ticktext[0], x: box.left + xa._offset + xa.l2p(xa.tickvals[head]),
            y: box.top + ya._offset + ya.l2p(ya.tickvals[0])};
  });
}"""


def overview_texts(page) -> dict:
    """test_phone's measure of the tab's figures (texts outside the screen, texts over texts),
    the overview's own findings only."""
    seen = page.evaluate(MEASURE_JS, "attention")
    return {k: [f for f in seen[k] if f[0] == "overview-plot"] for k in ("outside", "overlaps")}


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def test_the_overview_at_1080p_is_three_blocks_and_a_tile_opens_its_head(app_url, browser):
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    page = context.new_page()
    page.goto(f"{app_url}?{urlencode(LINK)}")
    page.wait_for_function(READY, timeout=300_000)
    page.evaluate("() => document.querySelector('#overview-plot').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(1500)
    blocks = page.evaluate(BLOCKS, 6)
    assert [b["first"] for b in blocks] == ["L0", "L10", "L20"], blocks
    assert min(b["tile"] for b in blocks) > 40, blocks
    seen = page.evaluate(MEASURE_JS, "attention")  # every figure of the tab: the comparison's
    assert not seen["overlaps"] and not seen["outside"], seen  # '−1' lay over its 'A − B' here
    shot(page, "overview_smollm2_1920x1080", full_page=False)
    page.mouse.click(blocks[2]["x"], blocks[2]["y"])  # L20 H6
    page.wait_for_function(
        "() => document.querySelector('#layer input[type=number]')?.value === '20'"
        " && document.querySelector('#head input[type=number]')?.value === '6'",
        timeout=30_000,
    )
    context.close()


def test_the_overview_presented_at_720p_reads(app_url, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{app_url}?{urlencode({**LINK, 'present': '1', 'fig': 'overview'})}")
    page.wait_for_function(READY, timeout=300_000)
    page.wait_for_timeout(2500)
    blocks = page.evaluate(BLOCKS, 0)
    assert len(blocks) >= 3 and min(b["tile"] for b in blocks) > 30, blocks
    seen = overview_texts(page)
    shot(page, "overview_smollm2_present_1280x720", full_page=False)
    assert not seen["overlaps"] and not seen["outside"], seen
    context.close()
