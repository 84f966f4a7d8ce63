"""Live training (train.fit) against its lesson: the steps and seconds each task takes to it.

The page trains by steps, until the lesson (train.live): roles ≥ 95 % of held-out sentences,
induction ≥ 90 % of second-copy tokens, dates ≥ 90 % exact match, each on the shipped card's
held-out set. Budgets: the lesson is reached within the recipe's steps (the Train tab's default)
and within its time cap (train.live.time_cap, which allows for a busy server). Each task trains
once from scratch on one thread (as serve.training runs it); the script prints the steps and
seconds at which it reached the lesson (or why not), the steps per second, the card's score and
the load average (a busy machine takes longer for the same steps: compare steps, not seconds).
``--slow N`` sleeps N ms after each step, a server N ms per step busier (the same steps, later).

    .venv/bin/python bench/bench_live_train.py [--only roles,induction,dates] [--seed 0] [--slow 0]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from train import fit  # noqa: E402
from train.live import LIVE, time_cap  # noqa: E402


def slowed(ms: float) -> None:
    """Each training step takes `ms` longer: train.fit's loss function, then a sleep."""
    if ms <= 0:
        return
    for name, recipe in LIVE.items():
        loss = recipe.data.loss

        def slow_loss(net, batch, loss=loss):
            time.sleep(ms / 1000)
            return loss(net, batch)

        module = importlib.import_module(f"train.{name}")
        module.loss = slow_loss  # recipe.data is the module: fit calls recipe.data.loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=",".join(LIVE))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slow", type=float, default=0.0, help="ms slept after each step")
    args = parser.parse_args()
    torch.set_num_threads(1)
    slowed(args.slow)
    print(f"torch {torch.__version__}, threads 1, load average {os.getloadavg()[0]:.1f}")
    for name in args.only.split(","):
        recipe = LIVE[name]
        cap = time_cap(recipe, recipe.steps)
        net = fit(name, seed=args.seed)
        card = net.card
        steps, seconds = card["steps"], card["wall_time_s"]
        reached = card["scores"]["reached"]
        verdict = "PASS" if reached and card["ended"] == "lesson" else "FAIL"
        print(
            f"{name}: {card['ended']} after {steps:,} of {recipe.steps:,} steps in {seconds:.0f} s "
            f"(cap {cap:.0f} s; {steps / max(seconds, 1e-9):.0f} steps/s); held-out "
            f"{card['scores']['held_out']:.1%} (lesson {recipe.lesson:.0%}) {verdict}; load "
            f"average {os.getloadavg()[0]:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
