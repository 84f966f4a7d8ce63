"""A classroom at once (issue 13) and honest staleness (issue 9), in Debian Chromium.

The server's forward passes are made slow on purpose (the engine sleeps for chosen texts), which
turns the race a busy classroom meets by chance into one that happens every time.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest

from engine import Engine
from tests.apphost import CHROMIUM
from tests.conftest import LONG_TEXT
from tests.inprocess import serve_demo
from tests.test_e2e_browser import open_tab, run_of, run_text, shot, wait_status, wait_tab

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]

SLOW_TEXT = "the linked sentence that takes long"
SLOW_SECONDS = 4.0
CHIP_RUN_JS = "() => document.querySelector('#token-chips .ta-run')?.dataset.run"


class SlowEngine(Engine):
    """An engine whose forward pass for SLOW_TEXT takes SLOW_SECONDS (a busy server)."""

    def __init__(self) -> None:
        super().__init__(device="cpu")
        self.slow = threading.Event()

    def analyse(self, text, *args, **kwargs):
        if text == SLOW_TEXT:
            self.slow.set()
            time.sleep(SLOW_SECONDS)
        return super().analyse(text, *args, **kwargs)


@pytest.fixture(scope="module")
def slow_app():
    import app

    engine = SlowEngine()
    with serve_demo(app.build_demo(engine, public=False)) as url:
        yield url, engine


def test_first_view_is_in_the_page_before_any_event(slow_app, browser):
    """The default analysis comes with the page: nothing in the queue can delay or replace it."""
    url, _ = slow_app
    context = browser.new_context()
    page = context.new_page()
    joins: list[str] = []
    page.on("request", lambda r: joins.append(r.url) if "/queue/join" in r.url else None)
    page.route("**/gradio_api/queue/join**", lambda route: route.abort())  # no event can run
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip", timeout=20_000)
    assert "7 tokens" in page.inner_text("#status")
    assert page.evaluate(CHIP_RUN_JS) == run_of("time flies like an arrow")
    context.close()


def test_a_late_deep_link_never_replaces_what_the_user_ran(slow_app, page):
    url, engine = slow_app
    engine.slow.clear()
    page.goto(f"{url}?text={quote(SLOW_TEXT)}&tab=tokens")
    assert engine.slow.wait(20), "the deep link's analysis never started"
    own = "dogs bark"
    page.fill("#text textarea", own)
    page.click("#run")
    wait_status(page, "4 tokens")
    time.sleep(SLOW_SECONDS + 2)  # the deep link's analysis has finished on the server by now
    assert page.input_value("#text textarea") == own
    assert page.evaluate(CHIP_RUN_JS) == run_of(own)
    assert "4 tokens" in page.inner_text("#status")
    shot(page, "classroom_race_kept_own_text")


def test_an_untouched_deep_link_opens_its_view_with_every_parameter(slow_app, page):
    url, _ = slow_app
    query = (
        f"?text={quote('我喜欢你')}&model=seed003-encdec&target={quote('I love you')}"
        "&tab=attention&stack=cross&layer=1&head=2&layer_b=0&head_b=3&colour=red"
    )
    page.goto(url + query)
    wait_status(page, "seed003-encdec")
    wait_tab(page, "attention")
    assert page.input_value("#target textarea") == "I love you"
    status = page.inner_text("#status")
    assert "No target text" not in status
    notes = page.inner_text("#link-notes")
    assert "Link parameter ignored: 'colour' is not a link parameter" in notes
    title = page.evaluate(
        "() => document.querySelector('#head-plot .js-plotly-plot').layout.title.text"
    )
    assert title.startswith("Layer 1, head 2") and "cross" in title
    assert page.input_value("#head-b input[type=number]") == "3"
    link = page.get_attribute("#status a", "href")
    assert "target=I+love+you" in link and "head_b=3" in link


def test_typing_marks_the_figures_stale_until_run(slow_app, page):
    url, _ = slow_app
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    assert not page.locator("#stale").is_visible()
    page.fill("#text textarea", "")
    page.type("#text textarea", "a new sentence")
    page.wait_for_selector("#stale", state="visible")
    assert page.evaluate("() => document.body.classList.contains('ta-stale')")
    page.click("#run")
    wait_status(page, "5 tokens")
    page.wait_for_selector("#stale", state="hidden")
    page.wait_for_function("() => !document.body.classList.contains('ta-stale')")


def test_an_error_marks_the_old_figures_stale(slow_app, page):
    url, _ = slow_app
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.fill("#text textarea", "   ")
    page.click("#run")
    wait_status(page, "Text is empty")
    page.wait_for_selector("#stale", state="visible")
    page.wait_for_function("() => document.body.classList.contains('ta-stale')")


def test_clicking_an_example_runs_it(slow_app, page):
    url, _ = slow_app
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.get_by_text("2026年11月22日").first.click()
    wait_status(page, "dates (trained")
    assert page.input_value("#text textarea") == "2026年11月22日"
    wait_status(page, "greedy output is “2026-11-22”")


def test_clicking_an_overview_tile_selects_that_head(slow_app, page):
    url, _ = slow_app
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.click("#tab-attention-button")
    wait_tab(page, "attention")
    page.locator("#overview-plot").scroll_into_view_if_needed()
    box = page.locator("#overview-plot .nsewdrag").bounding_box()
    # 6 layers × 12 heads of square tiles: the tile of layer 4, head 9 (centre of that tile).
    page.mouse.click(box["x"] + box["width"] * (9.5 / 12), box["y"] + box["height"] * (4.5 / 6))
    page.wait_for_function(
        "() => (document.querySelector('#head-plot .js-plotly-plot')?.layout?.title?.text || '')"
        ".startsWith('Layer 4, head 9')"
    )
    assert page.input_value("#layer input[type=number]") == "4"
    assert page.input_value("#head input[type=number]") == "9"


def test_scale_switch_recolours_the_head_view_and_names_its_max(slow_app, page):
    url, _ = slow_app
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.click("#tab-attention-button")
    wait_tab(page, "attention")
    # (null-safe: Gradio mounts each new figure in a new element, filled before it is drawn)
    zmax = "() => document.querySelector('#head-plot .js-plotly-plot')?.data?.[0]?.zmax"
    assert page.evaluate(zmax) == 1
    page.get_by_label("0–this head's max").check()
    page.wait_for_function(f"() => ({zmax})() < 1")
    title = page.evaluate(
        "() => document.querySelector('#head-plot .js-plotly-plot').layout.title.text"
    )
    assert "this head's largest weight" in title
    # A head switch in this scale recolours only the cells and the colour bar, as a full redraw.
    gd = "document.querySelector('#head-plot .js-plotly-plot')"
    for head in (3, 7):
        set_slider(page, "head", head)
        page.wait_for_function(f"() => {gd}.layout.title.text.startsWith('Layer 0, head {head} ')")
        assert page.evaluate("() => window.ta.switchDrew") == "cells"
        # each head its own range: the bar's five labels and the title written in place
        assert page.evaluate("() => window.ta.switchTexts") == "in place"
        assert page.evaluate(CELLS_REPAINTED_JS.replace("GD", gd)) is True
        # what the PNG / SVG buttons and the presented figure draw from has this head's bar
        kept = page.evaluate(f"() => [{gd}.taServer.colorbars[0], {gd}.data[0].colorbar]")
        assert kept[0]["ticktext"] == kept[1]["ticktext"], kept
        assert kept[0]["title"]["text"] == kept[1]["title"]["text"], kept
    over = "() => document.querySelector('#overview-plot .js-plotly-plot')?.layout?.title?.text"
    page.wait_for_function(f'() => ({over})()?.includes("own max")')


def test_figures_are_slide_ready_png_and_svg(slow_app, browser):
    """Titles name the model and the text; the PNG and SVG buttons save the figure drawn for a
    slide (the head view cropped to its square plot: over half the image), named after the view,
    the model and the head they hold (after a head switch in the browser too)."""
    url, _ = slow_app
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.click("#tab-attention-button")
    wait_tab(page, "attention")
    gd = "document.querySelector('#head-plot .js-plotly-plot')"
    title = page.evaluate(f"() => {gd}.layout.title.text")
    assert "bert" in title and "time flies like an arrow" in title
    info = page.evaluate("() => ta.saveImage('head-plot', 'png', false)")
    assert info["name"] == "head_bert_L0H0"
    plot_w, plot_h = info["plot"]
    assert plot_w * plot_h >= 0.5 * info["width"] * info["height"]  # cropped to the plot
    assert page.locator("#head-plot .modebar-btn[data-title='Download plot as a PNG']").count() == 0
    with page.expect_download() as png:
        page.click("#head-plot button:has-text('PNG')")
    assert png.value.suggested_filename == "head_bert_L0H0.png"
    from PIL import Image

    assert Image.open(png.value.path()).size == (2 * info["width"], 2 * info["height"])
    set_slider(page, "layer", 4)
    set_slider(page, "head", 3)
    page.wait_for_function(f"() => {gd}.layout.title.text.startsWith('Layer 4, head 3 ')")
    with page.expect_download() as svg:
        page.click("#head-plot button:has-text('SVG')")
    assert svg.value.suggested_filename == "head_bert_L4H3.svg"
    assert Path(svg.value.path()).read_text(encoding="utf-8").lstrip().startswith("<svg")


def test_a_head_switch_during_a_slow_run_shows_the_new_text(slow_app, page):
    """The redraw for a head picked while Run is still working waits for that Run and draws its
    text; it never lands first and is then overwritten with the head the Run was started with."""
    url, engine = slow_app
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.click("#tab-attention-button")
    wait_tab(page, "attention")
    page.fill("#text textarea", SLOW_TEXT)
    engine.slow.clear()
    page.click("#run")
    assert engine.slow.wait(20)
    page.fill("#head input[type=number]", "7")
    page.press("#head input[type=number]", "Enter")
    slow_run = run_of(SLOW_TEXT)
    head = "document.querySelector('#head-plot .js-plotly-plot')"
    page.wait_for_function(
        f"() => {head}?.layout?.meta?.run === '{slow_run}'"
        f" && {head}.layout.title.text.startsWith('Layer 0, head 7')",
        timeout=30_000,
    )
    time.sleep(2)  # nothing older may arrive afterwards
    assert page.evaluate(f"() => {head}.layout.title.text").startswith("Layer 0, head 7")
    assert page.evaluate(f"() => {head}.layout.meta.run") == slow_run
    assert page.input_value("#head input[type=number]") == "7"


def hover_numbers(z) -> list[str]:
    """A head map's cells as its hover prints them (".3f", JavaScript's toFixed: halves up)."""
    from decimal import ROUND_HALF_UP, Decimal

    return [
        "gap"
        if v is None or v != v
        else str(Decimal(float(v)).quantize(Decimal("0.001"), ROUND_HALF_UP))
        for row in z
        for v in row
    ]


# A figure's heatmaps' z as plain nested lists (as Plotly holds them: rows of typed arrays).
Z_JS = "%s._fullData.map((t) => Array.from(t.z, (row) => Array.from(row)))"
# From now on the page cannot fill figures: the server sends complete ones, and draws each head.
NO_FILL = "() => { delete window.DecompressionStream; window.ta.fill = undefined; }"


# What a head switch drew, against what Plotly's own full redraw of the same data draws: the
# cells' picture, the colour bar's texts where they stand (to a hundredth of a pixel), and the
# title's SVG (its lines and <sup> parts), whether the switch wrote the texts in place or not.
CELLS_REPAINTED_JS = """async () => {
  const gd = GD;
  const at = (t) => [t.getAttribute('x'), t.getAttribute('y'), t.getAttribute('transform')]
    .map((v) => String(v).replace(/-?\\d+\\.\\d+/g, (n) => (+n).toFixed(2)));
  const seen = () => JSON.stringify({
    cells: gd.querySelector('.hm image').getAttributeNS('http://www.w3.org/1999/xlink', 'href'),
    bar: [...gd.querySelectorAll('.colorbar text')].map((t) => [t.textContent, ...at(t)]),
    title: gd.querySelector('.gtitle')?.outerHTML,
  });
  const fast = seen();
  await window.Plotly.restyle(gd, {z: [gd.data[0].z]}, [0]);
  return fast === seen() || [fast.slice(-300), seen().slice(-300)];
}"""


def set_slider(page, elem_id: str, value: int) -> None:
    page.fill(f"#{elem_id} input[type=number]", str(value))
    page.press(f"#{elem_id} input[type=number]", "Enter")


def test_every_head_switch_draws_what_plotlys_full_redraw_draws(slow_app, page):
    """At a long text on "auto", faint heads (their own range, and a title line more) and strong
    ones alternate: every switch by the keyboard writes the title and the colour bar in place,
    lines added and removed included, and leaves what Plotly's own full redraw of the same data
    draws."""
    url, _ = slow_app
    text = LONG_TEXT[:600]
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    run_text(page, text)
    wait_status(page, "tokens")
    open_tab(page, "attention", run=run_of(text))
    gd = "document.querySelector('#head-plot .js-plotly-plot')"
    page.wait_for_function("() => window.ta.fill?.held")  # the run's switch data, decoded
    page.focus("#head input[type=range]")
    lines, texts = set(), []
    for head in range(1, 12):
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"() => {gd}.layout.title.text.startsWith('Layer 0, head {head} ')")
        assert page.evaluate("() => window.ta.switchDrew") == "cells"
        texts.append(page.evaluate("() => window.ta.switchTexts"))
        lines.add(page.evaluate(f"() => {gd}.querySelectorAll('.gtitle > tspan.line').length"))
        assert page.evaluate(CELLS_REPAINTED_JS.replace("GD", gd)) is True, head
    assert lines == {2, 3}, lines  # faint heads and strong ones, the title's lines changing
    assert set(texts) == {"in place"}, texts


def test_a_head_switch_is_drawn_in_the_browser_with_the_servers_numbers(slow_app, page):
    """Layer and head switches on the Attention tab send no request, and the head drawn in the
    browser shows exactly the hover numbers, colour range and title of the server's figure."""
    from viz import attention

    url, engine = slow_app
    text = "the cat sat on the mat because it was tired"
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    joins: list[str] = []
    page.on("request", lambda r: joins.append(r.url) if "/queue/join" in r.url else None)
    set_slider(page, "layer", 2)  # the Tokens tab reads no layer: nothing to ask the server
    page.fill("#text textarea", text)
    page.click("#run")
    wait_status(page, "12 tokens")
    page.click("#tab-attention-button")
    wait_tab(page, "attention", run=run_of(text))
    time.sleep(0.5)
    assert len(joins) == 2  # the Run and the tab, no request for the layer
    gd = "document.querySelector('#head-plot .js-plotly-plot')"
    texts = []
    for layer, head in ((2, 5), (4, 5), (4, 0)):
        set_slider(page, "layer", layer)
        set_slider(page, "head", head)
        page.wait_for_function(
            f"() => {gd}.layout.title.text.startsWith('Layer {layer}, head {head} ')"
        )
        trace = engine.analyse(text, "bert").trace
        server = attention.head_figure(trace, "encoder", layer, head)
        shown = page.evaluate(f"() => ({{z: {Z_JS % gd}[0], zmax: {gd}.data[0].zmax}})")
        assert hover_numbers(shown["z"]) == hover_numbers(server.data[0].z)
        assert shown["zmax"] == server.data[0].zmax
        # Only the cells were drawn again (ui/js/head_switch.js): the hover reads the new head,
        # and the picture is the one Plotly's own full redraw of that head paints.
        hover = page.evaluate(f"() => Array.from({gd}.calcdata[0][0].z, r => Array.from(r))")
        assert hover_numbers(hover) == hover_numbers(server.data[0].z)
        assert page.evaluate("() => window.ta.switchDrew") == "cells"
        texts.append(page.evaluate("() => window.ta.switchTexts"))
        ticks = page.evaluate(f"() => {gd}.data[0].colorbar.ticktext")
        assert ticks == list(server.data[0].colorbar.ticktext)  # the server's labels
        assert page.evaluate(CELLS_REPAINTED_JS.replace("GD", gd)) is True
    assert "in place" in texts, texts  # the title and bar written in place, at least once
    assert len(joins) == 2, "a head switch on the Attention tab asked the server"
    link = page.get_attribute("#status a[href^='?']", "href")
    assert "layer=4&head=0" in link  # the link to this view follows the switch
    shot(page, "head_switch_in_browser")
    # A browser that cannot decompress the data gets the same head from the server.
    page.evaluate(NO_FILL)
    set_slider(page, "head", 6)
    page.wait_for_function(f"() => {gd}.layout.title.text.startsWith('Layer 4, head 6 ')")
    assert len(joins) == 3
    server = attention.head_figure(engine.analyse(text, "bert").trace, "encoder", 4, 6)
    shown = page.evaluate(f"() => Array.from({gd}._fullData[0].z, row => Array.from(row))")
    assert hover_numbers(shown) == hover_numbers(server.data[0].z)


def test_a_layer_switch_on_the_heads_tab_still_redraws_there(slow_app, page):
    url, _ = slow_app
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.click("#tab-heads-button")
    page.wait_for_selector("#rollout-plot .js-plotly-plot .main-svg", timeout=20_000)
    rollout = "document.querySelector('#rollout-plot .js-plotly-plot')?.layout?.title?.text || ''"
    before = page.evaluate(f"() => {rollout}")
    set_slider(page, "layer", 3)
    page.wait_for_function(f"() => ({rollout}) !== {json.dumps(before)}", timeout=20_000)


HEAD_GD = "document.querySelector('#head-plot .js-plotly-plot')"
COMPARE_GD = "document.querySelector('#compare-plot .js-plotly-plot')"
OVERVIEW_GD = "document.querySelector('#overview-plot .js-plotly-plot')"
BLOCK_GD = "document.querySelector('#block-plot .js-plotly-plot')"
# Which payload the head and compare figures were filled from (null: sent complete).
FILLED_FROM = f"() => [{HEAD_GD}, {COMPARE_GD}].map((gd) => gd?.layout?.meta?.fill?.data ?? null)"
# Which of the overview and the attention block came with their numbers packed (ui/js/fill.js).
PACKED = """() => ['overview-plot', 'block-plot'].map(
  (id) => !!document.querySelector(`#${id} .js-plotly-plot`)?.layout?.meta?.packed)"""
# Every heatmap of the Attention tab drawn: each trace has its numbers and its painted image.
NOTHING_BLANK = """() => ['head-plot', 'overview-plot', 'compare-plot', 'block-plot'].every(
(id) => {
  const gd = document.querySelector(`#${id} .js-plotly-plot`);
  if (!gd || !gd._fullData || !gd._fullData.length) return false;
  const images = gd.querySelectorAll('g.heatmaplayer image');
  return images.length === gd.data.length
    && [...images].every((im) => (im.getAttribute('href') || '').startsWith('data:image/png'))
    && gd._fullData.every((t) => t.visible === true && t.z && t.z.length > 0 && t.z[0].length > 0);
})"""


def assert_shows_the_servers_numbers(page, trace, layer, head, a, b) -> None:
    """The head and compare figures on the page hold the server figures' hover numbers."""
    from viz import attention

    page.wait_for_function(NOTHING_BLANK, timeout=20_000)
    server = attention.head_figure(trace, "encoder", layer, head)
    assert hover_numbers(page.evaluate(f"() => {Z_JS % HEAD_GD}")[0]) == hover_numbers(
        server.data[0].z
    )
    server = attention.compare_figure(trace, "encoder", a, b)
    shown = page.evaluate(f"() => {Z_JS % COMPARE_GD}")
    for panel, server_panel in zip(shown, server.data, strict=True):
        assert hover_numbers(panel) == hover_numbers(server_panel.z)
    title = page.evaluate(f"() => {COMPARE_GD}.layout.title.text")
    assert title.startswith(server.layout.title.text)
    assert_overview_and_block_are_the_servers(page, trace)


def assert_overview_and_block_are_the_servers(page, trace) -> None:
    """The overview shows the server's tiles and the attention block the server's hover numbers,
    each tile with its tokens (sent packed to a page that fills figures, complete otherwise)."""
    from model import load_bert
    from viz import attention
    from viz.block import block_figure

    xy = "%s._fullData.map((t) => [Array.from(t.x), Array.from(t.y)])"
    overview = attention.overview_figure(trace, "encoder")
    shown = page.evaluate(f"() => {Z_JS % OVERVIEW_GD}")
    np.testing.assert_array_equal(np.asarray(shown[0]), overview.data[0].z)
    assert page.evaluate(f"() => {xy % OVERVIEW_GD}") == [
        [list(overview.data[0].x), list(overview.data[0].y)]
    ]
    # Its axes name the heads and the layers (the page's crowded-label rule once replaced them
    # with every few tiles' token labels, stood upright into the title).
    ticks = page.evaluate(
        f"""() => ['xtick', 'ytick'].map((k) =>
          [...{OVERVIEW_GD}.querySelectorAll(`g.${{k}} text`)].map((t) => t.textContent))"""
    )
    assert ticks == [list(overview.layout.xaxis.ticktext), list(overview.layout.yaxis.ticktext)]
    block = block_figure(trace, "encoder", load_bert()[0])  # the page's model: the bundled BERT
    shown = page.evaluate(f"() => {Z_JS % BLOCK_GD}")
    for tile, server_tile in zip(shown, block.data, strict=True):
        assert hover_numbers(tile) == hover_numbers(server_tile.z)
    assert page.evaluate(f"() => {xy % BLOCK_GD}") == [[list(t.x), list(t.y)] for t in block.data]


def hover_text_at(page, elem_id: str, x_axis: str, row: int, col: int) -> str:
    """Hover one heatmap cell with the mouse; the hover label Plotly shows."""
    page.locator(f"#{elem_id}").scroll_into_view_if_needed()
    x, y = page.evaluate(
        """([id, axis, r, k]) => {
        const gd = document.querySelector(`#${id} .js-plotly-plot`);
        const box = gd.getBoundingClientRect(), xa = gd._fullLayout[axis];
        const ya = gd._fullLayout.yaxis;
        return [box.left + xa._offset + xa.c2p(k), box.top + ya._offset + ya.c2p(r)]; }""",
        [elem_id, x_axis, row, col],
    )
    page.mouse.move(x, y)
    page.wait_for_selector(f"#{elem_id} .hovertext", timeout=5_000)
    return page.locator(f"#{elem_id} .hovertext").text_content()


def test_figures_sent_without_numbers_show_the_servers_numbers(slow_app, page):
    """A page that can fill figures gets the head and compare figures without z and fills them
    from the head switch data: after a Run, an A/B change, a head switch, a tab switch and another
    Run every heatmap is drawn, with the server's hover numbers; A − B's hover is the difference
    of the shown A and B; the SVG download holds the filled heatmaps."""
    url, engine = slow_app
    text = "the quick brown fox jumps over the lazy dog"
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.fill("#text textarea", text)
    page.click("#run")
    wait_status(page, "11 tokens")
    page.click("#tab-attention-button")
    wait_tab(page, "attention", run=run_of(text))
    trace = engine.analyse(text, "bert").trace
    assert all(page.evaluate(FILLED_FROM)), "a page that can fill got complete figures"
    assert page.evaluate(PACKED) == [True, True]
    assert_shows_the_servers_numbers(page, trace, 0, 0, (0, 0), (0, 1))
    from viz import attention

    server = attention.compare_figure(trace, "encoder", (0, 0), (0, 1))
    diff = np.asarray(server.data[2].z, dtype=np.float64)
    hovered = {}
    for axis, name in (("xaxis", "A = L0 H0:"), ("xaxis2", "B = L0 H1:"), ("xaxis3", "A − B:")):
        label = hover_text_at(page, "compare-plot", axis, 4, 2)
        number = re.search(rf"{name} ([-−]?[0-9]+\.[0-9]{{3}})$", label)
        assert number, f"{axis}: {label!r}"  # three decimals, as the hover format says
        hovered[axis] = number[1].replace("−", "-")
    assert float(hovered["xaxis3"]) == round(float(diff[4, 2]), 3)  # the server's number
    a_minus_b = (
        round(float(hovered["xaxis"]) * 1000) - round(float(hovered["xaxis2"]) * 1000)
    ) / 1000
    assert float(hovered["xaxis3"]) == a_minus_b  # A − B of the numbers A and B show
    set_slider(page, "layer-a", 3)
    page.wait_for_function(
        f"() => {COMPARE_GD}?.layout?.annotations?.[0]?.text === 'A = L3 H0'", timeout=20_000
    )
    set_slider(page, "head-b", 7)
    page.wait_for_function(
        f"() => {COMPARE_GD}?.layout?.annotations?.[1]?.text === 'B = L0 H7'", timeout=20_000
    )
    assert all(page.evaluate(FILLED_FROM))  # the page held the data: no numbers sent again
    assert_shows_the_servers_numbers(page, trace, 0, 0, (3, 0), (0, 7))
    set_slider(page, "head", 5)  # drawn in the browser
    page.wait_for_function(f"() => {HEAD_GD}.layout.title.text.startsWith('Layer 0, head 5 ')")
    assert_shows_the_servers_numbers(page, trace, 0, 5, (3, 0), (0, 7))
    page.click("#tab-tokens-button")
    page.wait_for_timeout(500)
    page.click("#tab-attention-button")
    page.wait_for_timeout(500)
    assert_shows_the_servers_numbers(page, trace, 0, 5, (3, 0), (0, 7))
    svg = page.evaluate(
        f"() => Plotly.toImage({COMPARE_GD}, {{format: 'svg'}}).then(decodeURIComponent)"
    )
    assert svg.count("data:image/png") >= 3  # the three filled heatmaps are in the download
    shot(page, "compare_filled_in_browser")
    other = "a second sentence to compare"
    page.fill("#text textarea", other)
    page.click("#run")
    wait_tab(page, "attention", run=run_of(other))
    assert all(page.evaluate(FILLED_FROM))
    assert_shows_the_servers_numbers(
        page, engine.analyse(other, "bert").trace, 0, 5, (3, 0), (0, 7)
    )
    # A figure of an older run that lands late, naming the data the page holds now (the newer
    # run's): drawn without numbers, never with the newer run's; and the page stops filling, so
    # the next figures come complete from the server.
    late = page.evaluate(LATE_FIGURE_OF_AN_OLDER_RUN)
    assert late == {"z": None, "fills": False}, late
    set_slider(page, "head", 2)  # the figure names another run: the server draws this head
    page.wait_for_function(f"() => {HEAD_GD}.layout.title.text.startsWith('Layer 0, head 2 ')")
    set_slider(page, "head-b", 3)
    page.wait_for_function(
        f"() => {COMPARE_GD}?.layout?.annotations?.[1]?.text === 'B = L0 H3'", timeout=20_000
    )
    assert page.evaluate(FILLED_FROM) == [None, None]  # both sent complete
    assert_shows_the_servers_numbers(
        page, engine.analyse(other, "bert").trace, 0, 2, (3, 0), (0, 3)
    )


# The head figure again, as a late response of an older run would bring it: without z, its
# meta.fill naming the data the page holds (the newer run's).
LATE_FIGURE_OF_AN_OLDER_RUN = f"""async () => {{
  const gd = {HEAD_GD}, held = window.ta.fill.held;
  const data = gd.data.map((t) => ({{...t, z: null}}));
  const layout = {{...gd.layout, meta: {{...gd.layout.meta, run: 'an-older-run',
    fill: {{...gd.layout.meta.fill, data: held}}}}}};
  await window.Plotly.react(gd, data, layout);
  return {{z: gd.data[0].z ?? null, fills: window.ta.fill.ok()}};
}}"""


def test_a_page_without_decompression_stream_gets_complete_figures(slow_app, browser):
    url, engine = slow_app
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.add_init_script("delete window.DecompressionStream;")
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("#token-chips .ta-chip")
    page.click("#tab-attention-button")
    text = "time flies like an arrow"
    wait_tab(page, "attention", run=run_of(text))
    assert page.evaluate(FILLED_FROM) == [None, None]
    assert page.evaluate(PACKED) == [False, False]
    set_slider(page, "head-b", 4)
    page.wait_for_function(
        f"() => {COMPARE_GD}?.layout?.annotations?.[1]?.text === 'B = L0 H4'", timeout=20_000
    )
    assert page.evaluate(FILLED_FROM) == [None, None]
    assert_shows_the_servers_numbers(page, engine.analyse(text, "bert").trace, 0, 0, (0, 0), (0, 4))
    context.close()
