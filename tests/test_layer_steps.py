"""analysis.layer_steps: one layer taken apart, each step following from the one before it.

Every step is checked against a computation written here with plain tensor operations on the
layer's weights (the LayerNorm, softmax, GELU formulas by hand, heads cut by column slices), from
the values of the earlier steps the function returned; the first step is the trace's stored input
of the layer, "attention weights" the trace's weights and the last step its stored output.
"""

from __future__ import annotations

import math
import pickle
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import lang
from analysis import layer_steps
from analysis.layer_lines import seed_order
from analysis.layer_steps import STEP_NAMES, Step, step_count, unsupported
from model import PRESETS, Transformer, load_trained

TOL = 1e-5
ATTENTION = [
    "Q",
    "K",
    "V",
    "Q heads",
    "K heads",
    "V heads",
    "scores",
    "masked scores",
    "attention weights",
    "context",
    "concat",
    "attention output",
]
FFN_POST = ["FFN hidden", "FFN output", "FFN residual", "LayerNorm after FFN", "output"]
FFN_PRE = ["LayerNorm before FFN", "FFN hidden", "FFN output", "FFN residual", "output"]
POST_ENCODER = ["input", *ATTENTION, "attention residual", "LayerNorm after attention", *FFN_POST]
PRE_ENCODER = ["input", "LayerNorm before attention", *ATTENTION, "attention residual", *FFN_PRE]
POST_DECODER = [
    *POST_ENCODER[:15],  # input … LayerNorm after attention
    "cross-attention output",
    "cross-attention residual",
    "LayerNorm after cross-attention",
    *FFN_POST,
]
POST_CROSS = [
    "input",
    "self-attention output",
    "self-attention residual",
    "LayerNorm after self-attention",
    *ATTENTION,
    "attention residual",
    "LayerNorm after attention",
    *FFN_POST,
]
PRE_DECODER = [
    *PRE_ENCODER[:15],  # input … attention residual
    "LayerNorm before cross-attention",
    "cross-attention output",
    "cross-attention residual",
    *FFN_PRE,
]
PRE_CROSS = [
    "input",
    "LayerNorm before self-attention",
    "self-attention output",
    "self-attention residual",
    "LayerNorm before attention",
    *ATTENTION,
    "attention residual",
    *FFN_PRE,
]

# Two texts of different lengths: the shorter one is padded (on each side of an encoder-decoder).
TEXTS = {
    "char": (["time flies like an arrow", "I have a dog"], ["le temps", "un chien noir"]),
    "dates": (["22 November 2026", "2026/11/22"], ["2026-11-22", "2026-1"]),
    "induction": (["abc abc", "hello world hello world"], None),
    "roles": (["Tom helps Ann.", "我喜欢你"], None),
}
MODELS = [*PRESETS, "bert", "dates", "induction", "roles"]


def in_chinese(note: lang.Msg) -> str:
    """A step's note as a Chinese page's card says it."""
    with lang.speaking("zh-CN"):
        return lang.tr(note)


def trace_texts(net, texts, targets=None, **options):
    enc = net.tokenizer(texts, padding=True, return_tensors="pt")
    if net.config.arch == "encoder-decoder":
        tgt = net.tokenizer(targets, padding=True, return_tensors="pt")
        options.update(tgt_ids=tgt["input_ids"], tgt_attention_mask=tgt["attention_mask"])
    return net.trace(enc["input_ids"], attention_mask=enc["attention_mask"], **options)


@pytest.fixture(scope="module")
def traced(request):
    """name -> (net, trace of a padded batch of two texts)."""
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            if name == "bert":
                net, _ = request.getfixturevalue("bert")
                texts = (["A Titan RTX has 24GB of VRAM", "I have a dog"], None)
            elif name in TEXTS:
                net, texts = load_trained(name), TEXTS[name]
            else:
                net, texts = Transformer(PRESETS[name]), TEXTS["char"]
            cache[name] = net, trace_texts(net, *texts)
        return cache[name]

    return get


# ---- the layer by hand ------------------------------------------------------------------------
def layer_norm(x, norm):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + norm.eps) * norm.weight + norm.bias


def linear(x, layer, rows=slice(None)):
    out = x @ layer.weight[rows].T
    return out if layer.bias is None else out + layer.bias[rows]


def activation(x, name):
    if name == "relu":
        return torch.clamp(x, min=0)
    if name == "gelu":
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    e = torch.exp(x - x.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def heads_of(m, n_heads):
    d_k = m.shape[-1] // n_heads
    return torch.stack([m[:, h * d_k : (h + 1) * d_k] for h in range(n_heads)])  # (H, T, d_k)


def multi_head(attn, x_q, x_kv, allowed):
    """MultiHead(x_q, x_kv, x_kv) head by head: softmax(q kᵀ/√d_k, hidden = -inf) v, concat, W_O."""
    n_heads = attn.n_heads
    d_k = x_q.shape[-1] // n_heads
    out = []
    for h in range(n_heads):
        rows = slice(h * d_k, (h + 1) * d_k)
        q, k, v = (
            linear(x, w, rows) for x, w in ((x_q, attn.w_q), (x_kv, attn.w_k), (x_kv, attn.w_v))
        )
        scores = torch.where(allowed, q @ k.T / math.sqrt(d_k), -math.inf)
        out.append(softmax(scores) @ v)
    return linear(torch.cat(out, -1), attn.w_o)


def real(mask, item):
    return mask[item].bool().nonzero().squeeze(1)


def check_every_step(net, tr, stack, layer, item, steps):
    """Each step against its computation by hand from the steps before it (see module doc)."""
    cfg = tr.config
    home = "decoder" if stack == "cross" else stack
    module = (net.encoder if home == "encoder" else net.decoder).layers[layer]
    src_mask = tr.attention_mask
    tgt_mask = tr.tgt_attention_mask if tr.tgt_attention_mask is not None else src_mask
    rows = real(src_mask if home == "encoder" else tgt_mask, item)
    src = real(src_mask, item)
    memory = tr.outputs["encoder"][item][src] if "cross" in tr.masks else None
    sublayers = {"self": (module.self_attn, module.add_norm1.norm)}  # (attention, its norm)
    if getattr(module, "cross_attn", None) is not None:
        sublayers["cross"] = (module.cross_attn, module.add_norm2.norm)
    label_kind = {"attention": "cross" if stack == "cross" else "self"}
    label_kind.update({"self-attention": "self", "cross-attention": "cross"})
    ffn = module.ffn
    ffn_norm = (module.add_norm3 if home == "decoder" else module.add_norm2).norm

    def allowed(kind):
        cols = src if kind == "cross" else rows
        mask_name = "cross" if kind == "cross" else home
        return tr.masks[mask_name][item][rows][:, cols]

    got: dict[str, torch.Tensor] = {}
    stream = sub_in = None
    n_heads = cfg.n_heads
    for i, step in enumerate(steps):
        name, value = step.name, step.value
        kind = label_kind.get(name.removesuffix(" output").removesuffix(" residual"))
        attn = sublayers[kind][0] if kind else None
        detailed = sublayers[label_kind["attention"]][0]
        kv = memory if label_kind["attention"] == "cross" else sub_in
        if name == "input":
            expected = tr.hidden_states[home][item, layer][rows]
        elif name.startswith("LayerNorm before "):
            label = name.removeprefix("LayerNorm before ")
            norm = ffn_norm if label == "FFN" else sublayers[label_kind[label]][1]
            expected = layer_norm(stream, norm)
        elif name in ("Q", "K", "V"):
            expected = linear(sub_in if name == "Q" else kv, getattr(detailed, f"w_{name.lower()}"))
        elif name.endswith(" heads"):
            expected = heads_of(got[name[0]], n_heads)
        elif name == "scores":
            d_k = cfg.d_model // n_heads
            expected = got["Q heads"] @ got["K heads"].transpose(1, 2) / math.sqrt(d_k)
        elif name == "masked scores":
            expected = torch.where(allowed(label_kind["attention"]), got["scores"], -math.inf)
        elif name == "attention weights":
            expected = softmax(got["masked scores"])
        elif name == "context":
            expected = got["attention weights"] @ got["V heads"]
        elif name == "concat":
            context = got["context"]  # (H, T, d_k)
            keep = tr.head_mask.get("cross" if label_kind["attention"] == "cross" else home)
            if keep is not None:
                m = keep[layer][:, None, None]
                mean = context.mean(1, keepdim=True) if tr.ablation == "mean" else 0
                context = context * m + mean * (1 - m)
            expected = torch.cat(list(context), dim=-1)
        elif name == "attention output":
            expected = linear(got["concat"], detailed.w_o)
        elif name.endswith("-attention output"):
            expected = multi_head(
                attn, sub_in, memory if kind == "cross" else sub_in, allowed(kind)
            )
        elif name == "FFN hidden":
            expected = activation(linear(sub_in, ffn.fc1), cfg.activation)
        elif name == "FFN output":
            expected = linear(got["FFN hidden"], ffn.fc2)
        elif name.endswith(" residual"):
            expected = stream + got[name.replace("residual", "output")]
        elif name.startswith("LayerNorm after "):
            label = name.removeprefix("LayerNorm after ")
            norm = ffn_norm if label == "FFN" else sublayers[label_kind[label]][1]
            expected = layer_norm(got[f"{label} residual"], norm)
        elif name == "output":
            expected = steps[i - 1].value
            stored = tr.hidden_states[home][item, layer + 1][rows]
            torch.testing.assert_close(value, stored, atol=TOL, rtol=0)
        else:  # pragma: no cover
            raise AssertionError(f"unexpected step {name!r}")
        torch.testing.assert_close(value, expected.detach().float(), atol=TOL, rtol=0, msg=name)
        got[name] = value
        # what the next sublayer reads: the stream, or its LayerNorm (pre-norm)
        if (
            name == "input"
            or name.startswith("LayerNorm after ")
            or (cfg.norm == "pre" and name.endswith(" residual"))
        ):
            stream = sub_in = value
        elif name.startswith("LayerNorm before "):
            sub_in = value
    assert steps[-1].name == "output"


# ---- the tests --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_every_step_follows_from_the_steps_before_it(traced, name):
    """BERT, every preset and the three trained models; every stack, first and last layer, both
    texts of a padded batch (one of them padded)."""
    net, tr = traced(name)
    n_layers = net.config.n_layers
    for stack in tr.stacks:
        for layer in (0, n_layers - 1):
            for item in (0, 1):
                steps = layer_steps(tr, stack, layer, item)
                check_every_step(net, tr, stack, layer, item, steps)


@pytest.mark.parametrize("name", MODELS)
def test_input_attention_weights_and_output_are_the_traces(traced, name):
    net, tr = traced(name)
    for stack in tr.stacks:
        home = "decoder" if stack == "cross" else stack
        queries = tr.attention_mask
        if home == "decoder" and tr.tgt_attention_mask is not None:
            queries = tr.tgt_attention_mask
        keys = queries if stack != "cross" else tr.attention_mask
        for layer in range(net.config.n_layers):
            steps = {s.name: s.value for s in layer_steps(tr, stack, layer, item=1)}
            q, k = real(queries, 1), real(keys, 1)
            hidden = tr.hidden_states[home][1]
            torch.testing.assert_close(steps["input"], hidden[layer][q], atol=TOL, rtol=0)
            torch.testing.assert_close(steps["output"], hidden[layer + 1][q], atol=TOL, rtol=0)
            weights = tr.attentions[stack][1, layer][:, q][:, :, k]  # (H, T, S)
            torch.testing.assert_close(steps["attention weights"], weights, atol=TOL, rtol=0)


def test_the_steps_are_what_the_models_own_modules_computed(traced):
    """The walk names the sites the layer passed (Replay.walk: the layer run with
    Sites(read=…)), and computes nothing itself; a forward pass returns only what a trace
    replays, and no module takes a "record" any more."""
    import inspect

    from model.attention import MultiHeadAttention, scaled_dot_product_attention
    from model.gated_mlp import GatedFeedForward
    from model.layers import AddNorm, DecoderLayer, EncoderLayer, PositionwiseFeedForward

    net, tr = traced("seed001-prenorm")
    layer = net.decoder.layers[0]
    x = tr.hidden_states["decoder"][:, 0]  # (B, T, d_model)
    _, plain = layer(x, tr.masks["decoder"], tr.outputs["encoder"], tr.masks["cross"])
    assert set(plain) == {"self", "attn_out", "cross", "cross_out", "mlp_out"}
    assert set(plain["self"]) == {"q", "k", "v", "scores", "pattern"}
    read = ["attn.hook_pattern", "attn.hook_attn_scores", "hook_cross_attn_out", "mlp.hook_post"]
    walked = net.replay().walk(tr, "decoder", 0, 1, [*read, "hook_resid_post"])
    steps = {s.name: s.value for s in layer_steps(tr, "decoder", 0, 1)}
    for name, value in (
        ("attention weights", walked["sites"]["attn.hook_pattern"]),
        ("masked scores", walked["sites"]["attn.hook_attn_scores"]),
        ("context", walked["contexts"]["attn."]),
        ("cross-attention output", walked["sites"]["hook_cross_attn_out"]),
        ("FFN hidden", walked["sites"]["mlp.hook_post"]),
        ("output", walked["sites"]["hook_resid_post"]),
    ):
        assert torch.equal(steps[name], value.float()), name
    source = (Path(__file__).parents[1] / "analysis" / "layer_steps.py").read_text()
    for code in (".softmax(", " @ ", "functional"):  # no second attention formula
        assert code not in source, code
    for fn in (
        scaled_dot_product_attention,
        MultiHeadAttention.project,
        MultiHeadAttention.forward,
        AddNorm.forward,
        PositionwiseFeedForward.forward,
        GatedFeedForward.forward,
        EncoderLayer.forward,
        DecoderLayer.forward,
    ):
        assert "record" not in inspect.signature(fn).parameters, fn.__qualname__


def test_names_come_from_one_list_in_its_order(traced):
    assert len(set(STEP_NAMES)) == len(STEP_NAMES)
    assert STEP_NAMES[0] == "input" and STEP_NAMES[-1] == "output"
    for name in ("seed000-tiny", "seed001-prenorm", "seed004-encoder", "bert"):
        _, tr = traced(name)
        for stack in tr.stacks:
            names = [s.name for s in layer_steps(tr, stack)]
            where = [STEP_NAMES.index(n) for n in names]
            assert where == sorted(where), (name, stack)
            assert all(isinstance(s, Step) for s in layer_steps(tr, stack))


def test_post_norm_layers_add_then_normalise(traced):
    """The paper, seed 002, BERT: X → attention → X + · → LayerNorm → FFN → + → LayerNorm."""
    for name in ("seed002-encoder", "bert"):
        _, tr = traced(name)
        assert [s.name for s in layer_steps(tr, "encoder", 1)] == POST_ENCODER
    steps = {s.name: s for s in layer_steps(traced("seed002-encoder")[1])}
    assert steps["LayerNorm after attention"].formula == "X₁ = LayerNorm(X + MultiHead(X))"
    assert steps["Q"].formula == "Q = X W_Q + b_Q"
    assert steps["output"].formula == "X_out = LayerNorm(X₁ + FFN(X₁))"


def test_pre_norm_layers_normalise_before_each_sublayer_and_add_last(traced):
    """Seed 001, seed 004, the roles and induction models: X → LN → attention → X + · → …"""
    for name, stack in (("seed004-encoder", "encoder"), ("roles", "encoder")):
        _, tr = traced(name)
        assert [s.name for s in layer_steps(tr, stack, 1)] == PRE_ENCODER
    for name in ("seed001-decoder", "induction"):
        _, tr = traced(name)
        assert [s.name for s in layer_steps(tr, "decoder", 1)] == PRE_ENCODER
    steps = {s.name: s for s in layer_steps(traced("seed004-encoder")[1])}
    assert steps["Q"].formula == "Q = LN(X) W_Q + b_Q"
    assert steps["attention residual"].formula == "X₁ = X + MultiHead(LN(X))"
    assert steps["FFN hidden"].formula == "GELU(LN(X₁) W_1 + b_1)"


def test_a_decoder_layer_takes_apart_the_attention_its_stack_names(traced):
    """Stack "decoder" takes the masked self-attention apart and shows cross-attention as one
    sublayer; stack "cross" the other way round. Both walk the whole decoder layer."""
    for name in ("seed000-tiny", "seed003-encdec", "dates"):
        _, tr = traced(name)
        assert [s.name for s in layer_steps(tr, "decoder", 1)] == POST_DECODER
        assert [s.name for s in layer_steps(tr, "cross", 1)] == POST_CROSS
    _, tr = traced("seed001-prenorm")
    assert [s.name for s in layer_steps(tr, "decoder", 1)] == PRE_DECODER
    assert [s.name for s in layer_steps(tr, "cross", 1)] == PRE_CROSS
    steps = {s.name: s for s in layer_steps(traced("seed000-tiny")[1], "cross")}
    assert steps["K"].formula == "K = C W_K + b_K" and steps["K"].reads == ()
    assert steps["Q"].formula == "Q = X₁ W_Q + b_Q"
    assert steps["self-attention output"].formula == "MaskedMultiHead(X)"


def test_cross_attention_keys_and_values_come_from_the_encoder_output(traced):
    net, tr = traced("dates")
    for item in (0, 1):
        steps = {s.name: s.value for s in layer_steps(tr, "cross", 1, item)}
        src = real(tr.attention_mask, item)
        memory = tr.outputs["encoder"][item][src]  # C: (S, d_model)
        attn = net.decoder.layers[1].cross_attn
        torch.testing.assert_close(steps["K"], linear(memory, attn.w_k), atol=TOL, rtol=0)
        torch.testing.assert_close(steps["V"], linear(memory, attn.w_v), atol=TOL, rtol=0)
        n_tgt = int(tr.tgt_attention_mask[item].sum())
        assert steps["scores"].shape == (net.config.n_heads, n_tgt, len(src))


def test_the_causal_mask_hides_the_future_with_minus_infinity(traced):
    _, tr = traced("induction")
    steps = {s.name: s for s in layer_steps(tr, "decoder", 0, item=1)}
    masked = steps["masked scores"].value  # (H, T, T)
    t = masked.shape[-1]
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    assert torch.isinf(masked[:, future]).all() and (masked[:, future] < 0).all()
    assert torch.isfinite(masked[:, ~future]).all()
    assert (steps["attention weights"].value[:, future] == 0).all()
    note = steps["masked scores"].note
    assert "causal" in note and f"{t * (t - 1) // 2} of the {t * t}" in note
    assert "因果掩码" in in_chinese(steps["masked scores"].note)


def test_an_encoders_real_tokens_hide_nothing_and_the_note_says_which_value_the_seed_writes(
    traced,
):
    _, tr = traced("seed000-tiny")
    steps = {s.name: s for s in layer_steps(tr, "encoder", 0, item=1)}  # the padded text
    assert steps["masked scores"].value is not None
    torch.testing.assert_close(steps["masked scores"].value, steps["scores"].value)
    assert "hides none" in steps["masked scores"].note
    assert "-1e9" in steps["masked scores"].note  # seed 000's masked_fill value
    assert steps["masked scores"].seed_line == "scores = scores.masked_fill(mask == 0, -1e9)"


def test_a_padded_text_gives_the_steps_of_the_text_alone(bert):
    """item picks the text; its padding is dropped (T = its real tokens), and every step equals
    the steps of the same text traced without padding."""
    net, tok = bert
    texts = ["I have a dog", "A Titan RTX has 24GB of VRAM"]
    batch = trace_texts(net, texts)
    alone = trace_texts(net, texts[:1])
    n_real = int(batch.attention_mask[0].sum())
    assert n_real < batch.input_ids.shape[1]  # item 0 is padded
    for layer in (0, 5):
        padded = layer_steps(batch, "encoder", layer, item=0)
        single = layer_steps(alone, "encoder", layer, item=0)
        assert padded[0].value.shape[0] == n_real
        for a, b in zip(padded, single, strict=True):
            assert a.name == b.name
            torch.testing.assert_close(a.value, b.value, atol=TOL, rtol=0, msg=a.name)


def test_shapes_name_every_dimension_of_the_value(traced):
    for name in ("bert", "seed000-tiny", "seed004-encoder"):
        net, tr = traced(name)
        cfg = net.config
        for stack in tr.stacks:
            steps = layer_steps(tr, stack, 0, item=1)
            t = steps[0].value.shape[0]
            s_len = int(tr.attention_mask[1].sum()) if stack == "cross" else t
            sizes = {"T": t, "S": s_len, "H": cfg.n_heads, "d_k": cfg.d_head}
            sizes.update(d_model=cfg.d_model, d_ff=cfg.d_ff)
            for step in steps:
                dims = re.fullmatch(r"\[(.*)\]", step.shape).group(1).split(", ")
                assert [sizes[d] for d in dims] == list(step.value.shape), (name, step.name)
                assert step.value.dtype == torch.float32 and step.value.device.type == "cpu"


def test_every_step_quotes_its_tutorial_and_says_what_it_does_in_two_languages(traced):
    for name in MODELS:
        _, tr = traced(name)
        for stack in tr.stacks:
            for step in layer_steps(tr, stack):
                assert re.fullmatch(r"seed 00[0-4]", step.seed), step
                assert step.seed_line.strip() and step.formula.strip()
                said = in_chinese(step.note)
                assert step.note.strip() and re.search(r"[\u4e00-\u9fff]", said)
                assert all(r in STEP_NAMES for r in step.reads)


def test_the_tutorial_quoted_is_the_one_the_model_follows(traced):
    def seeds(name, stack="encoder"):
        return {s.name: s.seed for s in layer_steps(traced(name)[1], stack)}

    assert seeds("seed000-tiny")["masked scores"] == "seed 000"
    assert seeds("seed003-encdec")["scores"] == "seed 003"
    assert seeds("seed003-encdec")["FFN hidden"] == "seed 003"  # its conv1d(k=1) FFN
    assert seeds("seed001-prenorm")["LayerNorm before attention"] == "seed 001"
    assert seeds("seed004-encoder")["attention residual"] == "seed 004"
    assert seeds("bert")["FFN hidden"] == "seed 004"  # a GELU model quotes the GELU tutorial
    assert seeds("bert")["LayerNorm after attention"] == "seed 000"
    assert seeds("induction", "decoder")["scores"] == "seed 000"  # seed 001 shows no internals
    assert seeds("roles")["scores"] == "seed 004"
    for name in MODELS:
        found = seeds(name, traced(name)[1].stacks[0])
        assert found["FFN hidden"] == found["FFN output"], name  # one tutorial's FFN
    assert seed_order(PRESETS["seed002-encoder"])[:2] == ("002", "000")
    steps = {s.name: s for s in layer_steps(traced("seed000-tiny")[1], "cross")}
    assert steps["attention residual"].seed_line == "x = self.ln2( x_residual2 + self.dropout2(x) )"


@pytest.mark.parametrize("ablation", ["zero", "mean"])
def test_removed_heads_are_removed_before_the_concat(ablation):
    net = Transformer(PRESETS["seed002-encoder"])
    keep = torch.ones(2, 8)
    keep[1, 3] = keep[1, 6] = 0
    tr = trace_texts(net, *TEXTS["char"], head_mask=keep, ablation=ablation)
    steps = layer_steps(tr, "encoder", 1, item=1)
    check_every_step(net, tr, "encoder", 1, 1, steps)
    concat = {s.name: s for s in steps}["concat"]
    assert "m_H·head_H" in concat.formula and "Head mask" in concat.note


def test_a_trace_without_its_model_asks_for_net(traced):
    net, tr = traced("seed002-encoder")
    copied = pickle.loads(pickle.dumps(tr))
    with pytest.raises(ValueError, match="pass net="):
        layer_steps(copied, "encoder", 1)
    with_net = layer_steps(copied, "encoder", 1, net=net)
    for a, b in zip(with_net, layer_steps(tr, "encoder", 1), strict=True):
        torch.testing.assert_close(a.value, b.value)


def test_wrong_layer_item_or_stack_say_so(traced):
    _, tr = traced("seed002-encoder")
    with pytest.raises(ValueError, match="layer 2 is out of range"):
        layer_steps(tr, "encoder", 2)
    with pytest.raises(ValueError, match="item 5 is out of range"):
        layer_steps(tr, "encoder", 0, 5)
    with pytest.raises(ValueError, match="no 'decoder' attention"):
        layer_steps(tr, "decoder")


@pytest.mark.parametrize(
    "changes",
    [
        {"activation": "gelu_tanh", "positions": "learned"},  # GPT-2's layer
        {"attn_bias": False, "attn_out_bias": False, "mlp_bias": False},  # no biases (LLaMA's)
    ],
)
def test_a_gpt2_shaped_layer_and_one_without_biases_add_up_too(changes):
    config = PRESETS["seed001-decoder"].replace(**changes)
    net = Transformer(config)
    tr = trace_texts(net, *TEXTS["char"])
    for layer in (0, 3):
        steps = layer_steps(tr, "decoder", layer, item=1)
        check_every_step(net, tr, "decoder", layer, 1, steps)
    formulas = {s.name: s.formula for s in steps}
    if "attn_bias" in changes:
        assert formulas["Q"] == "Q = LN(X) W_Q" and "b_" not in formulas["FFN output"]
    else:
        assert formulas["FFN hidden"] == "GELU_tanh(LN(X₁) W_1 + b_1)"


def test_a_rotary_or_grouped_query_preset_adds_up_from_its_input_to_its_output():
    """Seed 001's decoder with RoPE, or with 2 key/value heads for its 8 query heads, is taken
    apart (tests/test_layer_steps_lm.py checks each such step against transformers' LLaMA)."""
    for changes, extra in (
        ({"positions": "rotary"}, "RoPE on Q"),
        ({"n_kv_heads": 2}, "K heads repeated"),
    ):
        net = Transformer(PRESETS["seed001-decoder"].replace(**changes))
        tr = trace_texts(net, *TEXTS["char"])
        steps = layer_steps(tr, "decoder", 1, item=1)
        names = [s.name for s in steps]
        assert extra in names and len(steps) == step_count(net.config, "decoder")
        stored = tr.hidden_states["decoder"][1, 2][real(tr.attention_mask, 1)]
        torch.testing.assert_close(steps[-1].value, stored, atol=TOL, rtol=0)
        assert steps[names.index(extra)].seed.startswith("modeling_llama.py:")


def test_what_no_loaded_model_has_is_refused_by_name():
    base = {"norm_kind": "layer", "norm": "pre", "arch": "decoder"}
    assert unsupported(SimpleNamespace(**base)) is None
    assert "RMSNorm" in unsupported(SimpleNamespace(**{**base, "norm_kind": "rms", "norm": "post"}))
    net = Transformer(PRESETS["seed002-encoder"].replace(norm_kind="rms"))
    tr = trace_texts(net, *TEXTS["char"])
    with pytest.raises(ValueError, match="RMSNorm in a post-norm"):
        layer_steps(tr, "encoder")


def test_bert_at_128_and_512_tokens_is_fast_and_returns_full_tensors(bert):
    net, tok = bert
    text = " ".join(["the quick brown fox jumps over the lazy dog"] * 80)
    for n, limit in ((128, 1.0), (512, 3.0)):
        enc = tok([text], truncation=True, max_length=n, return_tensors="pt")
        tr = net.trace(enc["input_ids"])
        layer_steps(tr, "encoder", 0)  # first call: warm caches
        start = time.perf_counter()
        steps = {s.name: s.value for s in layer_steps(tr, "encoder", 3)}
        assert time.perf_counter() - start < limit, n
        assert steps["scores"].shape == (12, n, n)
        assert steps["FFN hidden"].shape == (n, net.config.d_ff)
