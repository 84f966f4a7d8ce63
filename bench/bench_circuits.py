"""Attribution patching, edge attribution and a circuit's faithfulness (issue 43).

A GPT-2-small shape (12 layers x 12 heads, d_model 768, vocabulary 50,257) built from
transformers' GPT2Config through model.lm_config, with seeded random weights (nothing is
downloaded; the time does not depend on the values), and bench_patching.py's pair of --tokens
tokens differing in three, metric logit_diff at the last token. Figures are medians (and the
fastest) of --repeats runs as a caller makes them. Budgets on the 2-core CPU: each one-step
attribution grid (attribute_heads [L, H], attribute_residual [L, T]) <= 0.5 s; edge_attribution
with the page's steps (analysis.circuits.PAGE_STEPS) <= 2 s; one circuit's faithfulness run
(its edges given) <= 1 s. Prints the load average before and after.

    .venv/bin/python bench/bench_circuits.py [--repeats 5] [--tokens 20] [--keep 100]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
from transformers import GPT2Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_patching import metric_for, pair, timed  # noqa: E402

from analysis.attribution_patching import attribute_heads, attribute_residual  # noqa: E402
from analysis.circuits import PAGE_STEPS, circuit, edge_attribution  # noqa: E402
from model import Transformer  # noqa: E402
from model.lm_config import lm_config  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--keep", type=int, default=100, help="edges of the timed circuit")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
    net = Transformer(lm_config(GPT2Config().to_dict(), "GPT-2-small shape")).eval()
    clean, corrupt = pair(net.config, args.tokens)
    metric = metric_for(net, clean, corrupt)
    cfg = net.config
    scores = edge_attribution(net, clean, corrupt, metric, steps=PAGE_STEPS)
    kept = scores.loc[scores["score"].abs().sort_values(ascending=False).index[: args.keep]]
    runs = {
        f"attribute_heads [{cfg.n_layers}, {cfg.n_heads}], 1 step": (
            0.5,
            lambda: attribute_heads(net, clean, corrupt, metric),
        ),
        f"attribute_residual [{cfg.n_layers}, {args.tokens}], 1 step": (
            0.5,
            lambda: attribute_residual(net, clean, corrupt, metric),
        ),
        f"edge_attribution ({len(scores)} edges), 1 step": (
            None,
            lambda: edge_attribution(net, clean, corrupt, metric),
        ),
        f"edge_attribution, {PAGE_STEPS} steps": (
            2.0,
            lambda: edge_attribution(net, clean, corrupt, metric, steps=PAGE_STEPS),
        ),
        f"circuit of {args.keep} given edges": (
            1.0,
            lambda: circuit(net, clean, corrupt, metric, kept),
        ),
        f"circuit(keep={args.keep}), {PAGE_STEPS} steps": (
            None,
            lambda: circuit(net, clean, corrupt, metric, args.keep),
        ),
    }
    print(f"{'what':<46} {'median s':>9} {'fastest':>8}  budget")
    for what, (budget, fn) in runs.items():
        fn()  # warm-up
        median, fastest = timed(fn, args.repeats)
        verdict = "—" if budget is None else ("PASS" if median <= budget else "OVER")
        limit = "" if budget is None else f"{budget} s "
        print(f"{what:<46} {median:>9.3f} {fastest:>8.3f}  {limit}{verdict}")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
