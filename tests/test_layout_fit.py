"""Every figure that is not a square map, laid out by the server for the screen the page reports
(viz/fit.py through viz.screen.lay_out): on a phone panels go into one column and maps of tokens
take the width, titles and panel titles wrap inside the figure, crowded labels are thinned; a
wide page keeps what fits; an API client gets the figure as it was built. What Chromium draws
of them: tests/test_phone.py, tests/test_readable.py."""

from __future__ import annotations

import json
import re

import plotly.graph_objects as go
import pytest

from tests.test_screen import PARAGRAPH
from ui.render import slide_ready
from viz.attention import compare_figure, overview_figure
from viz.embeddings import embedding_figure
from viz.fit import make_room
from viz.hidden import norms_heatmap
from viz.masks import score_steps_figure
from viz.measure import text_px
from viz.screen import Screen

PHONE = Screen.parse("326x390x844")
DESKTOP = Screen.parse("1856x1920x1080")


@pytest.fixture(scope="module")
def trace(bert):
    net, tok = bert
    enc = tok([PARAGRAPH], return_tensors="pt")
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])


def sent(fig, screen: Screen | None, name: str = "compare_plot") -> dict:
    """The figure as the page gets it, validated by Plotly."""
    out = json.loads(slide_ready(fig, name, "bert", PARAGRAPH, screen=screen).plot)
    out.pop("config")
    return go.Figure(out).to_plotly_json()


def panels(layout: dict) -> list[tuple[str, list, list]]:
    """(x axis, its x domain, its y axis's domain) of each panel, top to bottom."""
    out = []
    for key in sorted(k for k in layout if re.match(r"^xaxis\d*$", k)):
        y = "yaxis" + (layout[key].get("anchor") or "y")[1:]
        out.append((key, list(layout[key]["domain"]), list(layout[y].get("domain", [0, 1]))))
    return sorted(out, key=lambda p: (-p[2][1], p[1][0]))


def plot_height(layout: dict) -> float:
    m = layout["margin"]
    return layout["height"] - m["t"] - m["b"]


def test_on_a_phone_two_heads_compared_stand_in_one_column_each_map_four_fifths_wide(trace):
    fig = sent(compare_figure(trace, "encoder", (0, 0), (0, 1)), PHONE)
    layout = fig["layout"]
    rows = panels(layout)
    assert len(rows) == 3
    height = plot_height(layout)
    m = layout["margin"]
    for (_, _, yd), (_, _, below) in zip(rows, rows[1:], strict=False):
        assert below[1] < yd[0]  # one under the other, apart
    for _, xd, yd in rows:
        assert xd == [0, 1]  # the whole width
        map_w = 326 - m["l"] - m["r"]
        map_h = (yd[1] - yd[0]) * height
        assert map_w >= 0.8 * 326
        assert map_h == pytest.approx(map_w, abs=1.5)  # square cells: 125 × 125
    # every label cut to what fits and thinned, every token still on hover
    x = layout["xaxis"]
    assert len(x["tickvals"]) < 125 and x["categoryarray"] == fig["data"][0]["x"]
    assert max(text_px(t, 10) for t in layout["yaxis"]["ticktext"]) <= m["l"] - 8 + 0.5
    # the colour bars lie across under the last map each colours
    bars = [layout["coloraxis"]["colorbar"], layout["coloraxis2"]["colorbar"]]
    assert all(b["orientation"] == "h" for b in bars)
    assert bars[0]["y"] > rows[2][2][1] > bars[1]["y"]  # A and B's under B, A − B's under it


def test_on_a_phone_the_masking_steps_stack_as_the_compared_heads_do(trace):
    layout = sent(score_steps_figure(trace, "encoder", 0, 0), PHONE, "score_steps_plot")["layout"]
    rows = panels(layout)
    assert len(rows) == 3 and all(xd == [0, 1] for _, xd, _ in rows)


def test_a_wide_page_keeps_its_panels_side_by_side_and_its_labels_where_they_fit(trace):
    built = compare_figure(trace, "encoder", (0, 0), (0, 1)).to_plotly_json()
    layout = sent(compare_figure(trace, "encoder", (0, 0), (0, 1)), DESKTOP)["layout"]
    assert [p[1] for p in panels(layout)] == [
        list(built["layout"][k]["domain"]) for k in ("xaxis", "xaxis2", "xaxis3")
    ]
    assert layout["meta"]["laid_out"] is True


def test_a_title_wider_than_a_phone_wraps_keeps_every_word_and_grows_the_top_margin(trace):
    fig = overview_figure(trace, "encoder")
    page = sent(fig, None, "overview_plot")["layout"]
    phone = sent(overview_figure(trace, "encoder"), PHONE, "overview_plot")["layout"]
    words = lambda text: re.sub(r"<[^>]+>", " ", text).split()  # noqa: E731
    assert words(phone["title"]["text"]) == words(page["title"]["text"])
    assert phone["title"]["text"].count("<br>") > page["title"]["text"].count("<br>")
    assert phone["margin"]["t"] > page["margin"]["t"]
    for line in phone["title"]["text"].split("<br>"):
        assert text_px(line, 12) <= 0.98 * 326 - 12
    # a map of square tiles gives back the height a phone's width leaves empty
    assert phone["height"] < page["height"]


def test_panel_titles_wider_than_a_phone_wrap_with_room_above_their_panel(trace):
    layout = sent(embedding_figure(trace, "encoder"), PHONE, "embedding_plot")["layout"]
    m = layout["margin"]
    plot_w, plot_h = 326 - m["l"] - m["r"], layout["height"] - m["t"] - m["b"]
    tops = sorted((p[2][1] for p in panels(layout)), reverse=True)
    bottoms = sorted((p[2][0] for p in panels(layout)), reverse=True)
    highest = max(note["y"] for note in layout["annotations"])  # the top one's is the margin's
    for note in layout["annotations"]:
        lines = note["text"].split("<br>")
        assert max(text_px(line, 12) for line in lines) <= plot_w + 1
        if note.get("yanchor") == "bottom" and note["y"] < highest:  # over a lower panel
            above = min((b for b in bottoms if b > note["y"] + 1e-6), default=1)
            assert (above - note["y"]) * plot_h >= 1.3 * 12 * len(lines) - 1, note
    assert tops


def test_make_room_moves_what_is_below_and_keeps_every_size():
    layout = {
        "height": 500,
        "margin": {"t": 50, "b": 50, "l": 10, "r": 10},
        "yaxis": {"domain": [0.6, 1.0]},
        "yaxis2": {"domain": [0.0, 0.4]},
        "annotations": [{"text": "B", "y": 0.4, "yref": "paper", "yanchor": "bottom"}],
    }
    bar = {"y": 0.2, "len": 0.4, "yanchor": "middle"}
    make_room([{"colorbar": bar}], layout, [(0.4, 40)])
    assert layout["height"] == 540
    top, low = layout["yaxis"]["domain"], layout["yaxis2"]["domain"]
    assert (top[1] - top[0]) * 440 == pytest.approx(160) and top[1] == pytest.approx(1)
    assert (low[1] - low[0]) * 440 == pytest.approx(160) and low[0] == pytest.approx(0)
    assert (top[0] - low[1]) * 440 == pytest.approx(80 + 40)  # the gap grew by the room
    assert layout["annotations"][0]["y"] == pytest.approx(low[1])
    assert bar["len"] * 440 == pytest.approx(160) and bar["y"] == pytest.approx(low[1] / 2)


def test_a_crowded_category_axis_on_a_phone_stands_its_labels_up_and_shows_every_kth(trace):
    from viz.hidden import norms_heatmap

    layout = sent(norms_heatmap(trace, "encoder"), PHONE, "norms_heatmap")["layout"]
    x = layout["xaxis"]
    assert x["tickangle"] == -90 and x["dtick"] >= 2


def test_an_api_client_gets_every_figure_as_it_was_built(trace):
    fig = compare_figure(trace, "encoder", (0, 0), (0, 1))
    built = fig.to_plotly_json()["layout"]
    layout = sent(fig, None)["layout"]
    assert "laid_out" not in (layout.get("meta") or {})
    assert layout["xaxis"]["domain"] == list(built["xaxis"]["domain"])


def test_a_figure_in_a_column_is_laid_out_for_its_share_of_a_wide_page(trace):
    fig = compare_figure(trace, "encoder", (0, 0), (0, 1))
    whole = sent(fig, DESKTOP)["layout"]
    fig = compare_figure(trace, "encoder", (0, 0), (0, 1))
    fig.layout.meta = {**(fig.layout.meta or {}), "share": 0.25}
    column = sent(fig, DESKTOP)["layout"]
    # a quarter of 1840 px: 125 keys in a third of it do not fit one by one
    assert column["xaxis"].get("dtick", 1) > whole["xaxis"].get("dtick", 1)
    phone = sent(fig, PHONE)["layout"]  # a phone stacks the columns: the whole width
    assert panels(phone)[0][1] == [0, 1]


PROJECTOR = Screen.parse("1240x1280x720xp")  # a page presenting on a 720p projector


@pytest.mark.parametrize("make", ["compare", "overview", "embedding", "steps"])
def test_the_server_lays_every_figure_out_for_the_projector_and_for_a_slide(trace, make):
    """Presented (the window the page reported, text 1/54 of its height, 18 px at least, a
    title's second lines 16 px at least) and saved as a slide (1600 x 900 at 22 px): decided
    here, validated by Plotly, with a colour bar slot for every trace; a phone is not presented
    but saves slides."""
    figures = {
        "compare": lambda: compare_figure(trace, "encoder", (0, 0), (0, 1)),
        "overview": lambda: overview_figure(trace, "encoder"),
        "embedding": lambda: embedding_figure(trace, "encoder"),
        "steps": lambda: score_steps_figure(trace, "encoder", 0, 0),
    }
    sent_fig = sent(figures[make](), PROJECTOR)
    meta = sent_fig["layout"]["meta"]
    for room, (width, height, font) in (("present", (1264, 662, 18)), ("slide", (1600, 900, 22))):
        laid = meta[room]
        layout = go.Layout(laid["layout"]).to_plotly_json()  # Plotly validates it
        assert (layout["width"], layout["height"]) == (width, height)
        # 1.2 × the text, and its second lines (70 % of it) 16 px at least (issue 52)
        assert layout["title"]["font"]["size"] == max(round(1.2 * font), 23)
        assert len(laid["colorbars"]) == len(sent_fig["data"])
        for key in (k for k in layout if re.match(r"^[xy]axis\d*$", k)):
            assert layout[key]["tickfont"]["size"] == font, (room, key)
        for bar in filter(None, laid["colorbars"]):
            assert bar["tickfont"]["size"] == font
    assert meta["present"]["window"] == [1280, 720]
    phone = sent(figures[make](), PHONE)["layout"]["meta"]
    assert "present" not in phone and phone["slide"]["layout"]["width"] == 1600
    # the same page before it presents: no presented layout (it asks as it starts), a slide
    page = sent(figures[make](), Screen.parse("1240x1280x720"))["layout"]["meta"]
    assert "present" not in page and page["slide"]["layout"]["width"] == 1600


def test_a_presented_figure_shows_its_crowded_labels_a_line_of_their_size_apart(trace):
    """125 tokens across a projector at 18 px: every k-th label, each k labels at least
    1.08 x 18 px apart (the page's 12 px labels stand closer); labels a figure placed itself
    (the embeddings' rows) thinned alike."""
    layout = sent(norms_heatmap(trace, "encoder"), PROJECTOR)["layout"]
    big, n = layout["meta"]["present"]["layout"], len(trace.tokens)
    span = big["width"] - big["margin"]["l"] - big["margin"]["r"] - 60
    assert big["xaxis"]["tickangle"] == -90
    assert 0.9 * span / n * big["xaxis"]["dtick"] >= 1.08 * 18
    assert layout["xaxis"].get("dtick", 1) < big["xaxis"]["dtick"]
    big = sent(embedding_figure(trace, "encoder"), PROJECTOR)["layout"]["meta"]["present"]
    big = big["layout"]
    for key in ("yaxis", "yaxis2", "yaxis4"):
        d0, d1 = big[key]["domain"]
        plot = big["height"] - big["margin"]["t"] - 5 * 18
        assert plot * (d1 - d0) / len(big[key]["tickvals"]) >= 1.08 * 18, key


def test_a_presented_figure_leaves_room_for_what_the_page_shows_under_it(trace):
    """``meta.present_below`` (the layer walk's step card): the presented figure is shorter
    by the card's most height and its gaps."""
    fig = compare_figure(trace, "encoder", (0, 0), (0, 1))
    fig.layout.meta = {**(fig.layout.meta or {}), "present_below": [190, 0.24]}
    big = sent(fig, PROJECTOR)["layout"]["meta"]["present"]["layout"]
    assert big["height"] == 662 - (round(min(190, 0.24 * 720)) + 10)


def test_on_a_phone_the_attention_blocks_one_colour_bar_lies_under_its_last_map(bert):
    """Every layer's map shares one colour axis (its first map says showscale): stacked on a
    phone, the bar lies across under the last map, as the compared heads' do, not upright
    beside the whole column."""
    from viz.block import block_figure

    net, tok = bert
    enc = tok(["The cat sat on the mat because it was warm."], return_tensors="pt")
    short = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    layout = sent(block_figure(short, "encoder", net), PHONE, "block_plot")["layout"]
    rows = panels(layout)
    assert len(rows) == net.config.n_layers and all(xd == [0, 1] for _, xd, _ in rows)
    bar = layout["coloraxis"]["colorbar"]
    assert bar["orientation"] == "h" and bar["y"] < rows[-1][2][0]
