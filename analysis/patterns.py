"""Head detection scores: TransformerLens's head_detector and Olsson et al. 2022's prefix matching.

A detection pattern is a T×T 0/1 matrix of the (query, key) pairs a head of some type should
attend to. TransformerLens (``transformer_lens.head_detector``, Nanda et al.) scores a head by
its default ``error_measure="mul"``: Σ(A ∘ P) / ΣA, the share of all the head's attention that
falls on the pattern (ΣA is the number of query rows, every row summing to 1), with its defaults
``exclude_bos=False`` and ``exclude_current_token=False`` (nothing is zeroed first).
"""

from __future__ import annotations

import pandas as pd
import torch

from analysis.tokens import check_stack, real_tokens
from model.trace import Trace

DETECTORS = ("previous_token", "duplicate_token", "induction")
COLUMNS = ("layer", "head", *DETECTORS, "prefix_matching")
ALIASES = {  # user-facing names of pattern_mask -> canonical name
    "first": "first",
    "bos": "first",
    "cls": "first",
    "first_token": "first",
    "self": "self",
    "current": "self",
    "itself": "self",
    "current_token": "self",
    "same_word": "same_token",
    "same_token": "same_token",
    "duplicate": "same_token",
    "previous": "previous",
    "prev": "previous",
    "previous_token": "previous",
    "next": "next",
    "next_token": "next",
}


def detection_patterns(ids: list) -> dict[str, torch.Tensor]:
    """TransformerLens's three detection patterns for one sequence, float [T, T] each.

    previous_token: 1 at (i, i-1). duplicate_token: 1 at (i, j) for j < i with the same token.
    induction: the duplicate pattern shifted one key to the right, 1 at (i, j) for j ≤ i whose
    preceding token j-1 equals token i. All three are lower-triangular, as head_detector builds
    them (torch.tril).
    """
    t = len(ids)
    codes: dict = {}
    tokens = torch.tensor([codes.setdefault(x, len(codes)) for x in ids])  # (T,) ids or strings
    previous = torch.zeros(t, t)
    previous[1:, :-1] = torch.eye(t - 1)  # (T, T) the diagonal below the main one
    same = (tokens[:, None] == tokens[None, :]).float()  # (T, T)
    same.fill_diagonal_(0)  # a token is always a duplicate of itself: ignored
    duplicate = torch.tril(same)
    induction = torch.zeros(t, t)
    induction[:, 1:] = duplicate[:, :-1]  # (T, T) roll one key right, the first column 0
    return {
        "previous_token": torch.tril(previous),
        "duplicate_token": duplicate,
        "induction": torch.tril(induction),
    }


def pattern_mask(tokens: list[str], name: str) -> torch.Tensor:
    """A named attention pattern as a bool [T, T] mask, True where query i should attend key j.

    Names: "first" (the first token), "self", "same word" / "same_token" (other positions holding
    the same token, itself excluded), "previous" (i-1), "next" (i+1). Case, hyphens, spaces and
    a leading "attend to the" do not matter ("attend to the previous token" works). Pass the
    mask as ``head_patterns(..., custom=mask)``.
    """
    key = " ".join(name.lower().split())
    for prefix in ("attend to ", "attends to ", "the "):
        key = key.removeprefix(prefix)
    key = key.replace("-", "_").replace(" ", "_")
    if key not in ALIASES:
        names = '"first", "self", "same word", "previous" and "next"'
        raise ValueError(
            f"There is no attention pattern called {name!r}; the patterns are {names}."
        )
    t = len(tokens)
    mask = torch.zeros(t, t, dtype=torch.bool)
    kind = ALIASES[key]
    if kind == "first":
        mask[:, 0] = True
    elif kind == "self":
        mask.fill_diagonal_(True)
    elif kind == "previous":
        mask[1:, :-1] = torch.eye(t - 1, dtype=torch.bool)
    elif kind == "next":
        mask[:-1, 1:] = torch.eye(t - 1, dtype=torch.bool)
    else:
        mask = torch.tensor([[a == b for b in tokens] for a in tokens], dtype=torch.bool)
        mask.fill_diagonal_(False)
    return mask  # (T, T)


def _stack_ids(trace: Trace, stack: str) -> torch.Tensor:
    """The token ids the stack's queries and keys read, [B, T]."""
    if stack == "decoder" and trace.tgt_ids is not None:
        return trace.tgt_ids
    return trace.input_ids


def head_patterns(
    trace: Trace, stack: str = "encoder", item: int = 0, custom: torch.Tensor | None = None
) -> pd.DataFrame:
    """One row per (layer, head): how much of the head's attention follows each pattern.

    previous_token, duplicate_token, induction: TransformerLens's detect_head with its defaults
    (error_measure "mul": Σ(A ∘ P) / ΣA over all query rows, exclude_bos and
    exclude_current_token False; lower-triangular patterns, so on an encoder only earlier keys
    count). prefix_matching (Olsson et al. 2022, "In-context Learning and Induction Heads"): the
    attention on tokens right after earlier occurrences of the query's token, averaged over the
    queries that have such an occurrence (NaN when none has). custom: Σ(A ∘ M) / ΣA for a bool
    mask M [T, T] over this item's positions (pattern_mask makes one). Only real tokens count:
    padding is cut out as a query, a key and a token of the patterns.
    """
    check_stack(trace, stack)
    if stack == "cross":
        raise ValueError(
            "Head patterns compare a sequence's tokens with its own earlier tokens; "
            "cross-attention reads another sequence, so pick 'encoder' or 'decoder'."
        )
    attention = trace.attentions[stack]  # (B, L, H, T, T)
    if not 0 <= item < attention.shape[0]:
        raise ValueError(f"item {item} is outside this batch of {attention.shape[0]} texts.")
    real = real_tokens(trace, stack)[0][item].cpu()  # (T,)
    idx = real.nonzero().squeeze(1)
    alpha = attention[item].detach().cpu().double()[:, :, idx][:, :, :, idx]  # (L, H, n, n)
    ids = _stack_ids(trace, stack)[item].cpu()[idx].tolist()
    patterns = {k: v.double() for k, v in detection_patterns(ids).items()}  # (n, n) each
    total = alpha.sum((-2, -1))  # (L, H): ΣA
    scores = {name: (alpha * p).sum((-2, -1)) / total for name, p in patterns.items()}
    on_prefix = (alpha * patterns["induction"]).sum(-1)  # (L, H, n)
    has = patterns["induction"].sum(-1) > 0  # (n,) queries with an earlier occurrence
    scores["prefix_matching"] = on_prefix[..., has].mean(-1)  # (L, H), NaN when none
    columns = list(COLUMNS)
    if custom is not None:
        mask = torch.as_tensor(custom).cpu()
        t = attention.shape[-1]
        if mask.shape != (t, t):
            raise ValueError(
                f"The custom pattern is {tuple(mask.shape)}, but this text has {t} token "
                f"positions: draw a {t}×{t} pattern."
            )
        mask = mask.double()[idx][:, idx]  # (n, n)
        scores["custom"] = (alpha * mask).sum((-2, -1)) / total
        columns.append("custom")
    n_layers, n_heads = alpha.shape[:2]
    layer, head = torch.meshgrid(torch.arange(n_layers), torch.arange(n_heads), indexing="ij")
    frame = {"layer": layer.flatten().numpy(), "head": head.flatten().numpy()}
    frame.update({name: scores[name].flatten().numpy() for name in columns[2:]})
    return pd.DataFrame(frame, columns=columns)
