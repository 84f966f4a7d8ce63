"""analysis.layer_steps on the language-model families model.load_lm opens: GPT-2, LLaMA (4 query
heads per key/value head, RoPE θ = 500000), Qwen2 (biases on W_Q, W_K, W_V), Mistral (a
sliding window shorter than the text), Qwen3 (QK-norm, heads wider than d_model / H) and Gemma 3
(QK-norm, sandwich norms of gain 1 + w, a GELU-tanh gate, √d_model embeddings, sliding layers
with their own RoPE base around a full one), tiny random checkpoints built offline with
transformers' own config classes (tests/test_lm.py); and the real Gemma 3 270M where its package
is installed.

Two independent checks of every step: transformers' own modules of the same layer on the same
weights (their inputs and outputs caught by forward hooks: the norms, q/k/v_proj, o_proj, the
MLP's linears; the layer's input, output and attention weights from transformers' outputs), and
each step computed here by hand from the steps before it (RMSNorm, RoPE's angles from θ,
rotate_half, the key/value head a query head reads, softmax, SiLU written out). Texts are
left-padded, so RoPE turns the real tokens at positions other than 0 … T−1.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest
import torch

from analysis import layer_steps
from analysis.layer_lines import FAMILIES, family
from analysis.layer_steps import STEP_NAMES, step_count
from model import load_lm
from model.load_errors import SourceNotFound
from tests.test_layer_steps import in_chinese
from tests.test_lm import save_checkpoint

TOL = 1e-5
HF_TOL = 1e-4  # ours against transformers' eager model (tests/test_lm.py's bound)
REAL_RTOL = 1e-4  # of each value, on the real Gemma 3 (its stream reaches thousands)
CASES = ["gpt2", "llama", "qwen2", "mistral", "qwen3", "gemma3"]
TEXTS = ["The cat sat on the mat, and attention is all you need", "我喜欢你"]
LLAMA = [
    "input",
    "RMSNorm before attention",
    "Q",
    "K",
    "V",
    "Q heads",
    "K heads",
    "V heads",
    "RoPE on Q",
    "RoPE on K",
    "K heads repeated",
    "V heads repeated",
    "scores",
    "masked scores",
    "attention weights",
    "context",
    "concat",
    "attention output",
    "attention residual",
    "RMSNorm before FFN",
    "FFN gate",
    "FFN up",
    "FFN hidden",
    "FFN output",
    "FFN residual",
    "output",
]
QK_NORM = ["QK-norm on Q", "QK-norm on K"]
QWEN3 = LLAMA[:8] + QK_NORM + LLAMA[8:]
GEMMA3 = QWEN3[:20] + ["RMSNorm on attention output"] + QWEN3[20:26]
GEMMA3 += ["RMSNorm on FFN output"] + QWEN3[26:]
EXPECTED = {"qwen3": QWEN3, "gemma3": GEMMA3}


@pytest.fixture(scope="module", params=CASES)
def lm(request, tmp_path_factory):
    """(case, our model, transformers' model, the padded batch, our trace of it)."""
    folder = tmp_path_factory.mktemp(request.param)
    hf = save_checkpoint(folder, request.param)
    net, tok = load_lm(folder, device="cpu")
    tok.padding_side = "left"
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    trace = net.trace(enc["input_ids"], enc["attention_mask"])
    return request.param, net, hf, enc, trace


def hf_layer(hf, layer):
    base = hf.base_model
    return base.h[layer] if hasattr(base, "h") else base.layers[layer]


def hf_record(hf, enc, layer):
    """What transformers' own modules of one layer read and give, for the batch."""
    block, seen, hooks = hf_layer(hf, layer), {}, []

    def keep(name, what="out"):
        def hook(module, args, output):
            seen[name] = (args[0] if what == "in" else output).detach()

        return hook

    if hasattr(block, "attn"):  # GPT-2: c_attn gives Q, K, V side by side
        wanted = {
            "LayerNorm before attention": (block.ln_1, "out"),
            "QKV": (block.attn.c_attn, "out"),
            "concat": (block.attn.c_proj, "in"),
            "attention output": (block.attn.c_proj, "out"),
            "LayerNorm before FFN": (block.ln_2, "out"),
            "FFN hidden": (block.mlp.c_proj, "in"),
            "FFN output": (block.mlp.c_proj, "out"),
        }
    else:
        attn, mlp = block.self_attn, block.mlp
        wanted = {
            "RMSNorm before attention": (block.input_layernorm, "out"),
            "Q": (attn.q_proj, "out"),
            "K": (attn.k_proj, "out"),
            "V": (attn.v_proj, "out"),
            "concat": (attn.o_proj, "in"),
            "attention output": (attn.o_proj, "out"),
            "RMSNorm before FFN": (block.post_attention_layernorm, "out"),
            "FFN gate": (mlp.gate_proj, "out"),
            "FFN up": (mlp.up_proj, "out"),
            "FFN hidden": (mlp.down_proj, "in"),
            "FFN output": (mlp.down_proj, "out"),
        }
        if hasattr(attn, "q_norm"):  # QK-norm (Qwen3, Gemma 3)
            wanted.update(
                {"QK-norm on Q": (attn.q_norm, "out"), "QK-norm on K": (attn.k_norm, "out")}
            )
        if hasattr(block, "post_feedforward_layernorm"):  # Gemma 3's sandwich
            wanted.update(
                {
                    "RMSNorm on attention output": (block.post_attention_layernorm, "out"),
                    "RMSNorm before FFN": (block.pre_feedforward_layernorm, "out"),
                    "RMSNorm on FFN output": (block.post_feedforward_layernorm, "out"),
                }
            )
    for name, (module, what) in wanted.items():
        hooks.append(module.register_forward_hook(keep(name, what)))
    hooks.append(block.register_forward_hook(keep("output")))
    try:
        with torch.no_grad():
            ref = hf(**enc, output_attentions=True, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    seen["input"] = ref.hidden_states[layer]
    seen["attention weights"] = ref.attentions[layer]
    if isinstance(seen["output"], tuple):
        seen["output"] = seen["output"][0]
    if "QKV" in seen:
        seen["Q"], seen["K"], seen["V"] = seen.pop("QKV").split(net_width(hf), dim=-1)
    for name in QK_NORM:  # Qwen3 norms [B, T, heads, d_k] before the transpose, Gemma after
        if name in seen and hf.config.model_type == "qwen3":
            seen[name] = seen[name].transpose(1, 2)
    return seen


def net_width(hf) -> int:
    return hf.config.hidden_size


def real(enc, item):
    return enc["attention_mask"][item].bool().nonzero().squeeze(1)


# ---- the layer by hand ------------------------------------------------------------------------
def rms_norm(x, norm):
    """x / RMS(x) · g, g being w, or 1 + w in Gemma's norms (norm.offset)."""
    gain = 1 + norm.weight if norm.offset else norm.weight
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + norm.eps) * gain


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm(x, norm):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def linear(x, layer):
    out = x @ layer.weight.T
    return out if layer.bias is None else out + layer.bias


def softmax(x):
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def turned(x, positions, theta):
    """RoPE by hand: pair (i, i + d/2) of each row at position m turned by m · θ^(−2i/d)."""
    d = x.shape[-1]
    out = torch.empty_like(x)
    for i in range(d // 2):
        angle = positions.double() * theta ** (-2 * i / d)  # (T,)
        cos, sin = angle.cos().float(), angle.sin().float()
        a, b = x[..., i], x[..., i + d // 2]
        out[..., i] = a * cos - b * sin
        out[..., i + d // 2] = b * cos + a * sin
    return out


def near(step, rtol: float) -> float:
    """TOL, and ``rtol`` of the step's largest finite value."""
    finite = step.value[torch.isfinite(step.value)]
    return TOL + rtol * float(finite.abs().max())


def check_by_hand(net, trace, enc, layer, item, steps, rtol=0.0):
    """Each step from the steps before it, with plain tensor formulas (see the module doc), to
    TOL, and ``rtol`` of the step's largest value (a real model's stream reaches ten thousand:
    float32 holds it to about 0.004 there)."""
    cfg = net.config
    block = net.decoder.layers[layer]
    attn, ffn = block.self_attn, block.ffn
    rows = real(enc, item)
    norm_of = rms_norm if cfg.norm_kind == "rms" else layer_norm
    n_heads, d_k, n_rep = cfg.n_heads, cfg.d_head, cfg.n_heads // cfg.kv_heads
    t = len(rows)
    band = torch.ones(t, t, dtype=torch.bool).tril()
    local = cfg.is_local(layer)  # Gemma 3's sliding layers; Mistral's window is every layer's
    if cfg.sliding_window and (local or not cfg.layer_types):
        band &= ~torch.ones(t, t, dtype=torch.bool).tril(-cfg.sliding_window)
    theta = cfg.rope_local_theta if local else cfg.rope_theta
    got = {}
    for step in steps:
        name, g = step.name, got
        if name == "input" and layer == 0 and cfg.embed_scale:  # Gemma: √d_model embeddings
            ids = trace.input_ids[item][rows]
            expected = net.embedding.tok_emb.weight[ids] * math.sqrt(cfg.d_model)
        elif name == "input":
            expected = trace.hidden_states["decoder"][item, layer][rows]
        elif name.endswith("before attention"):
            expected = norm_of(g["input"], block.add_norm1.norm)
        elif name in ("Q", "K", "V"):
            expected = linear(steps[1].value, getattr(attn, f"w_{name.lower()}"))
        elif name.endswith(" heads"):
            m = g[name[0]]
            expected = torch.stack(
                [m[:, h * d_k : (h + 1) * d_k] for h in range(m.shape[1] // d_k)]
            )
        elif name.startswith("QK-norm on "):
            expected = rms_norm(g[f"{name[-1]} heads"], getattr(attn, f"{name[-1].lower()}_norm"))
        elif name.startswith("RoPE on "):
            m = name[-1]
            expected = turned(g.get(f"QK-norm on {m}", g[f"{m} heads"]), rows, theta)
        elif name.endswith(" heads repeated"):
            shared = g.get(f"RoPE on {name[0]}", g[f"{name[0]} heads"])
            expected = torch.stack([shared[h // n_rep] for h in range(n_heads)])
        elif name == "scores":
            q = g.get("RoPE on Q", g["Q heads"])
            k = g.get("K heads repeated", g.get("RoPE on K", g["K heads"]))
            expected = q @ k.transpose(1, 2) / math.sqrt(d_k)
        elif name == "masked scores":
            expected = torch.where(band, g["scores"], -math.inf)
        elif name == "attention weights":
            expected = softmax(g["masked scores"])
        elif name == "context":
            expected = g["attention weights"] @ g.get("V heads repeated", g["V heads"])
        elif name == "concat":
            expected = torch.cat(list(g["context"]), dim=-1)
        elif name == "attention output":
            expected = linear(g["concat"], attn.w_o)
        elif name == "RMSNorm on attention output":
            expected = rms_norm(g["attention output"], block.add_norm1.post)
        elif name == "attention residual":
            expected = g["input"] + g.get("RMSNorm on attention output", g["attention output"])
        elif name.endswith("before FFN"):
            expected = norm_of(g["attention residual"], block.add_norm3.norm)
        elif name == "FFN gate":
            expected = linear(steps[steps.index(step) - 1].value, ffn.w_gate)
        elif name == "FFN up":
            expected = linear(g[next(n for n in g if n.endswith("before FFN"))], ffn.w_up)
        elif name == "FFN hidden" and cfg.mlp == "gated":
            gate = g["FFN gate"]
            act = (
                gelu_tanh(gate) if cfg.activation == "gelu_tanh" else gate / (1 + torch.exp(-gate))
            )
            expected = act * g["FFN up"]
        elif name == "FFN hidden":
            expected = gelu_tanh(linear(g["LayerNorm before FFN"], ffn.fc1))
        elif name == "FFN output":
            expected = linear(g["FFN hidden"], ffn.w_down if cfg.mlp == "gated" else ffn.fc2)
        elif name == "RMSNorm on FFN output":
            expected = rms_norm(g["FFN output"], block.add_norm3.post)
        elif name == "FFN residual":
            expected = g["attention residual"] + g.get("RMSNorm on FFN output", g["FFN output"])
        elif name == "output":  # the trace's next layer as well as the residual just computed
            torch.testing.assert_close(g["FFN residual"], step.value, atol=near(step, rtol), rtol=0)
            expected = trace.hidden_states["decoder"][item, layer + 1][rows]
        else:  # pragma: no cover
            raise AssertionError(f"unexpected step {name!r}")
        torch.testing.assert_close(
            step.value, expected.float(), atol=near(step, rtol), rtol=0, msg=name
        )
        got[name] = step.value


# ---- the tests --------------------------------------------------------------------------------
def test_every_step_follows_from_the_steps_before_it(lm):
    case, net, _, enc, trace = lm
    for layer in (0, net.config.n_layers - 1):
        for item in (0, 1):  # item 1 is left-padded: its real tokens sit at positions ≥ 1
            steps = layer_steps(trace, "decoder", layer, item)
            check_by_hand(net, trace, enc, layer, item, steps)


def test_the_steps_equal_what_transformers_own_modules_compute(lm):
    """Every step transformers' layer has a tensor for: the layer's input and output, the norms,
    Q, K, V, the concat W_O reads, its output, the MLP's gate, up, hidden and output, and the
    attention weights, on the same weights and the same padded batch."""
    case, net, hf, enc, trace = lm
    for layer in range(net.config.n_layers):
        seen = hf_record(hf, enc, layer)
        for item in (0, 1):
            rows = real(enc, item)
            steps = {s.name: s.value for s in layer_steps(trace, "decoder", layer, item)}
            shared = sorted(set(seen) & set(steps) - {"attention weights"})
            assert len(shared) >= 9, (case, shared)
            for name in shared:
                ref = seen[name][item]  # [T, …], or [heads, T, d_k] (QK-norm)
                ref = ref[:, rows] if name in QK_NORM else ref[rows]
                torch.testing.assert_close(steps[name], ref, atol=HF_TOL, rtol=0, msg=name)
            ref = seen["attention weights"][item][:, rows][:, :, rows]
            torch.testing.assert_close(steps["attention weights"], ref, atol=HF_TOL, rtol=0)


def test_a_llama_layer_walks_rmsnorm_rope_grouped_heads_and_the_gated_mlp_in_order(lm):
    case, net, _, _, trace = lm
    steps = layer_steps(trace, "decoder", 1, 0)
    names = [s.name for s in steps]
    assert len(steps) == step_count(net.config, "decoder")
    where = [STEP_NAMES.index(n) for n in names]
    assert where == sorted(where)  # a subsequence of the one documented list
    if case == "gpt2":
        assert "RMSNorm before attention" not in names and "RoPE on Q" not in names
        assert names[1] == "LayerNorm before attention" and steps[2].seed == "seed 000"
        return
    assert names == EXPECTED.get(case, LLAMA)
    by = {s.name: s for s in steps}
    cfg = net.config
    h_kv, group = cfg.kv_heads, cfg.n_heads // cfg.kv_heads
    assert (cfg.n_heads, h_kv) == ((4, 2) if case == "gemma3" else (8, 2))
    assert by["K heads"].shape == "[H_kv, T, d_k]" and by["K heads"].value.shape[0] == h_kv
    assert by["K heads repeated"].value.shape[0] == cfg.n_heads
    assert f"g = h // {group}" in by["K heads repeated"].formula
    assert by["RoPE on K"].shape == "[H_kv, T, d_k]"
    assert by["scores"].formula.startswith("RoPE(Q_h) RoPE(K_h)ᵀ")
    act = "GELU_tanh" if case == "gemma3" else "SiLU"
    assert by["FFN hidden"].formula == f"{act}(G) ⊙ U"
    assert by["RMSNorm before attention"].formula == "RMSNorm(X)"
    if case in EXPECTED:  # QK-norm reads each head, RoPE reads QK-norm's output
        assert by["QK-norm on K"].shape == "[H_kv, T, d_k]" and by["RoPE on Q"].reads == (
            "QK-norm on Q",
        )
        assert by["Q"].shape == "[T, H·d_k]" and by["concat"].value.shape[-1] == cfg.d_attn
        gain = "(1 + w_q)" if case == "gemma3" else "g_q"
        assert f"⊙ {gain}" in by["QK-norm on Q"].formula
    if case == "gemma3":  # the sandwich: each sublayer's output normed before it is added
        assert by["attention residual"].reads == ("input", "RMSNorm on attention output")
        assert by["attention residual"].formula.startswith("X₁ = X + RMSNorm_post(")
        assert by["FFN residual"].reads == ("attention residual", "RMSNorm on FFN output")
        assert "1 + w" in by["RMSNorm before attention"].note
    biases = case == "qwen2"  # Qwen2: biases on W_Q, W_K, W_V only
    assert by["Q"].formula == "Q = RMSNorm(X) W_Q" + (" + b_Q" if biases else "")
    assert "b_O" not in by["attention output"].formula and "b_" not in by["FFN gate"].formula


def test_gemmas_local_layers_band_their_keys_and_turn_by_their_own_base(lm):
    """Gemma 3's layers 0 and 2 are local (window 3, RoPE base 10000), layer 1 full (base 10⁶):
    each layer's masked scores hide what Trace.layer_mask hides, no more, and each says so."""
    case, net, _, enc, trace = lm
    if case != "gemma3":
        pytest.skip("Gemma 3 only")
    rows = real(enc, 0)
    for layer, kind, base in ((0, "sliding (local)", "10000"), (1, "full (global)", "1000000")):
        by = {s.name: s for s in layer_steps(trace, "decoder", layer, 0)}
        allowed = trace.layer_mask("decoder", layer)[0][rows][:, rows]  # (T, T)
        masked = by["masked scores"].value  # (H, T, T)
        assert torch.equal(torch.isfinite(masked), allowed.expand_as(masked))
        assert (by["attention weights"].value[:, ~allowed] == 0).all()
        assert kind in by["masked scores"].note and kind in by["RoPE on Q"].note
        assert f"θ = {base}" in by["RoPE on K"].note and f"{base}^" in by["RoPE on Q"].formula
        zh = in_chinese(by["masked scores"].note)
        assert ("滑动窗口" in zh) == (layer == 0) and ("全局层" in zh) == (layer == 1)
    far = torch.ones(len(rows), len(rows), dtype=torch.bool).tril(-3)
    assert far.any() and not trace.layer_mask("decoder", 0)[0][rows][:, rows][far].any()


def test_gemmas_first_layer_reads_the_embeddings_times_root_d_model(lm):
    case, net, _, enc, trace = lm
    if case != "gemma3":
        pytest.skip("Gemma 3 only")
    first = layer_steps(trace, "decoder", 0, 0)[0]
    assert "√d_model = 8.00" in first.note and "√`d_model` = 8.00" in in_chinese(first.note)
    assert first.seed == "modeling_gemma3.py:100, 537" and "embed_scale" in first.seed_line
    assert layer_steps(trace, "decoder", 1, 0)[0].seed == "modeling_gemma3.py:537"


def test_the_sliding_window_hides_keys_too_far_back(lm):
    case, net, _, _, trace = lm
    if case != "mistral":
        pytest.skip("only Mistral has a sliding window")
    window = net.config.sliding_window
    by = {s.name: s for s in layer_steps(trace, "decoder", 0, 0)}
    masked = by["masked scores"].value  # (H, T, T)
    t = masked.shape[-1]
    assert t > window
    far = torch.ones(t, t, dtype=torch.bool).tril(-window)
    assert torch.isinf(masked[:, far]).all() and (by["attention weights"].value[:, far] == 0).all()
    assert f"sliding window of {window}" in by["masked scores"].note
    assert f"滑动窗口 {window}" in in_chinese(by["masked scores"].note)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_steps_quote_transformers_own_lines_that_the_installed_file_holds(name):
    import importlib

    import transformers

    file, version, table = FAMILIES[name]
    module = importlib.import_module(f"transformers.models.{name}.{file.removesuffix('.py')}")
    lines = Path(module.__file__).read_text(encoding="utf-8").splitlines()
    quoted = [(step, found) for step, found in table.items()]
    if name == "gemma3":
        from analysis.layer_lines import GEMMA3_EMBED

        quoted.append(("input", (GEMMA3_EMBED,)))
    for step, found in quoted:
        assert step in STEP_NAMES
        for number, line in found:
            assert any(x.strip() == line for x in lines), (step, line)
            if transformers.__version__ == version:  # the line numbers are this version's
                assert lines[number - 1].strip() == line, (step, number)


def test_every_lm_step_quotes_its_code_and_says_what_it_does_in_two_languages(lm):
    case, net, _, _, trace = lm
    file = FAMILIES[family(net.config)][0]
    for step in layer_steps(trace, "decoder", 0, 1):
        if case == "gpt2":
            assert re.fullmatch(r"seed 00[0-4]", step.seed), step.name
        else:
            assert re.fullmatch(rf"{file}:\d+(, \d+)*", step.seed), step.name
        assert step.seed_line.strip() and step.formula.strip()
        assert step.note.strip() and re.search(r"[\u4e00-\u9fff]", in_chinese(step.note))


def test_positions_off_turns_nothing_and_says_so(lm):
    case, net, _, enc, _ = lm
    if case == "gpt2":
        pytest.skip("GPT-2 adds learned positions; nothing is turned")
    trace = net.trace(enc["input_ids"], enc["attention_mask"], positions=False)
    by = {s.name: s for s in layer_steps(trace, "decoder", 0, 1)}
    turned = by["RoPE on Q"]  # it reads the heads, or their QK-norm
    torch.testing.assert_close(turned.value, by[turned.reads[0]].value)
    assert "switched off" in turned.note


def test_a_llama_layer_at_512_tokens_is_fast_and_returns_full_tensors(lm):
    case, net, _, _, _ = lm
    if case != "llama":
        pytest.skip("one family is enough for the size (GPT-2's tiny checkpoint reads 64)")
    ids = torch.randint(5, 300, (1, 512))
    trace = net.trace(ids)
    layer_steps(trace, "decoder", 0)
    start = time.perf_counter()
    by = {s.name: s.value for s in layer_steps(trace, "decoder", 1)}
    assert time.perf_counter() - start < 3.0
    assert by["scores"].shape == (8, 512, 512) and by["K heads"].shape == (2, 512, 8)


# ---- the Inside-a-layer tab on these models ----------------------------------------------------
def drawn(trace, key, **selection):
    """The tab's two outputs for one selection, drawn in-process as the server draws them."""
    from types import SimpleNamespace

    from ui.state import Selection
    from ui.tabs.base import View
    from ui.tabs.layer import makers

    view = View(SimpleNamespace(trace=trace, key=key), Selection(stack="decoder", **selection))
    return {name: make() for name, make in makers(view).items()}


def test_the_tab_draws_every_step_and_cites_llamas_lines_in_both_languages(lm):
    from lang import speaking, tr

    case, net, _, _, trace = lm
    steps = layer_steps(trace, "decoder", 1, 0)
    head = net.config.n_heads - 1  # the last query head: 7 in the grouped models, 3 in Gemma's
    group = net.config.n_heads // net.config.kv_heads
    for i, step in enumerate(steps):
        out = drawn(trace, (case, "tab"), layer=1, token=2, step=i, head=head)
        assert f'ta-step-chosen" data-step="{i}"' in out["layer_cards"]
        title = out["layer_plot"].layout.title.text
        assert step.name in title or step.name.replace("&", "&amp;") in title, (i, title)
        if step.shape.startswith("[H_kv"):  # query head 7 reads key/value head 7 // 4 = 1
            span = f"{head - group + 1}–{head}"
            assert f"key/value head {head // group}, shared by query heads {span}" in title
    cards = drawn(trace, (case, "tab"), layer=1)["layer_cards"]
    if case == "gpt2":
        assert "modeling_llama" not in cards and "seed 001:" in cards
        return
    file, _, table = FAMILIES[family(net.config)]
    line = table["RMSNorm before attention"][0][0]
    assert f"transformers&#x27; {file}, line {line}" in cards or (
        f"transformers' {file}, line {line}" in cards
    )
    assert "self.input_layernorm(hidden_states)" in cards
    with speaking("zh-CN"):
        zh = drawn(trace, (case, "tab"), layer=1, step=8)
        name = tr(steps[8].name)
    assert f"transformers 的 {file} 第 {line}" in zh["layer_cards"]
    assert name in zh["layer_plot"].layout.title.text
    assert name == ("对 Q 做 QK 归一化" if case in EXPECTED else "对 Q 做 RoPE")
    if case == "gemma3":  # the sandwich's second norms and QK-norm, said in Chinese
        assert "三明治" in zh["layer_cards"] and "注意力输出上的 RMSNorm" in zh["layer_cards"]
    from tests.test_chinese_page import NAMES, english_words, formulas, prose

    # no English on the Chinese cards but names, the library and its file (modeling_….py), and
    # the text's own words (the token's label)
    allowed = NAMES | set(re.findall(r"[A-Za-z]+", TEXTS[0]))
    assert set(english_words(prose(zh["layer_cards"]), allowed)) <= {"transformers", "py"}
    assert not formulas(zh["layer_cards"])  # no words inside a formula


def test_the_tab_at_512_tokens_draws_each_step_within_a_second(lm):
    case, net, _, _, _ = lm
    if case != "llama":
        pytest.skip("one family is enough for the size")
    trace = net.trace(torch.randint(5, 300, (1, 512)))
    steps = layer_steps(trace, "decoder", 1)
    drawn(trace, ("512", case), layer=1)  # the layer's steps, once
    for i in range(len(steps)):
        start = time.perf_counter()
        out = drawn(trace, ("512", case), layer=1, token=500, step=i)
        out["layer_plot"].to_json()
        assert time.perf_counter() - start < 1.0, steps[i].name


# ---- the real Gemma 3 270M ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def gemma():
    """The real Gemma 3 270M from its package, loaded once for this file (skipped where the
    package is not installed)."""
    try:
        return load_lm("gemma-3-270m", device="cpu")
    except SourceNotFound as missing:
        pytest.skip(str(missing))


@pytest.mark.slow
def test_the_real_gemma_3_walks_a_local_and_a_global_layer_to_its_next_hidden_state(gemma):
    """Layer 0 (sliding, window 512) and layer 5 (full) of Gemma 3 270M on a Chinese and an
    English text: every step follows from those before it, and the walk ends at the trace's
    next hidden state."""
    net, tok = gemma
    cfg = net.config
    assert not cfg.is_local(5) and cfg.is_local(0) and cfg.d_attn != cfg.d_model
    tok.padding_side = "left"
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    trace = net.trace(enc["input_ids"], enc["attention_mask"])
    for layer in (0, 5):
        for item in (0, 1):
            steps = layer_steps(trace, "decoder", layer, item)
            assert [s.name for s in steps] == GEMMA3
            check_by_hand(net, trace, enc, layer, item, steps, rtol=REAL_RTOL)
            stored = trace.hidden_states["decoder"][item, layer + 1][real(enc, item)]
            torch.testing.assert_close(
                steps[-1].value, stored, atol=near(steps[-1], REAL_RTOL), rtol=0
            )
        masked = next(s for s in steps if s.name == "masked scores")
        assert ("sliding (local)" if layer == 0 else "full (global)") in masked.note
