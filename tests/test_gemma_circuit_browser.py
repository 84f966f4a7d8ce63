"""Issue 51's Chinese class: Gemma 3 270M's indirect-object pair in Chinese, its circuit found on
How the heads connect in Debian Chromium, read at 1280 × 720 and on a phone (390 × 844) in
Chinese. A link opens the tab on the shipped pair; the graph's title counts the model's 5,644
edges, its heads are Gemma's (each edge out of a head its part of the norm after the attention),
the lesson's strongest edge L11H3 → logits is drawn, and no line passes over a text or a node not
its own. Screenshots go to artifacts/screenshots."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.apphost import CHROMIUM
from tests.test_circuits_browser import DRAWN, GRAPH_SEEN, app_url, wait_for  # noqa: F401
from tests.test_e2e_browser import shot
from tests.test_phone import MEASURE_JS, READY, phone

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
GEMMA = {
    "text": "小明和小红去了商店，小明把饮料递给了小",
    "model": "gemma-3-270m",
    "tab": "circuits",
    "pair": "小明和小红去了商店，小红把饮料递给了小",
    "answer": "红",
    "wrong": "明",
    "lang": "zh-CN",
}
EDGES = """() => {
  const gd = document.querySelector('#circuit-graph-plot .js-plotly-plot');
  return gd._fullData.filter((t) => t.visible === true && t.meta?.edge)
    .map((t) => t.hovertemplate.split(':')[0]);
}"""


@pytest.mark.parametrize("size", ["720p", "phone"])
def test_gemmas_chinese_circuit_reads_in_chinese(app_url, browser, size):  # noqa: F811
    if size == "phone":
        context, page = phone(browser)
    else:
        context = browser.new_context(viewport={"width": 1280, "height": 720})
        page = context.new_page()
    page.goto(f"{app_url}?{urlencode(GEMMA)}")
    wait_for(page, READY, timeout=300_000)
    wait_for(page, DRAWN, ["circuit-graph-plot"], timeout=300_000)
    page.wait_for_timeout(1000)
    graph = page.evaluate(GRAPH_SEEN)
    drawn = re.search(r"最强的\s*(\d+)\s*条", graph["title"])
    assert "5644" in graph["title"] and drawn, graph["title"]
    assert graph["arrows"] == len(graph["widths"]) == int(drawn[1]) >= 8, graph
    assert not graph["over"], graph["over"]
    edges = page.evaluate(EDGES)
    assert edges[0].replace(" ", "") == "L11H3→logit", edges  # the strongest, "logits" in Chinese
    seen = page.evaluate(MEASURE_JS, {"tab": "circuits", "legends": True})
    crowded = [o for o in seen["overlaps"] if o[0] == "circuit-graph-plot"]
    assert not crowded and not seen["outside"], (crowded, seen["outside"])
    page.evaluate(
        "() => document.querySelector('#circuit-graph-plot').scrollIntoView({block: 'center'})"
    )
    page.wait_for_timeout(300)
    shot(page, f"circuits_gemma_{size}_zh", full_page=False)
    context.close()
