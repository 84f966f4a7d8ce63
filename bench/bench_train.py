"""Training wall time per trained model, on one thread (what the cards' wall_time_s means).

By default times the first --steps steps of each recipe and projects the full run; --full trains
every recipe to the end into a temporary folder (assets/ untouched) and scores it. Prints one row
per model beside the wall time its card recorded.

    .venv/bin/python bench/bench_train.py [--steps 50] [--full] [--only dates,roles]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model import TRAINED, Transformer  # noqa: E402
from train import TASKS, reproduce  # noqa: E402
from train.loop import train  # noqa: E402


def time_steps(name: str, steps: int) -> float:
    """Seconds per training step over the first `steps` steps of the recipe (no snapshots)."""
    task = TASKS[name]
    spec = dataclasses.replace(task.spec, steps=steps, snapshots=())
    tok = task.data.tokenizer()
    net = Transformer(task.data.config(tok.vocab_size), tok)
    batches = task.data.batches(tok, spec.batch_size, spec.seed)
    result = train(net, batches, task.data.loss, spec, progress=False)
    return result["wall_time_s"] / steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--full", action="store_true", help="train every recipe to the end")
    parser.add_argument("--only", default=",".join(TASKS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    header = ("model", "steps", "ms/step", "projected s", "measured s", "card s")
    print(" ".join(f"{h:>{w}}" for h, w in zip(header, (10, 6, 8, 12, 11, 7), strict=True)))
    for name in args.only.split(","):
        recipe = TASKS[name].spec.steps
        per_step = time_steps(name, args.steps)
        measured = "-"
        if args.full:
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                card = reproduce(name, out_dir=Path(tmp), progress=False)
                measured = f"{card['wall_time_s']:.1f}"
                print(
                    f"{name}: scored in {time.perf_counter() - start:.1f} s total", file=sys.stderr
                )
        card_s = TRAINED.get(name, {}).get("wall_time_s", "-")
        print(
            f"{name:>10} {recipe:>6} {per_step * 1e3:>8.1f} {per_step * recipe:>12.1f} "
            f"{measured:>11} {card_s:>7}"
        )


if __name__ == "__main__":
    main()
