"""What model ran, and where: architecture summary, parameter counts, the config itself."""

from __future__ import annotations

import html

import pandas as pd

from lang import tr


def _text(value: str) -> str:
    """Escape <, > and & for markdown prose (gr.Markdown renders HTML); quotes stay readable."""
    return html.escape(value, quote=False)


CAPTIONS = {
    "architecture": (
        "**The model in one glance** — family, where the LayerNorm sits (post-norm LN(x + f(x)) "
        "or pre-norm x + f(LN(x))), how positions enter, and d_head = d_model / h."
    ),
    "params": (
        "**Parameters per component** (seed 001's get_num_params); share = component / total. "
        "Sinusoidal positions are a fixed buffer: 0 parameters."
    ),
    "config": "**The config** — every field of the frozen TransformerConfig this model was built "
    "from.",
}

_FAMILY = {
    "encoder": "encoder-only (BERT-style: every token sees every token)",
    "decoder": "decoder-only (GPT-style: causal self-attention)",
    "encoder-decoder": "encoder–decoder (the paper's: self-, masked self- and cross-attention)",
}
_NORM = {
    "post": "post-norm: LN(x + Sublayer(x)) (the paper, BERT)",
    "pre": "pre-norm: x + Sublayer(LN(x)), a final LayerNorm ends each stack (seed 001, GPT-2)",
}
_RMS_NORM = (
    "pre-norm with RMSNorm: x + Sublayer(RMSNorm(x)), RMSNorm(x) = g · x / √(mean(x²) + ε), "
    "no mean and no bias; a final RMSNorm ends the stack (LLaMA)"
)
_POSITIONS = {
    "sinusoidal": "sinusoidal PE, fixed (paper §3.5, seed 002)",
    "learned": "learned position embeddings (BERT, seed 004)",
    "rotary": "rotary (RoPE, Su et al. 2021): nothing is added to the embedding; each head's q "
    "and k are turned by angles set by their position, pair i by θ_i = base^(−2i/d_head) per "
    "token",
    "none": "none: the model sees no order",
}
_ACTIVATIONS = {
    "relu": "ReLU",
    "gelu": "GELU (erf)",
    "gelu_tanh": "GELU (tanh approximation)",
    "silu": "SiLU (x · σ(x))",
}


def _where(device: str) -> str:
    if device.startswith("cuda"):
        return f"CUDA GPU (`{_text(device)}`)"
    if device.startswith("mps"):
        return f"Apple GPU (`{_text(device)}`)"
    return "CPU" if device.startswith("cpu") else f"`{_text(device)}`"


def _millions(n: int) -> str:
    return f"{n / 1e6:.1f} M" if n >= 1e5 else f"{n / 1e3:.1f} k"


def _field(name: str) -> str:
    """A summary line's bold name ("- **Layers:**")."""
    return f"- **{tr(name)}:**"


def _source(source: str) -> str:
    """Where a model comes from, in the request's language (a checkpoint's name as it is)."""
    family, found, name = source.partition(" checkpoint ")
    if found and family in ("BERT", "GPT-2", "LLaMA", "Qwen2", "Mistral"):
        return tr("{family} checkpoint {name}", family=family, name=name)
    return tr(source)


def _grouped(c) -> list[str]:
    """Grouped-query attention's line (LLaMA 2 70B, Mistral, Qwen2; Ainslie et al. 2023)."""
    if c.kv_heads == c.n_heads:
        return []
    return [
        f"{_field('Key/value heads')} "
        + tr(
            "{kv} (grouped-query attention: each key/value head serves {ratio} query heads; "
            "query head h reads key/value head h // {ratio})",
            kv=c.kv_heads,
            ratio=c.n_heads // c.kv_heads,
        )
    ]


def _rotary(c) -> list[str]:
    """RoPE's base, its LLaMA 3 scaling, and Mistral's attention band."""
    lines = []
    if c.positions == "rotary":
        said = tr("base θ = {theta:g}", theta=c.rope_theta)
        if c.rope_llama3 is not None:
            factor, _, _, context = c.rope_llama3
            said += " · " + tr(
                "LLaMA 3 scaling: slow pairs turn {factor:g}× slower (trained on {n} tokens)",
                factor=factor,
                n=context,
            )
        lines.append(f"{_field('RoPE')} {said}")
    local = [i for i in range(c.n_layers) if getattr(c, "is_local", lambda i: False)(i)]
    if c.sliding_window is not None and local:  # Gemma 3: some layers only, their own RoPE base
        lines.append(
            f"{_field('Attention window')} "
            + tr(
                "in layers {layers}, each query sees its last {n} keys (itself included) and "
                "RoPE turns by base θ = {theta:g}; the other layers see every earlier key",
                layers=", ".join(map(str, local)),
                n=c.sliding_window,
                theta=c.rope_local_theta or c.rope_theta,
            )
        )
    elif c.sliding_window is not None:
        lines.append(
            f"{_field('Attention window')} "
            + tr("each query sees its last {n} keys (itself included)", n=c.sliding_window)
        )
    return lines


def _gated(c) -> list[str]:
    """The gated MLP's formula (LLaMA's SwiGLU; Shazeer 2020)."""
    if c.mlp != "gated":
        return []
    activation = _ACTIVATIONS.get(c.activation, c.activation).split(" (")[0]
    return [
        f"{_field('MLP')} "
        + tr(
            "gated: W_down({act}(x W_gate) ⊙ (x W_up)), three matrices of d_model × d_ff",
            act=_text(activation),
        )
    ]


def architecture_markdown(config, device: str, n_params: int) -> str:
    """A markdown summary of the model: family, norm, positions, sizes, seed, device."""
    c = config
    stacks = (
        tr("{n} encoder + {n} decoder layers", n=c.n_layers)
        if c.arch == "encoder-decoder"
        else tr(
            {"encoder": "{n} encoder layers", "decoder": "{n} decoder layers"}[c.arch], n=c.n_layers
        )
    )
    extras = []
    if c.type_vocab_size:
        extras.append(tr("{n} token types", n=c.type_vocab_size))
    if c.embedding_norm:
        extras.append(tr("LayerNorm after the embedding sum"))
    if c.lm_head:
        extras.append(tr("LM head") if c.lm_head_bias else tr("LM head (no bias)"))
    if c.pooler:
        extras.append(tr("[CLS] pooler"))
    if c.tie_lm_head:
        extras.append(tr("the LM head is the token embedding matrix (tied)"))
    activation = _ACTIVATIONS.get(c.activation)
    activation = tr(activation) if activation else _text(c.activation)
    norm = tr(_RMS_NORM) if c.norm_kind == "rms" else tr(_NORM[c.norm])
    lines = [
        f"**{_text(c.name)}** — {tr(_FAMILY[c.arch])}",
        "",
        f"{_field('Layers')} {stacks} · **{tr('heads')}** h = {c.n_heads} · "
        f"**d_model** = {c.d_model} · **d_ff** = {c.d_ff} · **d_head** = d_model / h = {c.d_head}",
        *_grouped(c),
        f"{_field('Norm')} {norm} (ε = {c.layer_norm_eps:g})",
        f"{_field('Positions')} "
        + tr("{kind}, up to {n} tokens", kind=tr(_POSITIONS[c.positions]), n=c.max_len),
        *_rotary(c),
        f"{_field('FFN activation')} {activation}",
        *_gated(c),
        f"{_field('Vocabulary')} "
        + tr("{n:,} ids", n=c.vocab_size)
        + (f" · {tr(', ').join(extras)}" if extras else ""),
        f"{_field('Parameters')} {n_params:,} ({_millions(n_params)})",
    ]
    if c.source:
        lines.append(f"{_field('Follows')} {_text(_source(c.source))}")
    lines.append(f"{_field('Ran on')} {_where(device)}")
    return "\n".join(lines)


# Transformer.param_counts' names of a stack's parts, the stack as a field (it is translated too).
STACK_PARTS = (
    "{stack} self-attention",
    "{stack} cross-attention",
    "{stack} FFN",
    "{stack} Add & Norm LayerNorms",
    "{stack} final LayerNorm",
    "{stack} Add & Norm RMSNorms",
    "{stack} final RMSNorm",
    "{stack} gated MLP (W_gate, W_up, W_down)",
)


def component_name(name: str) -> str:
    """A parameter group of ``Transformer.param_counts`` in the request's language: "encoder
    FFN" through the pattern "{stack} FFN" and the stack's own name."""
    for pattern in STACK_PARTS:
        for stack in ("encoder", "decoder"):
            if name == pattern.format(stack=stack):
                return tr(pattern, stack=tr(stack))
    return tr(name)


def param_table(param_counts: dict[str, int], config=None) -> pd.DataFrame:
    """Columns component, parameters, share % (one decimal), and a final "total" row, all in
    the request's language; a gated MLP (``config.mlp``) is named so, not "FFN"."""
    if config is not None and config.mlp == "gated":
        param_counts = {
            name.replace(" FFN", " gated MLP (W_gate, W_up, W_down)"): count
            for name, count in param_counts.items()
        }
    total = sum(int(v) for v in param_counts.values())
    columns = [tr("component"), tr("parameters"), tr("share %")]
    rows = [
        (component_name(name), int(count), round(100.0 * int(count) / total, 1) if total else 0.0)
        for name, count in param_counts.items()
    ]
    rows.append((tr("total"), total, 100.0 if total else 0.0))
    return pd.DataFrame(rows, columns=columns)


# What each config field means, beside its code name (which the table keeps: it is the name a
# script and TransformerConfig use), said in the page's language.
MEANINGS = {
    "name": "the model's name",
    "arch": "architecture: encoder, decoder or both",
    "vocab_size": "vocabulary size: rows of the token embedding table",
    "d_model": "width of the residual stream: one vector per token",
    "n_heads": "attention heads per layer",
    "d_head": "width of one head: d_model / n_heads",
    "n_layers": "layers per stack",
    "d_ff": "width of the FFN's hidden layer",
    "max_len": "the most tokens one text may have",
    "norm": "where the norm sits: after the residual add (post) or before the sublayer (pre)",
    "activation": "the FFN's activation function",
    "positions": "how token positions enter the model",
    "type_vocab_size": "segment (token type) embeddings; 0 = none",
    "embedding_norm": "a LayerNorm after the embedding sum",
    "layer_norm_eps": "ε added to the variance in each norm",
    "dropout": "dropout rate while training (never while tracing)",
    "lm_head": "a language-model head: Linear(d_model, vocab_size) on the last stack",
    "lm_head_bias": "the language-model head has a bias",
    "pooler": "BERT's pooler over the [CLS] vector",
    "final_norm": "a norm at the end of each stack",
    "token_labels": "labels of a per-token classifier; empty = none",
    "pad_id": "id of the padding token",
    "seed": "random seed of the initial weights",
    "norm_kind": "kind of norm: LayerNorm (layer) or RMSNorm (rms)",
    "rope_theta": "RoPE's base θ",
    "rope_llama3": "LLaMA 3's RoPE scaling; None = none",
    "n_kv_heads": "key/value heads (grouped-query attention); None = as many as query heads",
    "mlp": "kind of MLP: FFN (ffn) or gated MLP (gated)",
    "attn_bias": "W_Q, W_K and W_V have biases",
    "attn_out_bias": "W_O has a bias",
    "mlp_bias": "the MLP's linear layers have biases",
    "tie_lm_head": "the language-model head reuses the token embedding matrix",
    "sliding_window": "a query sees only this many last keys; None = all",
    "layer_types": "each layer's attention kind, sliding or full; empty = all alike",
    "rope_local_theta": "RoPE's base θ in the sliding layers; None = rope_theta",
    "head_dim": "a head's width when it is not d_model / n_heads; None = d_model / n_heads",
    "qk_norm": "an RMSNorm on every query and key head",
    "sandwich_norm": "a second norm on each sublayer's output",
    "norm_offset": "RMSNorm's gain is 1 + w",
    "embed_scale": "token embeddings multiplied by √d_model",
    "source": "the tutorial or checkpoint this model follows",
}


def config_value(name: str, value) -> str:
    """A field's value as text: code values as they are, where the model comes from in words."""
    return _source(value) if name == "source" and value else str(value)


def config_table(config) -> pd.DataFrame:
    """Columns field, value (as text) and meaning for every config field, plus the derived
    d_head: the code names stay, their meaning is said in the page's language."""
    items = list(config.to_dict().items())
    items.insert([k for k, _ in items].index("n_heads") + 1, ("d_head", config.d_head))
    columns = [tr("field"), tr("value"), tr("meaning")]
    rows = [(k, config_value(k, v), tr(MEANINGS[k]) if k in MEANINGS else "") for k, v in items]
    return pd.DataFrame(rows, columns=columns)
