"""The Inside-a-layer tab (issue 29 part 2): its cards name every step of analysis.layer_steps in
order, its figure draws the chosen step for the chosen token, token and step clamp, a link opens
it, a model the steps refuse gets a sentence; in the browser, in Chinese, the step changes."""

from __future__ import annotations

import html
import json
import re
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import pytest
import torch

from analysis.layer_steps import layer_steps, step_count
from engine import BUNDLED, Engine
from lang import speaking
from model import PRESETS, Transformer
from tests.apphost import CHROMIUM
from ui.handlers import Views
from ui.render import render
from ui.state import Client, Selection, ViewState, parse_link, share_link
from ui.tabs import TAB_IDS
from ui.tabs.base import View
from ui.tabs.layer import SHARED, makers
from viz.measure import text_px
from viz.screen import Screen

PHONE = Screen.parse("326x390x844")
DESKTOP = Screen.parse("1856x1920x1080")
CASES = [  # model, text, target, stack
    (BUNDLED, "time flies like an arrow", None, "encoder"),
    ("induction", "qzvkdmqzv", None, "decoder"),
    ("dates", "2026年11月22日", None, "cross"),
    ("dates", "2026年11月22日", None, "decoder"),
]


@pytest.fixture(scope="module")
def engine():
    return Engine(device="cpu")


def cards_of(value: str) -> list[str]:
    """The step names the cards show, in order."""
    titles = re.findall(r'class="ta-step-title"><b>\d+</b> · ([^<]*)</div>', value)
    return [html.unescape(t) for t in titles]


@pytest.mark.parametrize(("model", "text", "target", "stack"), CASES)
def test_the_cards_name_every_step_and_the_figure_draws_the_chosen_one(
    engine, model, text, target, stack
):
    analysis = engine.analyse(text, model, target)
    steps = layer_steps(analysis.trace, stack, 1)
    assert len(steps) == step_count(analysis.trace.config, stack)
    for chosen in (0, 12, len(steps) - 1):
        sel = Selection(stack=stack, layer=1, token=2, step=chosen)
        out = render("layer", analysis, sel, None)
        assert cards_of(out["layer_cards"]) == [s.name for s in steps]
        assert f'data-steps="{len(steps)}"' in out["layer_cards"]
        assert out["layer_cards"].count("ta-step ta-step-chosen") == 1
        assert f'ta-step-chosen" data-step="{chosen}"' in out["layer_cards"]
        fig = out["layer_plot"]
        title = fig.layout.title.text
        assert title.startswith(html.escape(steps[chosen].name)) or steps[chosen].name in title
        assert " 2·" in title  # the token: position 2
        assert len(fig.data) == 1


def test_token_and_step_clamp_to_the_text_and_the_layer(engine):
    analysis = engine.analyse("time flies like an arrow", BUNDLED)
    n_tokens = int(analysis.trace.attention_mask[0].sum())
    clamped = Selection(token=9999, step=9999, layer=99).clamp(analysis)
    assert (clamped.token, clamped.step) == (n_tokens - 1, 19)
    assert Selection(token=-3, step=-1).clamp(analysis).token == 0
    out = render("layer", analysis, Selection(token=9999, step=9999), None)
    assert out["layer_plot"].layout.title.text.split(" · ")[1].startswith(f"{n_tokens - 1}·")
    assert 'ta-step-chosen" data-step="19"' in out["layer_cards"]
    link = share_link(ViewState("x", BUNDLED, tab="layer", sel=clamped))
    assert f"token={n_tokens - 1}" in link and "step=19" in link


def test_a_link_opens_the_tab_at_that_layer_token_and_step():
    state, invalid = parse_link(
        "?tab=layer&layer=2&token=3&step=5", {BUNDLED}, TAB_IDS, ViewState("x", BUNDLED)
    )
    assert invalid == []
    assert state.tab == "layer"
    assert (state.sel.layer, state.sel.token, state.sel.step) == (2, 3, 5)
    _, invalid = parse_link("?token=-1&step=x", {BUNDLED}, TAB_IDS, ViewState("x", BUNDLED))
    assert len(invalid) == 2


def test_the_cards_speak_chinese(engine):
    analysis = engine.analyse("time flies like an arrow", BUNDLED)
    with speaking("zh-CN"):
        out = render("layer", analysis, Selection(step=9), None)
    steps = layer_steps(analysis.trace, "encoder", 0)
    assert "被关注时每个词元传递出去的内容" in out["layer_cards"]  # V, "token" said in Chinese
    assert steps[3].name == "V"
    assert "第 0 层" in out["layer_cards"]
    assert "注意力权重" in out["layer_plot"].layout.title.text


def test_a_model_the_steps_do_not_take_apart_gets_a_sentence():
    net = Transformer(PRESETS["seed002-encoder"].replace(norm_kind="rms"))
    trace = net.trace(torch.tensor([[5, 6, 7, 8]]))
    analysis = SimpleNamespace(trace=trace, key=("rms post-norm", "test"))
    view = View(analysis, Selection(stack="encoder"))
    drawn = {name: make() for name, make in makers(view).items()}
    assert drawn["layer_plot"] is None
    assert "RMSNorm" in drawn["layer_cards"] and "Traceback" not in drawn["layer_cards"]
    with speaking("zh-CN"):
        assert "还不能拆开" in makers(view)["layer_cards"]()


def test_the_tab_draws_fast_at_128_and_512_tokens(engine):
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 80)
    for words, limit in ((100, 1.0), (600, 3.0)):
        analysis = engine.analyse(" ".join(text.split()[:words]), BUNDLED)
        render("layer", analysis, Selection(layer=2), None)  # the layer's steps, once
        for step in (0, 12, 14, 25):
            start = time.perf_counter()
            out = render("layer", analysis, Selection(layer=2, token=5, step=step), None)
            out["layer_plot"].to_json()
            assert time.perf_counter() - start < limit


# ---- in the browser ---------------------------------------------------------------------------
CHROMIUM_MISSING = not Path(CHROMIUM).exists()


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM_MISSING, reason="Debian chromium is not installed")
def test_the_tab_in_chinese_in_the_browser(page):
    from tests.apphost import serve_app
    from tests.test_e2e_browser import shot

    drawn = """(step) => {
      const gd = document.querySelector('#layer-step-plot .js-plotly-plot');
      const chosen = document.querySelector('#layer-cards .ta-step-chosen');
      return gd && gd._fullLayout && gd.querySelector('.main-svg') && chosen
        && chosen.dataset.step === String(step)
        && gd.querySelectorAll('g.trace, image, g.heatmaplayer image, .bars path').length > 0;
    }"""
    with serve_app() as (url, _):
        text = quote("time flies like an arrow")
        page.goto(f"{url}?tab=layer&text={text}&layer=1&token=2&step=3&lang=zh-CN")
        page.wait_for_function(drawn, arg=3, timeout=60_000)
        cards = page.inner_text("#layer-cards")
        assert "第 1 层" in cards and "注意力权重" in cards and "形状" in cards
        page.fill("#step input[type=number]", "9")
        page.press("#step input[type=number]", "Enter")
        page.wait_for_function(drawn, arg=9, timeout=30_000)
        title = page.evaluate(
            "() => document.querySelector('#layer-step-plot .js-plotly-plot').layout.title.text"
        )
        assert "注意力权重" in title
        shot(page, "layer_tab_zh-CN")
        page.set_viewport_size({"width": 390, "height": 844})
        page.wait_for_timeout(500)
        shot(page, "layer_tab_phone_390x844")


def sent(analysis, sel: Selection, screen: Screen | None, text: str) -> dict:
    """The tab's outputs as a page on ``screen`` gets them (finished by the handler)."""
    state = ViewState(text, BUNDLED, tab="layer", sel=sel)
    out = render("layer", analysis, sel, None, client=Client(screen=screen))
    return Views.finished(out, state, sel, screen)


def with_template(node, template):
    """A figure of the step switch's data with its shared template put back, as the page does
    (ui/js/layer_switch.js)."""
    if isinstance(node, dict):
        return {
            k: template if k == "template" and v == SHARED else with_template(v, template)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [with_template(v, template) for v in node]
    return node


def drawn_figure(value) -> dict:
    """A gr.Plot value without its config (the page draws a step with the drawn figure's)."""
    fig = json.loads(value.plot)
    fig.pop("config")
    return fig


@pytest.mark.parametrize("screen", [None, DESKTOP, PHONE], ids=["api", "desktop", "phone"])
def test_each_step_figure_of_the_switch_data_is_the_figure_the_server_draws(engine, screen):
    """The step switch draws a step's figure as it came (ui/js/layer_switch.js): it is what the
    server sends for that step as the drawn figure, its title with the slide's line (model and
    text) and laid out for the page's screen (on a phone: its title's lines fit the figure)."""
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 14)
    analysis = engine.analyse(text, BUNDLED)
    sel = Selection(layer=1, token=5)
    data = json.loads(sent(analysis, sel, screen, text)["layer_data"])
    assert len(data["figures"]) == 20 and data["template"]["layout"]
    for step in (0, 4, 9, 15):
        drawn = sent(analysis, replace(sel, step=step), screen, text)["layer_plot"]
        figure = with_template(data["figures"][step], data["template"])
        assert figure == drawn_figure(drawn), step
        meta, title = figure["layout"]["meta"], figure["layout"]["title"]
        assert (meta["step"], meta["step_view"]) == (step, data["view"])
        assert "<sup>bert · “the quick brown fox" in title["text"]
        assert meta.get("laid_out") is (True if screen else None)
        if screen is PHONE:  # every line of the title fits the phone's 326 px figure
            for line in re.split(r"<br>", title["text"]):
                assert text_px(line, title["font"]["size"]) <= PHONE.width - 12, line


def test_the_step_switch_data_stays_small_at_128_and_512_tokens(engine):
    """Every step's figure for the token comes with the tab (ui/js/layer_switch.js draws a step
    from it): a [T, d] heatmap shows at most 64 rows, so even a narrow model at 512 tokens sends
    well under the 1 MB a full analysis may take; the template, the same for every step, once.
    (BERT at 128 tokens: 149 kB, 151 kB laid out for a desktop or a phone.)"""
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 80)
    for model, words, limit in ((BUNDLED, 126, 300_000), ("seed002-encoder", 400, 1_000_000)):
        text_in = " ".join(text.split()[:words])
        analysis = engine.analyse(text_in, model)
        for screen in (DESKTOP, PHONE):
            sel = Selection(layer=1, token=200, step=3)
            out = sent(analysis, sel, screen, text_in)
            data = json.loads(out["layer_data"])
            assert len(data["figures"]) == len(layer_steps(analysis.trace, "encoder", 1))
            size = len(out["layer_data"].encode())
            assert size < limit, (model, screen, size)
            assert out["layer_data"].count('"template":{') == 1
            assert data["view"] == json.loads(out["layer_plot"].plot)["layout"]["meta"]["step_view"]
            assert f'data-view="{data["view"]}"' in out["layer_cards"]
