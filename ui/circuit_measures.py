"""How the heads connect's measurements (ui/tabs/circuits.py draws them): the pair of Which heads
matter read as patch_pair reads it, its attribution grid, its edges and circuits, the exact
patching it is compared with, and composition scores. Each is kept in a cache bounded by bytes,
once per pair (or model) for the whole server; a pair being measured for another page is waited
for, not measured twice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

import analysis
from analysis.circuits import PAGE_STEPS
from analysis.patching import pair_measure
from engine import InputError
from lang import Msg, message_of, tr
from serve.lru import LockedLRU
from ui.patching_measures import MEASURED, asked, clean_inputs, measure

MB = 1 << 20
# The circuits measured for the curve: a dozen sizes at most, denser where the small circuits
# are (the copy pair's faithfulness is not monotone in the edges kept: 0.98 at 30, 0.82 at 40).
CURVE_SIZES = (1, 2, 5, 10, 15, 20, 30, 50, 75, 100, 200, 500, 1000)
SHOWN_EDGES = 60  # the graph draws at most this many edges: more is a web, not a circuit
# At more parameters than this the tab says so instead of measuring: its grid and composition
# scores run as it opens, and a circuit of GPT-2 small's size is seconds of CPU for the curve.
CIRCUIT_PARAMS = 200_000_000


@dataclass(frozen=True)
class PairSpec:
    """The pair as analysis.patch_pair reads it, its defaults resolved: the inputs, the metric
    (``measure``) and its name (``metric``: "logit_diff" or "cosine", as PairResult names it, so
    ui.pair_words.what_measured says it), answer, wrong, position, stack, cache key."""

    clean: dict
    corrupt: dict
    measure: Callable
    metric: str
    answer: int | None
    wrong: int | None
    position: int
    stack: str
    key: tuple


TRACES: LockedLRU = LockedLRU(16, 64 * MB, lambda t: t.nbytes())


def _traced(loaded, inputs: dict):
    key = (loaded.model_id, *(tuple(v.flatten().tolist()) for v in inputs.values()))
    found = TRACES.get(key)
    if found is None:
        with torch.no_grad():
            found = TRACES.put(key, loaded.net.trace(**inputs, with_logits=True))
    return found


def spec_of(loaded, found, sel) -> PairSpec:
    """The page's run and the patching tab's boxes as one pair, read as that tab reads them,
    with patch_pair's defaults: the clean run's top token, the corrupt run's (else the clean
    run's next), the last position (a decoder) or the first that differs."""
    check_size(loaded)
    pair = asked(loaded, clean_inputs(found), sel, found.text)
    clean_tr, corrupt_tr = _traced(loaded, pair.clean), _traced(loaded, pair.corrupt)
    measure, metric, answer, wrong, position = pair_measure(
        clean_tr, corrupt_tr, pair.clean, pair.corrupt, pair.answer, pair.wrong, pair.position
    )[:5]
    key = (loaded.model_id, *pair.key)
    return PairSpec(
        pair.clean, pair.corrupt, measure, metric, answer, wrong, position, pair.stack, key
    )


def _nbytes(value) -> int:
    if isinstance(value, pd.DataFrame):
        return int(value.memory_usage(deep=True).sum())
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, analysis.attribution_patching.Attributed):
        return sum(_nbytes(g) for g in (value.heads, value.heads_one_step, value.residual))
    return 4096


GRIDS: LockedLRU = LockedLRU(32, 16 * MB, _nbytes)
EDGES: LockedLRU = LockedLRU(8, 64 * MB, _nbytes)
CIRCUITS: LockedLRU = LockedLRU(256, 4 * MB, _nbytes)
COMPOSITION: LockedLRU = LockedLRU(8, 64 * MB, _nbytes)


def attributed(loaded, spec: PairSpec) -> analysis.attribution_patching.Attributed:
    """analysis.attribute_all of the pair with the page's steps: the heads' grid with them
    (EAP-IG) and with one step (EAP), and the residual stream's with one, from one call."""
    return GRIDS.once(
        ("attributed", *spec.key),
        lambda: analysis.attribute_all(
            loaded.net, spec.clean, spec.corrupt, spec.measure, PAGE_STEPS, stack=spec.stack
        ),
    )


def attribution_grid(loaded, spec: PairSpec, steps: int = PAGE_STEPS) -> torch.Tensor:
    """Every head's estimated share, [L, H]: with the page's steps (EAP-IG) or one (EAP)."""
    found = attributed(loaded, spec)
    return found.heads_one_step if steps == 1 else found.heads


def residual_grid(loaded, spec: PairSpec) -> torch.Tensor:
    """attribute_residual of the pair (one step): [L, T], the stream entering each layer at
    each position."""
    return attributed(loaded, spec).residual


def pair_tokens(loaded, spec: PairSpec) -> tuple[list[str], list[str]]:
    """The clean and the corrupt run's tokens of the stream the residual grid reads."""
    stream = "decoder" if spec.stack == "cross" else spec.stack
    return tuple(
        _traced(loaded, inputs).tokens_for(stream)[0][0] for inputs in (spec.clean, spec.corrupt)
    )


def exact_grid(loaded, found, sel) -> torch.Tensor:
    """Activation patching's grid: the patching tab's measurement (its cache, its queue)."""
    return measure(loaded, clean_inputs(found), sel, found.text).heads


# Exact patching runs the model once per head and per layer and position: on a model of up to
# this many parameters (the page's own trained models, ~0.4 s of CPU for the copy pair) the tab
# measures it as it opens; a larger one's (SmolLM2-135M: ~50 s) only when the user asks for it.
EXACT_AT_ONCE_PARAMS = 5_000_000


def at_once(loaded) -> bool:
    """Whether the tab measures exact patching as it opens (a model this small)."""
    return sum(p.numel() for p in loaded.net.parameters()) <= EXACT_AT_ONCE_PARAMS


def exact_at_hand(found, sel) -> bool:
    """Whether the agreement over the first grid can be said now for the page's pair: exact
    patching measured already (Which heads matter, Compare, another page) or measured at once.
    Part of what the tab shows beyond its fields (ui.tabs.base.Tab.measured): a pair patched
    since the tab was drawn draws it again, and a view kept for other pages
    (ui.render.DRAWN) is not one drawn before the measure. False where the tab measures
    nothing (a refused pair)."""
    try:
        spec = spec_of(found.model, found, sel)
    except InputError:
        return False
    return at_once(found.model) or spec.key in MEASURED


def known_exact(loaded, found, sel, spec: PairSpec) -> torch.Tensor | None:
    """Which heads matter's grid of this pair where it is at hand: measured already (by that tab
    or Compare: the same key), or cheap enough to measure now (a small model); None otherwise,
    or where exact patching refuses the pair."""
    done = MEASURED.get(spec.key)
    if done is None and at_once(loaded):
        try:
            done = measure(loaded, clean_inputs(found), sel, found.text)
        except InputError:
            return None
    return None if done is None else done.heads


def agreement(loaded, found, sel, spec: PairSpec) -> tuple[float, float, int] | None:
    """(Pearson r of the page's-steps estimate with exact patching over the heads, r of the
    one-step estimate, the number of heads), or None where exact patching is not at hand."""
    exact = known_exact(loaded, found, sel, spec)
    if exact is None:
        return None
    integrated, one = attribution_grid(loaded, spec), attribution_grid(loaded, spec, 1)
    return pearson(integrated, exact), pearson(one, exact), exact.numel()


def edges_of(loaded, spec: PairSpec, measure: bool = True) -> pd.DataFrame | None:
    """edge_attribution with the page's steps; a model it refuses raises its one sentence.
    ``measure=False``: only edges measured already (None otherwise)."""
    refusal = refused(loaded)
    if refusal:
        raise InputError(Msg(refusal))
    if not measure:
        return EDGES.get(("edges", *spec.key))

    def compute():
        return analysis.edge_attribution(
            loaded.net, spec.clean, spec.corrupt, spec.measure, steps=PAGE_STEPS
        )

    return EDGES.once(("edges", *spec.key), compute)


def refused(loaded) -> str:
    """Why edge attribution does not read this model ("" where it does): its own sentence."""
    from analysis.circuits import _graph

    try:
        _graph(loaded.net)
    except ValueError as exc:
        return str(exc)
    return ""


def multiplied(net) -> int:
    """The parameters a pass multiplies by: all but the vocabulary's tables, whose rows a pass
    looks up (the token embedding) or multiplies only where a metric reads (the LM head's logits
    are made lazily): Gemma 3 270M has 100 million, SmolLM2-135M 106 million."""
    vocab = net.config.vocab_size
    tables = [m for m in net.modules() if isinstance(m, nn.Embedding) and m.num_embeddings == vocab]
    tables += [net.lm_head] if net.lm_head is not None else []
    skip = {id(p) for m in tables for p in m.parameters()}
    return sum(p.numel() for p in net.parameters() if id(p) not in skip)


def check_size(loaded) -> None:
    """Refuse a model too large for the tab's measures (they run as the tab opens, too)."""
    if multiplied(loaded.net) > CIRCUIT_PARAMS:
        raise InputError(
            Msg(
                "This model is too large for the page's circuits: edges and circuits are "
                "measured for models of up to 200 million parameters besides their "
                "vocabulary's tables."
            )
        )


def ranked(edges: pd.DataFrame) -> pd.DataFrame:
    """Edges by |score|, largest first (ties in the table's order, as analysis.circuit)."""
    order = edges["score"].abs().sort_values(ascending=False, kind="stable").index
    return edges.loc[order].reset_index(drop=True)


def circuit_of(loaded, spec: PairSpec, keep: int) -> analysis.circuits.Circuit:
    """analysis.circuit of the ``keep`` strongest edges (the edges above, not measured again)."""
    top = ranked(edges_of(loaded, spec)).iloc[: max(0, keep)]

    def compute():
        return analysis.circuit(
            loaded.net, spec.clean, spec.corrupt, spec.measure, top, steps=PAGE_STEPS
        )

    return CIRCUITS.once(("circuit", keep, *spec.key), compute)


def curve_sizes(n_edges: int) -> list[int]:
    """The circuit sizes the faithfulness curve measures: a few, spread by orders of size."""
    return [n for n in CURVE_SIZES if n < n_edges] + [n_edges]


def curve(loaded, spec: PairSpec) -> list[tuple[int, float]]:
    """(edges kept, faithfulness) for the curve's sizes."""
    n_edges = len(edges_of(loaded, spec))
    return [(n, circuit_of(loaded, spec, n).faithfulness) for n in curve_sizes(n_edges)]


def default_keep(points: list[tuple[int, float]]) -> int:
    """The smallest measured circuit that restores 80 % of the answer (else the largest)."""
    return next((n for n, share in points if share >= 0.8), points[-1][0])


def composition(loaded, stack: str) -> dict[str, torch.Tensor]:
    """The three kinds of composition scores of the model's weights, [L, H, L, H] each, of the
    stack's self-attention (a decoder's for its cross-attention)."""
    own = "decoder" if stack == "cross" else stack

    def compute():
        return {
            kind: analysis.composition_scores(loaded.net, kind, own) for kind in ("q", "k", "v")
        }

    return COMPOSITION.once(("composition", loaded.model_id, own), compute)


def pearson(a, b) -> float:
    """Pearson's r of two grids (NaN where either is constant)."""
    x, y = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def comparison(loaded, found, sel, pair: PairSpec):
    """(one-step attribution [L, H], exact patching [L, H], Pearson r of the two, r with the
    page's steps, the page's-steps attribution [L, H]), or the sentence saying why exact
    patching refused the pair."""
    estimate = attribution_grid(loaded, pair, 1)
    try:
        exact = exact_grid(loaded, found, sel)
    except InputError as exc:
        return message_of(exc)
    integrated = attribution_grid(loaded, pair)
    return estimate, exact, pearson(estimate, exact), pearson(integrated, exact), integrated


def circuit_view(loaded, pair: PairSpec, keep: int, pressed: bool):
    """(the edges ranked, the circuit of ``keep`` edges — 0: the smallest measured that
    restores most of the answer —, the faithfulness curve, its size), or the sentence why none.
    ``pressed``: Find the circuit measures the edges; otherwise only edges measured already
    are used (a move of the slider measures one more circuit)."""
    try:
        edges = edges_of(loaded, pair, measure=pressed)
    except InputError as exc:
        return message_of(exc)
    if edges is None:
        return tr("Press Find the circuit first: it measures the edges.")
    points = curve(loaded, pair)
    keep = min(keep, len(edges)) or default_keep(points)
    return ranked(edges), circuit_of(loaded, pair, keep), points, keep
