"""The Train tab's live training while a class runs: does each task still reach its lesson?

For each task with the Train tab's default steps (roles 300, induction 3,000, dates 1,500; it
stops at its lesson, under train.live.time_cap), the page's own training runs on one app
(``python app.py``), driven as a page drives it over Gradio's queue protocol (the Train button's
event, then the tab's 1 s timer, which also keeps the job alive):

- **quiet**: nobody else on the server;
- **class**: while N students (bench/capacity.py's, default 30, each a short sentence through
  ``/run`` every 3 s on its own connections) run against the same app, from 5 s before the
  training starts until it ends.

It prints, per task and condition: the steps made, the seconds from the Train click until the
status line's held-out score first reached the task's lesson (the score is taken every 25-100
steps and read every second), the final score, and beside the class the students' runs per
second and latency p50 / p95. Budgets: beside the class the lesson is reached, within 2 × the
quiet time; the students' p95 stays within capacity.py's budget for a class (≤ 1.5 s). It prints
the load average. A report: the exit code is 0 whatever the figures.

    .venv/bin/python bench/train_beside_class.py [--only roles,induction,dates] [--clients 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.capacity import Endpoint, Tally, measure, percentile  # noqa: E402
from bench.serving_cost import Client  # noqa: E402
from tests.apphost import serve_app  # noqa: E402
from train.live import LIVE, time_cap  # noqa: E402

STATUS = re.compile(r"step ([\d,]+) of ([\d,]+), (\d+) s.*?; [a-z ]+ (\d+)%")
STUDENTS_P95 = 1.5  # s: capacity.py's p95 budget for a class running every 3 s


class Page:
    """One page's Train tab over the queue protocol: start, then the timer's tick every second."""

    def __init__(self, url: str, config: dict, address: str) -> None:
        self.client = Client(url, config, address)
        self.start_dep = self.client.dependency(target=("train-start", "click"))
        timers = [c["id"] for c in config["components"] if c.get("type") == "timer"]
        self.tick_dep = next(
            d
            for d in config["dependencies"]
            if any(t[0] in timers and t[1] == "tick" for t in d.get("targets", []))
        )

    def status(self, dep: dict, message: dict) -> str:
        """The Train tab's status line among the event's outputs."""
        value = message["output"]["data"][dep["outputs"].index(self.client.ids["train-status"])]
        return str(value.get("value", "") if isinstance(value, dict) else value)

    def train(self, task: str, steps: int) -> dict:
        """Start the training, tick until it has ended; what the status line said."""
        click = time.monotonic()
        named = {"train-task": task, "train-steps": steps, "train-positions": True}
        said = self.status(self.start_dep, self.client.call(self.start_dep, tab="train", **named))
        reached, steps, score = None, 0, None
        lesson = LIVE[task].lesson
        while True:
            time.sleep(1.0)
            said = self.status(self.tick_dep, self.client.call(self.tick_dep, tab="train"))
            found = STATUS.search(said.replace("\u202f", " "))
            if found:
                steps = int(found.group(1).replace(",", ""))
                if found.group(4) is not None:  # "copy accuracy 56% of the 90% ..."
                    score = int(found.group(4)) / 100
                    if reached is None and score >= lesson:
                        reached = time.monotonic() - click
            if "is done" in said or "was stopped" in said or "failed" in said:
                break
        return {"steps": steps, "reached": reached, "score": score, "lesson": lesson,
                "wall": time.monotonic() - click, "said": said}  # fmt: skip


def students_beside(url: str, clients: int, seconds: float) -> tuple[threading.Thread, dict]:
    """bench/capacity.py's students for ``seconds``, on a thread with its own event loop."""
    out: dict = {}
    args = argparse.Namespace(seconds=seconds, think=3.0, one_address=False)

    def run() -> None:
        out["tally"], out["wall"] = asyncio.run(measure(Endpoint(url), clients, args))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def line(task: str, condition: str, result: dict) -> str:
    reached = "never" if result["reached"] is None else f"{result['reached']:5.1f} s"
    score = "-" if result["score"] is None else f"{result['score']:.0%}"
    return (
        f"{task:9s} {condition:6s} steps {result['steps']:6,d}  lesson {result['lesson']:.0%} "
        f"reached at {reached}  final {score:>4s}  ({result['wall']:.0f} s from the click)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="roles,induction,dates")
    parser.add_argument("--clients", type=int, default=30)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at start; cores {os.cpu_count()}", flush=True)
    with serve_app() as (url, startup):
        print(f"app served in {startup:.1f} s", flush=True)
        config = httpx.get(url + "config", timeout=30).json()
        page = Page(url, config, "10.9.0.1")
        page.client.call(page.client.dependency(api_name="run"), text="Warm up.")
        for task in args.only.split(","):
            steps = LIVE[task].steps
            quiet = page.train(task, steps)
            print(line(task, "quiet", quiet), flush=True)
            beside = min(time_cap(LIVE[task], steps), quiet["wall"] * 2 + 20)  # its lesson's time
            thread, out = students_beside(url, args.clients, beside)
            time.sleep(5)
            busy = page.train(task, steps)
            load = os.getloadavg()[0]
            thread.join()
            tally: Tally = out["tally"]
            done = tally.latencies
            print(line(task, "class", busy), flush=True)
            ratio = "-" if not (quiet["reached"] and busy["reached"]) else (
                f"{busy['reached'] / quiet['reached']:.2f}")  # fmt: skip
            verdict = "PASS" if ratio != "-" and float(ratio) <= 2.0 else "FAIL"
            p95 = percentile(done, 0.95) if done else float("nan")
            print(
                f"          lesson time class / quiet = {ratio} (budget 2.0) {verdict}; "
                f"{args.clients} students: {len(done) / out['wall']:.2f} runs/s, p50 "
                f"{statistics.median(done) if done else float('nan'):.2f} s, p95 {p95:.2f} s "
                f"(budget {STUDENTS_P95}) {'PASS' if p95 <= STUDENTS_P95 else 'FAIL'}, "
                f"refused {tally.refused}, errors {len(tally.errors)}; load {load:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
