"""Time every analysis measure on the bundled BERT (6 layers x 12 heads) at 128 and 512 tokens.

Each measure runs on one cached trace (as a view would), medians of --repeats runs; ablation
re-runs the model once per head, so it gets fewer repeats. Budget: every view <= 5 s at 512.
Prints the machine's load average too: on a shared 2-core CPU it moves every figure.

    .venv/bin/python bench/bench_analysis.py [--repeats 5] [--lengths 128,512]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import analysis  # noqa: E402
from model import load_bert  # noqa: E402


def seconds(fn, repeats: int) -> str:
    """'median  min' of repeated wall-clock runs (the min is the least disturbed by other load)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return f"{statistics.median(times):>9.3f} {min(times):>8.3f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ablation-repeats", type=int, default=1)
    parser.add_argument("--skip-ablation", action="store_true")
    parser.add_argument("--lengths", default="128,512")
    args = parser.parse_args()

    net, tok = load_bert(device="cpu")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
    print(f"{'tokens':>6}  {'measure':<34} {'median s':>9} {'min s':>8}  note")
    for n in (int(x) for x in args.lengths.split(",")):
        gen = torch.Generator().manual_seed(n)
        ids = torch.randint(1000, 29000, (1, n), generator=gen)
        ids[0, 0], ids[0, -1] = tok.cls_token_id, tok.sep_token_id
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        tr = net.trace(**inputs)
        mid = n // 2
        layer_heads = [(3, h) for h in range(net.config.n_heads)]
        rows = [
            ("forward + trace (reference)", lambda inputs=inputs: net.trace(**inputs), ""),
            ("head_stats", lambda tr=tr: analysis.head_stats(tr), ""),
            ("norm_attention", lambda tr=tr: analysis.norm_attention(tr, net=net), ""),
            (
                "norm_attention_summed",
                lambda tr=tr: analysis.norm_attention_summed(tr, net=net),
                "",
            ),
            ("rollout", lambda tr=tr: analysis.rollout(tr), ""),
            (
                "score_breakdown (layer 0)",
                lambda tr=tr, m=mid: analysis.score_breakdown(
                    tr, "encoder", 0, 2, m, m - 1, net=net
                ),
                "",
            ),
            ("stats_csv", lambda tr=tr: analysis.stats_csv(analysis.head_stats(tr)), "incl. stats"),
        ]
        for name, fn, note in rows:
            fn()  # warm-up
            print(f"{n:>6}  {name:<34} {seconds(fn, args.repeats)}  {note}")
        for half in (False, True):
            data = analysis.trace_npz(tr, {"text": "bench"}, half=half)
            took = seconds(
                lambda tr=tr, half=half: analysis.trace_npz(tr, {}, half=half), args.repeats
            )
            name = f"trace_npz ({'float16' if half else 'float32'})"
            print(f"{n:>6}  {name:<34} {took}  {len(data) / 1e6:.1f} MB")
        ablations = (
            ("ablation_effects, 72 heads", None),
            ("  12 heads of layer 3", layer_heads),
        )
        for name, heads in () if args.skip_ablation else ablations:
            last = {}

            def run(heads=heads, inputs=inputs, last=last):
                last["df"] = analysis.ablation_effects(net, inputs, "encoder", heads)

            took = seconds(run, args.ablation_repeats)
            passes = last["df"].attrs["forward_passes"]
            print(f"{n:>6}  {name:<34} {took}  {passes} forward passes")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
