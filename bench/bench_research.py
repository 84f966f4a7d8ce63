"""Time issue 22's measures on the bundled BERT (6 layers x 12 heads).

Budgets (2-core CPU): one attention-flow row <= 2 s at 128 tokens, the whole flow matrix <= 10 s
at 64 tokens, a corpus of 200 sentences of <= 32 tokens <= 30 s. Also times head_patterns,
head_distances, the block norms and the exports on one cached trace, medians of --repeats runs.
Prints the machine's load average too: on a shared 2-core CPU it moves every figure.

    .venv/bin/python bench/bench_research.py [--repeats 3] [--corpus en,zh]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import analysis  # noqa: E402
from analysis.corpus import corpus_stats, parse_corpus  # noqa: E402
from model import load_bert  # noqa: E402


def timed(fn, repeats: int) -> tuple[float, float]:
    """(median, min) seconds of repeated wall-clock runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def random_trace(net, tok, n: int):
    gen = torch.Generator().manual_seed(n)
    ids = torch.randint(1000, 29000, (1, n), generator=gen)
    ids[0, 0], ids[0, -1] = tok.cls_token_id, tok.sep_token_id
    return net.trace(ids, attention_mask=torch.ones_like(ids))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--corpus", default="en,zh")
    args = parser.parse_args()

    net, tok = load_bert(device="cpu")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
    print(f"{'measure':<44} {'median s':>9} {'min s':>8}  budget")
    tr64, tr128 = random_trace(net, tok, 64), random_trace(net, tok, 128)
    rows = [
        ("attention_flow_row, 128 tokens", lambda: analysis.attention_flow_row(tr128, row=64), 2),
        ("attention_flow (whole matrix), 64 tokens", lambda: analysis.attention_flow(tr64), 10),
        ("head_patterns, 128 tokens", lambda: analysis.head_patterns(tr128), None),
        ("head_distances, 128 tokens", lambda: analysis.head_distances(tr128), None),
        ("mds_2d of 72 heads", lambda: analysis.mds_2d(analysis.head_distances(tr64)), None),
        ("norm_attention_block, 128 tokens", lambda: analysis.norm_attention_block(tr128), None),
        ("mixing_ratio, 128 tokens", lambda: analysis.mixing_ratio(tr128), None),
        ("measures_npz, 64 tokens (flow included)", lambda: analysis.measures_npz(tr64), None),
    ]
    for name, fn, budget in rows:
        repeats = 1 if "whole matrix" in name or "npz" in name else args.repeats
        median, least = timed(fn, repeats)
        print(f"{name:<44} {median:>9.3f} {least:>8.3f}  {'≤ ' + str(budget) if budget else ''}")
    for lang in args.corpus.split(","):
        text = (ROOT / "assets" / "corpus" / f"{lang}.txt").read_text(encoding="utf-8")
        sentences = parse_corpus(text)[:200]

        def run(sentences=sentences) -> None:
            corpus_stats(net, tok, sentences, max_tokens=32)

        median, least = timed(run, 1)
        name = f"corpus_stats, {len(sentences)} {lang} sentences ≤ 32 tokens"
        print(f"{name:<44} {median:>9.3f} {least:>8.3f}  ≤ 30")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
