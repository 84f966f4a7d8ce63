"""The view lives in the address bar (the app-layer rebuild), in Debian Chromium.

Every change of text, model, tab, layer or head updates the address; reload reopens exactly that
view; Back returns to the previous text, not out of the app.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, quote, urlparse

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import shot, wait_status, wait_tab

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def address(page) -> dict:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def wait_address(page, **wanted) -> None:
    page.wait_for_function(
        "(w) => { const q = new URLSearchParams(location.search);"
        " return Object.entries(w).every(([k, v]) => q.get(k) === v); }",
        arg={k: str(v) for k, v in wanted.items()},
        timeout=20_000,
    )


def test_the_address_follows_the_view_and_reload_and_back_restore_it(app_url, page):
    page.goto(f"{app_url}?text={quote('time flies like an arrow')}&tab=tokens")
    wait_status(page, "7 tokens")
    page.wait_for_function(
        "() => window.ta?.ready === true && !window.ta.opening"
    )  # the linked view is open
    page.fill("#text textarea", "dogs bark")
    page.click("#run")
    wait_status(page, "4 tokens")
    wait_address(page, text="dogs bark", tab="tokens")  # a new text: a new history entry
    page.click("#tab-attention-button")
    wait_tab(page, "attention")
    wait_address(page, text="dogs bark", tab="attention")
    page.fill("#head input[type=number]", "5")
    page.press("#head input[type=number]", "Enter")
    wait_address(page, head="5")  # the head switch in the browser moves the address too
    page.fill("#layer input[type=number]", "3")
    page.press("#layer input[type=number]", "Enter")
    wait_address(page, layer="3", head="5", tab="attention")
    # Reload: exactly that view again.
    page.reload()
    wait_status(page, "4 tokens")
    page.wait_for_function("() => window.ta?.ready === true && !window.ta.opening")
    wait_tab(page, "attention")
    assert page.input_value("#text textarea") == "dogs bark"
    assert page.get_attribute("#tab-attention-button", "aria-selected") == "true"
    assert page.input_value("#layer input[type=number]") == "3"
    assert page.input_value("#head input[type=number]") == "5"
    title = page.evaluate(
        "() => document.querySelector('#head-plot .js-plotly-plot').layout.title.text"
    )
    assert title.startswith("Layer 3, head 5")
    shot(page, "url_reloaded_view")
    # Back: the previous text, still in the app.
    page.go_back()
    wait_status(page, "7 tokens")
    page.wait_for_function("() => window.ta?.ready === true && !window.ta.opening")
    assert urlparse(page.url).netloc == urlparse(app_url).netloc
    assert address(page)["text"] == "time flies like an arrow"
    assert page.input_value("#text textarea") == "time flies like an arrow"
