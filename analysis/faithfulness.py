"""A circuit's faithfulness as edges are added, and MIB's two circuit scores.

faithfulness_curve measures analysis.circuit at several sizes from one scoring of the edges.
MIB (Mueller et al. 2025, "MIB: A Mechanistic Interpretability Benchmark", its circuit
localization track) scores a method by the circuits of its top 0.1 %, 0.2 %, 0.5 %, 1 %, 2 %,
5 %, 10 %, 20 %, 50 % and 100 % of the edges (the count rounded down, pruned): CPR is the area
under the faithfulness curve over those fractions, by the trapezoid rule on a linear axis
(higher is better), and CMD the area between the curve and 1, |1 − f| by the same rule
(lower is better).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
from torch import nn

from analysis.circuits import PAGE_STEPS, circuit, edge_attribution
from analysis.patching import Metric

MIB_FRACTIONS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def _count(size, total: int) -> int:
    """An edge count (an int) or a fraction of all the edges (a float in [0, 1], rounded down
    as MIB does: int(fraction × total))."""
    if isinstance(size, bool) or not isinstance(size, numbers.Real):
        raise ValueError(f"A size is a number of edges or a fraction of them, not {size!r}.")
    if isinstance(size, numbers.Integral):
        if not 0 <= size <= total:
            raise ValueError(f"A circuit keeps 0 to {total} edges, not {size}.")
        return int(size)
    if not 0 <= size <= 1:
        raise ValueError(f"A fraction of the edges is between 0 and 1, not {size}.")
    return int(size * total)


def faithfulness_curve(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    sizes: Sequence[int | float] = MIB_FRACTIONS,
    scores: pd.DataFrame | None = None,
    steps: int = PAGE_STEPS,
    ig_end: str = "clean",
    prune: bool = True,
    ablation: str = "patching",
) -> pd.DataFrame:
    """Faithfulness of the circuits of the strongest edges at each size (analysis.circuit).

    sizes: edge counts (ints) or fractions of all the edges (floats; 1.0 is every edge, the
    count int(fraction × edges) as MIB's); scores: rows of edge_attribution already measured
    (else measured once here with steps and ig_end); ablation: what removed edges carry, as
    analysis.circuit's. Returns one row per size: ``size`` as
    given, ``fraction`` (asked / all edges), ``asked`` (edges asked for), ``edges`` (kept after
    pruning) and ``faithfulness``.
    """
    if scores is None:
        scores = edge_attribution(net, clean, corrupt, metric, steps, ig_end)
    total = len(scores)
    rows = []
    for size in sizes:
        asked = _count(size, total)
        found = circuit(
            net, clean, corrupt, metric, asked, scores=scores, prune=prune, ablation=ablation
        )
        rows.append((size, asked / total, asked, len(found.edges), found.faithfulness))
    return pd.DataFrame(rows, columns=["size", "fraction", "asked", "edges", "faithfulness"])


@dataclass
class MIBScores:
    """MIB's circuit scores of one scoring: ``cpr`` (area under the faithfulness curve, higher
    is better), ``cmd`` (area between it and 1, lower is better) and the ``curve`` they are
    read from (faithfulness_curve at MIB_FRACTIONS)."""

    cpr: float
    cmd: float
    curve: pd.DataFrame


def _areas(fractions: Sequence[float], faithfulness: Sequence[float], log_scale: bool = False):
    """(CPR, CMD) of a curve: Σ over neighbouring points of (x₂ − x₁)·(f₁ + f₂)/2 and of
    (x₂ − x₁)·(|1 − f₁| + |1 − f₂|)/2, x the fraction of edges (its log with log_scale)."""
    if len(fractions) != len(faithfulness) or len(fractions) < 2:
        raise ValueError("A curve needs the same number (at least 2) of fractions and values.")
    xs = [math.log(x) if log_scale else float(x) for x in fractions]
    cpr = cmd = 0.0
    for i in range(len(xs) - 1):
        width, f1, f2 = xs[i + 1] - xs[i], faithfulness[i], faithfulness[i + 1]
        cpr += width * (f1 + f2) / 2
        cmd += width * (abs(1 - f1) + abs(1 - f2)) / 2
    return cpr, cmd


def mib_scores(
    net: nn.Module,
    clean: Mapping,
    corrupt: Mapping,
    metric: Metric,
    scores: pd.DataFrame | None = None,
    steps: int = PAGE_STEPS,
    ig_end: str = "clean",
    log_scale: bool = False,
    ablation: str = "patching",
) -> MIBScores:
    """MIB's CPR and CMD of the circuits of the strongest edges (scores as faithfulness_curve's)
    at MIB's edge fractions, pruned, on a linear axis as MIB reports them (log_scale: on the
    log of the fraction, MIB's option; ablation as analysis.circuit's)."""
    curve = faithfulness_curve(
        net, clean, corrupt, metric, MIB_FRACTIONS, scores, steps, ig_end, True, ablation
    )
    cpr, cmd = _areas(list(MIB_FRACTIONS), list(curve["faithfulness"]), log_scale)
    return MIBScores(cpr, cmd, curve)
