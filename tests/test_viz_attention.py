"""viz.attention: one head, every layer × head, two heads compared — values, labels, escaping,
sizes, every stack of every model family, and a Chromium draw of a 128-token BERT trace."""

from __future__ import annotations

import copy
import json
import shutil
import time
from pathlib import Path

import numpy as np
import plotly
import plotly.graph_objects as go
import pytest

from model import PRESETS, Transformer
from tests.apphost import CHROMIUM, CHROMIUM_ARGS
from tests.conftest import ARTIFACTS, LONG_TEXT
from tests.wire import filled_like_the_page, inflated, numbers, switch_numbers, unpacked, vector
from viz import attention as A
from viz import wire
from viz.common import DIVERGING_SCALE
from viz.masks import score_steps_figure

HOSTILE = "<img src=x onerror=alert(1)>"
SCREENSHOTS = ARTIFACTS / "screenshots"
OVERVIEW_BUDGET = 300_000  # bytes of figure JSON at 128 and 512 tokens (a run: 1 MB in all)


# ---------------------------------------------------------------- traces of every family


def bert_trace(bert, texts: list[str], max_length: int = 512):
    net, tok = bert
    enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])


def char_trace(preset: str, src: list[str], tgt: list[str] | None = None):
    net = Transformer(PRESETS[preset]).eval()
    enc = net.tokenizer(src, padding=True)
    if tgt is None:
        return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    dec = net.tokenizer(tgt, padding=True)
    return net.trace(
        enc["input_ids"],
        attention_mask=enc["attention_mask"],
        tgt_ids=dec["input_ids"],
        tgt_attention_mask=dec["attention_mask"],
    )


@pytest.fixture(scope="module")
def families(bert):
    """One padded two-text trace per family: BERT encoder, decoder-only, encoder-decoder."""
    return {
        "bert": bert_trace(bert, ["the cat and the dog", "time flies"]),
        "seed001-decoder": char_trace("seed001-decoder", ["abcab", "ab"]),
        "seed003-encdec": char_trace("seed003-encdec", ["hello", "hi"], ["bonjour", "ok"]),
    }


STACKS = [
    ("bert", "encoder"),
    ("seed001-decoder", "decoder"),
    ("seed003-encdec", "encoder"),
    ("seed003-encdec", "decoder"),
    ("seed003-encdec", "cross"),
]


@pytest.fixture(scope="module")
def long_traces(bert):
    """Single-text BERT traces of exactly 32, 128 and 512 tokens."""
    return {n: bert_trace(bert, [LONG_TEXT * 2], max_length=n) for n in (32, 128, 512)}


def with_hostile_token(trace):
    """A copy of the trace whose second source (and target) token is an HTML injection."""
    out = copy.copy(trace)
    out.tokens = [list(row) for row in trace.tokens]
    out.tokens[0][1] = HOSTILE
    if trace.tgt_tokens is not None:
        out.tgt_tokens = [list(row) for row in trace.tgt_tokens]
        out.tgt_tokens[0][1] = HOSTILE
    return out


def all_strings(fig: go.Figure) -> list[str]:
    """Every string in the figure's JSON (Plotly writes '<' as \\u003c, so decode first)."""
    found, todo = [], [json.loads(fig.to_json())]
    while todo:
        value = todo.pop()
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
    return found


def assert_escaped(fig: go.Figure) -> None:
    strings = all_strings(fig)
    assert not any("<img" in s for s in strings), "raw token HTML reached the figure"
    assert any("&lt;img" in s for s in strings), "the hostile token is missing from the figure"


def z_of(trace_dict) -> np.ndarray:
    return np.asarray(trace_dict.z, dtype=np.float64)


# ---------------------------------------------------------------- head_figure


def test_head_figure_labels_stay_distinct_when_a_token_repeats(families):
    tr = families["bert"]
    fig = A.head_figure(tr, "encoder", 0, 0)
    x = list(fig.data[0].x)
    assert tr.tokens[0].count("the") == 2
    assert len(x) == len(set(x)) == len(tr.tokens[0])  # "the cat and the dog" + [CLS] [SEP]
    assert list(fig.data[0].y) == x


def test_head_figure_heatmap_equals_the_trace_slice(families):
    tr = families["seed001-decoder"]  # batch item 1 is padded: its padding is removed
    fig = A.head_figure(tr, "decoder", 3, 2, batch=1)
    z = z_of(fig.data[0])
    n = int(tr.attention_mask[1].sum())
    want = tr.attentions["decoder"][1, 3, 2, :n, :n].numpy()
    allowed = tr.masks["decoder"][1, :n, :n].numpy()
    assert z.shape == (n, n) == (2, 2)
    np.testing.assert_allclose(z[allowed], want[allowed], rtol=1e-6)
    assert np.isnan(z[~allowed]).all()  # hidden cells are blank (grey), not weight 0
    assert "grey = hidden" in fig.layout.title.text


def test_head_figure_hover_names_query_key_and_weight(families):
    hover = A.head_figure(families["bert"], "encoder", 1, 1).data[0].hovertemplate
    assert "query %{y}" in hover and "key %{x}" in hover and "weight %{z" in hover


def test_head_figure_colour_scale_is_named_in_the_colour_bar(families):
    tr = families["bert"]
    fixed = A.head_figure(tr, "encoder", 2, 5)
    per_head = A.head_figure(tr, "encoder", 2, 5, scale="head")
    assert fixed.data[0].zmax == 1.0 and "0–1" in fixed.data[0].colorbar.title.text
    peak = float(np.nanmax(z_of(per_head.data[0])))
    assert per_head.data[0].zmax == pytest.approx(peak)
    assert "head max" in per_head.data[0].colorbar.title.text


def test_head_figure_title_names_layer_head_and_stack(families):
    titles = {
        ("bert", "encoder"): "encoder self-attention",
        ("seed001-decoder", "decoder"): "decoder masked self-attention",
        ("seed003-encdec", "cross"): "cross-attention (queries: target, keys: source)",
    }
    for (family, stack), name in titles.items():
        title = A.head_figure(families[family], stack, 1, 0).layout.title.text
        assert title.startswith("Layer 1, head 0") and name in title


def test_cross_attention_rows_are_target_tokens_and_columns_source(families):
    tr = families["seed003-encdec"]
    fig = A.head_figure(tr, "cross", 0, 0)
    assert len(fig.data[0].y) == len("bonjour") and len(fig.data[0].x) == len("hello")
    assert fig.layout.yaxis.title.text == "query (target)"


@pytest.mark.parametrize("chunk", [1, 4, 16])
def test_max_pool_is_max_pool2d_with_short_last_windows_and_nan(chunk):
    """The fast pooling the head view and the overview use gives max_pool2d's numbers exactly:
    windows that do not divide the text (the last one short), NaN kept, any chunk of maps."""
    import itertools

    import torch
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(0)
    for n, t_q, t_k, k_q, k_k in itertools.product(
        (1, 5), (1, 7, 16), (3, 9, 16), (1, 2, 3, 8), (1, 2, 5)
    ):
        maps = torch.rand(n, t_q, t_k, generator=gen)
        maps[maps > 0.95] = float("nan")
        want = F.max_pool2d(maps[:, None], (k_q, k_k), (k_q, k_k), ceil_mode=True)[:, 0]
        got = A.max_pool(maps, k_q, k_k, chunk=chunk)
        assert got.shape == want.shape, (n, t_q, t_k, k_q, k_k)
        assert torch.equal(got.nan_to_num(-1.0), want.nan_to_num(-1.0)), (n, t_q, t_k, k_q, k_k)


def test_head_figure_max_pools_long_texts(long_traces):
    tr = long_traces[512]
    fig = A.head_figure(tr, "encoder", 0, 0)
    z = z_of(fig.data[0])
    assert z.shape == (256, 256)
    assert "512 tokens max-pooled to 256" in fig.layout.title.text
    full = tr.attentions["encoder"][0, 0, 0].numpy()
    np.testing.assert_allclose(z[0, 0], full[:2, :2].max(), rtol=1e-6)


def test_a_missing_layer_head_or_stack_is_an_actionable_error(families):
    with pytest.raises(ValueError, match="layers 0–5"):
        A.head_figure(families["bert"], "encoder", 6, 0)
    with pytest.raises(ValueError, match="heads 0–11"):
        A.head_figure(families["bert"], "encoder", 0, 12)
    with pytest.raises(ValueError, match="no 'cross' attention"):
        A.overview_figure(families["bert"], "cross")


# ---------------------------------------------------------------- overview_figure


def test_overview_is_one_tiled_trace_with_layer_and_head_ticks(families):
    tr = families["bert"]
    fig = A.overview_figure(tr, "encoder")
    assert len(fig.data) == 1 and fig.data[0].type == "heatmap"
    n = len(tr.tokens[0])
    assert z_of(fig.data[0]).shape == (6 * n, 12 * n)
    assert list(fig.layout.yaxis.ticktext) == [f"L{i}" for i in range(6)]
    assert list(fig.layout.xaxis.ticktext) == [f"H{i}" for i in range(12)]
    assert list(fig.layout.xaxis.tickvals) == [h * n + (n - 1) / 2 for h in range(12)]
    assert len(fig.layout.shapes) == 5 + 11  # separators between tiles
    assert "as in the head view" in fig.layout.title.text
    assert (
        "each head scaled to its own max"
        in A.overview_figure(tr, "encoder", scale="head").layout.title.text
    )


def test_overview_colours_the_real_weight_by_default(families):
    """One colour convention: a tile's colour is its weight 0–1, as in the head view."""
    tr = families["bert"]
    n = len(tr.tokens[0])
    cells = A.overview_figure(tr, "encoder").data[0]
    tiles = z_of(cells).reshape(6, n, 12, n).transpose(0, 2, 1, 3)  # (L, H, T, T)
    att = tr.attentions["encoder"][0].numpy()
    np.testing.assert_array_equal(tiles, np.round(att * 100))
    assert (cells.zmin, cells.zmax) == (0, 100) and cells.customdata is None
    assert "weight %{z} % of the row" in cells.hovertemplate


def test_overview_tiles_are_each_divided_by_their_own_max(families):
    tr = families["bert"]
    n = len(tr.tokens[0])
    fig = A.overview_figure(tr, "encoder", scale="head")
    real = np.asarray(fig.data[0].customdata)  # the hover still gives the real weight
    np.testing.assert_array_equal(real, z_of(A.overview_figure(tr, "encoder").data[0]))
    z = z_of(fig.data[0])
    tiles = z.reshape(6, n, 12, n).transpose(0, 2, 1, 3)  # (L, H, T, T)
    assert (tiles.max(axis=(-2, -1)) == 100).all()
    att = tr.attentions["encoder"][0].numpy()
    want = np.round(att / att.max(axis=(-2, -1), keepdims=True) * 100)
    np.testing.assert_array_equal(tiles, want)


def test_overview_sends_one_byte_a_cell(families):
    fig = json.loads(A.overview_figure(families["bert"], "encoder").to_json())
    assert fig["data"][0]["z"]["dtype"] == "u1"


def test_overview_hover_names_layer_head_and_tokens(families):
    trace = A.overview_figure(families["bert"], "encoder", scale="head").data[0]
    assert trace.y[0] == "L0 · 0·[CLS]" and trace.x[-1] == "H11 · 6·[SEP]"
    assert "% of this head's max" in trace.hovertemplate and "%{customdata}" in trace.hovertemplate


@pytest.mark.parametrize("n", [128, 512])
def test_overview_stays_small_and_keeps_peaks_on_long_texts(long_traces, n):
    tr = long_traces[n]
    assert len(tr.tokens[0]) == n
    fig = A.overview_figure(tr, "encoder", scale="head")
    assert len(fig.to_json()) < 2 * OVERVIEW_BUDGET  # z and the real weights: a byte each
    z = z_of(fig.data[0])
    assert z.shape[0] <= 6 * A.MAX_TILE_CELLS and z.shape[1] <= 12 * A.MAX_TILE_CELLS
    tiles = z.reshape(6, z.shape[0] // 6, 12, z.shape[1] // 12)
    assert (tiles.max(axis=(1, 3)) == 100).all()  # max-pooling keeps every head's peak
    assert f"{n} tokens max-pooled" in fig.layout.title.text


# ---------------------------------------------------------------- compare_figure


def test_compare_shows_two_heads_and_their_difference(families):
    tr = families["bert"]
    fig = A.compare_figure(tr, "encoder", (0, 1), (5, 7))
    a, b, diff = (z_of(t) for t in fig.data)
    weights_a = A.head_pattern(tr, "encoder", 0, 1)
    weights_b = A.head_pattern(tr, "encoder", 5, 7)
    # A and B are the weights as the hover shows them (three decimals), A − B their difference.
    assert hover_strings(a) == hover_strings(weights_a)
    assert hover_strings(b) == hover_strings(weights_b)
    np.testing.assert_allclose(a, weights_a, atol=5e-4 + 1e-7)
    thousandths = [np.round(z * 1000) for z in (a, b, diff)]
    np.testing.assert_array_equal(thousandths[2], thousandths[0] - thousandths[1])
    assert {t.yaxis for t in fig.data} == {"y"}  # one shared query axis
    assert fig.data[0].x == fig.data[1].x == fig.data[2].x
    assert (
        fig.layout.coloraxis2.cmid == 0
        and fig.layout.coloraxis2.cmin == -fig.layout.coloraxis2.cmax
    )
    diverging = go.layout.Coloraxis(colorscale=DIVERGING_SCALE).colorscale
    assert fig.layout.coloraxis2.colorscale == diverging
    assert "query %{y}" in fig.data[2].hovertemplate and "A − B" in fig.data[2].hovertemplate
    assert [a.text for a in fig.layout.annotations] == ["A = L0 H1", "B = L5 H7", "A − B"]
    assert f"A − B from {diff.min():+.3f} to {diff.max():+.3f}" in fig.layout.title.text


def test_compare_does_not_blow_noise_up(families):
    """Near-uniform heads differing by 0.004: the difference stays pale (±1, not ±0.004)."""
    tr = families["seed003-encdec"]  # random weights: near-uniform heads
    fig = A.compare_figure(tr, tr.stacks[0], (0, 0), (0, 1))
    assert fig.layout.coloraxis.cmax == 1.0  # A and B on the head view's 0–1 scale
    assert fig.layout.coloraxis2.cmax >= 1.0
    fig = A.compare_figure(tr, tr.stacks[0], (0, 0), (0, 1), scale="head")
    peak = max(float(z_of(fig.data[0]).max()), float(z_of(fig.data[1]).max()))
    assert fig.layout.coloraxis2.cmax == pytest.approx(max(peak, np.abs(z_of(fig.data[2])).max()))


def test_compare_mean_pools_long_texts_and_keeps_the_difference_exact(long_traces):
    fig = A.compare_figure(long_traces[512], "encoder", (0, 0), (1, 1))
    a, b, diff = (z_of(t) for t in fig.data)
    assert a.shape == (128, 128)
    np.testing.assert_allclose(diff, a - b, atol=1e-6)
    assert len(fig.to_json()) < 400_000
    assert "mean-pooled" in fig.layout.title.text


# ---------------------------------------------------------------- every stack, captions


@pytest.mark.parametrize(("family", "stack"), STACKS)
def test_every_view_works_on_every_stack_of_every_family(families, family, stack):
    tr = families[family]
    _, n_layers, n_heads = tr.attentions[stack].shape[:3]
    last = (n_layers - 1, n_heads - 1)
    for fig in (
        A.head_figure(tr, stack, *last, batch=1),
        A.overview_figure(tr, stack, batch=1),
        A.compare_figure(tr, stack, (0, 0), last, batch=1),
    ):
        assert isinstance(fig, go.Figure)
        assert fig.layout.height and 250 <= fig.layout.height <= 1000
        assert A.stack_title(stack) in fig.layout.title.text


@pytest.mark.parametrize(("family", "stack"), STACKS)
def test_token_text_is_escaped_in_every_view(families, family, stack):
    tr = with_hostile_token(families[family])
    for fig in (
        A.head_figure(tr, stack, 0, 0),
        A.overview_figure(tr, stack),
        A.compare_figure(tr, stack, (0, 0), (0, 1)),
    ):
        assert_escaped(fig)


def test_every_view_has_a_caption_with_its_formula():
    assert set(A.CAPTIONS) == {"head", "overview", "compare"}
    for caption in A.CAPTIONS.values():
        assert "softmax(QKᵀ/√d_k)" in caption and caption.count("\n") <= 1


# ---------------------------------------------------------------- drawn in Chromium


def draw_in_chromium(figures: list[go.Figure], screenshot: Path, tmp_path: Path) -> float:
    """Draw figures in one page with plotly's bundled JS; return milliseconds until every plot
    has drawn its heatmaps, and save a full-page screenshot."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", tmp_path)
    figs = json.dumps([json.loads(f.to_json()) for f in figures]).replace("</", "<\\/")
    divs = "".join(f'<div id="f{i}"></div>' for i in range(len(figures)))
    (tmp_path / "index.html").write_text(
        f"""<!DOCTYPE html><html><head><meta charset="utf-8">
<script src="plotly.min.js"></script></head><body style="margin:0">{divs}
<script>
const FIGS = {figs};
window.draw = async () => {{
  const t0 = performance.now();
  await Promise.all(FIGS.map((f, i) => Plotly.newPlot("f" + i, f.data, f.layout)));
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const plots = [...document.querySelectorAll(".js-plotly-plot")];
  const drawn = plots.every((p, i) => p.querySelector(".main-svg") &&
      p.querySelectorAll(".hm image").length === FIGS[i].data.length);
  return {{ms: performance.now() - t0, drawn, n: plots.length}};
}};
</script></body></html>""",
        encoding="utf-8",
    )
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto((tmp_path / "index.html").as_uri())
            start = time.perf_counter()
            result = page.evaluate("draw()")
            wall_ms = (time.perf_counter() - start) * 1000
            assert result["n"] == len(figures) and result["drawn"], result
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    print(f"{screenshot.name}: drawn in {result['ms']:.0f} ms in the page, {wall_ms:.0f} ms wall")
    return result["ms"]


@pytest.mark.browser
def test_attention_views_draw_in_chromium(long_traces, tmp_path):
    """They draw (speed: bench/bench_browser.py, not a timed test)."""
    tr = long_traces[128]
    figures = [
        A.head_figure(tr, "encoder", 2, 3),
        A.overview_figure(tr, "encoder"),
        A.compare_figure(tr, "encoder", (0, 1), (2, 3)),
    ]
    draw_in_chromium(figures, SCREENSHOTS / "viz_attention.png", tmp_path)  # asserts each drew


# ---------------------------------------------------------------- the browser's head switch


def hover_strings(z: np.ndarray) -> list[str]:
    """A heatmap's hover numbers as Plotly prints them (d3 ".3f": JavaScript's toFixed(3))."""
    from decimal import ROUND_HALF_UP, Decimal

    return [
        "gap" if np.isnan(v) else str(Decimal(float(v)).quantize(Decimal("0.001"), ROUND_HALF_UP))
        for v in np.asarray(z, dtype=np.float64).ravel()
    ]


@pytest.mark.parametrize(("family", "stack"), STACKS)
@pytest.mark.parametrize("scale", ["fixed", "head"])
def test_switch_data_shows_every_head_as_the_server_figure_does(families, family, stack, scale):
    """A head drawn in the browser shows the same hover numbers, gaps, colour range and title as
    the server's figure of that head."""
    tr = families[family]
    data = A.head_switch_data(tr, stack, scale=scale)
    values = switch_numbers(data)
    for layer in range(data["layers"]):
        for head in range(data["heads"]):
            fig = A.head_figure(tr, stack, layer, head, scale=scale)
            assert hover_strings(values[layer, head]) == hover_strings(fig.data[0].z)
            assert data["zmax"][layer][head] == fig.data[0].zmax
            assert fig.layout.title.text == data["titles"][layer][head]
            assert fig.layout.meta["head"] == [layer, head]


def test_switch_data_pools_like_the_head_view_and_stays_small(long_traces):
    for n, budget in ((128, 1_000_000), (512, None)):
        tr = long_traces[n]
        data = A.head_switch_data(tr, "encoder")
        values = switch_numbers(data)
        assert values.shape == (6, 12, min(n, 256), min(n, 256))
        fig = A.head_figure(tr, "encoder", 5, 11)
        assert hover_strings(values[5, 11]) == hover_strings(fig.data[0].z)
        if budget:  # the whole stack for the browser, at 128 tokens (bench/README.md: a run ≤ 1 MB)
            assert len(json.dumps(data)) < 0.8 * budget
        assert inflated(data["data"]).size == 2 * values.size


def boxes_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.mark.parametrize("make", ["compare", "score_steps"])
def test_three_panel_colour_bars_sit_under_the_panels(bert, make):
    """No colour bar between the panels (it covered A − B on a phone): both lie horizontally
    below, side by side, each under its own panels."""
    net, tok = bert
    enc = tok(["time flies like an arrow"], return_tensors="pt")
    trace = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
    if make == "compare":
        fig = A.compare_figure(trace, "encoder", (0, 0), (0, 1))
    else:
        fig = score_steps_figure(trace, "encoder", 0, 0)
    bars = [fig.layout.coloraxis.colorbar, fig.layout.coloraxis2.colorbar]
    assert all(b.orientation == "h" and b.yref == "container" for b in bars)
    spans = [(b.x - b.len / 2, b.x + b.len / 2) for b in bars]
    assert not boxes_overlap(*spans)
    assert spans[1][0] >= fig.layout.xaxis3.domain[0]  # the second bar is under panel 3
    assert fig.layout.margin.b >= 64 and all(b.y * fig.layout.height < 8 for b in bars)


# ---------------------------------------------------------------- figures the browser fills


def payload(trace, stack: str, scale: str) -> dict:
    """The head switch data as the Attention tab sends it (with an id and a run)."""
    return {**A.head_switch_data(trace, stack, scale=scale), "id": "d1", "run": "r1"}


def without_meta_fill(fig: go.Figure) -> dict:
    d = json.loads(fig.to_json())
    d["layout"]["meta"].pop("fill", None)
    for trace in d["data"]:
        trace.pop("z", None)
    return d


@pytest.mark.parametrize(("family", "stack"), STACKS)
@pytest.mark.parametrize("scale", ["fixed", "head"])
def test_a_figure_sent_without_numbers_is_filled_to_the_servers_figure(
    families, family, stack, scale
):
    """The head and compare figures a page that holds the payload receives without z, filled
    from the payload as the browser does, show exactly the server figure's numbers (hover), gaps,
    colour ranges and titles, and nothing else differs."""
    tr = families[family]
    data = payload(tr, stack, scale)
    n_layers, n_heads = data["layers"], data["heads"]
    for layer, head in {(0, 0), (n_layers - 1, n_heads - 1), (n_layers - 1, 0)}:
        full = A.head_figure(tr, stack, layer, head, scale=scale)
        slim = wire.without_z(go.Figure(full), "d1", [[layer, head]], hidden=None)
        filled = filled_like_the_page(slim, data)
        assert hover_strings(filled.data[0].z) == hover_strings(full.data[0].z)
        assert filled.data[0].zmax == full.data[0].zmax
        assert without_meta_fill(filled) == without_meta_fill(full)
    a, b = (0, 1), (n_layers - 1, n_heads - 1)
    full = A.compare_figure(tr, stack, a, b, scale=scale)
    assert A.compare_in_switch_data(tr, stack, a, b)
    slim = wire.without_z(go.Figure(full), "d1", [[*a], [*b], [*a, *b]], hidden=0)
    filled = filled_like_the_page(slim, data)
    for shown, server in zip(filled.data, full.data, strict=True):
        # exactly the server's numbers: it sends float32 of the same thousandths
        np.testing.assert_array_equal(shown.z, np.asarray(server.z, np.float32))
        assert hover_strings(shown.z) == hover_strings(server.z)
    diff = np.asarray(filled.data[2].z)
    assert f"A − B from {diff.min():+.3f} to {diff.max():+.3f}" in full.layout.title.text
    assert without_meta_fill(filled) == without_meta_fill(full)


def test_compare_is_filled_only_where_it_and_the_payload_pool_alike(long_traces):
    """Up to MAX_PANEL_CELLS tokens neither view pools; beyond, compare mean-pools and the
    payload max-pools, so the compare figure must carry its own numbers."""
    assert A.compare_in_switch_data(long_traces[128], "encoder", (0, 0), (5, 11))
    assert not A.compare_in_switch_data(long_traces[512], "encoder", (0, 0), (5, 11))


def test_a_slim_figure_is_much_smaller_than_the_full_one(long_traces):
    tr = long_traces[128]
    full = A.compare_figure(tr, "encoder", (0, 0), (5, 11))
    slim = wire.without_z(go.Figure(full), "d1", [[0, 0], [5, 11], [0, 0, 5, 11]], hidden=0)
    assert len(slim.to_json()) < 0.25 * len(full.to_json())


@pytest.mark.browser
@pytest.mark.parametrize("native_base64", [True, False])
def test_the_pages_decoder_reads_every_head_as_the_server_wrote_it(families, native_base64):
    """The page's decoder (ui/js/fill.js), in Chromium, with the browser's base64 decoder and
    without it (an older browser): every head of a masked stack gives the hover numbers and gaps
    the payload holds (decoded in Python here) and A − B is their difference; the test vector's
    payload gives exactly the vector's numbers."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    from ui.js import source

    tr = families["seed003-encdec"]
    data = {**A.head_switch_data(tr, "decoder"), "id": "d1", "run": "r1"}
    values = switch_numbers(data)  # (L, H, rows, cols), NaN = hidden
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto("about:blank")
            if not native_base64:
                page.evaluate("() => { delete Uint8Array.fromBase64; }")
            page.add_script_tag(content=source("fill.js"))
            shown, test_vector = page.evaluate(
                """async (srcs) => { const out = [];
                  for (const src of srcs) {
                    const fill = window.ta.fill, d = await fill.add(src);
                    const rows = (z) => z.map((r) => Array.from(r, (v) => (v !== v ? null : v)));
                    const heads = [];
                    for (let l = 0; l < d.layers; l++) for (let h = 0; h < d.heads; h++) {
                      heads.push(rows(fill.z(d, [l, h], null)));
                    }
                    const diff = rows(fill.z(d, [0, 0, d.layers - 1, d.heads - 1], 0));
                    out.push({heads, diff});
                  }
                  return out; }""",
                [json.dumps(data), json.dumps(vector()["switch"]["payload"])],
            )
        finally:
            browser.close()
    # the test vector (tests/wire_vector.json): exactly its numbers, gaps included
    want = numbers(vector()["switch"]["numbers"]).astype(np.float32)  # (1, 2, rows, cols)
    got = np.array(test_vector["heads"], dtype=np.float64)  # (2, rows, cols), NaN = a gap
    np.testing.assert_array_equal(got, want.reshape(got.shape))
    n_heads = data["heads"]
    for i, head in enumerate(shown["heads"]):
        expected = values[i // n_heads, i % n_heads]
        assert hover_strings(np.array(head, dtype=np.float64)) == hover_strings(expected)
    assert np.isnan(values).any()  # the causal mask hides cells: gaps are decoded too
    a, b = values[0, 0], values[-1, -1]
    want = (np.nan_to_num(a * 1000).round() - np.nan_to_num(b * 1000).round()) / 1000
    np.testing.assert_allclose(np.array(shown["diff"], dtype=np.float64), want, atol=1e-6)


# ---------------------------------------------------------------- figures with their numbers packed


def without_numbers(sent: dict) -> dict:
    """A figure's JSON without its heatmaps' z and customdata (compared apart)."""
    out = copy.deepcopy(sent)
    for trace in out["data"]:
        trace.pop("z", None)
        trace.pop("customdata", None)
    return out


def plain(fig: go.Figure) -> dict:
    return json.loads(fig.to_json())


def test_a_packed_attention_block_shows_the_full_figures_numbers(bert, long_traces):
    """The attention block sent packed ("milli") unpacks to the full figure's hover numbers on
    every tile, colours within 0.0005, the same tokens on every tile and nothing else changed;
    at 128 tokens it is under a third of the full figure's bytes."""
    from viz.block import block_figure

    for n in (32, 128):
        full = block_figure(long_traces[n], "encoder", bert[0])
        sent = wire.packed(go.Figure(full), "milli")
        assert sent.layout.meta["packed"]["same_xy"]
        shown = unpacked(sent)
        for tile, server in zip(shown["data"], full.data, strict=True):
            assert hover_strings(tile["z"]) == hover_strings(server.z)
            assert np.abs(tile["z"] - np.asarray(server.z, np.float64)).max() <= 0.0005 + 1e-6
        assert without_numbers(shown) == without_numbers(plain(full))
    assert len(sent.to_json()) < len(full.to_json()) / 3


@pytest.mark.parametrize(("family", "stack"), STACKS)
@pytest.mark.parametrize("scale", ["fixed", "head"])
def test_a_packed_overview_is_the_full_figure(families, family, stack, scale):
    """The overview sent packed ("byte": its percent tiles, and under "head" the real weights of
    its hover) unpacks to exactly the full figure, masked stacks included."""
    full = A.overview_figure(families[family], stack, scale=scale)
    sent = wire.packed(go.Figure(full), "byte")
    fields = [field for _, field, *_ in sent.layout.meta["packed"]["cells"]]
    assert fields == (["z", "customdata"] if scale == "head" else ["z"])
    shown = unpacked(sent)
    want = plain(full)
    np.testing.assert_array_equal(shown["data"][0]["z"], full.data[0].z)
    if scale == "head":
        np.testing.assert_array_equal(shown["data"][0]["customdata"], full.data[0].customdata)
    assert without_numbers(shown) == without_numbers(want)


def test_numbers_that_cannot_be_packed_leave_the_figure_whole():
    """A number beyond a milli code's range (or below 0) keeps the full figure; byte packing
    takes bytes only."""
    for z in ([[0.5, 70.0]], [[-0.1, 0.2]]):
        fig = go.Figure(go.Heatmap(z=np.array(z, np.float32)))
        assert wire.packed(go.Figure(fig), "milli").to_json() == fig.to_json()
    with pytest.raises(ValueError, match="uint8"):
        wire.packed(go.Figure(go.Heatmap(z=np.zeros((2, 2), np.float32))), "byte")


@pytest.mark.browser
def test_the_page_unpacks_a_packed_figure_as_soon_as_it_is_drawn():
    """ui/js/fill.js in Chromium: the test vector's packed figure (tests/wire_vector.json), as
    Gradio has drawn it without its numbers, gets the vector's numbers written into its data
    (gaps, halves up, the largest code), its x and y copied to every tile; an overview's bytes
    too; and a figure with bytes that do not inflate keeps no numbers and turns filling off."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    from ui.js import source

    sent = vector()["packed"]["figure"]
    want = vector()["packed"]["numbers"]
    overview = wire.packed(
        go.Figure(
            go.Heatmap(
                z=np.arange(12, dtype=np.uint8).reshape(3, 4),
                customdata=np.full((3, 4), 7, np.uint8),
            )
        ),
        "byte",
    )
    broken = copy.deepcopy(sent)
    broken["layout"]["meta"]["packed"]["data"] = "bm90IGRlZmxhdGU="
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto("about:blank")
            page.add_script_tag(content=source("fill.js"))
            shown = page.evaluate(
                """async ([sent, overview, broken]) => {
                  const rows = (z) => z && z.map((r) => Array.from(r, (v) => (v !== v ? null : v)));
                  const out = [];
                  for (const fig of [sent, overview, broken]) {
                    const gd = {data: fig.data, layout: fig.layout};  /* as drawn, unfilled */
                    await window.ta.fill.numbers(gd);
                    out.push(gd.data.map((t) => ({z: rows(t.z), customdata: rows(t.customdata),
                                                  x: t.x ?? null, y: t.y ?? null})));
                  }
                  return {out, fills: window.ta.fill.ok()};
                }""",
                [sent, json.loads(overview.to_json()), broken],
            )
        finally:
            browser.close()
    milli, byte, unreadable = shown["out"]
    for got, expected in zip(milli[:2], want, strict=True):
        expected = numbers(expected).astype(np.float32)  # the page stores float32, as the server
        assert hover_strings(np.array(got["z"], dtype=np.float64)) == hover_strings(expected)
        np.testing.assert_array_equal(np.array(got["z"], np.float64), expected)
        assert (got["x"], got["y"]) == (["a", "b", "c"], ["p", "q"])
    assert milli[2]["z"] is None  # the scatter is left alone
    assert byte[0]["z"] == np.arange(12).reshape(3, 4).tolist()
    assert byte[0]["customdata"] == [[7] * 4] * 3
    assert unreadable[0]["z"] is None and shown["fills"] is False


def test_the_overviews_margins_are_sized_to_its_own_labels(long_traces):
    """The overview names its heads and layers (ticktext), not its tiles' long category labels
    ("L0 · 12·word"): the left margin fixed for it is the layers' (it was ~100 px, which shrank
    the tiles on a phone)."""
    from viz.fit import fixed_margins

    fig = fixed_margins(A.overview_figure(long_traces[32], "encoder").to_plotly_json())
    assert max(len(y) for y in fig["data"][0]["y"]) > 10  # the categories are long
    assert fig["layout"]["margin"]["l"] == 40  # "L5": the figure's own minimum
    assert fig["layout"]["meta"]["fit_height"] == {"below": 560, "pad": 16}  # ui/js/figures.js
