"""Many users against one `python app.py` on 127.0.0.1: errors, cross-talk, latency, memory.

  * concurrency: --clients gradio_client sessions at once, each sending --requests distinct texts
    back to back through "/run"; prints errors, cross-talk (a response whose tokens are not its own
    request's), requests per second and p50/p95 latency (submit -> result, queueing included);
  * memory: --rounds rounds of --sessions fresh sessions, each analysing a distinct --tokens-token
    text; prints the app process's RSS (VmRSS) before and after each round. Budget: <= 1.5 GB, and
    the second round adds < 15 %.
tests/test_load.py runs the same functions at the default sizes.

    .venv/bin/python bench/load.py [--clients 32] [--requests 10] [--sessions 50] [--rounds 2]
                                   [--tokens 128] [--mmap-threshold-kb N]

--mmap-threshold-kb starts the app with glibc's MALLOC_MMAP_THRESHOLD_ fixed at N KiB (the
environment form of mallopt(M_MMAP_THRESHOLD, ...)), to compare RSS with and without it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model import load_bert  # noqa: E402
from tests.apphost import serve_app  # noqa: E402
from tests.test_api_client import connect, run  # noqa: E402
from tests.test_load import (  # noqa: E402
    MAX_RSS,
    MAX_SECOND_ROUND_GROWTH,
    app_pid,
    hammer,
    memory_round,
    mib,
    rss_bytes,
)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--budget-s", type=float, default=540, help="wall-clock cap of the load")
    parser.add_argument("--mmap-threshold-kb", type=int, default=0)
    args = parser.parse_args()

    _, tok = load_bert(device="cpu")
    env = {}
    if args.mmap_threshold_kb:
        env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold_kb * 1024)
    failed = False
    with serve_app(env=env) as (url, startup):
        pid = app_pid(url)
        print(f"app pid {pid}, served in {startup:.1f} s, RSS {mib(rss_bytes(pid))}, env {env}")
        warm = connect(url)
        run(warm, "warm up")  # the model loads on first use; keep that out of the latencies
        warm.close()
        print(f"after warm-up: RSS {mib(rss_bytes(pid))}")

        result = hammer(url, args.clients, args.requests, tok, budget_s=args.budget_s)
        print(f"concurrency {args.clients} x {args.requests}: {result.summary()}")
        for line in (result.errors + result.crosstalk)[:10]:
            print("   ", line)
        print(f"after concurrency: RSS {mib(rss_bytes(pid))}")
        failed |= bool(result.errors or result.crosstalk)

        afters = []
        for round_no in range(1, args.rounds + 1):
            start = time.perf_counter()
            before, after = memory_round(url, pid, tok, args.sessions, round_no, args.tokens)
            afters.append(after)
            print(
                f"memory round {round_no}: {args.sessions} sessions x {args.tokens} tokens in "
                f"{time.perf_counter() - start:.1f} s: RSS {mib(before)} -> {mib(after)} "
                f"({(after - before) / before:+.1%})"
            )
        if len(afters) >= 2:
            growth = (afters[1] - afters[0]) / afters[0]
            ok = max(afters) <= MAX_RSS and growth < MAX_SECOND_ROUND_GROWTH
            print(
                f"memory: max RSS {mib(max(afters))} (budget {mib(MAX_RSS)}), second round "
                f"{growth:+.1%} (budget < {MAX_SECOND_ROUND_GROWTH:.0%}): {'ok' if ok else 'OVER'}"
            )
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
