"""In front of a class: state that cannot mislead, Enter that runs, captions that render (issue 20),
in Debian Chromium against `python app.py`."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import TAB_PLOTS, shot, wait_status, wait_tab
from ui.tabs import TAB_IDS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]
READY = "() => window.ta?.ready === true && !window.ta.opening"


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def test_enter_runs_and_shift_enter_adds_a_line_that_is_never_a_token(app_url, page):
    page.goto(app_url)
    page.wait_for_function(READY)
    box = page.locator("#text textarea")
    box.fill("dogs bark")
    box.press("Shift+Enter")  # a new line, no run
    assert box.input_value() == "dogs bark\n"
    page.wait_for_timeout(500)
    assert "7 tokens" in page.inner_text("#status")  # still the first view
    box.press("Enter")  # runs; the trailing new line is no token
    wait_status(page, "4 tokens")
    assert "[UNK]" not in page.inner_text("#token-chips")


def test_another_model_starts_with_positional_encoding_on_and_the_figure_says_when_off(
    app_url, page
):
    page.goto(f"{app_url}?text={quote('我喜欢你')}&model=roles&pe=off&tab=attention")
    wait_status(page, "roles")
    page.wait_for_function(READY)
    wait_tab(page, "attention")
    assert not page.is_checked("#positions input")
    title = page.evaluate(
        "() => document.querySelector('#head-plot .js-plotly-plot').layout.title.text"
    )
    assert "positional encoding off" in title  # said on the figure, not only the status line
    page.click("#model input")
    page.wait_for_selector("#model ul li")
    page.locator("#model ul li", has_text="dates").first.click()
    # On again, and not offered: without it the dates model only breaks (it teaches nothing).
    page.wait_for_function("() => !document.querySelector('#positions input')?.offsetParent")
    page.click("#run")
    wait_status(page, "dates")
    wait_tab(page, "attention")
    title = page.evaluate(
        "() => document.querySelector('#head-plot .js-plotly-plot').layout.title.text"
    )
    assert "positional encoding off" not in title
    shot(page, "lecture_pe_reset_on_model_change")


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_no_tab_shows_a_literal_markdown_star_in_either_language(app_url, page, lang):
    page.goto(f"{app_url}?lang={lang}")
    page.wait_for_function(READY)
    page.wait_for_function(f"() => document.documentElement.lang === '{lang}'")
    for tab in TAB_IDS:
        page.click(f"#tab-{tab}-button")
        if tab in TAB_PLOTS:
            wait_tab(page, tab)
        else:  # Heads, Output: their captions and tables
            page.wait_for_selector(f"#tab-{tab} .ta-caption", state="visible")
            page.wait_for_timeout(1_000)
        seen = page.evaluate("() => document.querySelector('.gradio-container').innerText")
        assert "**" not in seen, (tab, seen[seen.index("**") - 80 : seen.index("**") + 80])
    shot(page, f"lecture_no_stars_{lang}")
