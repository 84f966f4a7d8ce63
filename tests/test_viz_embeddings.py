"""viz.embeddings: the input sum term by term, the position table and its curves.

Also the browser check of this slice's views (embeddings, hidden-state norms, tokens): each drawn
by Plotly's bundled JS in Chromium for a BERT trace, timed, and screenshotted.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import numpy as np
import plotly
import pytest

from model import PRESETS, Transformer
from model.embeddings import sinusoid_table
from tests.apphost import CHROMIUM, CHROMIUM_ARGS
from viz.common import compact_json
from viz.embeddings import (
    CAPTIONS,
    MAX_ROWS,
    embedding_figure,
    pe_curves_figure,
    position_curves_figure,
    position_table,
    position_table_figure,
)

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
HOSTILE = "<img src=x onerror=alert(1)>"
TEXT = "The cat sat on the mat because the mat was warm and the cat was tired. " * 40
JSON_BUDGET = 900_000  # bytes of compact JSON for the embedding figure at 128 tokens


def bert_trace_of(bert, n_tokens: int):
    net, tok = bert
    enc = tok([TEXT], truncation=True, max_length=n_tokens, return_tensors="pt")
    assert enc["input_ids"].shape[1] == n_tokens
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])


def decoded(fig, i: int) -> np.ndarray:
    """A heatmap's values as sent (float32)."""
    return np.asarray(fig.data[i].z, dtype=np.float64)


def tolerance(fig) -> float:
    return 1e-6


@pytest.fixture(scope="module")
def bert_trace(bert):
    net, tok = bert
    enc = tok(["the cat and the dog", "a bird"], padding=True, return_tensors="pt")
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])


@pytest.fixture(scope="module")
def encoder_trace():
    net = Transformer(PRESETS["seed002-encoder"])
    enc = net.tokenizer(["我喜欢你", "你喜欢我吗"])
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])


# ---------------------------------------------------------------- the embedding sum
def test_bert_panels_are_token_position_type_and_sum(bert_trace):
    fig = embedding_figure(bert_trace, "encoder")
    names = [t.hovertemplate.split("<br>")[0] for t in fig.data]
    assert names == ["token embedding", "position", "token type", "sum"]
    emb = bert_trace.embeddings["encoder"]
    np.testing.assert_allclose(
        decoded(fig, 0), emb["token"][0].detach().numpy(), atol=tolerance(fig)
    )
    np.testing.assert_allclose(
        decoded(fig, 1), emb["position"].detach().numpy(), atol=tolerance(fig)
    )
    assert fig.data[2].z.shape == (1, 384)  # one segment: one row, E_type[0]
    np.testing.assert_allclose(
        decoded(fig, 2)[0], emb["token_type"][0, 0].detach().numpy(), atol=1e-4
    )
    assert "LayerNorm" in fig.layout.title.text  # BERT normalises the sum before layer 1


def test_sum_panel_equals_token_plus_position_plus_type(bert_trace):
    fig = embedding_figure(bert_trace, "encoder")
    emb = bert_trace.embeddings["encoder"]
    expected = emb["token"][0] + emb["position"] + emb["token_type"][0]
    np.testing.assert_allclose(
        decoded(fig, 3), expected.detach().numpy(), atol=tolerance(fig) + 1e-6
    )


def test_sentence_pair_shows_one_type_row_per_segment(bert):
    net, tok = bert
    enc = tok(["time flies"], ["like an arrow"], return_tensors="pt")
    tr = net.trace(
        enc["input_ids"],
        attention_mask=enc["attention_mask"],
        token_type_ids=enc["token_type_ids"],
    )
    fig = embedding_figure(tr)
    assert fig.data[2].z.shape == (2, 384)
    assert list(fig.data[2].y) == ["segment 0 · tokens 0–3", "segment 1 · tokens 4–7"]
    emb = tr.embeddings["encoder"]
    expected = emb["token"][0] + emb["position"] + emb["token_type"][0]
    np.testing.assert_allclose(
        decoded(fig, 3), expected.detach().numpy(), atol=tolerance(fig) + 1e-6
    )


def test_sinusoidal_sum_has_three_panels_and_no_padding(encoder_trace):
    fig = embedding_figure(encoder_trace, batch=0)  # "我喜欢你" is padded to 5
    assert len(fig.data) == 3
    assert all(t.z.shape == (4, 128) for t in fig.data)
    assert list(fig.data[0].y) == ["0·我", "1·喜", "2·欢", "3·你"]
    emb = encoder_trace.embeddings["encoder"]
    expected = emb["token"][0, :4] + emb["position"][:4]
    np.testing.assert_allclose(
        decoded(fig, 2), expected.detach().numpy(), atol=tolerance(fig) + 1e-6
    )


def test_colour_scales_are_diverging_and_centred(bert_trace):
    fig = embedding_figure(bert_trace)
    for i, t in enumerate(fig.data):
        axis = fig.layout["coloraxis" if i == 0 else f"coloraxis{i + 1}"]
        assert t.coloraxis == ("coloraxis" if i == 0 else f"coloraxis{i + 1}")
        assert axis.cmin == -axis.cmax and axis.cmid == 0
        assert axis.colorscale[0][1] != axis.colorscale[-1][1]
    assert fig.layout.xaxis4.title.text == "dimension"  # one shared x axis, titled at the bottom
    assert fig.layout.height >= 400


def test_hover_shows_token_dimension_and_value(bert_trace):
    template = embedding_figure(bert_trace).data[0].hovertemplate
    assert "%{y}" in template and "dimension %{x}" in template and "value %{z:.4f}" in template


def test_repeated_tokens_get_distinct_labels(bert_trace):
    labels = list(embedding_figure(bert_trace).data[0].y)
    assert "1·the" in labels and "4·the" in labels
    assert len(set(labels)) == len(labels)


def test_hostile_token_is_escaped_in_the_figure(bert_trace):
    bert_trace.tokens[0][3] = HOSTILE
    try:
        payload = embedding_figure(bert_trace).to_json()
    finally:
        bert_trace.tokens[0][3] = "and"
    assert "<img" not in json.dumps(json.loads(payload)) and "&lt;img" in payload


def test_payload_stays_small_at_128_tokens(bert):
    fig = embedding_figure(bert_trace_of(bert, 128))
    assert all(t.z.dtype == np.float32 for t in fig.data)  # the hover shows the real value
    assert fig.data[0].z.shape == (128, 384)
    assert len(compact_json(fig.to_plotly_json())) < JSON_BUDGET


def test_512_tokens_are_capped_with_a_visible_note(bert):
    tr = bert_trace_of(bert, 512)
    fig = embedding_figure(tr)
    assert fig.data[0].z.shape == (MAX_ROWS, 384)
    assert f"first {MAX_ROWS} of 512 tokens" in fig.layout.title.text
    assert len(compact_json(fig.to_plotly_json())) < JSON_BUDGET
    table = position_table_figure(tr)
    assert re.search(r"every \d+(st|nd|rd|th) position shown", table.layout.title.text)
    assert len(compact_json(table.to_plotly_json())) < JSON_BUDGET


# ---------------------------------------------------------------- positions
def test_sinusoidal_table_equals_the_models_table(encoder_trace):
    fig = position_table_figure(encoder_trace)  # seed 002 plots 100 positions
    expected = sinusoid_table(100, 128).numpy()
    assert fig.data[0].z.shape == (100, 128)
    np.testing.assert_allclose(decoded(fig, 0), expected, atol=tolerance(fig))
    model = Transformer(PRESETS["seed002-encoder"])
    np.testing.assert_array_equal(
        position_table(encoder_trace, n_positions=512)[0],
        model.embedding.pos_emb.encoding.numpy(),
    )
    assert fig.data[0].zmin == -fig.data[0].zmax and fig.data[0].zmid == 0


def test_learned_table_comes_from_the_trace(bert_trace):
    t = bert_trace.input_ids.shape[1]
    table, note = position_table(bert_trace)
    np.testing.assert_array_equal(
        table, bert_trace.embeddings["encoder"]["position"].detach().numpy()
    )
    assert table.shape == (t, 384) and note == ""
    fig = position_table_figure(bert_trace, n_positions=100)
    assert fig.data[0].z.shape == (t, 384)
    assert f"positions 0–{t - 1}" in fig.layout.title.text


def test_curves_follow_the_chosen_dimensions(encoder_trace, bert_trace):
    fig = position_curves_figure(encoder_trace, dims=(1, 2, 3), n_positions=100)
    table = sinusoid_table(100, 128).numpy()
    assert [t.name.split(" ·")[0] for t in fig.data] == ["dim 1", "dim 2", "dim 3"]
    for t, dim in zip(fig.data, (1, 2, 3), strict=True):
        np.testing.assert_allclose(np.asarray(t.y), table[:, dim], atol=1e-6)
    assert "cos, period 6.28" in fig.data[0].name
    learned = position_curves_figure(bert_trace)
    assert len(learned.data) == 4 and len(learned.data[0].y) == bert_trace.input_ids.shape[1]
    with pytest.raises(ValueError, match="dimensions 0–383"):
        position_curves_figure(bert_trace, dims=(0, 384))


def test_every_family_and_stack():
    dec = Transformer(PRESETS["seed001-decoder"])
    tr = dec.trace(dec.tokenizer(["我喜欢你"])["input_ids"])
    assert len(embedding_figure(tr).data) == 3  # default stack: the decoder
    assert position_table_figure(tr).data[0].z.shape == (100, 128)

    ed = Transformer(PRESETS["seed003-encdec"])
    src, tgt = ed.tokenizer(["hello", "hi"]), ed.tokenizer(["bonjour", "salut"])
    tr = ed.trace(
        src["input_ids"],
        attention_mask=src["attention_mask"],
        tgt_ids=tgt["input_ids"],
        tgt_attention_mask=tgt["attention_mask"],
    )
    fig = embedding_figure(tr, "decoder", batch=1)
    assert fig.data[0].z.shape == (5, 128) and list(fig.data[0].y)[0] == "0·s"
    assert "decoder" in fig.layout.title.text
    assert len(position_curves_figure(tr, "decoder").data) == 4
    assert pe_curves_figure is position_curves_figure
    with pytest.raises(ValueError, match="not 'cross'"):
        embedding_figure(tr, "cross")

    bert_like = Transformer(PRESETS["seed004-encoder"])  # learned positions, random init
    tr = bert_like.trace(bert_like.tokenizer(["abc"])["input_ids"])
    assert position_table(tr)[0].shape == (3, 128)


def test_captions_present():
    assert set(CAPTIONS) == {"embeddings", "positions", "position_curves"}
    assert "sin(pos / 10000^(2i/d_model))" in CAPTIONS["positions"]
    assert "$" not in "".join(CAPTIONS.values())  # gr.Markdown renders only $$…$$ as LaTeX


# ---------------------------------------------------------------- browser: draw, time, screenshot
_PAGE = """<!doctype html><html><head><meta charset="utf-8">
<script src="plotly.min.js"></script>
<style>body {{ font-family: sans-serif; margin: 12px; background: {bg}; color: {fg}; }}
.plot {{ width: 1100px; margin-bottom: 12px; }}</style></head><body>
<div id="html-parts"></div>
{divs}
<script type="application/json" id="payload">{payload}</script>
<script>
window.drawn = (async function () {{
  const payload = JSON.parse(document.getElementById("payload").textContent);
  const t0 = performance.now();
  document.getElementById("html-parts").innerHTML = payload.html.join("");
  await Promise.all(payload.figures.map((text, i) => {{
    const fig = JSON.parse(text);
    return Plotly.newPlot("plot" + i, fig.data, fig.layout, {{displaylogo: false}});
  }}));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0;
}})();
</script></body></html>"""


def _views(tr, tok) -> dict[str, tuple[list, list[str]]]:
    """view -> (figures, HTML fragments): what one tab of the app would show."""
    from viz.common import stack_tokens
    from viz.hidden import norms_heatmap, norms_lines
    from viz.tokens import shapes_markdown, token_chips_html, tokens_table

    tokens = stack_tokens(tr, "encoder")[0]
    ids = tr.input_ids[0, : len(tokens)]
    chips = token_chips_html(tokens, ids, tok.all_special_tokens, tok.unk_token)
    table = tokens_table(tokens, ids, tok.all_special_tokens, tok.unk_token).head(12).to_html()
    shapes = f"<p>{html.escape(shapes_markdown(tr))}</p>"
    return {
        "embeddings": (
            [embedding_figure(tr), position_table_figure(tr), position_curves_figure(tr)],
            [],
        ),
        "hidden": ([norms_heatmap(tr, "encoder"), norms_lines(tr, "encoder")], []),
        "tokens": ([], [chips, shapes, table]),
    }


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")
    site = tmp_path_factory.mktemp("viz_site")
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", site)
    pw = sync_api.sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser, site
    browser.close()
    pw.stop()


def draw(browser, site: Path, name: str, figures, parts, dark: bool = False):
    """Load a page holding the figures and HTML, return (page, ms from data to drawn)."""
    payload = json.dumps({"figures": [f.to_json() for f in figures], "html": parts})
    payload = payload.replace("<", "\\u003c")  # nothing in the JSON can close the <script>
    divs = "".join(f'<div class="plot" id="plot{i}"></div>' for i in range(len(figures)))
    bg, fg = ("#0b0f19", "#e5e7eb") if dark else ("#ffffff", "#111827")
    path = site / f"{name}.html"
    path.write_text(_PAGE.format(divs=divs, payload=payload, bg=bg, fg=fg), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1140, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("dialog", lambda d: (errors.append("dialog: " + d.message), d.dismiss()))
    page.goto(path.as_uri())
    ms = page.evaluate("window.drawn")
    n_plots = page.evaluate("document.querySelectorAll('.plot .main-svg').length")
    assert not errors, errors
    assert n_plots >= len(figures)  # every figure drew its SVG
    return page, ms


@pytest.mark.browser
@pytest.mark.parametrize("n_tokens", [32, 128, 512])
def test_views_draw_in_chromium(chromium, bert, n_tokens):
    """Every figure draws as SVG with no image and hostile tokens as text. How fast is measured
    in bench/bench_browser.py (budgets 1 / 2 / 5 s), not here: a shared CI machine is no clock."""
    browser, site = chromium
    tr = bert_trace_of(bert, n_tokens)
    tr.tokens[0][5] = HOSTILE  # must render as text, never as an element
    for view, (figures, parts) in _views(tr, bert[1]).items():
        draw(browser, site, f"warmup_{view}", figures, parts)[0].close()  # JIT, font caches
        page, ms = draw(browser, site, f"{view}_{n_tokens}", figures, parts)
        size = sum(len(f.to_json()) for f in figures) + sum(len(p) for p in parts)
        print(f"{view:>10} @ {n_tokens:3d} tokens: {size / 1e3:7.1f} kB, drawn in {ms:6.0f} ms")
        assert page.evaluate("document.querySelectorAll('img').length") == 0
        if n_tokens == 128:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / f"viz_{view}.png"), full_page=True)
        page.close()


@pytest.mark.browser
def test_token_chips_read_on_a_dark_background(chromium, bert):
    browser, site = chromium
    net, tok = bert
    enc = tok(["time flies like an arrow, unbelievably 🦜 <img src=x>"], return_tensors="pt")
    tr = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    _, parts = _views(tr, tok)["tokens"]
    page, _ = draw(browser, site, "tokens_dark", [], parts, dark=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "viz_tokens_dark.png"), full_page=True)
    colour = page.evaluate("getComputedStyle(document.querySelector('.ta-tok')).color")
    assert colour == "rgb(229, 231, 235)"  # chips inherit the page's text colour
    page.close()
