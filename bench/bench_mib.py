"""Issue 54's circuits: both IG ends, a circuit from scores already measured, MIB's scores, and
a dataset of pairs in one call against a loop over its pairs.

The GPT-2-small shape of bench_circuits.py (seeded random weights, nothing downloaded) and
bench_patching.py's pair of --tokens tokens; the dataset is --pairs such pairs (the clean text
of pair i has token 5 set to id 100 + i in both texts), each with the logit difference of its
clean run's top token against its corrupt run's. Figures are medians (and the fastest) of
--repeats runs; the dataset runs once each way (it is long). Prints the load average before
and after: on a shared machine the numbers hold only beside the load printed.

    .venv/bin/python bench/bench_mib.py [--repeats 3] [--tokens 20] [--keep 100] [--pairs 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from transformers import GPT2Config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_patching import metric_for, pair, timed  # noqa: E402

import analysis  # noqa: E402
from analysis.circuits import PAGE_STEPS, circuit, edge_attribution  # noqa: E402
from model import Transformer  # noqa: E402
from model.lm_config import lm_config  # noqa: E402


def dataset(net, clean, corrupt, n_pairs: int):
    """n_pairs pairs as [N, T] batches and logit_diff of each pair's own two tops."""
    cleans, corrupts, answers, wrongs = [], [], [], []
    for i in range(n_pairs):
        a, b = clean["input_ids"].clone(), corrupt["input_ids"].clone()
        a[0, 5] = b[0, 5] = 100 + i
        with torch.no_grad():
            tops = [int(net(x)[0, -1].argmax()) for x in (a, b)]
        wrong = tops[1] if tops[1] != tops[0] else (tops[0] + 1) % net.config.vocab_size
        cleans.append(a), corrupts.append(b), answers.append(tops[0]), wrongs.append(wrong)
    batch = [torch.cat(x) for x in (cleans, corrupts)]
    encodings = [{"input_ids": x, "attention_mask": torch.ones_like(x)} for x in batch]
    return encodings, answers, wrongs


def once(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--keep", type=int, default=100)
    parser.add_argument("--pairs", type=int, default=50)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
    net = Transformer(lm_config(GPT2Config().to_dict(), "GPT-2-small shape")).eval()
    clean, corrupt = pair(net.config, args.tokens)
    metric = metric_for(net, clean, corrupt)
    scores = edge_attribution(net, clean, corrupt, metric, steps=PAGE_STEPS)
    runs = {
        f"edge_attribution, {PAGE_STEPS} steps, ig_end clean": lambda: edge_attribution(
            net, clean, corrupt, metric, PAGE_STEPS
        ),
        f"edge_attribution, {PAGE_STEPS} steps, ig_end corrupt": lambda: edge_attribution(
            net, clean, corrupt, metric, PAGE_STEPS, "corrupt"
        ),
        f"circuit(keep={args.keep}) scoring again": lambda: circuit(
            net, clean, corrupt, metric, args.keep
        ),
        f"circuit(keep={args.keep}, scores=...)": lambda: circuit(
            net, clean, corrupt, metric, args.keep, scores=scores
        ),
        "mib_scores(scores=...), 10 circuits": lambda: analysis.mib_scores(
            net, clean, corrupt, metric, scores=scores
        ),
    }
    print(f"{'what':<52} {'median s':>9} {'fastest':>8}")
    for what, fn in runs.items():
        fn()  # warm-up
        median, fastest = timed(fn, args.repeats)
        print(f"{what:<52} {median:>9.3f} {fastest:>8.3f}")
    pruned = circuit(net, clean, corrupt, metric, args.keep, scores=scores, prune=True)
    found = analysis.mib_scores(net, clean, corrupt, metric, scores=scores)
    print(f"{len(scores)} edges; top {args.keep}: {len(pruned.edges)} after pruning")
    print(f"CPR {found.cpr:.4f}, CMD {found.cmd:.4f}")
    (batch_clean, batch_corrupt), answers, wrongs = dataset(net, clean, corrupt, args.pairs)
    together = analysis.logit_diff(answers, wrongs)
    one_call = once(lambda: edge_attribution(net, batch_clean, batch_corrupt, together, PAGE_STEPS))

    def loop():
        for i in range(args.pairs):
            one = [{k: v[i : i + 1] for k, v in e.items()} for e in (batch_clean, batch_corrupt)]
            edge_attribution(net, *one, analysis.logit_diff(answers[i], wrongs[i]), PAGE_STEPS)

    print(f"{args.pairs} pairs, {PAGE_STEPS} steps: one call {one_call:.2f} s, ", end="")
    print(f"a loop over the pairs {once(loop):.2f} s")
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
