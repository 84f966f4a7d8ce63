"""`python -m train NAME [--steps N] [--out DIR] [--score-only]`: train a model, write its card."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from train.run import reproduce, rescore
from train.tasks import TASKS


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m train", description=__doc__)
    parser.add_argument("name", choices=sorted(TASKS))
    parser.add_argument("--steps", type=int, help="train this many steps instead (a quick check)")
    parser.add_argument("--out", type=Path, help="folder to write (default: assets/trained/NAME)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument(
        "--score-only", action="store_true", help="re-score the saved weights; no training"
    )
    args = parser.parse_args()
    if args.score_only:
        card = rescore(args.name, out_dir=args.out)
    else:
        card = reproduce(args.name, out_dir=args.out, steps=args.steps, progress=not args.quiet)
    print(json.dumps({k: card[k] for k in ("wall_time_s", "final_loss", "scores")}, indent=1))


if __name__ == "__main__":
    main()
