"""Memory under unread deep links: one session joins many 512-token deep links on the Attention
tab and never reads their results (a crashed tab, a careless script).

Starts ``python app.py``; one Gradio session joins ``--links`` deep-link events, each a different
512-token text on the Attention tab (every one a forward pass and ~3 MB of figures), in waves of
``--wave``, and never opens its event stream. It prints the app's RSS before, at its peak and
after the queue has drained; what is left after is held against the budget: the trace cache
(engine.TraceCache, 384 MB) plus the unread results' budget (serve.unread, 64 MB) plus 128 MiB.

    .venv/bin/python bench/unread_links.py [--links 300] [--wave 20] [--url URL --pid PID]
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.lecture_link import Deeplink  # noqa: E402
from tests.apphost import serve_app_process  # noqa: E402

BUDGET_MIB = 384 + 64 + 128
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "they",
    "are",
    "be",
    "this",
]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def long_text(n: int) -> str:
    """About 500 word pieces, different for every n."""
    rng = random.Random(n)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(250))


def run(url: str, pid: int, args) -> None:
    config = httpx.get(url + "config", timeout=30).json()
    deep = Deeplink(config)
    session, page = uuid.uuid4().hex[:12], "unread" + uuid.uuid4().hex[:8]
    start = rss_mib(pid)
    peak = [start]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mib(pid))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    joined = refused = 0
    with httpx.Client(base_url=url, timeout=60, headers={"X-Forwarded-For": "10.7.0.1"}) as http:
        for n in range(args.links):
            link = "?" + urlencode({"text": long_text(n), "model": "bert", "tab": "attention"})
            answer = http.post("/gradio_api/queue/join", json=deep.body(link, session, page))
            if answer.status_code == 200:
                joined += 1
            else:
                refused += 1
            if (n + 1) % args.wave == 0:
                time.sleep(args.pause)
    # The queue drains (each link is still computed and its result kept, unread).
    quiet_since = time.monotonic()
    last = rss_mib(pid)
    while time.monotonic() - quiet_since < args.settle:
        time.sleep(1)
        now = rss_mib(pid)
        if abs(now - last) > 8:
            quiet_since, last = time.monotonic(), now
    stop.set()
    end = rss_mib(pid)
    # The budget is what the server is left holding once the work is done (the words:
    # "leaves RSS within"); the peak, while passes and draws are in flight, is printed beside it.
    growth = end - start
    print(
        f"{joined} links joined ({refused} refused by the queue); RSS {start:.0f} MiB at start, "
        f"peak {peak[0]:.0f} (+{peak[0] - start:.0f}), after {end:.0f}: +{growth:.0f} MiB left "
        f"(budget +{BUDGET_MIB}: {'PASS' if growth <= BUDGET_MIB else 'FAIL'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--links", type=int, default=300)
    parser.add_argument("--wave", type=int, default=20)
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between waves")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds of steady RSS")
    parser.add_argument("--url")
    parser.add_argument("--pid", type=int)
    args = parser.parse_args()
    if args.url:
        run(args.url.rstrip("/") + "/", args.pid, args)
        return
    with serve_app_process() as (url, _, proc):
        time.sleep(3)
        run(url, proc.pid, args)


if __name__ == "__main__":
    main()
