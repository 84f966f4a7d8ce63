"""Real language models in the browser: Debian Chromium opens a tiny GPT-2 and a tiny LLaMA with
grouped-query attention through the checkpoint box, runs them, and visits every tab; each tab
draws its figures and no view says it failed. A public deployment opens the one checkpoint its
TA_MODELS lists, also from a link, and refuses another with a sentence.

The checkpoints are written by transformers itself with random weights (tests/test_lm.py's
cases); nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import DRAWN_JS, TAB_PLOTS, shot, wait_status, wait_tab
from tests.test_lm import save_checkpoint

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path(CHROMIUM).exists() and not os.environ.get("CI"),
        reason="Debian chromium is not installed (the README's test command installs it)",
    ),
]

TEXT = "The cat sat on the mat. The cat sat"
# Every tab of the page and the figures it must draw (TAB_PLOTS, plus the two it leaves out).
PLOTS = {
    **TAB_PLOTS,
    "heads": ["distance-plot", "rollout-plot", "flow-plot"],
    "output": ["steps-plot", "lens-plot"],
}
TABS = ["tokens", "embeddings", "attention", "layer", "heads", "masks", "output", "hidden"]
TABS += ["bertviz", "model"]
FAILED = ("could not be drawn", "无法绘制", "Traceback")


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("page-lms")
    for case in ("gpt2", "llama"):
        save_checkpoint(root / case, case)
    return {case: str(root / case) for case in ("gpt2", "llama")}


def open_checkpoint(page, folder: str) -> None:
    """Pick the checkpoint box in the model list, name the folder and run the text."""
    page.click("#model input")
    page.wait_for_selector("#model ul li")
    page.locator("#model ul li", has_text="Custom checkpoint").click()
    page.fill("#checkpoint textarea, #checkpoint input", folder)
    page.fill("#text textarea", TEXT)
    page.click("#run")


def visit(page, tab: str) -> None:
    """Open a tab and wait until it has drawn (its figures, or its table, chips or iframe)."""
    page.click(f"#tab-{tab}-button")
    if tab == "heads":
        page.wait_for_function(DRAWN_JS, arg=[PLOTS["heads"], None], timeout=60_000)
        page.wait_for_selector("#head-stats table tbody tr", state="attached", timeout=30_000)
    elif tab == "layer":  # its steps drawn, or one sentence on what it does not take apart
        page.wait_for_function(
            f"() => document.querySelector('#layer-cards .ta-refusal') || ({DRAWN_JS})"
            f"([{PLOTS['layer']!r}, null])",
            timeout=60_000,
        )
    elif tab == "output":
        page.wait_for_function(DRAWN_JS, arg=[PLOTS["output"], None], timeout=60_000)
        page.wait_for_selector("#steps-table table tbody tr", state="attached", timeout=30_000)
    else:
        wait_tab(page, tab, timeout=60_000)


def said(page, selector: str) -> str:
    return page.inner_text(selector)


def figure_texts(page) -> str:
    """Every figure's title and annotations on the page (a failed view is an annotation)."""
    return page.evaluate(
        """() => [...document.querySelectorAll('.js-plotly-plot')].map((gd) =>
             [gd.layout?.title?.text || '',
              ...((gd.layout?.annotations || []).map((a) => a.text || ''))].join(' ')).join(' ')"""
    )


@pytest.mark.parametrize("case", ["gpt2", "llama"])
def test_every_tab_draws_for_a_language_model_from_the_checkpoint_box(browser, folders, case):
    with serve_app() as (url, _):
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url)
        wait_status(page, "tokens")
        open_checkpoint(page, folders[case])
        family = {"gpt2": "GPT-2", "llama": "LLaMA"}[case]
        wait_status(page, f"{family} checkpoint", timeout=60_000)
        for tab in TABS:
            visit(page, tab)
            texts = figure_texts(page) + page.inner_text("body")
            assert not any(word in texts for word in FAILED), (case, tab)
            assert page.locator(".ta-error:visible").count() == 0, (case, tab)
        page.click("#tab-tokens-button")
        wait_tab(page, "tokens")
        chips = said(page, "#token-chips")
        assert "␣cat" in chips and "Ġ" not in chips  # byte-level pieces read as text
        page.click("#tab-attention-button")
        wait_tab(page, "attention")
        title = page.evaluate(
            "() => document.querySelector('#head-plot .js-plotly-plot').layout.title.text"
        )
        assert ("(kv " in title) == (case == "llama"), title  # GQA heads name their kv head
        if case == "llama":
            page.click("#tab-embeddings-button")
            wait_tab(page, "embeddings")
            assert "RoPE" in figure_texts(page)
            shot(page, "lm_llama_embeddings")
        else:
            page.click("#tab-output-button")
            page.wait_for_function(DRAWN_JS, arg=[PLOTS["output"], None], timeout=60_000)
            assert "Greedy continuation" in said(page, "#prediction")
            shot(page, "lm_gpt2_output")
        page.close()


def test_the_logit_lens_of_a_language_model_is_readable_at_1920x1080(browser, folders):
    """Each layer row at least ROW_PX tall (it was a 60 px band of 8 px text), its labels at
    12 px, and any cell text Plotly fits at MIN_CELL_FONT px or more."""
    from viz.logit_lens import MIN_CELL_FONT, ROW_PX, TEXT_PX

    with serve_app() as (url, _):
        page = browser.new_page(viewport={"width": 1920, "height": 1080})
        page.goto(url)
        wait_status(page, "tokens")
        open_checkpoint(page, folders["gpt2"])
        wait_status(page, "GPT-2 checkpoint", timeout=60_000)
        visit(page, "output")
        got = page.evaluate(
            """() => {
              const gd = document.querySelector('#lens-plot .js-plotly-plot');
              const full = gd._fullLayout, px = (el) => parseFloat(getComputedStyle(el).fontSize);
              const cells = [...gd.querySelectorAll('.heatmap-label text')].map(px);
              return {plot: full.yaxis._length, rows: gd.data[0].y.length,
                      ticks: [...gd.querySelectorAll('.xtick text, .ytick text')].map(px),
                      cells};
            }"""
        )
        page.set_viewport_size({"width": 700, "height": 1000})  # Plotly fits it again
        page.wait_for_function(
            "() => document.querySelector('#lens-plot .js-plotly-plot')?.data?.[0]?.texttemplate"
            " === ''",
            timeout=60_000,
        )  # 12 positions in 700 px: too narrow for 10 px cell text; colour and hover stay
        page.close()
    assert got["rows"] == 4 and got["plot"] / got["rows"] >= ROW_PX, got  # 3 layers + embeddings
    assert got["ticks"] and min(got["ticks"]) >= TEXT_PX, got
    assert not got["cells"] or min(got["cells"]) >= MIN_CELL_FONT, got


def test_a_public_deployment_opens_only_what_ta_models_lists(browser, folders):
    with serve_app("--public", env={"TA_MODELS": folders["gpt2"]}) as (url, _):
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url)
        wait_status(page, "tokens")
        open_checkpoint(page, folders["llama"])
        wait_status(page, "only these checkpoints", timeout=30_000)
        open_checkpoint(page, folders["gpt2"])
        wait_status(page, "GPT-2 checkpoint", timeout=60_000)
        page.close()
        page = browser.new_page(viewport={"width": 1280, "height": 1000})  # a lecturer's link
        page.goto(f"{url}?model=checkpoint:{quote(folders['gpt2'])}&text=hi%20there&tab=output")
        wait_status(page, "GPT-2 checkpoint", timeout=60_000)
        box = page.input_value("#checkpoint textarea, #checkpoint input")
        assert box == folders["gpt2"]
        page.close()
