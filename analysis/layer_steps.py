"""One layer taken apart step by step: every intermediate tensor from its input to its output.

Vaswani et al. 2017 (§3.1-3.3) as the seed tutorials write it, in the layer's real order:

post-norm (the paper, seeds 000/002/003, BERT): X → MultiHead → X + · → LayerNorm → FFN → + → LN
pre-norm (seeds 001/004):                       X → LN → MultiHead → X + · → LN → FFN → X₁ + ·
LLaMA, Qwen2, Mistral (model.load_lm):          X → RMSNorm → Q, K, V → heads → RoPE on Q and K
    → K, V heads repeated for their query heads (grouped-query) → scores … W_O → X + · → RMSNorm
    → gate, up → SiLU(gate) ⊙ up → W_down → X₁ + ·
Qwen3 adds QK-norm (each Q and K head RMS-normalised before RoPE); Gemma 3 adds QK-norm and its
sandwich (W_O's output and W_down's normalised again before each residual add), RMSNorm gains
1 + w, a GELU-tanh gate, √d_model embeddings, and local layers with their own window and RoPE
base among full ones.

A decoder layer of an encoder-decoder adds cross-attention (Q from the decoder, K and V from the
encoder output C) between its masked self-attention and its FFN. The attention the ``stack``
names is taken apart in full (Q, K, V, heads, scores, mask, softmax, context, concat, W_O); a
decoder layer's other attention is one step (its sublayer output), so that the step list of
"decoder" and of "cross" both walk the whole layer from its input to its output.

No step is computed here: the model runs the layer again on the trace's stored input
(``trace.hidden_states``), the encoder output and the masks, and reads the named sites
(model/sites.py) its own modules pass, every intermediate they computed (``Replay.walk``,
model/replay.py; the model is ``net``, or the one the trace replays). This module maps step
names to site names (ATTENTION_SITES, NORM_SITES, FFN_SITES) and gives the steps, in the layer's
order, their formulas, the tutorial lines that compute them and notes. The layer runs on the
real tokens of one text: a padded item keeps only its real positions (T = its real token count,
S = its source's), which give the same numbers as the padded batch (padded keys were hidden,
-inf, and padding never reaches a real token). STEP_NAMES lists every name in order;
docs/layer-steps.md documents it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from analysis.layer_lines import family_line, llama_style, seed_line
from analysis.layer_notes import (
    GATE_GELU,
    GATED_HIDDEN,
    GATED_HIDDEN_GELU,
    GEMMA_NORMS,
    NOTES,
    POSITIONS_OFF,
    embeddings_note,
    head_mask_note,
    mask_note,
    rope_base_note,
)
from analysis.tokens import check_stack
from analysis.weights import model_of
from lang import Msg
from model.layers import band
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
    "QK-norm on Q",  # QK-norm (Qwen3, Gemma 3): each head RMS-normalised over its d_k
    "QK-norm on K",
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
    "RMSNorm on attention output",  # Gemma 3's sandwich: a second norm before the residual add
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
    "RMSNorm on FFN output",  # Gemma 3's sandwich
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
    formula: symbols, the same in every language; one that holds words ("M = 0 where
        allowed") is a ``lang.Msg``, said in the reader's language.
    shape: the named dimensions of ``value`` (T query tokens, S key tokens of cross-attention, H
        heads, d_k = d_model / H, d_ff the FFN width); ``value.shape`` gives the sizes.
    reads: the earlier steps it is computed from ("input" reads none; cross-attention's K and V,
        and the decoder view's "cross-attention output", also read C, the encoder output).
    seed, seed_line: the tutorial ("seed 000" … "seed 004"), or transformers' code of the
        layer's family for a LLaMA-style layer ("modeling_llama.py:297", "modeling_qwen3.py:245",
        "modeling_gemma3.py:394"), and its own line(s) of code that do this step, verbatim;
        several lines are joined by newlines (analysis/layer_lines.py).
    note: what the step does, one English sentence (a ``lang.Msg``: ``lang.tr(note)`` says it
        in the reader's language; analysis/layer_notes.py).
    """

    name: str
    formula: str
    shape: str
    value: torch.Tensor
    seed: str
    seed_line: str
    note: Msg
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


# The detailed attention's steps by site name (model/sites.py), under "attn." (self-attention) or
# "cross_attn."; RoPE's and the repeated heads' sites are passed only where the model turns or
# repeats. "context" is the heads' contexts before a head mask (Replay.walk's "contexts"),
# "concat" after it; "attention output" is the layer's hook_attn_out / hook_cross_attn_out.
ATTENTION_SITES = {
    "Q": "hook_q_flat",
    "K": "hook_k_flat",
    "V": "hook_v_flat",
    "Q heads": "hook_q",
    "K heads": "hook_k",
    "V heads": "hook_v",
    "RoPE on Q": "hook_rot_q",
    "QK-norm on Q": "hook_q_normed",
    "QK-norm on K": "hook_k_normed",
    "RoPE on K": "hook_rot_k",
    "K heads repeated": "hook_rep_k",
    "V heads repeated": "hook_rep_v",
    "scores": "hook_unmasked_scores",
    "masked scores": "hook_attn_scores",
    "attention weights": "hook_pattern",
    "concat": "hook_concat",
}
# Each attention's Add & Norm by kind: (its norm's output: "… before" when pre-norm, "… after"
# when post-norm; "… residual"; "… output", the sublayer's output).
NORM_SITES = {
    "self": ("ln1.hook_normalized", "hook_attn_resid", "hook_attn_out"),
    "cross": ("ln2.hook_normalized", "hook_cross_attn_resid", "hook_cross_attn_out"),
}
# The FFN's steps; "FFN gate" and "FFN up" in a gated MLP only.
FFN_SITES = {
    "FFN gate": "mlp.hook_pre",
    "FFN up": "mlp.hook_pre_linear",
    "FFN hidden": "mlp.hook_post",
    "FFN output": "hook_mlp_out",
    "FFN residual": "hook_mlp_resid",
}
# The FFN's norm ("… before FFN" when pre-norm, "… after FFN" when post-norm): without, with
# cross-attention before it in the layer.
FFN_NORM_SITES = ("ln2.hook_normalized", "ln3.hook_normalized")
# A sandwich layer's (Gemma 3's) second norms: (the sublayer's own output, the norm's output),
# after the attention and after the MLP; the residual connection adds the norm's output.
SANDWICH_SITES = {
    "attention": ("ln1_post.hook_in", "ln1_post.hook_normalized"),
    "FFN": ("ln2_post.hook_in", "ln2_post.hook_normalized"),
}
LAYER_SITES = ("hook_resid_pre", "hook_resid_post")  # "input", "output"


def _reads(detail: str) -> list[str]:
    """The site names the walk reads, the attention taken apart being under ``detail``."""
    names = [detail + name for name in ATTENTION_SITES.values()]
    names += [name for kind in NORM_SITES.values() for name in kind]
    names += [name for pair in SANDWICH_SITES.values() for name in pair]
    return [*names, *FFN_SITES.values(), *FFN_NORM_SITES, *LAYER_SITES]


def unsupported(config) -> str | None:
    """What of the config the steps do not take apart (no model the project loads has it)."""
    if getattr(config, "norm_kind", "layer") == "rms" and (
        config.norm == "post" or config.arch == "encoder-decoder"
    ):
        return "RMSNorm in a post-norm or encoder-decoder layer"
    return None


class _Steps:
    """The steps of one call, in order: each value moved to the CPU as float32."""

    def __init__(self, config) -> None:
        self.config = config
        self.llama = llama_style(config)
        self.steps: list[Step] = []
        # notes said a family's own way: Gemma's norms (gain 1 + w), a gate through GELU
        self.notes = dict(GEMMA_NORMS) if getattr(config, "norm_offset", False) else {}
        if config.mlp == "gated" and config.activation.startswith("gelu"):
            self.notes.update({"FFN gate": GATE_GELU, "FFN hidden": GATED_HIDDEN_GELU})

    def quote(self, name: str, place: str, first: bool = False) -> tuple[str, str]:
        """Where the step's code is: transformers' line for a LLaMA-style layer (its family's
        file: LLaMA's, Qwen3's, Gemma 3's), else a tutorial's; ``first``: layer 0's input."""
        found = family_line(name, self.config, first) if self.llama else None
        return found or seed_line(name, place, self.config)

    def add(self, name, value, formula, shape, place, reads=(), note=None, first=False) -> None:
        seed, line = self.quote(name, place, first)
        value = value.detach().to("cpu", torch.float32)
        note = note or self.notes.get(name) or NOTES[name]
        self.steps.append(Step(name, formula, shape, value, seed, line, note, tuple(reads)))


def _attn_width(config) -> str:
    """The width of Q and of the heads' concat: d_model, or H·d_k where head_dim says otherwise
    (Gemma 3 270M: 4 heads of 256 on a d_model of 640)."""
    return "d_model" if config.d_attn == config.d_model else "H·d_k"


def _projections(s: _Steps, parts: dict, block: dict) -> tuple[str, str, str, str]:
    """The attention's steps from Q to its heads (turned, repeated): the names of the steps the
    scores read (Q's, K's) and the context reads (V's), and the scores' symbol."""
    place, reader, kv, src = block["place"], block["reader"], block["kv"], block["src"]
    cross = block["kind"] == "cross"
    keys = "S" if cross else "T"
    kv_reads = () if cross else (src,)  # cross-attention's K and V read C, the encoder output
    attn = block["attn"]
    grouped = "K heads repeated" in parts
    kv_heads, kv_width = ("H_kv", "d_kv") if grouped else ("H", _attn_width(s.config))
    q_width = _attn_width(s.config)
    s.add("Q", parts["Q"], f"Q = {reader} W_Q{_b(attn.w_q, 'Q')}", f"[T, {q_width}]", place, (src,))
    for m in ("K", "V"):
        formula = f"{m} = {kv} W_{m}{_b(getattr(attn, f'w_{m.lower()}'), m)}"
        s.add(m, parts[m], formula, f"[{keys}, {kv_width}]", place, kv_reads)
    g = "g" if grouped else "h"  # a key/value head: g, shared by the query heads h of its group
    for m, t, h, i in (("Q", "T", "H", "h"), ("K", keys, kv_heads, g), ("V", keys, kv_heads, g)):
        formula = f"{m}_{i} = {m}.view({t}, {h}, d_k).transpose(0, 1)"
        s.add(f"{m} heads", parts[f"{m} heads"], formula, f"[{h}, {t}, d_k]", place, (m,))
    q_name, k_name, v_name = "Q heads", "K heads", "V heads"
    q_sym, k_sym = "Q_h", "K_h"
    if "QK-norm on Q" in parts:
        gain = "(1 + w_{m})" if s.config.norm_offset else "g_{m}"
        for m, h, i in (("Q", "H", "h"), ("K", kv_heads, g)):
            name, low = f"QK-norm on {m}", m.lower()
            normed = f"{m}_{i} / RMS({m}_{i}) ⊙ {gain.format(m=low)}"
            formula = f"{m}_{i} ← {low}_norm({m}_{i}) = {normed}"  # RMS over its d_k
            s.add(name, parts[name], formula, f"[{h}, {keys}, d_k]", place, (f"{m} heads",))
        q_name, k_name = "QK-norm on Q", "QK-norm on K"
    if "RoPE on Q" in parts:
        turn = "{m} ⊙ cos(mθ) + rotate_half({m}) ⊙ sin(mθ)"
        for m, h, i in (("Q", "H", "h"), ("K", kv_heads, g)):
            name = f"RoPE on {m}"
            formula = f"RoPE({m}_{i}) = {turn.format(m=f'{m}_{i}')}" + block["theta"]
            was = q_name if m == "Q" else k_name
            note = block["turn"][name]
            s.add(name, parts[name], formula, f"[{h}, {keys}, d_k]", place, (was,), note)
        q_name, k_name, q_sym, k_sym = "RoPE on Q", "RoPE on K", "RoPE(Q_h)", "RoPE(K_h)"
    if grouped:
        rep = attn.n_rep
        for m, was in (("K", k_name), ("V", v_name)):
            name = f"{m} heads repeated"
            shared = f"RoPE({m}_g)" if was.startswith("RoPE") else f"{m}_g"
            formula = f"{m}_h = {shared}, g = h // {rep}  (H / H_kv = {rep})"
            s.add(name, parts[name], formula, f"[H, {keys}, d_k]", place, (was,))
        k_name, v_name = "K heads repeated", "V heads repeated"
    return q_name, k_name, v_name, f"{q_sym} {k_sym}ᵀ / √d_k"


def _detail(s: _Steps, parts: dict, block: dict) -> None:
    """The steps inside the attention the stack names, Q through W_O."""
    q_name, k_name, v_name, scores = _projections(s, parts, block)
    place, cross, attn = block["place"], block["kind"] == "cross", block["attn"]
    keys = "S" if cross else "T"
    s.add("scores", parts["scores"], scores, f"[H, T, {keys}]", place, (q_name, k_name))
    ok = block["allowed"]
    hidden, total = int((~ok).sum()), ok.numel()
    kind = "padding" if cross or block["home"] == "encoder" else "causal"
    seed = s.quote("masked scores", place)[0]
    window = None if cross else s.config.sliding_window
    note = mask_note(kind, hidden, total, seed, window, "" if cross else block["layers"])
    # words inside the formula: a Msg, said in the page's language (ui/tabs/layer.py)
    masked = Msg("{scores} + M  (M = 0 where allowed, -inf where hidden)", scores=scores)
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
    width = f"[T, {_attn_width(s.config)}]"
    s.add("concat", parts["concat"], concat, width, place, ("context",), note)
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
    its norm, a decoder layer's other attention (3 steps), the FFN (4; 2 more when gated); 2
    more for QK-norm on Q and K, 2 more for a sandwich's second norms (Gemma 3)."""
    home = "decoder" if stack == "cross" else stack
    other = 3 if home == "decoder" and config.has_encoder else 0
    rope = 2 if config.positions == "rotary" and stack != "cross" else 0
    grouped = 2 if config.kv_heads < config.n_heads else 0
    gated = 2 if config.mlp == "gated" else 0
    qk_norm = 2 if getattr(config, "qk_norm", False) and stack != "cross" else 0
    sandwich = 2 if getattr(config, "sandwich_norm", False) else 0
    return 1 + 14 + rope + qk_norm + grouped + other + 4 + gated + sandwich + 1


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
    replay = model_of(trace, stack, net, "The layer's steps")
    home = "decoder" if stack == "cross" else stack
    module = replay.stacks[home].layers[layer]  # its biases and groups name the formulas
    detail = "cross_attn." if stack == "cross" else "attn."
    with torch.no_grad():  # every intermediate the layer computed, by site name
        walked = replay.walk(trace, stack, layer, item, _reads(detail))
    at = walked["sites"]
    parts = {step: at[detail + n] for step, n in ATTENTION_SITES.items() if detail + n in at}
    parts["context"] = walked["contexts"][detail]  # before a head mask
    cfg = trace.config
    norm_name, ln = ("RMSNorm", "RMSNorm") if cfg.norm_kind == "rms" else ("LayerNorm", "LN")
    walk = {"trace": trace, "stack": stack, "home": home, "layer": layer, "at": at}
    walk.update(parts=parts, pre=cfg.norm == "pre", norm_name=norm_name, ln=ln)
    walk.update(sandwich=getattr(cfg, "sandwich_norm", False))
    allowed = walked["mask"]  # (T, T) the stack's; a local layer among full ones bands it
    if home == "decoder" and cfg.is_local(layer):
        allowed = band(allowed[None], cfg.sliding_window, allowed[None])[0]
    blocks = [{"kind": "self", "attn": module.self_attn, "allowed": allowed}]
    if "cross_mask" in walked:
        blocks.append({"kind": "cross", "attn": module.cross_attn, "allowed": walked["cross_mask"]})
    s = _Steps(cfg)
    scaled = layer == 0 and getattr(cfg, "embed_scale", False)
    note = embeddings_note(cfg.d_model**0.5) if scaled else None
    s.add("input", at["hook_resid_pre"], "X", "[T, d_model]", home, note=note, first=scaled)
    sym, last = "X", "input"
    for number, block in enumerate(blocks, start=1):
        sym, last = _attention_steps(s, walk, block, number, sym, last)
    _ffn_steps(s, walk, module.ffn, FFN_NORM_SITES[len(blocks) - 1], sym, last)
    return s.steps


def _layer_kind(config, layer: int) -> str:
    """ "local" or "full" in a model whose sliding layers sit among full ones (Gemma 3), else ""."""
    if not getattr(config, "layer_types", ()):
        return ""
    return "local" if config.is_local(layer) else "full"


def _turn(config, layer: int, positions: bool) -> dict:
    """RoPE's notes by step name ("turn") and what its formula adds ("theta"): the layer's own
    base where local and full layers turn by different ones (Gemma 3)."""
    kind = _layer_kind(config, layer)
    theta, turn = "", {}
    for name in ("RoPE on Q", "RoPE on K"):
        turn[name] = NOTES[name] if positions else POSITIONS_OFF
    local = getattr(config, "rope_local_theta", None)
    if kind and positions and local is not None:
        base, other = (local, config.rope_theta) if kind == "local" else (config.rope_theta, local)
        theta = f"  (θ_i = {base:.0f}^(−2i/d_k))"
        local_layer = kind == "local"
        turn = {n: rope_base_note(note, local_layer, base, other) for n, note in turn.items()}
    return {"theta": theta, "turn": turn}


def _attention_steps(
    s: _Steps, walk: dict, block: dict, number: int, sym: str, last: str
) -> tuple[str, str]:
    """One attention of the layer with its Add & Norm: taken apart when the stack names it,
    else its output only. Returns the new stream's symbol and its step's name."""
    kind, home, pre, at = block["kind"], walk["home"], walk["pre"], walk["at"]
    norm_site, residual_site, out_site = NORM_SITES[kind]
    place = "cross" if kind == "cross" else home
    detailed = (kind == "cross") == (walk["stack"] == "cross")
    # the name of this attention's steps: "attention …" when taken apart, else its kind
    label = "attention" if detailed else f"{kind}-attention"
    head_mask = walk["trace"].head_mask.get("cross" if kind == "cross" else home)
    keep = None if head_mask is None else head_mask[walk["layer"]]
    dims = "[T, d_model]"
    src_name, reader = last, sym
    if pre:
        src_name, reader = f"{walk['norm_name']} before {label}", f"{walk['ln']}({sym})"
        s.add(src_name, at[norm_site], reader, dims, place, (last,))
    if kind == "cross":
        kv_sym, mha = "C", f"MultiHead({reader}, C, C)"
    else:
        kv_sym = reader
        mha = ("Masked" if home == "decoder" else "") + f"MultiHead({reader})"
    out_name = f"{label} output"
    sandwich = walk["sandwich"] and detailed
    if sandwich:  # W_O's own output, then the second norm's (what hook_attn_out sees)
        out_site = SANDWICH_SITES["attention"][0]
    if detailed:
        parts = walk["parts"] | {"attention output": at[out_site]}
        info = {"place": place, "reader": reader, "kv": kv_sym, "src": src_name}
        info.update(kind=kind, home=home, allowed=block["allowed"], keep=keep)
        info.update(mode=walk["trace"].ablation, layers=_layer_kind(s.config, walk["layer"]))
        info.update(_turn(s.config, walk["layer"], walk["trace"].positions))
        _detail(s, parts, info | {"mha": mha, "attn": block["attn"]})
    else:
        s.add(out_name, at[out_site], mha, dims, place, (src_name,))
    new = f"X{'₁₂'[number - 1]}"
    res_name = f"{label} residual"
    if sandwich:
        post = f"RMSNorm on {label} output"
        mha = f"RMSNorm_post({mha})"
        s.add(post, at[SANDWICH_SITES["attention"][1]], mha, dims, place, (out_name,))
        out_name = post
    added = f"{new} = {sym} + {mha}" if pre else f"{sym} + {mha}"
    s.add(res_name, at[residual_site], added, dims, place, (last, out_name))
    last = res_name
    if not pre:
        last = f"LayerNorm after {label}"
        s.add(last, at[norm_site], f"{new} = LayerNorm({sym} + {mha})", dims, place, (res_name,))
    return new, last


def _ffn_steps(s: _Steps, walk: dict, ffn: nn.Module, norm_site: str, sym: str, last: str) -> None:
    """The FFN with its Add & Norm, then the layer's output."""
    cfg, home, pre, at = s.config, walk["home"], walk["pre"], walk["at"]
    dims = "[T, d_model]"
    src_name, reader = last, sym
    if pre:
        src_name, reader = f"{walk['norm_name']} before FFN", f"{walk['ln']}({sym})"
        s.add(src_name, at[norm_site], reader, dims, home, (last,))
    if cfg.mlp == "gated":
        act = _ACT[cfg.activation].format(x="G")
        note = GATED_HIDDEN_GELU if cfg.activation.startswith("gelu") else GATED_HIDDEN
        for name, key, weight in (("FFN gate", "gate", "G"), ("FFN up", "up", "U")):
            linear = getattr(ffn, f"w_{key}")
            formula = f"{weight} = {reader} W_{key}{_b(linear, key)}"
            s.add(name, at[FFN_SITES[name]], formula, "[T, d_ff]", home, (src_name,))
        reads = ("FFN gate", "FFN up")
        hidden = at[FFN_SITES["FFN hidden"]]
        s.add("FFN hidden", hidden, f"{act} ⊙ U", "[T, d_ff]", home, reads, note)
        formula = f"FFN({reader}) = ({act} ⊙ U) W_down{_b(ffn.w_down, 'down')}"
    else:
        inner = _ACT[cfg.activation].format(x=f"{reader} W_1{_b(ffn.fc1, '1')}")
        s.add("FFN hidden", at[FFN_SITES["FFN hidden"]], inner, "[T, d_ff]", home, (src_name,))
        formula = f"FFN({reader}) = {inner} W_2{_b(ffn.fc2, '2')}"
    raw, normed = SANDWICH_SITES["FFN"]
    output, out_name, ffn_sym = FFN_SITES["FFN output"], "FFN output", f"FFN({reader})"
    if walk["sandwich"]:  # W_down's own output, then the second norm's (hook_mlp_out's)
        output = raw
    s.add("FFN output", at[output], formula, dims, home, ("FFN hidden",))
    if walk["sandwich"]:
        ffn_sym, out_name = f"RMSNorm_post({ffn_sym})", "RMSNorm on FFN output"
        s.add(out_name, at[normed], ffn_sym, dims, home, ("FFN output",))
    added = f"{sym} + {ffn_sym}"
    s.add("FFN residual", at[FFN_SITES["FFN residual"]], added, dims, home, (last, out_name))
    last = "FFN residual"
    if not pre:
        added = f"LayerNorm({added})"
        s.add("LayerNorm after FFN", at[norm_site], added, dims, home, (last,))
        last = "LayerNorm after FFN"
    s.add("output", at["hook_resid_post"], f"X_out = {added}", dims, home, (last,))
