"""The Attention tab's first draw for a new user, on a quiet server and beside a class.

Starts ``python app.py``. Each round two new browser contexts (new students: nothing cached) in
headless Chromium, each with its own new 128-token text:

- **first draw** (budget): a student opens the page, runs a text on the Tokens tab the page opens
  on, then clicks the Attention tab: from the click until every figure of the tab (head view,
  overview, attention block, compare) is drawn for that text. The page has been open for a
  second before the Run, a stand-in for the time a student takes to type;
- **Run → drawn** (budget): on that page, with the Attention tab showing, another text run;
- **link → drawn** (measured, no budget): the other student opens a link to the Attention tab:
  from the address entered until every figure is drawn. Its floor is the browser's main thread:
  Gradio's frontend boots (~0.8 s here), only then can its Plotly chunk evaluate (~0.75 s here,
  4.6 MB of JavaScript), then the four figures draw.

``--students N`` keeps N simulated students running short sentences through the server meanwhile
(bench/capacity.py's students, 3 s between Runs, in a thread of their own). Budgets: ≤ 1.0 s at
128 tokens on a quiet machine, ≤ 2 s while 60 students run.

    .venv/bin/python bench/first_draw.py [--rounds 5] [--students 0,60]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.capacity import Endpoint, Tally, student  # noqa: E402
from tests.apphost import CHROMIUM, CHROMIUM_ARGS, serve_app_process  # noqa: E402
from tests.test_e2e_browser import run_of, wait_tab  # noqa: E402

WORDS = ["time", "flies", "like", "an", "arrow", "fruit", "bananas", "river", "bank", "model"]


def text_of(n: int, tokens: int = 128) -> str:
    """About ``tokens`` word pieces (126 words + [CLS] and [SEP]), different for every n."""
    rng = random.Random(n)
    return " ".join(rng.choice(WORDS) for _ in range(tokens - 2))


def class_running(url: str, students: int, stop: threading.Event) -> threading.Thread:
    """N students running short sentences until ``stop`` (capacity.py's students)."""

    def run() -> None:
        endpoint = Endpoint(url)
        args = SimpleNamespace(think=3.0, one_address=False)

        async def main() -> None:
            tally = Tally()
            deadline = time.monotonic() + 3600
            tasks = [
                asyncio.create_task(student(n, endpoint, args, deadline, tally))
                for n in range(students)
            ]
            while not stop.is_set():
                await asyncio.sleep(0.2)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def rounds(url: str, n: int, base: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    times: dict[str, list[float]] = {"first draw": [], "Run → drawn": [], "link → drawn": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)

        def student():
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            return context, context.new_page()

        for r in range(n + 1):  # the first round warms the server
            first, second, linked = (text_of(base + 3 * r + k) for k in range(3))
            context, page = student()
            page.goto(url)
            page.wait_for_selector("#run")
            page.wait_for_timeout(1000)
            page.fill("#text textarea", first)
            page.click("#run")
            wait_tab(page, "tokens", timeout=60_000, run=run_of(first))
            start = time.perf_counter()
            page.click("#tab-attention-button")
            wait_tab(page, "attention", timeout=60_000, run=run_of(first))
            clicked = time.perf_counter() - start
            page.fill("#text textarea", second)
            start = time.perf_counter()
            page.click("#run")
            wait_tab(page, "attention", timeout=60_000, run=run_of(second))
            ran = time.perf_counter() - start
            context.close()
            context, page = student()
            start = time.perf_counter()
            page.goto(url + "?" + urlencode({"text": linked, "model": "bert", "tab": "attention"}))
            wait_tab(page, "attention", timeout=60_000, run=run_of(linked))
            opened = time.perf_counter() - start
            context.close()
            if r:
                for name, took in zip(times, (clicked, ran, opened), strict=True):
                    times[name].append(took)
        browser.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--students", default="0,60")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at start", flush=True)
    with serve_app_process() as (url, _, _proc):
        for k, students in enumerate(int(s) for s in args.students.split(",")):
            stop = threading.Event()
            load = class_running(url, students, stop) if students else None
            if load:
                time.sleep(5)  # the class is running before the new user arrives
            times = rounds(url, args.rounds, 1000 * (k + 1))
            stop.set()
            if load:
                load.join(timeout=30)
            budget = 1.0 if students == 0 else 2.0
            for name, values in times.items():
                median = statistics.median(values)
                verdict = "(no budget)"
                if name != "link → drawn":
                    verdict = f"budget {budget:.1f} s {'PASS' if median <= budget else 'FAIL'}"
                print(
                    f"{students:3d} students: {name:13s} median {median:.2f} s, max "
                    f"{max(values):.2f} s over {len(values)}  {verdict}",
                    flush=True,
                )
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
