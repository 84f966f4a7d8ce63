"""analysis.layer_steps on the language-model families model.load_lm opens: GPT-2, LLaMA (4 query
heads per key/value head, RoPE θ = 500000), Qwen2 (biases on W_Q, W_K, W_V) and Mistral (a
sliding window shorter than the text), tiny random checkpoints built offline with transformers'
own config classes (tests/test_lm.py).

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
from analysis.layer_lines import LLAMA_FILE, LLAMA_LINES, LLAMA_VERSION
from analysis.layer_steps import STEP_NAMES, step_count
from model import load_lm
from tests.test_layer_steps import in_chinese
from tests.test_lm import save_checkpoint

TOL = 1e-5
HF_TOL = 1e-4  # ours against transformers' eager model (tests/test_lm.py's bound)
CASES = ["gpt2", "llama", "qwen2", "mistral"]
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
    return seen


def net_width(hf) -> int:
    return hf.config.hidden_size


def real(enc, item):
    return enc["attention_mask"][item].bool().nonzero().squeeze(1)


# ---- the layer by hand ------------------------------------------------------------------------
def rms_norm(x, norm):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + norm.eps) * norm.weight


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


def check_by_hand(net, trace, enc, layer, item, steps):
    """Each step from the steps before it, with plain tensor formulas (see the module doc)."""
    cfg = net.config
    block = net.decoder.layers[layer]
    attn, ffn = block.self_attn, block.ffn
    rows = real(enc, item)
    norm_of = rms_norm if cfg.norm_kind == "rms" else layer_norm
    n_heads, d_k, n_rep = cfg.n_heads, cfg.d_head, cfg.n_heads // cfg.kv_heads
    t = len(rows)
    band = torch.ones(t, t, dtype=torch.bool).tril()
    if cfg.sliding_window:
        band &= ~torch.ones(t, t, dtype=torch.bool).tril(-cfg.sliding_window)
    got = {}
    for step in steps:
        name, g = step.name, got
        if name == "input":
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
        elif name.startswith("RoPE on "):
            expected = turned(g[f"{name[-1]} heads"], rows, cfg.rope_theta)
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
        elif name == "attention residual":
            expected = g["input"] + g["attention output"]
        elif name.endswith("before FFN"):
            expected = norm_of(g["attention residual"], block.add_norm3.norm)
        elif name == "FFN gate":
            expected = linear(steps[steps.index(step) - 1].value, ffn.w_gate)
        elif name == "FFN up":
            expected = linear(g[next(n for n in g if n.endswith("before FFN"))], ffn.w_up)
        elif name == "FFN hidden" and cfg.mlp == "gated":
            gate = g["FFN gate"]
            expected = gate / (1 + torch.exp(-gate)) * g["FFN up"]
        elif name == "FFN hidden":
            x = linear(g["LayerNorm before FFN"], ffn.fc1)
            expected = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        elif name == "FFN output":
            expected = linear(g["FFN hidden"], ffn.w_down if cfg.mlp == "gated" else ffn.fc2)
        elif name == "FFN residual":
            expected = g["attention residual"] + g["FFN output"]
        elif name == "output":
            expected = g["FFN residual"]
        else:  # pragma: no cover
            raise AssertionError(f"unexpected step {name!r}")
        torch.testing.assert_close(step.value, expected.float(), atol=TOL, rtol=0, msg=name)
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
                ref = seen[name][item][rows]
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
    assert names == LLAMA
    by = {s.name: s for s in steps}
    cfg = net.config
    h_kv = cfg.kv_heads
    assert (cfg.n_heads, h_kv) == (8, 2)  # 4 query heads per key/value head
    assert by["K heads"].shape == "[H_kv, T, d_k]" and by["K heads"].value.shape[0] == h_kv
    assert by["K heads repeated"].value.shape[0] == cfg.n_heads
    assert "g = h // 4" in by["K heads repeated"].formula
    assert by["RoPE on K"].shape == "[H_kv, T, d_k]"
    assert by["scores"].formula.startswith("RoPE(Q_h) RoPE(K_h)ᵀ")
    assert by["FFN hidden"].formula == "SiLU(G) ⊙ U"
    assert by["RMSNorm before attention"].formula == "RMSNorm(X)"
    biases = case == "qwen2"  # Qwen2: biases on W_Q, W_K, W_V only
    assert by["Q"].formula == "Q = RMSNorm(X) W_Q" + (" + b_Q" if biases else "")
    assert "b_O" not in by["attention output"].formula and "b_" not in by["FFN gate"].formula


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


def test_llama_steps_quote_transformers_own_lines_that_the_installed_file_holds():
    import transformers
    import transformers.models.llama.modeling_llama as llama

    lines = Path(llama.__file__).read_text(encoding="utf-8").splitlines()
    for name, quoted in LLAMA_LINES.items():
        assert name in STEP_NAMES
        for number, line in quoted:
            assert any(x.strip() == line for x in lines), (name, line)
            if transformers.__version__ == LLAMA_VERSION:  # the line numbers are this version's
                assert lines[number - 1].strip() == line, (name, number)


def test_every_lm_step_quotes_its_code_and_says_what_it_does_in_two_languages(lm):
    case, _, _, _, trace = lm
    for step in layer_steps(trace, "decoder", 0, 1):
        if case == "gpt2":
            assert re.fullmatch(r"seed 00[0-4]", step.seed), step.name
        else:
            assert re.fullmatch(rf"{LLAMA_FILE}:\d+(, \d+)*", step.seed), step.name
        assert step.seed_line.strip() and step.formula.strip()
        assert step.note.strip() and re.search(r"[\u4e00-\u9fff]", in_chinese(step.note))


def test_positions_off_turns_nothing_and_says_so(lm):
    case, net, _, enc, _ = lm
    if case == "gpt2":
        pytest.skip("GPT-2 adds learned positions; nothing is turned")
    trace = net.trace(enc["input_ids"], enc["attention_mask"], positions=False)
    by = {s.name: s for s in layer_steps(trace, "decoder", 0, 1)}
    torch.testing.assert_close(by["RoPE on Q"].value, by["Q heads"].value)
    assert "switched off" in by["RoPE on Q"].note


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
    from lang import speaking

    case, net, _, _, trace = lm
    steps = layer_steps(trace, "decoder", 1, 0)
    head = net.config.n_heads - 1  # the last query head: 7 in the grouped models
    for i, step in enumerate(steps):
        out = drawn(trace, (case, "tab"), layer=1, token=2, step=i, head=head)
        assert f'ta-step-chosen" data-step="{i}"' in out["layer_cards"]
        title = out["layer_plot"].layout.title.text
        assert step.name in title or step.name.replace("&", "&amp;") in title, (i, title)
        if step.shape.startswith("[H_kv"):  # query head 7 reads key/value head 7 // 4 = 1
            assert "key/value head 1, shared by query heads 4–7" in title
    cards = drawn(trace, (case, "tab"), layer=1)["layer_cards"]
    if case == "gpt2":
        assert "modeling_llama" not in cards and "seed 001:" in cards
        return
    assert "transformers&#x27; modeling_llama.py, line 297:" in cards or (
        "transformers' modeling_llama.py, line 297:" in cards
    )
    assert "self.input_layernorm(hidden_states)" in cards
    with speaking("zh-CN"):
        zh = drawn(trace, (case, "tab"), layer=1, step=8)
    assert "transformers 的 modeling_llama.py 第 297 行" in zh["layer_cards"]
    assert "对 Q 做 RoPE" in zh["layer_plot"].layout.title.text


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
