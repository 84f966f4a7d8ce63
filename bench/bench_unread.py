"""Results a client never reads (issue 10): server RSS with the unread budget vs without it.

A script joins 100 Runs of one text on the Attention tab (~122 tokens, ~1.1 MB of figures each;
the trace is cached, so what grows is the results) for one session, in waves of 20, and never
reads the event stream. Each configuration runs in its own process, side by
side in one invocation: the app's budget (serve.unread.UNREAD_BYTES, 64 MB) vs none (Gradio's own
behaviour). Prints RSS before, after, after handing freed memory back to the OS (malloc_trim:
what is left is held), and what the ledger counts as kept.

    .venv/bin/python bench/bench_unread.py [--runs 100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one(runs: int, budget_mb: float | None) -> dict:
    from gradio.server_messages import ProcessCompletedMessage

    import app
    from tests.inprocess import serve_demo
    from tests.test_kept import LONG, Client

    demo = app.build_demo(public=False)
    with serve_demo(demo) as url:
        ledger = demo._queue.pending_messages_per_session.ledger
        if budget_mb is None:
            ledger.budget = float("inf")
        warm = Client(url, "warm")
        warm.on_tab(demo, "attention")
        warm.join(text=LONG)
        warm.results(1)
        before = rss_mb()
        client = Client(url, "never-reads")
        client.on_tab(demo, "attention")
        for i in range(runs):  # in waves of 20: the queue holds at most 64 waiting events
            client.join(text=LONG)  # one trace, cached: what grows is the results
            queue = demo._queue.pending_messages_per_session["never-reads"]
            while i % 20 == 19 or i == runs - 1:
                done = sum(isinstance(m, ProcessCompletedMessage) for m in list(queue._queue))
                if done >= i + 1:
                    break
                time.sleep(0.2)
        after = rss_mb()
        import gc

        from engine import _TRIM

        gc.collect()
        if _TRIM is not None:
            _TRIM(0)  # freed memory back to the OS: what is left is what is still held
        return {
            "before": before,
            "after": after,
            "trimmed": rss_mb(),
            "kept_mb": ledger.total / 2**20,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--one", choices=["bounded", "unbounded"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        budget = None if args.one == "unbounded" else 64
        print(json.dumps(one(args.runs, budget)))
        return
    for kind in ("bounded", "unbounded"):
        out = (
            subprocess.run(
                [sys.executable, __file__, "--runs", str(args.runs), "--one", kind],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        r = json.loads(out)
        print(
            f"{kind:9}: {args.runs} unread Attention results: RSS {r['before']:.0f} -> "
            f"{r['after']:.0f} MB (+{r['after'] - r['before']:.0f} MB), after malloc_trim "
            f"{r['trimmed']:.0f} MB (+{r['trimmed'] - r['before']:.0f} MB); ledger counts "
            f"{r['kept_mb']:.1f} MB kept",
            flush=True,
        )


if __name__ == "__main__":
    main()
