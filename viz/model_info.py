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
_POSITIONS = {
    "sinusoidal": "sinusoidal PE, fixed (paper §3.5, seed 002)",
    "learned": "learned position embeddings (BERT, seed 004)",
}
_ACTIVATIONS = {"relu": "ReLU", "gelu": "GELU (erf)", "gelu_tanh": "GELU (tanh approximation)"}


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
    name = source.removeprefix("BERT checkpoint ")
    return tr("BERT checkpoint {name}", name=name) if name != source else tr(source)


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
    activation = _ACTIVATIONS.get(c.activation)
    lines = [
        f"**{_text(c.name)}** — {tr(_FAMILY[c.arch])}",
        "",
        f"{_field('Layers')} {stacks} · **{tr('heads')}** h = {c.n_heads} · "
        f"**d_model** = {c.d_model} · **d_ff** = {c.d_ff} · **d_head** = d_model / h = {c.d_head}",
        f"{_field('Norm')} {tr(_NORM[c.norm])} (ε = {c.layer_norm_eps:g})",
        f"{_field('Positions')} "
        + tr("{kind}, up to {n} tokens", kind=tr(_POSITIONS[c.positions]), n=c.max_len),
        f"{_field('FFN activation')} {tr(activation) if activation else _text(c.activation)}",
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
)


def component_name(name: str) -> str:
    """A parameter group of ``Transformer.param_counts`` in the request's language: "encoder
    FFN" → "编码器 FFN"."""
    for pattern in STACK_PARTS:
        for stack in ("encoder", "decoder"):
            if name == pattern.format(stack=stack):
                return tr(pattern, stack=tr(stack))
    return tr(name)


def param_table(param_counts: dict[str, int]) -> pd.DataFrame:
    """Columns component, parameters, share % (one decimal), and a final "total" row, all in
    the request's language."""
    total = sum(int(v) for v in param_counts.values())
    columns = [tr("component"), tr("parameters"), tr("share %")]
    rows = [
        (component_name(name), int(count), round(100.0 * int(count) / total, 1) if total else 0.0)
        for name, count in param_counts.items()
    ]
    rows.append((tr("total"), total, 100.0 if total else 0.0))
    return pd.DataFrame(rows, columns=columns)


def config_table(config) -> pd.DataFrame:
    """Columns field, value (as text) for every config field, plus the derived d_head."""
    items = list(config.to_dict().items())
    items.insert([k for k, _ in items].index("n_heads") + 1, ("d_head", config.d_head))
    return pd.DataFrame(
        {tr("field"): [k for k, _ in items], tr("value"): [str(v) for _, v in items]},
        columns=[tr("field"), tr("value")],
    )
