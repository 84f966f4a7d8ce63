"""Which heads matter in Debian Chromium against `python app.py`: a link patches once its view is
open; a click on a head of the grid draws that head on both texts and selects it everywhere, and
the button beside it opens it on the Attention tab; on a phone in both languages every figure of
the tab fits and no text lies over another; presented at 720p the grid fills the screen.
Screenshots go to artifacts/screenshots (docs/screenshots with UPDATE_DOC_SCREENSHOTS=1)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import shot
from tests.test_phone import MEASURE_JS, READY, phone

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
COPY = {"text": "qzxwv qzxw", "model": "induction", "tab": "patching", "pair": "bhmtk qzxw"}
WINOGRAD = {
    "text": "The trophy didn't fit in the suitcase because it was too big.",
    "tab": "patching",
    "pair": "The trophy didn't fit in the suitcase because it was too small.",
    "read_at": "11",
}
PATCHED = """() => {
  const ids = ['patch-heads-plot', 'patch-resid-plot', 'patch-shift-plot'];
  return ids.every((id) => {
    const gd = document.querySelector(`#${id} .js-plotly-plot`);
    const drawn = gd && gd._fullLayout && gd.querySelector('.main-svg');
    return drawn && gd.data?.[0]?.type === 'heatmap';
  }) && document.querySelector('#patch-said')?.textContent.includes('%');
}"""
SHOWN = """() => [...document.querySelectorAll('#tab-patching .js-plotly-plot')]
  .filter((gd) => gd.offsetParent && gd.querySelector('.main-svg')).length >= 4"""
WHERE = """() => ({
  selected: document.querySelector('[role=tab][aria-selected=true]')?.id,
  panel: getComputedStyle(document.getElementById('tab-patching')).display,
  plots: [...document.querySelectorAll('#tab-patching .js-plotly-plot')].map(
    (gd) => [gd.closest('.block[id]')?.id, !!gd.offsetParent]),
  status: document.querySelector('#status')?.textContent,
})"""
PAIR_TITLE = """() => document.querySelector('#patch-pair-plot .gtitle')?.textContent || ''"""


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def wait_patched(page, timeout: float = 120_000) -> None:
    """Until the tab's grids are drawn; on a timeout, what the page showed instead."""
    try:
        page.wait_for_function(PATCHED, timeout=timeout)
    except Exception:
        said = page.evaluate("() => document.querySelector('#patch-said')?.textContent")
        status = page.evaluate("() => document.querySelector('#status')?.textContent")
        raise AssertionError(f"not patched: said {said!r}, status {status!r}") from None


def cell_center(page, plot: str, x: int, y: int) -> tuple[float, float]:
    """The page coordinates of heatmap cell (x, y) of a figure (category axes, cells 0, 1, …)."""
    return page.evaluate(
        """([plot, x, y]) => {
          const gd = document.querySelector(`#${plot} .js-plotly-plot`);
          gd.scrollIntoView({block: 'center'});
          const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
          const box = gd.getBoundingClientRect();
          return [box.left + xa._offset + xa.l2p(x), box.top + ya._offset + ya.l2p(y)];
        }""",
        [plot, x, y],
    )


def test_a_link_patches_and_a_clicked_head_shows_on_both_texts(app_url, browser):
    context = browser.new_context(viewport={"width": 1920, "height": 1080})
    page = context.new_page()
    page.goto(f"{app_url}?{urlencode(COPY)}")
    page.wait_for_function(READY, timeout=60_000)
    wait_patched(page)
    said = page.inner_text("#patch-said")
    assert "L0 H1 62%" in said and "previous_token" in said
    page.evaluate("() => document.querySelector('#patch-said').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(500)
    shot(page, "patching_1920x1080_en", full_page=False)
    x, y = cell_center(page, "patch-heads-plot", 1, 1)  # L1 H1
    page.mouse.click(x, y)
    page.wait_for_function(f"() => ({PAIR_TITLE})().startsWith('L1 H1')", timeout=30_000)
    assert page.input_value("#layer input[type=number]") == "1"
    assert page.input_value("#head input[type=number]") == "1"
    page.click("#patch-open")
    page.wait_for_function(
        "() => document.querySelector('#tab-attention-button')?.getAttribute('aria-selected')"
        " === 'true'",
        timeout=30_000,
    )
    # ... where the head view shows it, and under it the same head on both texts of the pair
    page.wait_for_function(
        "() => (document.querySelector('#attention-pair-plot .gtitle')?.textContent || '')"
        ".startsWith('L1 H1 on both texts')",
        timeout=30_000,
    )
    assert page.is_visible("#head-plot .main-svg")
    # back on the tab, the pair is still patched: its grids and sentence as the user left them
    page.evaluate("() => ta.openTab('patching')")
    page.wait_for_function("() => ta.tab === 'patching'", timeout=10_000)
    page.wait_for_timeout(2500)  # the tab's event answered (it must not clear the patch)
    wait_patched(page, timeout=30_000)
    assert page.inner_text("#patch-said") == said
    context.close()


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_tab_fits_a_phone_in_both_languages(app_url, browser, lang):
    context, page = phone(browser)
    page.goto(f"{app_url}?{urlencode({**WINOGRAD, 'lang': lang})}")
    page.wait_for_function(READY, timeout=60_000)
    wait_patched(page)
    page.wait_for_timeout(1000)  # the frames after the draw: stacked panels, spaced labels
    try:  # shown, not only drawn: the four figures of the tab visible on the screen
        page.wait_for_function(SHOWN, timeout=30_000)
    except Exception:
        raise AssertionError(f"the tab's figures not shown: {page.evaluate(WHERE)}") from None
    seen = page.evaluate(MEASURE_JS, "patching")
    page.evaluate("() => document.querySelector('#patch-said').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(300)
    shot(page, f"patching_phone_{lang}", full_page=False)
    assert seen["figures"] >= 4, seen
    assert not seen["outside"], seen["outside"]
    assert not seen["overlaps"], seen["overlaps"]
    assert not seen["pageWider"]
    said = page.inner_text("#patch-said")
    assert ("这一课" in said) if lang == "zh-CN" else ("The lesson" in said), said
    context.close()


def test_the_grid_presented_at_720p_fills_the_screen(app_url, browser):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{app_url}?{urlencode({**COPY, 'present': '1', 'fig': 'patch-heads'})}")
    page.wait_for_function(READY, timeout=60_000)
    wait_patched(page)
    page.wait_for_timeout(1500)
    box = page.evaluate(
        """() => {
          const gd = document.querySelector('#patch-heads-plot .js-plotly-plot');
          const r = gd.querySelector('.nsewdrag').getBoundingClientRect();
          return {top: r.top, bottom: r.bottom, height: r.height, shown: !!gd.offsetParent};
        }"""
    )
    shot(page, "patching_present_1280x720", full_page=False)
    assert box["shown"] and box["top"] >= 0 and box["bottom"] <= 720
    assert box["height"] / 720 >= 0.45, box
    context.close()


def test_an_api_client_patches_its_own_last_run(app_url):
    """/patch, after /run in the same client session: the numbers of the page's tab."""
    from gradio_client import Client

    client = Client(app_url, verbose=False)
    client.predict(text=COPY["text"], model="induction", tab="patching", api_name="/run")
    values = client.predict(pair=COPY["pair"], tab="patching", api_name="/patch")
    said = next(v for v in values if isinstance(v, str) and "restore most" in v)
    assert "L0 H1 62%" in said
    csv = next(v for v in values if isinstance(v, str) and v.endswith(".csv"))
    assert "heads" in Path(csv).read_text(encoding="utf-8")


def test_a_real_language_models_patch_shows_how_far_it_is(app_url, browser):
    """SmolLM2's grids are 720 patched runs (270 heads, 30 layers × 15 positions): tens of
    seconds on a busy server. While they run, the grid's place shows a bar that moves and says
    how many runs are done, in the page's language; then the grids come."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    text = "When Mary and John went to the shop, John gave a book to"
    link = {"text": text, "model": "smollm2-135m", "tab": "patching", "lang": "zh-CN"}
    page.goto(f"{app_url}?{urlencode(link)}")
    page.wait_for_function(READY, timeout=180_000)
    page.fill("#pair textarea", text.replace("John gave", "Mary gave"))
    page.click("#patch-run")
    bar = "() => document.querySelector('#patch-heads-plot .progress-level')?.textContent || ''"
    seen = []
    for _ in range(600):  # at most 5 minutes
        said = page.evaluate(bar).strip()
        if said and (not seen or seen[-1] != said):
            seen.append(said)
        if len(seen) == 3:
            shot(page, "patching_progress_smollm2_zh_1280x720", full_page=False)
        if page.evaluate(PATCHED):
            break
        page.wait_for_timeout(500)
    wait_patched(page, timeout=10_000)
    assert len(seen) >= 3, seen  # the bar moved while the runs went on
    done = [int(s.split("已完成 ")[1].split(" /")[0]) for s in seen]
    assert done == sorted(done) and all(" / 720 次运行" in s for s in seen), seen
    context.close()
