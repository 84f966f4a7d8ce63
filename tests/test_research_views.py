"""The research measures on the Heads tab (issue 22, first page slice): the head table's
conventions switch and pattern columns, the head-distance map (a click opens the head), and the
attention-flow row — drawn from the same analysis functions the tests of analysis/ check against
independent computations, and in Debian Chromium against `python app.py`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import analysis
from engine import BUNDLED, Engine
from lang import speaking
from tests.apphost import CHROMIUM, serve_app
from ui.render import render
from ui.state import Selection
from ui.tabs import BY_ID

TEXT = "the cat sat on the mat, the cat sat."
SHOTS = Path(__file__).resolve().parents[1] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def bert_analysis():
    return Engine(device="cpu").analyse(TEXT, BUNDLED, "")


def test_the_head_table_switches_conventions_and_adds_the_pattern_columns(bert_analysis):
    ours = render("heads", bert_analysis, Selection(), only={"head_stats_table"})
    clark = render(
        "heads",
        bert_analysis,
        Selection(convention="clark", pattern="first"),
        only={"head_stats_table"},
    )
    ours, clark = ours["head_stats_table"], clark["head_stats_table"]
    for column in ("previous_token", "duplicate_token", "induction", "prefix_matching"):
        assert column in ours.columns
    assert "custom" in clark.columns and "custom" not in ours.columns
    # Clark's prev divides by n where ours divides by n − 1: never larger, equal up to rounding
    n = len(bert_analysis.trace.tokens[0])
    assert (clark["prev"] <= ours["prev"] + 1e-3).all()
    assert abs(clark["prev"] - ours["prev"] * (n - 1) / n).max() < 2e-3
    # the "first" column is the weight on the first token, as the statistics' own column
    assert abs(clark["custom"] - clark["first"]).max() < 2e-3


def test_a_pattern_the_page_does_not_know_gets_a_sentence_in_either_language(bert_analysis):
    with speaking("zh-CN"):
        out = render("heads", bert_analysis, Selection(pattern="zigzag"), only={"head_stats_table"})
    shown = str(list(out["head_stats_table"].columns))
    assert "zigzag" in shown and "没有名为" in shown


@pytest.mark.parametrize("pattern", ["zigzag", "every ;; other !!", "x" * 500])
def test_a_nonsense_pattern_empties_its_own_column_only(bert_analysis, pattern):
    """Issue 27: a pattern the page cannot read says so in its own column's header, its cells
    empty; every other column of the table is drawn as without it, and the CSV still comes."""
    plain = render("heads", bert_analysis, Selection(), only={"head_stats_table"})
    out = render(
        "heads", bert_analysis, Selection(pattern=pattern), only={"head_stats_table", "stats_csv"}
    )
    table, plain = out["head_stats_table"], plain["head_stats_table"]
    assert "error" not in table.columns  # not the whole view replaced by a sentence
    assert len(table) == 6 * 12
    extra = [c for c in table.columns if c not in plain.columns]
    assert len(extra) == 1 and extra[0].startswith("custom: there is no attention pattern")
    assert repr(pattern[:40]) in extra[0]
    assert (table[extra[0]] == "").all()
    assert table[list(plain.columns)].equals(plain)
    assert not table[list(plain.columns)].isna().all().any()  # every other column filled
    csv = Path(out["stats_csv"]).read_text()
    assert "no column: there is no attention pattern" in csv


def test_the_distance_map_and_the_flow_row_are_the_analysis_functions(bert_analysis):
    trace = bert_analysis.trace
    out = render("heads", bert_analysis, Selection(layer=5, query=0), only={"flow_plot"})
    fig = out["flow_plot"]
    flow = [t for t in fig.data if t.name == "attention flow (max-flow)"][0]
    expected = analysis.attention_flow_row(trace, "encoder", 0, 5, 0)
    assert abs(sum(flow.y) - 1) < 1e-6
    assert max(abs(a - float(b)) for a, b in zip(flow.y, expected, strict=True)) < 1e-6
    out = render("heads", bert_analysis, Selection(), only={"distance_plot"})
    points = out["distance_plot"].data[0]
    assert len(points.x) == 6 * 12
    assert [list(c) for c in points.customdata[:2]] == [[0, 0], [0, 1]]


def test_past_64_tokens_the_distance_map_averages_64_query_rows_and_says_so():
    """At a few hundred tokens every query row costs seconds: the map (and the NPZ) average
    over 64 evenly spaced rows, the title and the manifest say so, and the points are MDS of
    exactly that (analysis.head_distances(queries=64))."""
    from analysis.export import measure_arrays
    from ui.tabs.heads import DISTANCE_QUERIES

    long = Engine(device="cpu").analyse(" ".join(["word"] * 100), BUNDLED, "")
    fig = render("heads", long, Selection(), only={"distance_plot"})["distance_plot"]
    assert "averaged over 64 of the 102 query positions" in fig.layout.title.text
    expected = analysis.mds_2d(
        analysis.head_distances(long.trace, "encoder", queries=DISTANCE_QUERIES)
    )
    assert max(abs(a - float(b)) for a, b in zip(fig.data[0].x, expected[:, 0], strict=True)) < 1e-9
    _, notes = measure_arrays(long.trace, "encoder", distance_queries=DISTANCE_QUERIES)
    assert notes["head_distances"] == "averaged over 64 of 102 query rows, evenly spaced"


def farthest_point(page, elem_id: str, but: tuple[int, int] | None = None) -> list:
    """[x, y, layer, head] of the head map's point farthest from the others (a click there hits
    no other point or label), scrolled into view; never the head ``but``."""
    page.locator(f"#{elem_id}").scroll_into_view_if_needed()
    return page.evaluate(
        """([id, but]) => {
          const gd = document.querySelector(`#${id} .js-plotly-plot`);
          const boxes = [...gd.querySelectorAll('.scatterlayer .point')]
            .map((p) => p.getBoundingClientRect());
          const at = boxes.map((r) => [r.left + r.width / 2, r.top + r.height / 2]);
          let best = -1, room = -1;
          at.forEach(([x, y], i) => {
            const [l, h] = gd.data[0].customdata[i];
            if (but && l === but[0] && h === but[1]) return;
            const near = Math.min(...at.filter((_, j) => j !== i)
              .map(([u, v]) => Math.hypot(u - x, v - y)));
            if (near > room) { room = near; best = i; }
          });
          return [...at[best], ...gd.data[0].customdata[best]];
        }""",
        [elem_id, list(but) if but else None],
    )


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_a_click_on_the_distance_map_opens_that_head_and_the_columns_show(page):
    with serve_app() as (url, _):
        page.goto(f"{url}?tab=heads&pattern=first&convention=clark&layer=5&head=11")
        page.wait_for_selector("#distance-plot .scatterlayer .point", timeout=30_000)
        heads = page.evaluate(
            "() => [...document.querySelectorAll('#head-stats thead th')].map(t => t.innerText)"
        )
        assert {"induction", "prefix_matching", "custom"} <= {h.strip() for h in heads}
        x, y, layer, head = farthest_point(page, "distance-plot")
        page.mouse.click(x, y)
        page.wait_for_function(
            f"() => document.querySelector('#layer input[type=number]').value === '{layer}'"
            f" && document.querySelector('#head input[type=number]').value === '{head}'",
            timeout=20_000,
        )
        assert (layer, head) != (5, 11)  # a change the page had to make


def test_the_attention_block_is_on_the_attention_tab_for_every_layer(bert_analysis):
    """Kobayashi et al. 2021's block: one tile a layer, each the analysis function's norms and
    titled with its mixing ratio; no layer, head, measure or units switch redraws it."""
    trace, net = bert_analysis.trace, bert_analysis.model.net
    out = render("attention", bert_analysis, Selection(layer=2, measure="norms", units="words"))
    fig = out["block_plot"]
    expected = analysis.norm_attention_block(trace, "encoder", net)[0]  # (L, T, T)
    ratio = analysis.mixing_ratio(trace, "encoder", net)[0]  # (L,)
    assert [cells.name for cells in fig.data] == [f"L{layer}" for layer in range(6)]
    for layer, cells in enumerate(fig.data):
        assert abs(torch.as_tensor(cells.z, dtype=torch.float32) - expected[layer]).max() < 1e-5
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [f"layer {la} · mixing ratio {float(ratio[la]):.2f}" for la in range(6)]
    assert float(ratio.min()) > 0 and float(ratio.max()) < 1
    assert "Kobayashi et al. 2021" in fig.layout.title.text
    assert fig.layout.coloraxis.cmax == pytest.approx(float(expected.max()))  # one scale
    tab = BY_ID["attention"]
    for name in ("layer", "head", "measure", "units"):
        assert "block_plot" not in tab.redrawn_by(name), name
    assert not tab.server_redraws("layer") and not tab.server_redraws("head")
    assert "block_plot" not in BY_ID["heads"].outputs  # in one place
    # each layer on its own scale: the same numbers, each tile 0 → its own max
    fig = render("attention", bert_analysis, Selection(scale="head"), only={"block_plot"})
    fig = fig["block_plot"]
    assert [c.zmax for c in fig.data] == pytest.approx([float(m.max()) for m in expected])
    assert not fig.layout.coloraxis.cmax


def test_past_its_token_limit_the_block_figure_draws_the_mixing_ratios_and_says_so():
    from viz.block import BLOCK_TOKENS

    long = " ".join(["word"] * (BLOCK_TOKENS + 10))
    drawn = Engine(device="cpu").analyse(long, BUNDLED, "")
    fig = render("attention", drawn, Selection(), only={"block_plot"})["block_plot"]
    (bars,) = fig.data
    ratio = analysis.mixing_ratio(drawn.trace, "encoder", drawn.model.net)[0]
    assert abs(torch.as_tensor(bars.y, dtype=torch.float32) - ratio).max() < 1e-6
    assert f"up to {BLOCK_TOKENS} tokens" in fig.layout.title.text


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_a_click_on_a_layer_of_the_block_figure_opens_that_layer(page):
    with serve_app() as (url, _):
        page.goto(f"{url}?tab=attention&layer=0&head=3")
        gd = "document.querySelector('#block-plot .js-plotly-plot')"
        page.wait_for_function(f"() => {gd}?.data?.length === 6", timeout=30_000)
        page.locator("#block-plot").scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#block-plot").screenshot(path=str(SHOTS / "attention_block.png"))
        x, y = page.evaluate(
            f"""() => {{
              const gd = {gd}, box = gd.getBoundingClientRect(), full = gd._fullLayout;
              const xa = full.xaxis5, ya = full.yaxis5;  // layer 4: second row, second tile
              return [box.left + xa._offset + xa._length / 2,
                      box.top + ya._offset + ya._length / 2];
            }}"""
        )
        page.mouse.click(x, y)
        page.wait_for_function(
            "() => document.querySelector('#layer input[type=number]').value === '4'"
            " && (document.querySelector('#head-plot .js-plotly-plot')?.layout?.title?.text || '')"
            ".startsWith('Layer 4, head 3')",
            timeout=20_000,
        )


def test_the_words_switch_is_clark_et_als_word_attention(bert_analysis):
    trace = bert_analysis.trace
    out = render("attention", bert_analysis, Selection(units="words", layer=1, head=2))
    fig = out["head_plot"]
    tokens = trace.tokens[0]
    words, expected = analysis.word_attention(trace.attentions["encoder"][0, 1, 2], tokens)
    assert [label.split("·", 1)[1] for label in fig.data[0].x] == words
    shown = torch.as_tensor(fig.data[0].z, dtype=torch.float32)
    assert abs(shown - expected).max() < 1e-6
    assert "over words" in fig.layout.title.text


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_the_words_switch_redraws_every_attention_view_over_words(page):
    with serve_app() as (url, _):
        page.goto(f"{url}?tab=attention&text=unbelievably%20tokenization%20works")
        gd = "document.querySelector('#head-plot .js-plotly-plot')"
        page.wait_for_function(f"() => {gd}?.data?.[0]?.x?.length === 10")  # word pieces
        page.locator("#units label", has_text="words").click()
        page.wait_for_function(f"() => {gd}?.data?.[0]?.x?.length === 5", timeout=20_000)
        labels = page.evaluate(f"() => {gd}.data[0].x")
        assert "1·unbelievably" in labels and "2·tokenization" in labels
        page.fill("#head input[type=number]", "3")  # the head switch draws words too
        page.press("#head input[type=number]", "Enter")
        page.wait_for_function(f"() => {gd}?.layout?.meta?.head?.join() === '0,3'")
        assert page.evaluate(f"() => {gd}.data[0].x.length") == 5
