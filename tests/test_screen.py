"""The head view laid out for the screen the page reports (viz/screen.py): on a projector at 720p
and 1080p and on a phone, a real paragraph's map keeps its size and its labels apart; an API
client gets the figure as it was built. What the browser draws of it: tests/test_readable.py."""

from __future__ import annotations

import html
import json
import re

import plotly.graph_objects as go
import pytest

from ui.render import slide_ready
from ui.state import Client
from viz.attention import head_figure
from viz.heads import rollout_figure
from viz.masks import causal_mask_figure
from viz.measure import LINE, text_px
from viz.screen import Screen

# A lecture's paragraph: 125 tokens for the bundled BERT.
PARAGRAPH = (
    "The history of the transformer begins with a simple observation about recurrent networks: "
    "they read a sentence one word at a time, and the memory of the first words fades long "
    "before the last ones arrive. Attention lets every word look at every other word directly, "
    "weighing how much each one matters for the meaning of the whole. A lecturer can show this "
    "on a projector: pick a head, type a paragraph, and watch which words attend to which, "
    "layer after layer, until the model has built a representation that a classifier or a "
    "decoder can use. Every head tells a different story about the sentence."
)


@pytest.fixture(scope="module")
def traces(bert):
    net, tok = bert
    out = {}
    for name, text in {"paragraph": PARAGRAPH, "long": " ".join([PARAGRAPH] * 5)}.items():
        enc = tok([text], return_tensors="pt", truncation=True, max_length=512)
        out[name] = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    assert len(out["paragraph"].tokens[0]) == 125
    return out


# The square maps of tokens the page lays out for its screen.
SQUARES = {
    "head": lambda trace: head_figure(trace, "encoder", 2, 3, scale="auto"),
    "causal mask": lambda trace: causal_mask_figure(trace.tokens[0], "encoder"),
    "rollout": lambda trace: rollout_figure(trace, "encoder", 3),
}


CASES = [
    ("paragraph", "head"),
    ("long", "head"),
    ("paragraph", "causal mask"),
    ("paragraph", "rollout"),
]


def laid_out(trace, screen: Screen | None, kind: str = "head") -> dict:
    """A square map (the head view by default) as the page gets it: slide-ready (its title
    names the model and the text), laid out for ``screen``."""
    fig = SQUARES[kind](trace)
    sent = json.loads(slide_ready(fig, "head_plot", "bert", PARAGRAPH, screen=screen).plot)
    sent.pop("config")
    return go.Figure(sent).to_plotly_json()  # Plotly validates what the page gets


def plot_box(layout: dict, n_x: int, n_y: int) -> tuple[float, float, float]:
    """(plot width, plot height, cell) of a laid-out square map, as Plotly lays it out: the area
    within the margins, cells square (the smaller of the two fits)."""
    m = layout["margin"]
    width = layout["width"] - m["l"] - m["r"]
    height = layout["height"] - m["t"] - m["b"]
    cell = min(width / n_x, height / n_y)
    return cell * n_x, cell * n_y, cell


def steps(layout: dict, labels: list[str]) -> dict:
    """Each axis's thinning step, read back from the labels it shows."""
    out = {}
    for key in ("xaxis", "yaxis"):
        shown = [labels.index(v) for v in layout[key]["tickvals"]]
        gaps = {b - a for a, b in zip(shown, shown[1:], strict=False)}
        assert len(gaps) <= 1, gaps  # evenly thinned
        out[key] = gaps.pop() if gaps else len(labels)
    return out


@pytest.mark.parametrize(("size", "least_font"), [("1280x720", 13), ("1920x1080", 18)])
@pytest.mark.parametrize(("text", "kind"), CASES)
def test_a_presented_square_map_takes_two_thirds_of_the_height_and_its_labels_keep_apart(
    traces, size, least_font, text, kind
):
    width, height = map(int, size.split("x"))
    fig = laid_out(traces[text], Screen.parse(f"1856x{width}x{height}xp"), kind)
    trace = fig["data"][0]
    present = fig["layout"]["meta"]["present"]
    big = present["layout"]
    n_x, n_y = len(trace["x"]), len(trace["y"])
    _, plot_height, cell = plot_box(big, n_x, n_y)
    assert plot_height >= 0.65 * height, plot_height
    font = big["xaxis"]["tickfont"]["size"]
    assert font >= least_font
    for key, step in steps(big, list(trace["x"])).items():
        assert cell * step >= LINE * font, (key, cell, step)
    # flat or upright, the key labels fit under the plot and the query labels beside it
    longest_y = max(text_px(t, font) for t in big["yaxis"]["ticktext"])
    assert longest_y + font <= big["margin"]["l"]
    if big["xaxis"]["tickangle"] == -90:
        longest_x = max(text_px(t, font) for t in big["xaxis"]["ticktext"])
        assert longest_x <= big["margin"]["b"]
    # every token is still named on hover: the cells keep every label
    assert len(set(trace["x"])) == n_x and "%{x}" in trace["hovertemplate"]
    if kind != "causal mask":  # a mask's colours are named in its title: no bar
        assert present["colorbars"][0]["tickfont"]["size"] == font
    go.Figure({"data": fig["data"], "layout": big})  # Plotly accepts the presented layout


@pytest.mark.parametrize(("text", "kind"), CASES)
def test_on_a_phone_a_square_map_takes_four_fifths_of_the_width_its_bar_below(traces, text, kind):
    fig = laid_out(traces[text], Screen.parse("326x390x844"), kind)
    layout, trace = fig["layout"], fig["data"][0]
    n_x, n_y = len(trace["x"]), len(trace["y"])
    plot_width, _, cell = plot_box(layout, n_x, n_y)
    assert layout["width"] == 326  # nothing beyond the screen's card
    assert plot_width >= 0.8 * 326, plot_width
    if kind != "causal mask":
        assert trace["colorbar"]["orientation"] == "h"
    font = layout["xaxis"]["tickfont"]["size"]
    for key, step in steps(layout, list(trace["x"])).items():
        assert cell * step >= LINE * font, (key, cell, step)
    longest_y = max(text_px(t, font) for t in layout["yaxis"]["ticktext"])
    assert longest_y <= layout["margin"]["l"]
    assert "present" not in layout["meta"]  # a phone is not put on a projector


def test_the_title_wraps_on_a_phone_and_keeps_every_word(traces):
    fig = laid_out(traces["paragraph"], Screen.parse("326x390x844"))
    title = fig["layout"]["title"]["text"]
    room = 0.98 * 326 - 12
    for line in title.split("<br>"):
        size = 12 * (0.7 if line.startswith("<sup>") else 1)
        assert text_px(line, size) <= room + size, line
    unwrapped = laid_out(traces["paragraph"], None)["layout"]["title"]["text"]
    assert title.count("<br>") > unwrapped.count("<br>")
    text = lambda t: "".join(html.unescape(re.sub(r"<[^>]+>", "", t)).split())  # noqa: E731
    assert text(title) == text(unwrapped)  # only breaks were added


def test_an_api_client_gets_the_figure_as_it_was_built(traces):
    fig = laid_out(traces["paragraph"], None)
    assert "laid_out" not in fig["layout"]["meta"]
    assert fig["layout"]["xaxis"].get("tickmode") != "array"


def test_the_page_reports_its_screen_in_its_stamp():
    client = Client.of("page-1|fill:abc123|screen:326x390x844")
    assert client.fills and client.holds == "abc123"
    assert client.screen == Screen(326, 380, 840)  # windows rounded down to 20 px
    # a wide page's figure width to 20 px (it decides how many labels of a panel fit)
    assert Client.of("page-1|screen:1857x1921x1081").screen == Screen(1840, 1920, 1080)
    assert Client.of("page-1").screen is None
    for bad in ("page|screen:", "page|screen:1x2", "page|screen:axbxc", "page|screen:9" * 3):
        assert Client.of(bad).screen is None, bad
    # alike screens are one kind: the server draws their figures once
    assert Client.of("a|screen:1900x1920x1080") == Client.of("b|screen:1910x1925x1090")
    # "xp": the page presents (its figures carry the presented layout); a phone never does
    presenting = Client.of("page-1|screen:1857x1921x1081xp").screen
    assert presenting.presented and presenting.text() == "1840x1920x1080xp"
    assert not Client.of("page-1|screen:1857x1921x1081").screen.presented
    assert not Client.of("page-1|screen:326x390x844xp").screen.presented  # a phone
    assert Client.of("page-1|screen:326x390x844xq").screen is None


def test_only_a_presenting_page_gets_the_presented_layout(traces):
    """Laid out for a projector only when the page says it presents: a desktop page that does not
    gets the page's layout and the slide, and no presented layout to carry."""
    on = laid_out(traces["paragraph"], Screen.parse("1856x1920x1080xp"))["layout"]
    off = laid_out(traces["paragraph"], Screen.parse("1856x1920x1080"))["layout"]
    assert "present" in on["meta"] and "present" not in off["meta"]
    assert on["meta"]["slide"] == off["meta"]["slide"]
    page_only = {k: v for k, v in on.items() if k != "meta"}
    assert page_only == {k: v for k, v in off.items() if k != "meta"}
    # a phone in presentation mode is told it is drawn as on its page (null: nothing to ask)
    phone = laid_out(traces["paragraph"], Screen.parse("326x390x844xp"))["layout"]["meta"]
    assert phone["present"] is None and "slide" in phone
