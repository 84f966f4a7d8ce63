"""Head measures over a corpus: each averaged over many sentences, as Clark et al. 2019 (§3) do.

One sentence tells little about a head; Clark et al. average over 1,000 Wikipedia segments. Here
a corpus of up to a few hundred sentences (one a line) runs through the model in padded batches,
every measure is taken per sentence on its real tokens only, and each (layer, head) gets the mean
and standard deviation over sentences.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn

from analysis.distances import head_distances
from analysis.head_stats import head_stats
from analysis.norms import norm_attention
from analysis.patterns import head_patterns
from analysis.tokens import real_tokens

MEASURES = ("head_stats", "head_patterns", "norms", "distances")
MAX_SENTENCES = 300
MAX_CHARS = 500  # one line of the corpus; max_tokens cuts the tokens anyway


@dataclass
class CorpusResult:
    """Per (layer, head): mean and std over sentences of every measure, and the mean distances."""

    sentences: int  # how many sentences were measured
    stats: pd.DataFrame  # layer, head, then "<column>_mean" and "<column>_std" per column
    distances: torch.Tensor | None = None  # [L·H, L·H] mean JS divergence (head_distances)
    options: dict = field(default_factory=dict)  # stack, measures, max_tokens: what was asked

    def mean(self, column: str) -> pd.Series:
        """One measure's mean per head, indexed by (layer, head)."""
        return self.stats.set_index(["layer", "head"])[f"{column}_mean"]


def parse_corpus(
    text: str, max_sentences: int = MAX_SENTENCES, max_chars: int = MAX_CHARS
) -> list[str]:
    """The non-empty lines of ``text``, stripped: one sentence a line."""
    lines = [line.strip() for line in text.splitlines()]
    sentences = [line for line in lines if line]
    if not sentences:
        raise ValueError("The corpus is empty: write one sentence a line.")
    if len(sentences) > max_sentences:
        raise ValueError(
            f"The corpus has {len(sentences)} sentences; at most {max_sentences} are measured at "
            "once: remove some lines."
        )
    for number, sentence in enumerate(sentences, start=1):
        if len(sentence) > max_chars:
            raise ValueError(
                f"Sentence {number} has {len(sentence)} characters; a sentence may have at most "
                f"{max_chars}: split it over several lines."
            )
    return sentences


def norm_columns(trace, stack: str, net: nn.Module) -> list[dict[str, torch.Tensor]]:
    """Per item: "norm" Σ_j ‖α_ij f_h(x_j)‖ and "norm_share" (its share of the layer's heads),
    each averaged over real queries, [L, H] (Kobayashi et al. 2020)."""
    per_head = norm_attention(trace, stack, net).sum(-1).double().cpu()  # (B, L, H, T_q)
    share = per_head / per_head.sum(2, keepdim=True).clamp_min(1e-30)  # (B, L, H, T_q)
    real = real_tokens(trace, stack)[0].cpu()  # (B, T_q)
    out = []
    for b in range(per_head.shape[0]):
        q = real[b]
        out.append({"norm": per_head[b][..., q].mean(-1), "norm_share": share[b][..., q].mean(-1)})
    return out


def corpus_key(
    net: nn.Module,
    sentences: Sequence[str],
    stack: str = "encoder",
    measures: Sequence[str] = MEASURES,
    max_tokens: int = 32,
) -> tuple:
    """What decides corpus_stats's result: the model (and its weights' versions), the sentences
    and the options; a cache of results is keyed by it (the Heads tab's, ui/corpus_handlers.py)."""
    options = {"stack": stack, "measures": tuple(measures), "max_tokens": max_tokens}
    digest = hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()
    versions = tuple(p._version for p in net.parameters())  # weights changed in place: a new key
    return (net.config.name, id(net), hash(versions), digest, tuple(sorted(options.items())))


def corpus_stats(
    net: nn.Module,
    tokenizer,
    sentences: Sequence[str],
    stack: str = "encoder",
    measures: Sequence[str] = MEASURES,
    max_tokens: int = 32,
    batch_size: int = 50,
    on_progress: Callable[[int, int], None] | None = None,
) -> CorpusResult:
    """Mean and std over sentences of every head measure, per (layer, head).

    Args:
        net, tokenizer: the model and its tokenizer (BERT's, or ``net.tokenizer``).
        sentences: the corpus, one sentence each (parse_corpus splits a text).
        stack: the self-attention stack to measure ("encoder" or "decoder"; an encoder-decoder's
            decoder reads each sentence itself, so measure its encoder).
        measures: any of "head_stats" (Clark et al. 2019), "head_patterns" (TransformerLens,
            Olsson et al. 2022), "norms" (Kobayashi et al. 2020), "distances" (Clark et al.'s
            JS divergence between heads).
        max_tokens: each sentence is cut to this many tokens (special tokens included).
        batch_size: sentences per forward pass (padded to the batch's longest).
        on_progress: called as on_progress(done, total) after every batch.
    Returns:
        A CorpusResult; std is the sample standard deviation (ddof 1) over the sentences where
        the measure is defined (prefix_matching needs a repeated token), NaN for one sentence.
    """
    unknown = sorted(set(measures) - set(MEASURES))
    if unknown:
        raise ValueError(f"Unknown measures {unknown}; the measures are {list(MEASURES)}.")
    sentences = list(sentences)
    if not sentences:
        raise ValueError("The corpus is empty: give at least one sentence.")
    options = {"stack": stack, "measures": tuple(measures), "max_tokens": max_tokens}
    values: dict[str, list[np.ndarray]] = {}  # column -> one [L, H] array per sentence
    distance_sum = None
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        enc = tokenizer(
            batch, padding=True, truncation=True, max_length=max_tokens, return_tensors="pt"
        )
        inputs = {"attention_mask": enc["attention_mask"]}
        if net.config.arch == "encoder-decoder":  # its decoder must read something: the
            # sentence itself (the page's empty target); only the encoder is measured then
            inputs.update(tgt_ids=enc["input_ids"], tgt_attention_mask=enc["attention_mask"])
        with torch.no_grad():
            trace = net.trace(enc["input_ids"], **inputs)
        norms = norm_columns(trace, stack, net) if "norms" in measures else None
        shape = (trace.config.n_layers, trace.config.n_heads)
        for item in range(len(batch)):
            parts = []
            if "head_stats" in measures:
                parts.append(head_stats(trace, stack, item))
            if "head_patterns" in measures:
                parts.append(head_patterns(trace, stack, item))
            for part in parts:
                for name in part.columns[2:]:
                    per_head = part[name].to_numpy().reshape(shape)  # (L, H)
                    values.setdefault(name, []).append(per_head)
            for name, value in (norms[item] if norms is not None else {}).items():
                values.setdefault(name, []).append(value.numpy())
            if "distances" in measures:
                d = head_distances(trace, stack, item)  # (L·H, L·H)
                distance_sum = d if distance_sum is None else distance_sum + d
        if on_progress is not None:
            on_progress(min(start + batch_size, len(sentences)), len(sentences))
    distances = distance_sum / len(sentences) if distance_sum is not None else None
    result = CorpusResult(len(sentences), summary(values), distances, options)
    return result


def summary(values: dict[str, list[np.ndarray]]) -> pd.DataFrame:
    """layer, head, then "<name>_mean" and "<name>_std" (ddof 1) over sentences, NaN skipped."""
    if not values:
        return pd.DataFrame(columns=["layer", "head"])
    n_layers, n_heads = next(iter(values.values()))[0].shape
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    frame = {"layer": layer.ravel(), "head": head.ravel()}
    with warnings.catch_warnings():  # a measure no sentence defines stays NaN, silently
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, per_sentence in values.items():
            stacked = np.stack(per_sentence)  # (S, L, H)
            frame[f"{name}_mean"] = np.nanmean(stacked, 0).ravel()
            frame[f"{name}_std"] = np.nanstd(stacked, 0, ddof=1).ravel()
    return pd.DataFrame(frame)
