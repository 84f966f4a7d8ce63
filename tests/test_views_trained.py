"""Trained models and the numbers views in Debian Chromium (issues 7 and 8): decoding step by step,
training snapshots, the positional-encoding switch, the head table (sort, pick a row), downloads."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.apphost import CHROMIUM, serve_app
from tests.test_e2e_browser import shot, wait_status

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


ROWS_JS = """(id) => [...document.querySelectorAll(`#${id} [role=row]`)].slice(1)
  .map((r) => [...r.children].map((c) => c.innerText.trim()))"""
ROW_COUNT_JS = "(id) => +document.querySelector(`#${id} [role=grid]`).getAttribute('aria-rowcount')"


def rows(page, elem_id: str) -> list[list[str]]:
    """The body rows a gr.Dataframe shows (a long table renders only what is scrolled into view)."""
    return page.evaluate(ROWS_JS, elem_id)


def sort_by(page, elem_id: str, column: str, order: str) -> None:
    page.hover(f"#{elem_id} th[title={column}]")
    page.click(f"#{elem_id} th[title={column}] .cell-menu-button", force=True)
    page.locator("button", has_text=f"Sort {order}").first.click()


def test_roles_model_tells_who_did_what_and_loses_it_without_positions(app_url, page):
    page.goto(f"{app_url}?model=roles&text={quote('你喜欢我')}&tab=output")
    wait_status(page, "roles (trained")
    page.wait_for_function(
        "() => (document.querySelector('#prediction')?.innerText || '').includes('agent')"
    )
    prediction = page.inner_text("#prediction")
    assert "agent: 你" in prediction and "patient: 我" in prediction
    page.wait_for_selector("#steps-plot .js-plotly-plot .main-svg")  # where each token looked
    shot(page, "roles_output")
    page.uncheck("#positions input")
    wait_status(page, "Positional encoding is off")
    page.wait_for_function(
        "() => (document.querySelector('#prediction')?.innerText || '').includes('order is')"
    )
    off = page.inner_text("#prediction")
    assert "agent: 你 我" in off or "agent: 我 你" in off  # both read as the same bag of tokens
    link = page.get_attribute("#status a", "href")
    assert "pe=off" in link
    page.wait_for_selector("#steps-plot .js-plotly-plot .main-svg")
    shot(page, "roles_output_no_positions")


def test_dates_model_decodes_step_by_step_and_shows_its_snapshots(app_url, page):
    page.goto(f"{app_url}?model=dates&text={quote('二〇二六年十一月二十二日')}&tab=output")
    wait_status(page, "greedy output is “2026-11-22”")
    page.wait_for_selector("#steps-plot .js-plotly-plot .main-svg")
    page.wait_for_function(f"() => ({ROW_COUNT_JS})('steps-table') === 12")  # header + 11 steps
    steps = rows(page, "steps-table")
    assert steps[0][1:3] == ["<s>", "2"] and steps[4][2] == "-"
    title = page.evaluate(
        "() => document.querySelector('#steps-plot .js-plotly-plot').layout.title.text"
    )
    assert "row t is the step that wrote token t + 1" in title
    shot(page, "dates_decoding")
    assert page.locator("#snapshot").is_visible()
    page.get_by_label("step 100", exact=True).check()
    wait_status(page, "training snapshot at step 100")
    status = page.inner_text("#status")
    assert "2026-11-22" not in status  # early in training the output is still wrong
    shot(page, "dates_snapshot_step_100")


def test_untrained_models_say_so_on_their_figures(app_url, page):
    page.goto(f"{app_url}?model=seed002-encoder&text=abc&tab=attention")
    wait_status(page, "seed002-encoder")
    page.wait_for_selector("#head-plot .js-plotly-plot .main-svg")
    title = page.evaluate(
        "() => document.querySelector('#head-plot .js-plotly-plot').layout.title.text"
    )
    assert "near-uniform by construction" in title


def test_head_table_sorts_picks_a_head_and_downloads(app_url, browser):
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    text = "the cat sat on the mat , and the dog sat too ."
    page.goto(f"{app_url}?text={quote(text)}&tab=heads")
    wait_status(page, "15 tokens")
    page.wait_for_function(f"() => ({ROW_COUNT_JS})('head-stats') === 73")  # 6 layers × 12 heads
    titles = page.eval_on_selector_all("#head-stats th", "(ths) => ths.map((t) => t.title)")
    assert titles[:4] == ["layer", "head", "entropy", "prev"]
    sort_by(page, "head-stats", "prev", "descending")
    page.wait_for_function(
        "() => { const r = (" + ROWS_JS + ")('head-stats'); return r.length > 3 &&"
        " +r[0][3] >= +r[1][3] && +r[1][3] >= +r[2][3]; }"
    )
    top = rows(page, "head-stats")
    prev_values = [float(r[3]) for r in top[:5]]
    assert prev_values == sorted(prev_values, reverse=True)
    layer, head = int(top[0][0]), int(top[0][1])
    page.locator("#head-stats [role=row]").nth(1).locator(":scope > *").nth(2).click()
    page.wait_for_function(
        f"() => document.querySelector('#layer input[type=number]').value === '{layer}'"
        f" && document.querySelector('#head input[type=number]').value === '{head}'"
    )
    page.wait_for_function(
        "(want) => (document.querySelector('#breakdown')?.innerText || '').includes(want)",
        arg=f"Layer {layer}, head {head}",
    )
    shot(page, "heads_table_picked")
    page.click("#ablate")
    page.wait_for_function(
        f"() => {{ const r = ({ROWS_JS})('ablation-table');"
        " return r.length >= 14 && r[r.length - 1][0] === 'sum of singles'; }",
        timeout=60_000,
    )
    ablated = rows(page, "ablation-table")
    assert [r[1] for r in ablated[:12]] == [str(layer)] * 12  # the picked head's layer
    assert ablated[12][0] == "set"
    with page.expect_download() as got:
        page.click("#stats-csv")
    table = Path(got.value.path()).read_text(encoding="utf-8")
    csv_rows = list(csv.DictReader(io.StringIO(table)))
    assert len(csv_rows) == 72 and {"layer", "head", "entropy", "prev"} <= set(csv_rows[0])
    page.get_by_role("button", name="Export the whole trace (NPZ + JSON manifest)").click()
    link = page.wait_for_selector("#trace-npz a", timeout=30_000)
    with page.expect_download() as npz:
        link.click()
    with zipfile.ZipFile(npz.value.path()) as archive:
        names = archive.namelist()
        manifest = json.loads(archive.read("manifest.json"))
    assert "attentions/encoder.npy" in names
    assert manifest["model"].startswith("BERT")
    assert manifest["hf_max_diff"] < 1e-5  # measured against transformers' BertModel (eager)
    context.close()
