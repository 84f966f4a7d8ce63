"""One layer taken apart step by step: every intermediate tensor from its input to its output.

Vaswani et al. 2017 (§3.1-3.3) as the seed tutorials write it, in the layer's real order:

post-norm (the paper, seeds 000/002/003, BERT): X → MultiHead → X + · → LayerNorm → FFN → + → LN
pre-norm (seeds 001/004):                       X → LN → MultiHead → X + · → LN → FFN → X₁ + ·
LLaMA, Qwen2, Mistral (model.load_lm):          X → RMSNorm → Q, K, V → heads → RoPE on Q and K
    → K, V heads repeated for their query heads (grouped-query) → scores … W_O → X + · → RMSNorm
    → gate, up → SiLU(gate) ⊙ up → W_down → X₁ + ·

A decoder layer of an encoder-decoder adds cross-attention (Q from the decoder, K and V from the
encoder output C) between its masked self-attention and its FFN. The attention the ``stack``
names is taken apart in full (Q, K, V, heads, scores, mask, softmax, context, concat, W_O); a
decoder layer's other attention is one step (its sublayer output), so that the step list of
"decoder" and of "cross" both walk the whole layer from its input to its output.

Every step is computed from the trace's stored residual stream (the layer's input,
``trace.hidden_states``), the encoder output and the masks, by the model's own weights (read from
``net``, or from the model the trace replays, as analysis.block does), on the real tokens of one
text: a padded item keeps only its real positions (T = its real token count, S = its source's),
which give the same numbers as the padded batch (padded keys were hidden, -inf, and padding never
reaches a real token). STEP_NAMES lists every name in order; docs/layer-steps.md documents it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from analysis.layer_lines import LLAMA_LINES, llama_line, llama_style, seed_line
from analysis.layer_notes import GATED_HIDDEN, NOTES, POSITIONS_OFF, head_mask_note, mask_note
from analysis.tokens import check_stack, real_tokens
from analysis.weights import check_net
from model.attention import HeadAblation
from model.rotary import Rotation
from model.trace import Trace

# Every step name, in the order data flows; each architecture's list is a subsequence of this
# one (docs/layer-steps.md). "attention" is the attention of the stack asked for; in a decoder
# layer with cross-attention the other one is "self-attention …" (stack "cross") or
# "cross-attention …" (stack "decoder").
STEP_NAMES: tuple[str, ...] = (
    "input",
    "LayerNorm before self-attention",  # stack "cross", pre-norm
    "self-attention output",  # stack "cross"
    "self-attention residual",  # stack "cross"
    "LayerNorm after self-attention",  # stack "cross", post-norm
    "LayerNorm before attention",  # pre-norm
    "RMSNorm before attention",  # pre-norm with RMSNorm (LLaMA, Qwen2, Mistral)
    "Q",
    "K",
    "V",
    "Q heads",
    "K heads",
    "V heads",
    "RoPE on Q",  # rotary positions (LLaMA …)
    "RoPE on K",  # rotary positions
    "K heads repeated",  # grouped-query attention: H_kv key heads shared by H query heads
    "V heads repeated",  # grouped-query attention
    "scores",
    "masked scores",
    "attention weights",
    "context",
    "concat",
    "attention output",
    "attention residual",
    "LayerNorm after attention",  # post-norm
    "LayerNorm before cross-attention",  # stack "decoder" of an encoder-decoder, pre-norm
    "cross-attention output",  # stack "decoder" of an encoder-decoder
    "cross-attention residual",  # stack "decoder" of an encoder-decoder
    "LayerNorm after cross-attention",  # stack "decoder" of an encoder-decoder, post-norm
    "LayerNorm before FFN",  # pre-norm
    "RMSNorm before FFN",  # pre-norm with RMSNorm
    "FFN gate",  # gated MLP (LLaMA …): X W_gate
    "FFN up",  # gated MLP: X W_up
    "FFN hidden",  # act(X W_1 + b_1); gated MLP: SiLU(gate) ⊙ up
    "FFN output",
    "FFN residual",
    "LayerNorm after FFN",  # post-norm
    "output",
)


@dataclass(frozen=True)
class Step:
    """One intermediate of a layer, for one text.

    value: the whole tensor (CPU, float32), never cut or pooled: at 512 tokens "scores" is
        [H, 512, 512]; what a page shows of it is the page's business. Hidden entries of
        "masked scores" are -inf.
    shape: the named dimensions of ``value`` (T query tokens, S key tokens of cross-attention, H
        heads, d_k = d_model / H, d_ff the FFN width); ``value.shape`` gives the sizes.
    reads: the earlier steps it is computed from ("input" reads none; cross-attention's K and V,
        and the decoder view's "cross-attention output", also read C, the encoder output).
    seed, seed_line: the tutorial ("seed 000" … "seed 004"), or transformers' LLaMA code for a
        LLaMA-style layer ("modeling_llama.py:297"), and its own line(s) of code that do this
        step, verbatim; several lines are joined by newlines (analysis/layer_lines.py).
    """

    name: str
    formula: str
    shape: str
    value: torch.Tensor
    seed: str
    seed_line: str
    note_en: str
    note_zh: str
    reads: tuple[str, ...] = ()


_ACT = {
    "relu": "max(0, {x})",
    "gelu": "GELU({x})",
    "gelu_tanh": "GELU_tanh({x})",
    "silu": "SiLU({x})",
}


def _b(linear: nn.Linear, name: str) -> str:
    """ " + b_Q" in a formula when the projection has a bias (LLaMA's have none)."""
    return f" + b_{name}" if linear.bias is not None else ""


# ---- the computation ------------------------------------------------------------------------
def _layers(trace: Trace, stack: str, net: nn.Module | None) -> tuple[nn.ModuleList, Callable]:
    """The layers of the stack's home (the decoder for "cross"), from net or the trace's model,
    and the model's RoPE angles (seq_len, positions) -> Rotation | None."""
    home = "decoder" if stack == "cross" else stack
    if net is not None:
        check_net(trace, net, stack, "The layer's steps")
        return (net.encoder if home == "encoder" else net.decoder).layers, net.embedding.rotation
    replay = trace._replay
    if replay is None or home not in replay.stacks:
        raise ValueError(
            "The layer's steps need the model's weights, which this trace no longer reaches: "
            "pass net=<the model that made the trace>."
        )
    replay._check(replay.stacks[home])  # eval mode, weights unchanged since the trace
    return replay.stacks[home].layers, replay.rotation


def _linear(x: torch.Tensor, linear: nn.Linear) -> torch.Tensor:
    return F.linear(x, linear.weight, linear.bias)


def unsupported(config) -> str | None:
    """What of the config the steps do not take apart (no model the project loads has it)."""
    if getattr(config, "norm_kind", "layer") == "rms" and (
        config.norm == "post" or config.arch == "encoder-decoder"
    ):
        return "RMSNorm in a post-norm or encoder-decoder layer"
    return None


def _attend(
    attn: nn.Module,
    x_q: torch.Tensor,
    x_kv: torch.Tensor,
    allowed: torch.Tensor,
    keep: torch.Tensor | None,
    mode: str,
    rotation: Rotation | None = None,
) -> dict[str, torch.Tensor]:
    """MultiHeadAttention of one text, every intermediate kept (model/attention.py's order: split,
    RoPE on Q and K, a shared key/value head repeated for its group, scores, …)."""
    n_heads, d_k, n_rep = attn.n_heads, attn.d_head, attn.n_rep
    q, k, v = _linear(x_q, attn.w_q), _linear(x_kv, attn.w_k), _linear(x_kv, attn.w_v)
    t_q, t_k = q.shape[0], k.shape[0]

    def split(m: torch.Tensor, t: int) -> torch.Tensor:
        return m.view(t, m.shape[1] // d_k, d_k).transpose(0, 1)  # (H or H_kv, t, d_k)

    qh, kh, vh = split(q, t_q), split(k, t_k), split(v, t_k)
    parts = {"Q": q, "K": k, "V": v, "Q heads": qh, "K heads": kh, "V heads": vh}
    if rotation is not None:  # turned before repeating: H_kv key heads, not H
        qh = parts["RoPE on Q"] = rotation(qh)  # (H, T, d_k)
        kh = parts["RoPE on K"] = rotation(kh)  # (H_kv, S, d_k)
    if n_rep > 1:  # query head h reads key/value head h // n_rep (HF's repeat_kv)
        kh = parts["K heads repeated"] = kh.repeat_interleave(n_rep, dim=0)  # (H, S, d_k)
        vh = parts["V heads repeated"] = vh.repeat_interleave(n_rep, dim=0)  # (H, S, d_k)
    # Q scaled before the product, as the model does (T·d_k numbers rather than T·T): QKᵀ/√d_k
    scores = (qh * d_k**-0.5) @ kh.transpose(-2, -1)  # (H, T, S)
    # nothing hidden: the same tensor; else -inf where hidden (the model adds an -inf bias)
    masked = scores if bool(allowed.all()) else scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(masked, dim=-1)  # (H, T, S)
    if not bool(allowed.any(-1).all()):  # a fully hidden row is NaN after softmax: 0, as the model
        weights = weights.masked_fill(~allowed, 0.0)
    context = weights @ vh  # (H, T, d_k)
    used = context if keep is None else HeadAblation(keep, mode)(context[None])[0]
    concat = used.transpose(0, 1).reshape(t_q, n_heads * d_k)  # (T, d_model)
    out = _linear(concat, attn.w_o)  # (T, d_model)
    parts.update(scores=scores, weights=weights, context=context, concat=concat, out=out)
    parts["masked scores"], parts["attention weights"] = masked, weights
    parts["attention output"] = out
    return parts


class _Steps:
    """The steps of one call, in order: each value moved to the CPU as float32."""

    def __init__(self, config) -> None:
        self.config = config
        self.llama = llama_style(config)
        self.steps: list[Step] = []

    def quote(self, name: str, place: str) -> tuple[str, str]:
        """Where the step's code is: LLaMA's line for a LLaMA-style layer, else a tutorial's."""
        if self.llama and name in LLAMA_LINES:
            return llama_line(name)
        return seed_line(name, place, self.config)

    def add(self, name, value, formula, shape, place, reads=(), note=None) -> None:
        seed, line = self.quote(name, place)
        en, zh = note or NOTES[name]
        value = value.detach().to("cpu", torch.float32)
        self.steps.append(Step(name, formula, shape, value, seed, line, en, zh, tuple(reads)))


def _detail(s: _Steps, parts: dict, block: dict) -> None:
    """The steps inside the attention the stack names, Q through W_O."""
    place, reader, kv, src = block["place"], block["reader"], block["kv"], block["src"]
    cross = block["kind"] == "cross"
    keys = "S" if cross else "T"
    kv_reads = () if cross else (src,)  # cross-attention's K and V read C, the encoder output
    attn = block["attn"]
    grouped = "K heads repeated" in parts
    kv_heads, kv_width = ("H_kv", "d_kv") if grouped else ("H", "d_model")
    s.add("Q", parts["Q"], f"Q = {reader} W_Q{_b(attn.w_q, 'Q')}", "[T, d_model]", place, (src,))
    for m in ("K", "V"):
        formula = f"{m} = {kv} W_{m}{_b(getattr(attn, f'w_{m.lower()}'), m)}"
        s.add(m, parts[m], formula, f"[{keys}, {kv_width}]", place, kv_reads)
    g = "g" if grouped else "h"  # a key/value head: g, shared by the query heads h of its group
    for m, t, h, i in (("Q", "T", "H", "h"), ("K", keys, kv_heads, g), ("V", keys, kv_heads, g)):
        formula = f"{m}_{i} = {m}.view({t}, {h}, d_k).transpose(0, 1)"
        s.add(f"{m} heads", parts[f"{m} heads"], formula, f"[{h}, {t}, d_k]", place, (m,))
    q_name, k_name, v_name = "Q heads", "K heads", "V heads"
    q_sym, k_sym = "Q_h", "K_h"
    if "RoPE on Q" in parts:
        turn = "{m} ⊙ cos(mθ) + rotate_half({m}) ⊙ sin(mθ)"
        positions = block["positions"]
        for m, h, i in (("Q", "H", "h"), ("K", kv_heads, g)):
            name = f"RoPE on {m}"
            formula = f"RoPE({m}_{i}) = {turn.format(m=f'{m}_{i}')}"
            note = NOTES[name] if positions else POSITIONS_OFF
            s.add(name, parts[name], formula, f"[{h}, {keys}, d_k]", place, (f"{m} heads",), note)
        q_name, k_name, q_sym, k_sym = "RoPE on Q", "RoPE on K", "RoPE(Q_h)", "RoPE(K_h)"
    if grouped:
        rep = attn.n_rep
        for m, was in (("K", k_name), ("V", v_name)):
            name = f"{m} heads repeated"
            shared = f"RoPE({m}_g)" if was.startswith("RoPE") else f"{m}_g"
            formula = f"{m}_h = {shared}, g = h // {rep}  (H / H_kv = {rep})"
            s.add(name, parts[name], formula, f"[H, {keys}, d_k]", place, (was,))
        k_name, v_name = "K heads repeated", "V heads repeated"
    scores = f"{q_sym} {k_sym}ᵀ / √d_k"
    s.add("scores", parts["scores"], scores, f"[H, T, {keys}]", place, (q_name, k_name))
    ok = block["allowed"]
    hidden, total = int((~ok).sum()), ok.numel()
    kind = "padding" if cross or block["home"] == "encoder" else "causal"
    seed = s.quote("masked scores", place)[0]
    note = mask_note(kind, hidden, total, seed, None if cross else s.config.sliding_window)
    masked = f"{scores} + M  (M = 0 where allowed, -inf where hidden)"
    s.add(
        "masked scores", parts["masked scores"], masked, f"[H, T, {keys}]", place, ("scores",), note
    )
    weights = f"A_h = softmax({scores} + M)"
    s.add(
        "attention weights",
        parts["attention weights"],
        weights,
        f"[H, T, {keys}]",
        place,
        ("masked scores",),
    )
    s.add(
        "context",
        parts["context"],
        "head_h = A_h V_h",
        "[H, T, d_k]",
        place,
        ("attention weights", v_name),
    )
    concat, note = "Concat(head_1, …, head_H)", None
    keep = block["keep"]
    if keep is not None:
        concat = "Concat(m_1·head_1, …, m_H·head_H)"
        kept = ", ".join(f"{float(v):g}" for v in keep)
        note = head_mask_note(kept, mean=block["mode"] == "mean")
    s.add("concat", parts["concat"], concat, "[T, d_model]", place, ("context",), note)
    s.add(
        "attention output",
        parts["attention output"],
        f"{block['mha']} = Concat(…) W_O{_b(attn.w_o, 'O')}",
        "[T, d_model]",
        place,
        ("concat",),
    )


def step_count(config, stack: str) -> int:
    """How many steps ``layer_steps`` returns for this config and stack, without computing them:
    input and output, the attention taken apart (12 steps from Q to W_O; 2 more for RoPE on Q
    and K, 2 more for grouped-query attention's repeated K and V heads) with its residual and
    its norm, a decoder layer's other attention (3 steps), the FFN (4; 2 more when gated)."""
    home = "decoder" if stack == "cross" else stack
    other = 3 if home == "decoder" and config.has_encoder else 0
    rope = 2 if config.positions == "rotary" and stack != "cross" else 0
    grouped = 2 if config.kv_heads < config.n_heads else 0
    gated = 2 if config.mlp == "gated" else 0
    return 1 + 14 + rope + grouped + other + 4 + gated + 1


def layer_steps(
    trace: Trace,
    stack: str = "encoder",
    layer: int = 0,
    item: int = 0,
    net: nn.Module | None = None,
) -> list[Step]:
    """Every step of one layer of one text, from its input to its output, in the layer's order.

    Args:
        trace: a Trace; the weights come from ``net``, else from the model that made the trace.
        stack: "encoder", "decoder" or "cross" (the decoder layer, its cross-attention taken
            apart; "decoder" takes its masked self-attention apart).
        layer, item: 0-based layer and batch item (the text).
        net: the model that made the trace, needed only when the trace no longer reaches it (a
            trace read back from a pickle).
    Returns:
        Steps named from STEP_NAMES, on the text's real tokens only (T = its real tokens; S = T,
        or the source's real tokens for cross-attention): "input" is
        ``trace.hidden_states[home][item, layer]``, "attention weights"
        ``trace.attentions[stack][item, layer]`` ([H, T, S]) and "output"
        ``trace.hidden_states[home][item, layer + 1]``, home being "decoder" for "cross".
    """
    check_stack(trace, stack)
    batch, n_layers = trace.attentions[stack].shape[:2]
    for what, value, size in (("layer", layer, n_layers), ("item", item, batch)):
        if not 0 <= value < size:
            raise ValueError(f"{what} {value} is out of range: this trace has {size} (0-based).")
    missing = unsupported(trace.config)
    if missing:
        raise ValueError(f"The layer's steps do not take apart {missing}.")
    layers, rotation_of = _layers(trace, stack, net)
    module = layers[layer]
    home = "decoder" if stack == "cross" else stack
    cfg = trace.config
    pre = cfg.norm == "pre"
    norm_name, ln = ("RMSNorm", "RMSNorm") if cfg.norm_kind == "rms" else ("LayerNorm", "LN")
    param = next(module.parameters())
    q_real = real_tokens(trace, stack)[0]
    rows = q_real[item].nonzero().squeeze(1).to(param.device)  # the text's real positions
    # RoPE turns the text's positions as the model did (0 … T−1 of the padded batch): the real
    # rows' own angles. Positions off: nothing turns (the step shows the heads unchanged).
    full = rotation_of(trace.hidden_states[home].shape[2], trace.positions)
    rotary = cfg.positions == "rotary"
    if full is not None:
        own = Rotation(full.cos.to(param.device)[rows], full.sin.to(param.device)[rows])
    elif rotary:
        own = Rotation(torch.tensor(1.0, dtype=param.dtype), torch.tensor(0.0, dtype=param.dtype))
    else:
        own = None

    def on(t: torch.Tensor) -> torch.Tensor:
        return t.to(device=param.device, dtype=param.dtype)

    blocks = [{"kind": "self", "attn": module.self_attn, "norm": module.add_norm1.norm}]
    if home == "decoder" and getattr(module, "cross_attn", None) is not None:
        blocks.append({"kind": "cross", "attn": module.cross_attn, "norm": module.add_norm2.norm})
    s = _Steps(cfg)
    dims = "[T, d_model]"
    with torch.no_grad():
        stream = on(trace.hidden_states[home][item, layer].to(param.device)[rows])  # (T, d_model)
        s.add("input", stream, "X", dims, home)
        sym, last = "X", "input"
        for number, block in enumerate(blocks, start=1):
            kind = block["kind"]
            place = "cross" if kind == "cross" else home
            detailed = (kind == "cross") == (stack == "cross")
            # the name of this attention's steps: "attention …" when taken apart, else its kind
            label = "attention" if detailed else f"{kind}-attention"
            mask_name, cols = home, rows
            if kind == "cross":
                mask_name = "cross"
                source = real_tokens(trace, "cross")[1][item]  # (T_src,) the real source tokens
                cols = source.nonzero().squeeze(1).to(param.device)
            allowed = trace.masks[mask_name][item].to(param.device)[rows][:, cols]  # (T, S)
            head_mask = trace.head_mask.get(mask_name)
            keep = None if head_mask is None else head_mask[layer]
            src, src_name, reader = stream, last, sym
            if pre:
                src = block["norm"](stream)
                src_name, reader = f"{norm_name} before {label}", f"{ln}({sym})"
                s.add(src_name, src, reader, dims, place, (last,))
            if kind == "cross":
                memory = on(trace.outputs["encoder"][item].to(param.device)[cols])  # (S, d_model)
                kv, kv_sym, mha = memory, "C", f"MultiHead({reader}, C, C)"
            else:
                kv, kv_sym = src, reader
                mha = ("Masked" if home == "decoder" else "") + f"MultiHead({reader})"
            turn = own if kind == "self" else None  # cross-attention is never turned
            parts = _attend(block["attn"], src, kv, allowed, keep, trace.ablation, turn)
            out_name = f"{label} output"
            if detailed:
                info = {"place": place, "reader": reader, "kv": kv_sym, "src": src_name}
                info.update(kind=kind, home=home, allowed=allowed, keep=keep, mode=trace.ablation)
                info.update(positions=full is not None)
                _detail(s, parts, info | {"mha": mha, "attn": block["attn"]})
            else:
                s.add(out_name, parts["attention output"], mha, dims, place, (src_name,))
            residual = stream + parts["attention output"]
            new = f"X{'₁₂'[number - 1]}"
            res_name = f"{label} residual"
            added = f"{new} = {sym} + {mha}" if pre else f"{sym} + {mha}"
            s.add(res_name, residual, added, dims, place, (last, out_name))
            if pre:
                stream, last = residual, res_name
            else:
                stream, last = block["norm"](residual), f"LayerNorm after {label}"
                s.add(last, stream, f"{new} = LayerNorm({sym} + {mha})", dims, place, (res_name,))
            sym = new
        ffn = module.ffn
        norm = (module.add_norm3 if home == "decoder" else module.add_norm2).norm
        src, src_name, reader = stream, last, sym
        if pre:
            src, src_name, reader = norm(stream), f"{norm_name} before FFN", f"{ln}({sym})"
            s.add(src_name, src, reader, dims, home, (last,))
        if cfg.mlp == "gated":
            out, _ = _gated(s, ffn, src, src_name, reader, home)
            formula = f"FFN({reader}) = (SiLU(G) ⊙ U) W_down{_b(ffn.w_down, 'down')}"
        else:
            inner = _ACT[cfg.activation].format(x=f"{reader} W_1{_b(ffn.fc1, '1')}")
            hidden = ffn.act(_linear(src, ffn.fc1))  # (T, d_ff)
            s.add("FFN hidden", hidden, inner, "[T, d_ff]", home, (src_name,))
            out = _linear(hidden, ffn.fc2)  # (T, d_model)
            formula = f"FFN({reader}) = {inner} W_2{_b(ffn.fc2, '2')}"
        s.add("FFN output", out, formula, dims, home, ("FFN hidden",))
        stream, added = stream + out, f"{sym} + FFN({reader})"
        s.add("FFN residual", stream, added, dims, home, (last, "FFN output"))
        last = "FFN residual"
        if not pre:
            stream, added = norm(stream), f"LayerNorm({added})"
            s.add("LayerNorm after FFN", stream, added, dims, home, (last,))
            last = "LayerNorm after FFN"
        s.add("output", stream, f"X_out = {added}", dims, home, (last,))
    return s.steps


def _gated(s: _Steps, ffn: nn.Module, src, src_name: str, reader: str, home: str):
    """The gated MLP's steps (gate, up, act(gate) ⊙ up); returns (W_down's output, hidden)."""
    act = _ACT[s.config.activation].format(x="G")
    gate = _linear(src, ffn.w_gate)  # (T, d_ff)
    s.add("FFN gate", gate, f"G = {reader} W_gate{_b(ffn.w_gate, 'gate')}", "[T, d_ff]", home,
          (src_name,))  # fmt: skip
    up = _linear(src, ffn.w_up)  # (T, d_ff)
    s.add("FFN up", up, f"U = {reader} W_up{_b(ffn.w_up, 'up')}", "[T, d_ff]", home, (src_name,))
    hidden = ffn.act(gate) * up  # (T, d_ff)
    s.add("FFN hidden", hidden, f"{act} ⊙ U", "[T, d_ff]", home, ("FFN gate", "FFN up"),
          GATED_HIDDEN)  # fmt: skip
    return _linear(hidden, ffn.w_down), hidden  # (T, d_model), (T, d_ff)
