"""Activation patching: which heads and which positions carry what makes two texts' answers differ.

Run a clean text and a minimally changed corrupt one (same number of tokens); then run the corrupt
text again with one activation taken from the clean run, and measure how much of the clean answer
comes back (Meng et al. 2022, "Locating and Editing Factual Associations in GPT", causal tracing;
Wang et al. 2022, "Interpretability in the Wild", path patching's parent; Heimersheim & Nanda
2024, "How to use and interpret activation patching"). Each entry is the share restored,

    (m_patched − m_corrupt) / (m_clean − m_corrupt):

0 = the patch restores nothing (the corrupt answer), 1 = it restores the clean answer whole;
values below 0 or above 1 happen (the patch pushes further either way). This is "denoising"
(clean into corrupt), TransformerLens's ``patching`` convention.

Every patched run is a real forward pass of the model with the patch passed as an argument
(model/patch.py), batched: one call per layer, one batch item per head or position, the layers
before the patched one not run again (their output is the corrupt run's).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from lang import Msg
from model.patch import Logits, Patch

Metric = Callable[..., "torch.Tensor | float"]
INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids", "tgt_ids", "tgt_attention_mask")
CHUNK_TOKENS = 8192  # tokens per patched call: batch items × T (memory stays near one long text)


def logit_diff(
    answer: int | Sequence[int], wrong: int | Sequence[int], position: int = -1
) -> Metric:
    """The metric trace -> logits[:, position, answer] − logits[:, position, wrong], one per batch
    item ([B]; a model with a token classifier: its label logits). For a dataset of N pairs,
    answer and wrong are N ids each: batch item b reads pair b mod N's (the attributions run a
    dataset in blocks of N, pair i at items i, N + i, 2N + i, …)."""

    def metric(trace) -> torch.Tensor:
        logits = trace.logits if trace.logits is not None else trace.label_logits
        if logits is None:
            raise ValueError(
                Msg("This model has no output head: measure its outputs (analysis.cosine_to).")
            )
        at = logits[:, position]  # (B, vocab)
        if isinstance(answer, numbers.Integral) and isinstance(wrong, numbers.Integral):
            return at[:, answer] - at[:, wrong]
        ids = [torch.as_tensor(x, device=at.device).reshape(-1) for x in (answer, wrong)]
        item = torch.arange(at.shape[0], device=at.device)
        a, w = (x[item % x.numel()] for x in ids)
        return at[item, a] - at[item, w]

    return metric


def cosine_to(clean_trace, position: int, stack: str | None = None) -> Metric:
    """The metric trace -> cos(outputs[stack][:, position], the clean run's at that position), [B]:
    for an encoder without a head (BERT); stack defaults to the model's last."""

    def metric(trace) -> torch.Tensor:
        name = stack or _last_stack(trace.config)
        out = trace.outputs[name][:, position]  # (B, d_model)
        ref = clean_trace.outputs[name][0, position].to(out.device)  # (d_model,)
        return torch.nn.functional.cosine_similarity(out, ref[None], dim=-1)

    return metric


def _last_stack(config) -> str:
    return config.last_stream


def _inputs(
    net: nn.Module, clean: Mapping, corrupt: Mapping, pairs: bool = False
) -> tuple[dict, dict]:
    """The two encodings as keyword inputs, refused unless they are one text each of one length
    (``pairs``: or N texts each, [N, T], the i-th clean text paired with the i-th corrupt)."""
    pair = []
    for enc in (clean, corrupt):
        unknown = sorted(set(enc) - set(INPUT_KEYS))
        if unknown or "input_ids" not in enc:
            raise ValueError(f"An encoding holds input_ids and maybe {list(INPUT_KEYS[1:])}.")
        pair.append({k: torch.as_tensor(v) for k, v in enc.items() if v is not None})
    for key in ("input_ids", "tgt_ids"):
        a, b = (p.get(key) for p in pair)
        if a is None and b is None:
            continue
        if a is None or b is None or a.dim() != 2 or b.dim() != 2:
            raise ValueError("Patching compares two single texts: input_ids of shape [1, T] each.")
        if not pairs and (a.shape[0] != 1 or b.shape[0] != 1):
            raise ValueError("Patching compares two single texts: input_ids of shape [1, T] each.")
        if a.shape[0] != b.shape[0]:
            raise ValueError(
                f"A dataset pairs each clean text with a corrupt one: {a.shape[0]} clean texts, "
                f"{b.shape[0]} corrupt."
            )
        if a.shape != b.shape:
            raise ValueError(
                Msg(
                    "The two texts must have the same number of tokens to patch one into the "
                    "other: the clean text has {clean}, the corrupt text {corrupt}.",
                    clean=a.shape[1],
                    corrupt=b.shape[1],
                )
            )
    return pair[0], pair[1]


def _metric_values(metric: Metric, trace, n: int) -> torch.Tensor:
    """metric over a batched trace as a float64 [n] vector: a metric may return one number per
    item ([n]) or, for a batch of one, a single number (then it is called per item)."""
    value = metric(trace)
    value = torch.as_tensor(value, dtype=torch.float64).detach().cpu().reshape(-1)
    if value.numel() == n:
        return value
    if value.numel() == 1 and n > 1:
        return torch.cat([_metric_values(metric, _item(trace, b), 1) for b in range(n)])
    raise ValueError(f"The metric returned {value.numel()} numbers for a batch of {n} runs.")


def _item(trace, b: int):
    """Batch item b of a patched run's outputs-only trace, as a batch of one."""
    from copy import copy

    one = copy(trace)
    pick = slice(b, b + 1)
    one.tokens = trace.tokens[pick]
    one.input_ids, one.attention_mask = trace.input_ids[pick], trace.attention_mask[pick]
    one.outputs = {k: v[pick] for k, v in trace.outputs.items()}
    for name in ("logits", "label_logits", "pooled"):
        value = getattr(trace, name)
        if value is not None:
            value = value.rows(pick) if isinstance(value, Logits) else value[pick]
        setattr(one, name, value)
    return one


class _Pair:
    """The clean and corrupt runs of one pair: their traces, metrics and what patching reads.
    ``traces``: the two runs' traces (with logits) where the caller has them already."""

    def __init__(self, net, clean, corrupt, metric, traces=None, progress=None):
        self.net, self.metric = net, metric
        self.progress = progress  # called (patched runs done, of how many) after each chunk
        self.done, self.total = 0, 0
        self.clean_in, self.corrupt_in = _inputs(net, clean, corrupt)
        if traces is None:
            traces = (
                net.trace(**self.clean_in, with_logits=True),
                net.trace(**self.corrupt_in, with_logits=True),
            )
        self.clean, self.corrupt = traces
        # Measured by the pass the patched runs make (the fused attention kernel, not the
        # trace's explicit one): a patch that changes nothing restores exactly 0, to the bit.
        with torch.no_grad():
            clean_run, corrupt_run = (
                net.patched(patch=None, **x) for x in (self.clean_in, self.corrupt_in)
            )
            self.m_clean = float(_metric_values(metric, clean_run, 1)[0])
            self.m_corrupt = float(_metric_values(metric, corrupt_run, 1)[0])
        gap = self.m_clean - self.m_corrupt
        if not abs(gap) > 1e-6 * max(1.0, abs(self.m_clean)):
            raise ValueError(
                Msg(
                    "The metric is the same for both texts ({value}): there is nothing for a "
                    "patch to restore. Choose texts (or an answer) whose outputs differ.",
                    value=f"{self.m_clean:.4g}",
                )
            )

    def stack(self, stack: str | None) -> str:
        """Whose heads: ``stack``, by default the model's first; a ValueError if it has none."""
        cfg = self.net.config
        stacks = list(cfg.stacks)
        stack = stack or cfg.first_stack
        if stack not in stacks:
            raise ValueError(f"This model's stacks are {stacks}, not {stack!r}.")
        return stack

    def run(self, n_items: int, make: Callable[[int, int], Patch]) -> torch.Tensor:
        """n_items patched runs of the corrupt text, batched in chunks: make(first, n) gives the
        patch of items first … first + n − 1. Returns the share restored per item, [n_items]."""
        shares = []
        gap = self.m_clean - self.m_corrupt
        t = self.corrupt_in["input_ids"].shape[1]
        for first, n in _chunks(n_items, t):
            batch = {k: v.expand(n, *v.shape[1:]) for k, v in self.corrupt_in.items()}
            trace = self.net.patched(patch=make(first, n), **batch)
            shares.append((_metric_values(self.metric, trace, n) - self.m_corrupt) / gap)
            self.done += n
            if self.progress is not None:
                self.progress(self.done, max(self.total, self.done))
        return torch.cat(shares).float()

    @staticmethod
    def resid(trace, stream: str, layer: int) -> torch.Tensor:
        """The stream entering a layer, [T, d_model]."""
        return trace.hidden_states[stream][0, layer]


def _head_patch(stack, layer, z, start, first: int, n: int) -> Patch:
    """Items first … first + n − 1: head first + b's context z [H, T, d_head] from the clean
    run, the stream entering the layer the corrupt run's (start [T, d_model]) whole."""
    which = torch.zeros(n, z.shape[0], dtype=torch.bool)  # (B, H)
    which[torch.arange(n), torch.arange(first, first + n)] = True
    whole = torch.ones(n, start.shape[0], dtype=torch.bool)  # (B, T)
    return Patch(stack, z={layer: (z[None], which)}, resid_pre={layer: (start, whole)})


def _resid_patch(stream, layer, good, bad, first: int, n: int) -> Patch:
    """Items first … first + n − 1: the stream entering the layer is the corrupt run's (bad
    [T, d_model]) with position first + b the clean run's (good)."""
    t = good.shape[0]
    pick = torch.zeros(n, t, 1, dtype=torch.bool, device=good.device)  # (B, T, 1)
    pick[torch.arange(n), torch.arange(first, first + n)] = True
    streams = torch.where(pick, good[None], bad[None])  # (B, T, d_model)
    whole = torch.ones(n, t, dtype=torch.bool)  # (B, T)
    return Patch(stream, resid_pre={layer: (streams, whole)})


def _chunks(n: int, t: int) -> list[tuple[int, int]]:
    """(first, count) pieces of n batch items of t tokens each, at most CHUNK_TOKENS a piece."""
    size = max(1, CHUNK_TOKENS // max(1, t))
    return [(i, min(size, n - i)) for i in range(0, n, size)]


def patch_heads(
    net: nn.Module, clean: Mapping, corrupt: Mapping, metric: Metric, stack: str | None = None
) -> torch.Tensor:
    """The share of the clean metric restored by each head's context z taken from the clean run.

    Args:
        net: a Transformer (model.Transformer, load_bert, load_lm, load_trained).
        clean, corrupt: {"input_ids": [1, T], "attention_mask": [1, T]} of one length (a
            tokenizer's output; an encoder-decoder's also with tgt_ids, tgt_attention_mask).
        metric: trace -> a number per batch item: [B], or one number for a batch of one (then it
            is called per item). The trace of a patched run holds outputs, logits and
            label_logits only (Transformer.patched); analysis.logit_diff, analysis.cosine_to.
        stack: whose heads: "encoder" (default when there is one), "decoder" or "cross".
    Returns:
        [L, H] float: (m_patched − m_corrupt) / (m_clean − m_corrupt), head h's z =
        softmax(QKᵀ/√d_k)·V of that head before W_O at every position (TransformerLens's
        ``hook_z``; per query head with grouped-query attention). Raises ValueError (a
        ``lang.Msg``) for texts of different lengths or a metric equal on both.
    """
    return _heads(_Pair(net, clean, corrupt, metric), stack)


def _heads(pair: _Pair, stack: str | None) -> torch.Tensor:
    """patch_heads on a pair whose runs are traced."""
    name = pair.stack(stack)
    stream = "decoder" if name == "cross" else name
    cfg = pair.net.config
    clean_tr, corrupt_tr = pair.clean, pair.corrupt
    z = (clean_tr.attentions[name] @ clean_tr.values[name])[0]  # (L, H, T_q, d_head)
    rows = []
    for layer in range(cfg.n_layers):
        start = pair.resid(corrupt_tr, stream, layer)  # (T, d_model): layers before: not run
        make = partial(_head_patch, name, layer, z[layer], start)
        rows.append(pair.run(cfg.n_heads, make))
    return torch.stack(rows)  # (L, H)


def patch_residual(
    net: nn.Module, clean: Mapping, corrupt: Mapping, metric: Metric, stack: str | None = None
) -> torch.Tensor:
    """The share of the clean metric restored by the residual stream entering layer l at
    position t taken from the clean run (TransformerLens's ``resid_pre``).

    Args as patch_heads; stack: whose stream ("encoder" by default when there is one, or
    "decoder"). Returns [L, T] float.
    """
    return _residual(_Pair(net, clean, corrupt, metric), stack)


def _residual(pair: _Pair, stack: str | None) -> torch.Tensor:
    """patch_residual on a pair whose runs are traced."""
    stream = pair.stack("decoder" if stack == "cross" else stack)
    t = pair.resid(pair.clean, stream, 0).shape[0]
    rows = []
    for layer in range(pair.net.config.n_layers):
        good, bad = pair.resid(pair.clean, stream, layer), pair.resid(pair.corrupt, stream, layer)
        rows.append(pair.run(t, partial(_resid_patch, stream, layer, good, bad)))
    return torch.stack(rows)  # (L, T)


def attention_shift(clean_trace, corrupt_trace, stack: str, item: int = 0) -> torch.Tensor:
    """How differently each head attends on the two texts of a pair: the total variation
    distance ½·Σⱼ |A_clean(i, j) − A_corrupt(i, j)| of each query row, averaged over the real
    queries (0 = the same pattern, 1 = no key in common). Both texts must have one length.

    Returns [L, H] float. A head can move a lot and matter little (or the reverse): read it
    beside patch_heads, which measures what the head's output does to the answer.
    """
    a = clean_trace.attentions[stack][item].float()  # (L, H, T, T)
    b = corrupt_trace.attentions[stack][item].float()
    if a.shape != b.shape:
        raise ValueError(
            Msg(
                "The two texts must have the same number of tokens to compare their heads: "
                "{clean} and {corrupt}.",
                clean=a.shape[-1],
                corrupt=b.shape[-1],
            )
        )
    mask = clean_trace.attention_mask if stack == "encoder" else clean_trace.tgt_attention_mask
    if mask is None:
        mask = clean_trace.attention_mask
    real = mask[item].bool() if mask is not None else torch.ones(a.shape[-1], dtype=torch.bool)
    rows = 0.5 * (a - b).abs().sum(-1)  # (L, H, T)
    return rows[..., real.to(rows.device)].mean(-1).cpu()


@dataclass
class PairResult:
    """What patch_pair measured on one minimal pair (all tensors float32 on the CPU).

    heads [L, H] and positions [L, T]: shares restored (patch_heads, patch_residual); shift
    [L, H]: attention_shift; attribution: direct_logit_attribution's terms, for a pre-norm
    decoder-only model (else None); metric: "logit_diff" or "cosine"; m_clean, m_corrupt: its
    value on each text; position: where it is read (in ``stream``'s positions); answer, wrong:
    token (or label) ids of the logit difference (None for the cosine); top_clean, top_corrupt:
    the 5 likeliest ids at that position with their probabilities; clean, corrupt: the two
    runs' traces; stack: whose heads; stream: whose residual positions.
    """

    heads: torch.Tensor
    positions: torch.Tensor
    shift: torch.Tensor
    attribution: dict | None
    metric: str
    m_clean: float
    m_corrupt: float
    position: int
    answer: int | None
    wrong: int | None
    top_clean: list[tuple[int, float]]
    top_corrupt: list[tuple[int, float]]
    clean: object
    corrupt: object
    stack: str
    stream: str


def _head_logits(trace):
    return trace.logits if trace.logits is not None else trace.label_logits


def _top(logits, position: int, k: int = 5) -> list[tuple[int, float]]:
    probs = torch.softmax(logits[0, position].float(), dim=-1)
    values, ids = probs.topk(min(k, probs.shape[-1]))
    return [(int(i), float(v)) for i, v in zip(ids.tolist(), values.tolist(), strict=True)]


def pair_measure(
    clean_tr,
    corrupt_tr,
    clean_in: Mapping,
    corrupt_in: Mapping,
    answer: int | None = None,
    wrong: int | None = None,
    position: int | None = None,
) -> tuple[Metric, str, int | None, int | None, int, list, list]:
    """The measure of a pair and its defaults, as ``patch_pair`` documents them, from the two
    runs' traces and inputs: (metric, its name, answer, wrong, position, the clean and corrupt
    runs' top 5 at that position)."""
    cfg = clean_tr.config
    logits_a, logits_b = _head_logits(clean_tr), _head_logits(corrupt_tr)
    if logits_a is None:  # no output head: the cosine to the clean run's output
        length = clean_tr.hidden_states[cfg.first_stack].shape[2]
        if position is None:
            differ = (clean_in["input_ids"][0] != corrupt_in["input_ids"][0]).nonzero()
            position = int(differ[0]) if len(differ) else length - 1
        position = _in_range(position, length)
        return cosine_to(clean_tr, position), "cosine", None, None, position, [], []
    length = clean_tr.hidden_states[cfg.last_stream].shape[2]
    if position is None:
        position = length - 1
        if cfg.arch != "decoder":  # the first position whose top prediction differs
            for t in range(length):
                if int(logits_a[0, t].argmax()) != int(logits_b[0, t].argmax()):
                    position = t
                    break
    position = _in_range(position, length)
    top_clean, top_corrupt = _top(logits_a, position), _top(logits_b, position)
    if answer is None:
        answer = top_clean[0][0]
    if wrong is None:
        wrong = next(i for i, _ in [*top_corrupt, *top_clean] if i != answer)
    measure = logit_diff(answer, wrong, position)
    return measure, "logit_diff", answer, wrong, position, top_clean, top_corrupt


def patch_pair(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    answer: int | None = None,
    wrong: int | None = None,
    position: int | None = None,
    stack: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> PairResult:
    """Everything the "Which heads matter" view shows for one minimal pair, with its defaults.

    With an output head (a language model's, a trained model's token or label classifier) the
    metric is logit_diff(answer, wrong, position): ``answer`` defaults to the clean run's top
    token there, ``wrong`` to the corrupt run's (its second if that is the answer too), and
    ``position`` to the last one for a decoder-only model, else the first position whose top
    prediction differs between the two runs. Without one (BERT's encoder) it is cosine_to the
    clean run's output at ``position``, by default the first position whose input differs.
    ``stack``: whose heads are patched (default: the model's first); the residual stream
    patched is the one the two texts differ in (the encoder's, or a decoder-only model's).
    ``progress``: called as (patched runs done, of how many) after each batched call: a real
    language model's grids take seconds (SmolLM2's 270 heads and 30 layers × T positions).
    """
    clean_in, corrupt_in = _inputs(net, clean, corrupt)
    cfg = net.config
    with torch.no_grad():
        clean_tr = net.trace(**clean_in, with_logits=True)
        corrupt_tr = net.trace(**corrupt_in, with_logits=True)
    stack = stack or cfg.first_stack
    stream = "encoder" if cfg.has_encoder else "decoder"
    found = pair_measure(clean_tr, corrupt_tr, clean_in, corrupt_in, answer, wrong, position)
    metric, name, answer, wrong, position, top_clean, top_corrupt = found
    pair = _Pair(net, clean_in, corrupt_in, metric, (clean_tr, corrupt_tr), progress)
    pair.total = cfg.n_layers * (cfg.n_heads + pair.resid(clean_tr, stream, 0).shape[0])
    heads, positions = _heads(pair, stack), _residual(pair, stream)  # no run traced again
    m_clean, m_corrupt = pair.m_clean, pair.m_corrupt
    attribution = None
    if name == "logit_diff" and cfg.arch == "decoder" and cfg.norm == "pre":
        from analysis.attribution import direct_logit_attribution

        attribution = direct_logit_attribution(net, clean_tr, answer, wrong, position)
    return PairResult(
        heads=heads,
        positions=positions,
        shift=attention_shift(clean_tr, corrupt_tr, stack),
        attribution=attribution,
        metric=name,
        m_clean=m_clean,
        m_corrupt=m_corrupt,
        position=position,
        answer=answer,
        wrong=wrong,
        top_clean=top_clean,
        top_corrupt=top_corrupt,
        clean=clean_tr,
        corrupt=corrupt_tr,
        stack=stack,
        stream=stream,
    )


def _in_range(position: int, length: int) -> int:
    if not -length <= int(position) < length:
        raise ValueError(
            Msg(
                "Position {position} is outside the text's {length} tokens.",
                position=int(position),
                length=length,
            )
        )
    return int(position) % length
