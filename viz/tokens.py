"""Tokens as the model sees them: chips with position and id, a table, and the tensor shapes.

Every token string is escaped (viz.common.safe) before it reaches HTML: a token can be
``<img src=x onerror=alert(1)>``. Tables hold plain text (gr.Dataframe shows "str" cells as text).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd
import torch

from lang import tr
from viz.common import display_token, safe

CHIP_CHARS = 24  # a chip shows longer tokens than an axis label; the full token is in its tooltip

KINDS = {  # kind -> legend text, in the order the legend lists them
    "word": "token",
    "continuation": "word piece (##…, continues the previous token)",
    "special": "special token",
    "unknown": "unknown token (not in the vocabulary)",
}

CAPTIONS = {
    "chips": (
        "The text as the tokenizer cut it: each chip is one token, with its **position** (its "
        "row in every tensor below) and its **id** (its row in the embedding table "
        "`E[vocab, d_model]`)."
    ),
    "table": "One row per token: position, token, id, kind.",
    "shapes": (
        "Shapes as the tensors flow in: `input_ids [B, T]` picks rows of `E`, giving "
        "`[B, T, d_model]`; positions `[T, d_model]` broadcast over the batch."
    ),
}

_STYLE = """<style>
.ta-tokens { font-family: Inter, system-ui, sans-serif; color: inherit; line-height: 1.2; }
.ta-tokens .ta-chips { display: flex; flex-wrap: wrap; gap: 6px 4px; align-items: stretch; }
.ta-tokens .ta-chip { display: inline-flex; flex-direction: column; align-items: center;
  min-width: 2.2em; padding: 3px 6px; border-radius: 6px; color: inherit;
  background: rgba(128, 128, 128, 0.12); border: 1px solid rgba(128, 128, 128, 0.45); }
.ta-tokens .ta-tok { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 14px; font-weight: 600; white-space: pre; }
.ta-tokens .ta-meta { font-size: 10.5px; opacity: 0.75; white-space: nowrap;
  font-variant-numeric: tabular-nums; }
.ta-tokens .ta-hash { opacity: 0.55; font-weight: 400; }
.ta-tokens .ta-special { background: rgba(217, 119, 6, 0.18);
  border-color: rgba(217, 119, 6, 0.85); }
.ta-tokens .ta-continuation { background: rgba(37, 99, 235, 0.13);
  border: 1px dashed rgba(59, 130, 246, 0.9); }
.ta-tokens .ta-unknown { background: rgba(220, 38, 38, 0.2);
  border: 2px solid rgba(220, 38, 38, 0.9); }
.ta-tokens .ta-legend { display: flex; flex-wrap: wrap; gap: 4px 14px; margin: 0 0 8px 0;
  font-size: 12px; opacity: 0.9; align-items: center; }
.ta-tokens .ta-legend .ta-chip { min-width: 1.2em; padding: 0 6px; }
.ta-tokens .ta-legend-item { display: inline-flex; gap: 5px; align-items: center; }
</style>"""


def token_kind(token: str, special_tokens: Iterable[str], unk_token: str | None) -> str:
    """One of KINDS: "unknown", "special", "continuation" (WordPiece "##ing") or "word"."""
    if unk_token is not None and token == unk_token:
        return "unknown"
    if token in special_tokens:
        return "special"
    if token.startswith("##") and len(token) > 2:
        return "continuation"
    return "word"


def _id_list(ids: Sequence[int] | torch.Tensor) -> list[int]:
    if isinstance(ids, torch.Tensor):
        return [int(i) for i in ids.detach().cpu().reshape(-1).tolist()]
    return [int(i) for i in ids]


def _check_lengths(tokens: Sequence[str], ids: list[int]) -> None:
    if len(tokens) != len(ids):
        raise ValueError(f"Got {len(tokens)} tokens but {len(ids)} ids; pass one id per token.")


def _chip(position: int, token: str, token_id: int, kind: str) -> str:
    shown = display_token(token, CHIP_CHARS)
    if kind == "continuation":
        body = f'<span class="ta-hash">##</span>{safe(display_token(token[2:], CHIP_CHARS - 2))}'
    else:
        body = safe(shown)
    title = safe(
        tr("position {position} · id {id}", position=position, id=token_id)
        + f" · {tr(KINDS[kind])} · {token!r}"
    )
    return (
        f'<span class="ta-chip ta-{kind}" title="{title}">'
        f'<span class="ta-tok">{body}</span>'
        f'<span class="ta-meta">{position} · {token_id}</span></span>'
    )


def _legend(kinds_present: set[str]) -> str:
    items = [
        '<span class="ta-legend-item"><span class="ta-chip">'
        f'<span class="ta-tok">{safe(tr("token"))}</span>'
        f'<span class="ta-meta">{safe(tr("position · id"))}</span></span></span>'
    ]
    for kind, text in KINDS.items():
        if kind == "word" or kind in kinds_present:
            sample = '<span class="ta-hash">##</span>' if kind == "continuation" else "&nbsp;"
            items.append(
                f'<span class="ta-legend-item"><span class="ta-chip ta-{kind}">'
                f'<span class="ta-tok">{sample}</span></span>{safe(tr(text))}</span>'
            )
    return f'<div class="ta-legend">{"".join(items)}</div>'


def token_chips_html(
    tokens: Sequence[str],
    ids: Sequence[int] | torch.Tensor,
    special_tokens: Iterable[str] = (),
    unk_token: str | None = None,
) -> str:
    """One chip per token (token, position, id); special, ## and unknown tokens marked.

    Args:
        tokens: token strings of one text, padding removed (viz.common.stack_tokens).
        ids: their ids, same length.
        special_tokens: e.g. ``tokenizer.all_special_tokens``.
        unk_token: e.g. ``tokenizer.unk_token``.
    Returns:
        An HTML fragment with its own <style>, scoped under ``.ta-tokens``.
    """
    id_list = _id_list(ids)
    _check_lengths(tokens, id_list)
    special = set(special_tokens)
    kinds = [token_kind(t, special, unk_token) for t in tokens]
    chips = "".join(
        _chip(i, t, k, kind)
        for i, (t, k, kind) in enumerate(zip(tokens, id_list, kinds, strict=True))
    )
    return (
        f'<div class="ta-tokens">{_STYLE}{_legend(set(kinds))}'
        f'<div class="ta-chips">{chips}</div></div>'
    )


def tokens_table(
    tokens: Sequence[str],
    ids: Sequence[int] | torch.Tensor,
    special_tokens: Iterable[str] = (),
    unk_token: str | None = None,
) -> pd.DataFrame:
    """Columns position, token (display text, not escaped), id, kind (headers and kinds in the
    request's language, lang.tr)."""
    id_list = _id_list(ids)
    _check_lengths(tokens, id_list)
    special = set(special_tokens)
    return pd.DataFrame(
        {
            tr("position"): list(range(len(tokens))),
            tr("token"): [display_token(t, CHIP_CHARS) for t in tokens],
            "id": id_list,
            tr("kind"): [tr(token_kind(t, special, unk_token)) for t in tokens],
        }
    )


def _shape(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _side_line(
    ids_name: str, t_name: str, emb_name: str, shape_ids, d_model: int, stack: str, trace
) -> str:
    b, t = (int(s) for s in shape_ids)
    line = (
        f"`{ids_name} [B, {t_name}] = {_shape((b, t))}` → "
        f"`{tr(emb_name)} [B, {t_name}, d_model] = {_shape((b, t, d_model))}`"
    )
    if trace.config.positions == "rotary":  # nothing added: each layer turns q and k instead
        line += " " + tr("(RoPE: no position vector; every layer turns q and k by position)")
    else:
        line += f" + `{tr('position')} [{t_name}, d_model] = {_shape((t, d_model))}`"
    if "token_type" in trace.embeddings.get(stack, {}):
        line += f" + `{tr('token type')} [B, {t_name}, d_model] = {_shape((b, t, d_model))}`"
    if trace.config.embedding_norm:
        line += " → LayerNorm"
    hidden = trace.hidden_states.get(stack)
    if hidden is not None:
        states = tr("{stack} hidden states", stack=tr(stack))
        line += f" → `{states} [B, L+1, {t_name}, d_model] = {_shape(hidden.shape)}`"
    return line


def shapes_markdown(trace) -> str:
    """The input side's shapes (and the target side's for encoder-decoder models) as markdown."""
    cfg = trace.config
    d = cfg.d_model
    first = cfg.first_stack
    lines = [
        _side_line("input_ids", "T", "token embedding", trace.input_ids.shape, d, first, trace)
    ]
    if cfg.arch == "encoder-decoder" and trace.tgt_ids is not None:
        lines.append(
            _side_line(
                "tgt_ids", "T_tgt", "target embedding", trace.tgt_ids.shape, d, "decoder", trace
            )
        )
    b = int(trace.input_ids.shape[0])
    head = tr(
        "B = {b} text, T = {t} tokens (padding included)"
        if b == 1
        else "B = {b} texts, T = {t} tokens (padding included)",
        b=b,
        t=int(trace.input_ids.shape[1]),
    )
    if len(lines) > 1:
        head += f", T_tgt = {int(trace.tgt_ids.shape[1])}"
    head += tr(", d_model = {d}, L = {n} layers", d=d, n=cfg.n_layers)
    return tr("**Shapes** — {head}", head=head) + "\n\n" + "\n\n".join(lines)
