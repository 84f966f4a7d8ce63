"""How the heads connect in Debian Chromium against `python app.py`, at 1920 × 1080 in English and
Chinese: a link opens the tab on the induction model's copy pair with its attribution grid and
composition scores drawn; Compare and Find the circuit draw the comparison, the graph and the
curve, and the lesson is said. Screenshots go to artifacts/screenshots (docs/screenshots with
UPDATE_DOC_SCREENSHOTS=1)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import shot
from tests.test_phone import READY

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
COPY = {
    "text": "qzxwv qzxw",
    "model": "induction",
    "tab": "circuits",
    "pair": "bhmtk qzxw",
    "answer": "v",
}
DRAWN = """(ids) => ids.every((id) => {
  const gd = document.querySelector(`#${id} .js-plotly-plot`);
  return gd && gd._fullLayout && gd.querySelector('.main-svg') && gd.data?.length > 0;
})"""


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_tab_opens_on_the_copy_pair_and_draws_its_circuit(browser, lang):
    words = {"en": ("K-composition", "Pearson"), "zh-CN": ("K 组合", "Pearson")}[lang]
    with serve_app() as (url, _):
        context = browser.new_context(viewport={"width": 1920, "height": 1080})
        page = context.new_page()
        page.goto(f"{url}?{urlencode({**COPY, 'lang': lang})}")
        page.wait_for_function(READY, timeout=60_000)
        page.wait_for_function(
            DRAWN, arg=["circuit-attr-plot", "circuit-comp-plot"], timeout=60_000
        )
        page.click("#circuit-compare-run")
        page.wait_for_function(DRAWN, arg=["circuit-compare-plot"], timeout=60_000)
        page.click("#circuit-run")
        page.wait_for_function(
            DRAWN, arg=["circuit-graph-plot", "circuit-curve-plot"], timeout=120_000
        )
        assert words[0] in page.inner_text("#circuit-edges-said")
        assert words[1] in page.inner_text("#circuit-compare-said")
        page.wait_for_timeout(500)
        shot(page, f"circuits_1920x1080_{lang}", full_page=True)
        page.evaluate(
            "() => document.querySelector('#circuit-edges-said').scrollIntoView({block: 'start'})"
        )
        page.wait_for_timeout(300)
        shot(page, f"circuits_graph_1920x1080_{lang}", full_page=False)
        context.close()
