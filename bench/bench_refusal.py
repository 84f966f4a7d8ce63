"""Refusal time and peak RSS growth for every crafted checkpoint of tests/test_checkpoint_guard.py.

Each run is a fresh Python process that has imported torch, safetensors and transformers (a server
has them loaded: that is idle), resets its peak RSS (/proc/self/clear_refs), calls load_bert on one
crafted checkpoint and reports the time to the refusal and VmHWM minus the idle VmRSS. Prints the
median of the runs per case. Budget: every refusal <= 2 s and <= 100 MiB above idle.

    .venv/bin/python bench/bench_refusal.py [--runs 3] [--case "300k empty tensors"]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.test_checkpoint_guard import REFUSALS, measure  # noqa: E402

BUDGET_S, BUDGET_MIB = 2.0, 100.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per case")
    parser.add_argument("--case", action="append", help="only these cases (repeatable)")
    args = parser.parse_args()
    cases = args.case or list(REFUSALS)
    over = 0
    print(f"{'case':<44} {'refusal s':>9} {'peak MiB':>9}  sentence")
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(cases):
            build, _ = REFUSALS[case]
            source = build(Path(tmp) / f"case{i}")
            runs = [measure([source])[0] for _ in range(args.runs)]
            seconds = statistics.median(r["seconds"] for r in runs)
            peak = statistics.median(r["peak_mib"] for r in runs)
            over += seconds > BUDGET_S or peak > BUDGET_MIB or runs[0]["message"] == "loaded"
            message = runs[0]["message"]
            message = message if len(message) <= 80 else message[:79] + "…"
            print(f"{case:<44} {seconds:>9.3f} {peak:>9.1f}  {message}", flush=True)
    print(
        f"method: {runs[0]['method']}; {over} case(s) over budget ({BUDGET_S} s, {BUDGET_MIB} MiB)"
    )
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
