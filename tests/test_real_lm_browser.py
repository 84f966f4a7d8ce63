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


# The block figure's tiles: each layer's tile (its trace's name "L<n>"), its side in px and its
# centre on the page.
BLOCK_TILES = """() => {
  const gd = document.querySelector('#block-plot .js-plotly-plot');
  if (!gd || !gd._fullLayout) return null;
  const box = gd.getBoundingClientRect(), L = gd._fullLayout;
  return gd.data.map((t) => {
    const xa = L[`xaxis${t.xaxis.slice(1)}`], ya = L[`yaxis${t.yaxis.slice(1)}`];
    return {name: t.name, w: xa._length, h: ya._length,
            x: box.left + xa._offset + xa._length / 2, y: box.top + ya._offset + ya._length / 2};
  });
}"""
LAYER_HEAD = """() => [document.querySelector('#layer input[type=number]')?.value,
                    document.querySelector('#head input[type=number]')?.value]"""


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_on_a_phone_the_overview_and_block_are_a_fingers_size_and_short(app_url, browser, lang):
    """SmolLM2 on a 390 × 844 phone: the overview's tiles are at least 32 px (they were 20-22),
    a tap on one opens its head; the block figure's 30 layers stand in a compact grid (one column
    made the page ~18,800 px tall), square tiles of 32 px and more, the figure under 1,700 px, a
    tap on a tile opens its layer; no label of the two figures lies over another or off the
    screen."""
    from tests.test_phone import phone

    context, page = phone(browser)
    page.goto(f"{app_url}?{urlencode({**LINK, 'lang': lang})}")
    page.wait_for_function(READY, timeout=300_000)
    page.evaluate("() => document.querySelector('#overview-plot').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(1500)
    blocks = page.evaluate(BLOCKS, 4)
    assert len(blocks) == 1 and blocks[0]["tile"] >= 32, blocks  # SmolLM2's 9 heads in a row
    seen = overview_texts(page)
    assert not seen["overlaps"] and not seen["outside"], seen
    shot(page, f"overview_smollm2_phone_390x844_{lang}", full_page=False)
    page.touchscreen.tap(blocks[0]["x"], blocks[0]["y"])  # L0 H4
    page.wait_for_function(f"() => ({LAYER_HEAD})().join() === '0,4'", timeout=30_000)
    page.wait_for_timeout(1500)  # the tap scrolls (smoothly) to the head view it opened
    page.evaluate("() => document.querySelector('#block-plot').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(1200)
    tiles = page.evaluate(BLOCK_TILES)
    assert [t["name"] for t in tiles] == [f"L{i}" for i in range(30)]
    assert all(t["w"] >= 32 and abs(t["w"] - t["h"]) < 2 for t in tiles), tiles[0]
    height = page.evaluate("() => document.querySelector('#block-plot').offsetHeight")
    assert height < 1700, height
    seen = page.evaluate(MEASURE_JS, "attention")
    bad = {k: [f for f in seen[k] if f[0] == "block-plot"] for k in ("outside", "overlaps")}
    assert not bad["outside"] and not bad["overlaps"], bad
    shot(page, f"block_smollm2_phone_390x844_{lang}", full_page=False)
    assert 0 < tiles[7]["y"] < 844, tiles[7]  # on the screen, where the finger taps
    page.touchscreen.tap(tiles[7]["x"], tiles[7]["y"])
    page.wait_for_function(f"() => ({LAYER_HEAD})()[0] === '7'", timeout=30_000)
    context.close()
