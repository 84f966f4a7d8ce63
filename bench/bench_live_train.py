"""Live training (train.fit) against its budgets: how good each task gets in its seconds.

Budgets on the 2-core machine (issue 21): roles ≥ 95 % of held-out sentences within 30 s,
induction ≥ 90 % of second-copy tokens within 60 s, dates ≥ 90 % exact match within 120 s. Each
task trains once from scratch on one thread (as serve.training runs it); the script prints when
the quick held-out score first reached the target, the score at the end, and the task's full
held-out evaluation of the returned model.

    .venv/bin/python bench/bench_live_train.py [--only roles,induction,dates] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from train import dates, fit, induction, roles  # noqa: E402

BUDGETS = {  # task: (seconds, target, the full evaluation's number)
    "roles": (30.0, 0.95, lambda net: roles.evaluate(net)["held_out"]["sentence_accuracy"]),
    "induction": (60.0, 0.90, lambda net: induction.evaluate(net)["in_context_accuracy"]),
    "dates": (120.0, 0.90, lambda net: dates.evaluate(net)["exact_match"]),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=",".join(BUDGETS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads 1, load average {os.getloadavg()[0]:.1f}")
    for name in args.only.split(","):
        seconds, target, full = BUDGETS[name]
        reached: list[float] = []

        def record(progress, target=target, reached=reached) -> None:
            if progress.score is not None and progress.score >= target and not reached:
                reached.append(progress.elapsed)

        net = fit(name, seconds=seconds, seed=args.seed, on_progress=record)
        card = net.card
        when = f"{reached[0]:.0f} s" if reached else "not reached"
        print(
            f"{name}: {card['steps']} steps in {card['wall_time_s']:.0f} s; quick score "
            f"{card['scores']['held_out']:.1%} at the end, ≥ {target:.0%} at {when}; full "
            f"held-out evaluation {full(net):.1%}; load average {os.getloadavg()[0]:.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
