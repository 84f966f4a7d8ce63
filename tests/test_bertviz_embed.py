"""bertviz embedded offline: escaping, truncation, size, and a Chromium render with no network."""

from __future__ import annotations

import base64
import html
import http.server
import json
import re
import shutil
import threading
import urllib.parse
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.apphost import CHROMIUM, CHROMIUM_ARGS, ROOT
from viz.bertviz_embed import (
    DEFAULT_MAX_TOKENS,
    bertviz_document,
    bertviz_iframe,
    truncation_note,
)

SCREENSHOTS = ROOT / "artifacts" / "screenshots"

HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(2)</script>",
    '" onload="alert(3)',
    "'><svg onload=alert(4)>",
    "<!--",
    "a\u2028b\u2029c",
    "&amp;&lt;",
    "]]><iframe src=javascript:alert(5)>",
]


def _attention(n_layers: int, n_heads: int, t: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(2 * torch.randn(n_layers, n_heads, t, t, generator=g), dim=-1)


def _tokens(t: int, hostile: bool = False) -> list[str]:
    toks = ["[CLS]"] + [f"tok{i}" for i in range(t - 2)] + ["[SEP]"]
    if hostile:
        for i, h in enumerate(HOSTILE[: max(0, t - 2)]):
            toks[1 + i] = h
    return toks


def _srcdoc(iframe: str) -> str:
    m = re.fullmatch(r'<iframe sandbox="allow-scripts" [^<>]*srcdoc="([^"]*)"></iframe>', iframe)
    assert m, iframe[:300]
    return html.unescape(m.group(1))


def _script(doc: str, script_id: str) -> str:
    m = re.search(rf'<script type="[^"]+" id="{script_id}">(.*?)</script>', doc, re.S)
    assert m
    return m.group(1)


# ---------------------------------------------------------------- unit tests


@pytest.mark.parametrize("view", ["head", "model"])
def test_hostile_tokens_are_escaped(view):
    toks = _tokens(12, hostile=True)
    frame = bertviz_iframe(_attention(2, 3, 12), toks, view=view)
    # The whole document sits inside one attribute: the only tags are the iframe's own.
    assert frame.count("<") == 2 and frame.startswith('<iframe sandbox="allow-scripts" ')
    assert frame.endswith("></iframe>")
    doc = _srcdoc(frame)
    for bad in ("<img src=x", "<script>alert", "<svg onload", "<iframe src", "\u2028", "\u2029"):
        assert bad not in doc
    params_text = _script(doc, "bv-params")
    assert not set("<>&") & set(params_text)
    assert json.loads(params_text)["tokens"] == toks  # round-trips exactly
    # Every <script> is either ours (inline, no src) or data; nothing is loaded from anywhere.
    assert not re.search(r"<script[^>]*\bsrc=", doc)
    assert "require.min.js" not in doc  # (bertviz's require.config URLs go to a no-op shim)
    assert doc.count("</script>") == doc.count("<script")


def test_the_iframes_own_scripts_come_from_their_js_file_in_order():
    """viz/bertviz_embed.js holds the error, shim and loader sections (issue 27: no JavaScript
    in Python strings); each is its own <script>, after the error handler and before bertviz."""
    from viz import bertviz_embed

    text = (ROOT / "viz" / "bertviz_embed.js").read_text(encoding="utf-8")
    doc, _ = bertviz_document(_attention(2, 2, 5), _tokens(5))
    places = []
    for section, marker in (
        ("error", "bertviz could not draw this view"),
        ("shim", "window.requirejs = function"),
        ("loader", "window.__bertvizParams = {"),
    ):
        code = bertviz_embed._script(section)
        assert marker in code and code in text and f"<script>{code}</script>" in doc
        assert "==== " not in code  # one section only
        places.append(doc.index(code))
    assert places == sorted(places)


def test_prettify_matches_bertviz():
    toks = ["[CLS]", "Ġhello", "▁world", "end</w>", "[SEP]"]
    doc, _ = bertviz_document(_attention(1, 2, 5), toks)
    assert json.loads(_script(doc, "bv-params"))["tokens"] == [
        "[CLS]",
        " hello",
        " world",
        "end",
        "[SEP]",
    ]
    doc, _ = bertviz_document(_attention(1, 2, 5), toks, prettify_tokens=False)
    assert json.loads(_script(doc, "bv-params"))["tokens"] == toks


@pytest.mark.parametrize("as_numpy", [False, True])
def test_truncation_raw_subblock_and_note(as_numpy):
    att = _attention(3, 4, 70)
    data = att.numpy() if as_numpy else att
    doc, _ = bertviz_document(data, _tokens(70), view="head", max_tokens=32)
    params = json.loads(_script(doc, "bv-params"))
    assert params["shape"] == [3, 4, 32]
    assert params["tokens"] == _tokens(70)[:32]
    q = np.frombuffer(base64.b64decode(_script(doc, "bv-attn")), dtype=np.uint8)
    expected = np.rint(att[:, :, :32, :32].numpy() * 255).astype(np.uint8).ravel()
    assert np.array_equal(q, expected)  # the raw sub-block, not renormalised
    assert (
        np.abs(q.reshape(3, 4, 32, 32) / 255 - att[:, :, :32, :32].numpy()).max()
        <= 0.5 / 255 + 1e-6
    )
    note = re.search(r'<div class="bv-note" id="bv-note">(.*?)</div>', doc, re.S)
    assert note
    text = html.unescape(note.group(1))
    assert text == truncation_note(70, 32)
    assert "70 tokens" in text and "first 32" in text and "not renormalised" in text
    assert "tokens² × layers × heads" in text


def test_no_note_when_everything_fits():
    doc, _ = bertviz_document(_attention(2, 2, 10), _tokens(10), max_tokens=10)
    assert 'id="bv-note"' not in doc
    assert json.loads(_script(doc, "bv-params"))["shape"] == [2, 2, 10]


def test_default_caps_per_view():
    att, toks = _attention(1, 2, 80), _tokens(80)
    for view in ("head", "model"):
        doc, _ = bertviz_document(att, toks, view=view)
        assert json.loads(_script(doc, "bv-params"))["shape"][2] == DEFAULT_MAX_TOKENS[view]


def test_sentence_pair_filter():
    doc, _ = bertviz_document(_attention(1, 2, 10), _tokens(10), sentence_b_start=4)
    assert doc.count("<option value=") == 5
    assert json.loads(_script(doc, "bv-params"))["sentence_b_start"] == 4
    # sentence B starts beyond the shown tokens: no pair filter
    doc, _ = bertviz_document(_attention(1, 2, 10), _tokens(10), sentence_b_start=8, max_tokens=6)
    assert "<option value=" not in doc
    assert json.loads(_script(doc, "bv-params"))["sentence_b_start"] is None


def test_nonfinite_weights_are_clamped():
    att = _attention(1, 1, 4).clone()
    att[0, 0, 0, 0] = float("nan")
    att[0, 0, 1, 1] = float("inf")
    doc, _ = bertviz_document(att, _tokens(4))
    q = np.frombuffer(base64.b64decode(_script(doc, "bv-attn")), dtype=np.uint8).reshape(4, 4)
    assert q[0, 0] == 0 and q[1, 1] == 255


@pytest.mark.parametrize(
    ("shape", "ntok", "kwargs"),
    [
        ((2, 12, 12), 12, {}),
        ((1, 2, 12, 11), 12, {}),
        ((1, 2, 12, 12), 11, {}),
        ((1, 2, 12, 12), 12, {"view": "neuron"}),
        ((1, 2, 12, 12), 12, {"max_tokens": 0}),
        ((1, 2, 12, 12), 12, {"layer": 1}),
        ((1, 2, 12, 12), 12, {"heads": [2]}),
        ((1, 2, 12, 12), 12, {"display_mode": "blue"}),
    ],
)
def test_rejects_bad_input(shape, ntok, kwargs):
    with pytest.raises(ValueError):
        bertviz_iframe(np.full(shape, 0.1, dtype=np.float32), _tokens(ntok), **kwargs)


def test_size_is_small():
    sizes = {}
    for t in (32, 64):
        att, toks = _attention(6, 12, t), _tokens(t)
        for view in ("head", "model"):
            sizes[t, view] = len(bertviz_iframe(att, toks, view=view, max_tokens=t).encode())
    # 6 layers × 12 heads: one byte per weight (base64) + ~50 KB of scripts.
    # bertviz's own html_action="return" output: 3.2 MB at 32 tokens, 12.9 MB at 64.
    assert sizes[32, "head"] < 200_000 and sizes[32, "model"] < 200_000
    assert sizes[64, "head"] < 500_000 and sizes[64, "model"] < 500_000
    # embedded once: the data is T²·L·H bytes (4/3 in base64), not two JSON copies
    assert sizes[64, "head"] - sizes[32, "head"] < 1.45 * (64**2 - 32**2) * 72


def test_height_default_and_explicit():
    frame = bertviz_iframe(_attention(2, 2, 10), _tokens(10))
    assert re.search(r"height:\d+px", frame)
    frame = bertviz_iframe(_attention(2, 2, 10), _tokens(10), height=333)
    assert "height:333px" in frame


# ---------------------------------------------------------------- browser tests


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    """Chromium page over a 127.0.0.1 server; requests to other hosts are aborted and recorded."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.skip("Debian chromium not installed")
    root = tmp_path_factory.mktemp("bertviz_pages")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state = {"blocked": [], "dialogs": [], "errors": []}
    pw = sync_api.sync_playwright().start()
    try:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900})

        def route(r):
            url = r.request.url
            host = urllib.parse.urlsplit(url).hostname
            if url.startswith(("about:", "data:")) or host in ("127.0.0.1", "localhost"):
                r.continue_()
            else:
                state["blocked"].append(url)
                r.abort()

        page.route("**/*", route)

        def on_dialog(d):
            state["dialogs"].append(d.message)
            d.dismiss()

        page.on("dialog", on_dialog)
        page.on("pageerror", lambda e: state["errors"].append(str(e)))
        port = server.server_address[1]

        def show(name: str, frame_html: str):
            (root / name).write_text(
                f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>"
                f"<h3>host page</h3>{frame_html}</body></html>",
                encoding="utf-8",
            )
            page.goto(f"http://127.0.0.1:{port}/{name}")
            frame = page.frame_locator("iframe.bertviz-frame")
            frame.locator("#vis svg").first.wait_for(state="attached", timeout=20_000)
            return frame

        yield page, show, state
        browser.close()
    finally:
        pw.stop()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _no_failures(frame, state):
    assert state["blocked"] == []
    assert state["dialogs"] == []
    assert state["errors"] == []
    assert (frame.locator("#bv-error").text_content() or "") == ""


@pytest.mark.browser
def test_head_view_renders_offline(browser_page):
    page, show, state = browser_page
    t, n_heads = 20, 12
    toks = _tokens(t, hostile=True)
    frame = show("head.html", bertviz_iframe(_attention(6, n_heads, t), toks, view="head"))
    _no_failures(frame, state)
    assert frame.locator("#attention line").count() == n_heads * t * t
    assert frame.locator("#layer option").count() == 6
    texts = frame.locator("#left text").all_text_contents()
    assert texts == toks  # hostile tokens shown literally, as text
    # head checkboxes drawn, attention drawn with non-zero opacity
    opacities = frame.locator("#attention line").evaluate_all(
        "els => els.slice(0, 400).map(e => +e.getAttribute('stroke-opacity'))"
    )
    assert max(opacities) > 0
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "bertviz_head.png"), full_page=True)
    # hovering a token highlights its lines (bertviz's mouseover handler, d3 v5 event signature)
    frame.locator("#left text").nth(1).hover()
    assert frame.locator("#attention line[visibility='visible']").count() == n_heads * t
    before = frame.locator("#attention line").first.get_attribute("stroke-opacity")
    frame.locator("#layer").select_option("3")
    assert frame.locator("#attention line").count() == n_heads * t * t
    assert frame.locator("#attention line").first.get_attribute("stroke-opacity") != before
    _no_failures(frame, state)


@pytest.mark.browser
def test_model_view_renders_offline(browser_page):
    page, show, state = browser_page
    t, n_layers, n_heads = 16, 6, 12
    toks = _tokens(t, hostile=True)
    frame = show("model.html", bertviz_iframe(_attention(n_layers, n_heads, t), toks, view="model"))
    _no_failures(frame, state)
    assert frame.locator("#vis svg line").count() == n_layers * n_heads * t * t
    assert frame.locator(".attn_background").count() == n_layers * n_heads
    # clicking a thumbnail opens bertviz's detail panel with the tokens as text
    # (the event is sent to the thumbnail's click region itself: a click by coordinates can land
    # beside it while the embedding page still settles its height under load)
    frame.locator(".attn_background").nth(14).evaluate(
        """(el) => el.parentNode.querySelector(':scope > rect:last-of-type')
          .dispatchEvent(new MouseEvent('click'))"""
    )
    frame.locator("text.detail").first.wait_for(state="attached", timeout=10_000)
    detail_tokens = frame.locator("text.detail, .detail text.token").all_text_contents()
    assert set(toks) <= set(detail_tokens)
    _no_failures(frame, state)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "bertviz_model.png"), full_page=True)


@pytest.mark.browser
def test_truncated_and_pair_views_render_offline(browser_page):
    page, show, state = browser_page
    t, n = 40, 24
    att = _attention(2, 4, t)
    frame = show(
        "trunc.html",
        bertviz_iframe(att, _tokens(t), view="head", max_tokens=n, sentence_b_start=10),
    )
    _no_failures(frame, state)
    note = frame.locator("#bv-note")
    assert note.is_visible()
    assert f"{t} tokens" in note.text_content()
    assert frame.locator("#attention line").count() == 4 * n * n
    # the frame is tall enough for the drawing: no clipped tokens
    frame_box = page.locator("iframe.bertviz-frame").bounding_box()
    assert frame.locator("body").evaluate("b => b.scrollHeight") <= frame_box["height"] + 1
    frame.locator("#filter").select_option("3")  # Sentence A -> Sentence B
    assert frame.locator("#attention line").count() == 4 * 10 * (n - 10)
    _no_failures(frame, state)
