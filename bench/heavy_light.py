"""Heavy and light users together (issue 10): does a classroom's short request wait on a big one?

Starts `python app.py`, then for --seconds runs --heavy gradio_client sessions sending distinct
512-token texts to the largest preset (seed000-transformer, 111M parameters, encoder-decoder: every
request a cache miss) beside --light sessions sending distinct short texts to the bundled BERT.
Prints the light requests' p50/p95/max latency (budget p95 ≤ 2 s), the heavy ones', errors, and
the server's peak RSS sampled every 0.1 s (budget ≤ 2.5 GB).

    .venv/bin/python bench/heavy_light.py [--heavy 4] [--light 4] [--seconds 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.apphost import serve_app  # noqa: E402
from tests.test_api_client import connect, run  # noqa: E402
from tests.test_load import app_pid, mib, rss_bytes  # noqa: E402

HEAVY_MODEL = "seed000-transformer"
ALPHABET = "abcdefghijklmnopqrstuvwxyz "


def heavy_text(user: int, i: int) -> str:
    """512 distinct characters' worth of text (the character tokenizer: 512 tokens)."""
    seed = f"user {user} request {i} "
    body = "".join(ALPHABET[(user * 7 + i * 13 + k * k) % len(ALPHABET)] for k in range(512))
    return (seed + body)[:512]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heavy", type=int, default=4)
    parser.add_argument("--light", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    with serve_app() as (url, _):
        pid = app_pid(url)
        warm = connect(url)
        run(warm, "warm up")  # the bundled BERT is loaded at start; this warms the queue
        run(warm, heavy_text(99, 0), HEAVY_MODEL)  # build the big preset once, before the clock
        warm.close()
        idle = rss_bytes(pid)
        stop = threading.Event()
        light: list[float] = []
        heavy: list[float] = []
        errors: list[str] = []
        peak = [idle]

        def user(kind: str, n: int) -> None:
            client = connect(url)
            i = 0
            while not stop.is_set():
                text = heavy_text(n, i) if kind == "heavy" else f"light user {n} says hello {i}"
                start = time.perf_counter()
                try:
                    out = run(client, text, HEAVY_MODEL if kind == "heavy" else "bert")
                    if "tokens" not in str(out.get("status")):
                        errors.append(f"{kind}: {str(out.get('status'))[:120]}")
                except Exception as exc:  # a refused or failed request is a finding, not a crash
                    errors.append(f"{kind}: {type(exc).__name__}: {exc}"[:160])
                (heavy if kind == "heavy" else light).append(time.perf_counter() - start)
                i += 1
            client.close()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], rss_bytes(pid))
                time.sleep(0.1)

        threads = [threading.Thread(target=sample, daemon=True)]
        threads += [threading.Thread(target=user, args=("heavy", k)) for k in range(args.heavy)]
        threads += [threading.Thread(target=user, args=("light", k)) for k in range(args.light)]
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        stop.set()
        for t in threads:
            t.join(timeout=300)
    for name, values in (("light", light), ("heavy", heavy)):
        if values:
            print(
                f"{name}: {len(values)} requests, p50 {statistics.median(values):.2f} s, "
                f"p95 {percentile(values, 0.95):.2f} s, max {max(values):.2f} s"
            )
    print(f"errors: {len(errors)} {errors[:3]}")
    print(f"RSS: idle {mib(idle)}, peak {mib(peak[0])} (budget 2.5 GB)")


if __name__ == "__main__":
    main()
