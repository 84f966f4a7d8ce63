"""The Train tab (issue 21) in Debian Chromium against `python app.py`: a task trains from scratch
on this page, the status and the figure are redrawn while it runs, Stop ends it, the weights
download as safetensors with a card, and another page sees none of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import shot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
STEP = "() => (/step (\\d[\\d,]*)/.exec(document.querySelector('#train-status')?.innerText || '')"
STEP += " || [0, '0'])[1].replace(',', '')"


def test_a_page_trains_watches_stops_and_downloads_its_own_model(browser, tmp_path):
    with serve_app() as (url, _):
        context = browser.new_context(
            viewport={"width": 1280, "height": 1000}, accept_downloads=True
        )
        page = context.new_page()
        page.goto(f"{url}?tab=train")
        page.wait_for_selector("#train-start")
        page.click("#train-start")  # roles, 30 s
        page.wait_for_function(f"() => +({STEP})() > 0", timeout=60_000)
        first = int(page.evaluate(f"() => ({STEP})()"))
        page.wait_for_function(f"() => +({STEP})() > {first}", timeout=10_000)  # redrawn
        page.wait_for_selector("#train-plot .js-plotly-plot .main-svg")
        shot(page, "train_tab_running")
        page.click("#train-stop")
        page.wait_for_function(
            "() => /stopped|done/.test(document.querySelector('#train-status').innerText)",
            timeout=20_000,
        )
        page.click("#train-save")
        page.wait_for_selector("#train-weights a[href]", timeout=30_000)
        names = page.evaluate(
            "() => [...document.querySelectorAll('#train-weights a[href]')]"
            ".map((a) => decodeURIComponent(a.getAttribute('href').split('/').pop()))"
        )
        assert sorted(names) == ["roles.card.json", "roles.safetensors"]
        with page.expect_download() as got:
            page.locator("#train-weights a[href$='card.json']").first.click()
        card = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
        assert card["name"] == "roles"

        other = context.browser.new_page()  # another visitor: nothing of this page's training
        other.goto(f"{url}?tab=train")
        other.wait_for_selector("#train-save")
        other.click("#train-save")
        other.wait_for_function(
            "() => /no trained model/i.test(document.querySelector('#status').innerText)",
            timeout=20_000,
        )
        other.close()
        context.close()


def test_the_logit_lens_shows_each_layer_of_the_induction_model(page):
    """The Output tab's logit lens: one row per layer (embeddings first), the text's positions
    as columns, and the last row the model's own prediction (its greedy continuation)."""
    from urllib.parse import quote

    with serve_app() as (url, _):
        text = quote("mississippi mississippi")
        page.goto(f"{url}?tab=output&model=induction&text={text}")
        lens = "document.querySelector('#lens-plot .js-plotly-plot')"
        page.wait_for_function(f"() => {lens}?.data?.[0]?.y?.length === 4", timeout=60_000)
        rows = page.evaluate(f"() => {lens}.data[0].y")
        assert rows[0] == "embeddings" and rows[-1] == "after layer 2"
        cells = page.evaluate(f"() => {lens}.data[0].text")
        last, first = cells[-1], cells[0]
        # after the last layer the second copy is predicted letter by letter ("ssissippi")
        assert "".join(c.split("<br>")[0].split()[0] for c in last[14:22]) == "ssissipp", last
        assert last != first  # the embeddings alone predict something else
        page.locator("#lens-plot").scroll_into_view_if_needed()
        shot(page, "logit_lens_induction")
