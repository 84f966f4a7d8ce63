"""Other visitors' views beside a live training (issue 21), quiet and with a training running.

The Train tab's promise: a live training "never slows the other users' views beyond their
budgets". In one process, through the app's own code: the engine and renderer as
bench/bench_views.py uses them (engine.Engine, ui.render.render) on the bundled BERT, and the
training exactly as the server runs it: serve.training.Trainings (limit 1, its default fit,
train.process.fit_in_process: train.fit in a process of its own on one torch thread) started
with trainings.start(page, "induction", s), kept alive by a thread calling trainings.touch(page)
every second (the page's timer) and stopped with trainings.close(page).

What a visitor waits for, at 32 and 512 tokens (bench.bench_browser.text_of):
  run    a Run with an emptied trace cache: engine.analyse(text, BUNDLED), then the Attention tab
         drawn from that trace (render("attention", analysis, Selection()));
  heads  the Heads tab then drawn from the cached trace (its first draw: fields it computes on
         access are computed then).
Rounds alternate quiet / beside a training, the order flipping every pair (quiet, training,
training, quiet, ...), so drift in the machine's load touches both alike. A training round starts
a fresh training and measures once it has reported (trained ≥ 1 s); after the round it is closed
and its thread waited for, so a quiet round has no training. The figures are medians of N rounds.

Budgets: every view ≤ 5 s at 512 tokens (bench_views.py's; checked on the slowest single time of
either condition) and, this benchmark's own, the median beside a training ≤ 1.5 × the quiet one
at 512 tokens. It also prints the load average at start and end, torch's thread count and the
training steps done. A report: the exit code is 0 whatever the figures.

    .venv/bin/python bench/bench_views_beside_training.py [--rounds 7] [--lengths 32,512]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_browser import text_of  # noqa: E402
from engine import BUNDLED, Engine, TraceCache  # noqa: E402
from serve.training import MAX_STEPS, Trainings  # noqa: E402
from ui.render import render  # noqa: E402
from ui.state import Selection  # noqa: E402
from ui.tabs import BY_ID  # noqa: E402

PAGE = "bench-page"
TASK = "induction"
VIEW_BUDGET = 5.0  # s, every view at 512 tokens (bench/README.md, bench_views.py)
RATIO_BUDGET = 1.5  # median beside a training / median quiet, at 512 tokens
BUDGET_TOKENS = 512
MEASURES = ("run", "heads")


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def training_threads() -> list[threading.Thread]:
    """The threads serve.training runs its jobs on (it names them "training")."""
    return [t for t in threading.enumerate() if t.name == "training" and t.is_alive()]


def measure(engine: Engine, texts: dict[int, str]) -> dict:
    """One round: each length's Run (cold cache) + Attention tab, then its Heads tab; seconds."""
    times = {}
    for n, text in texts.items():
        engine.cache = TraceCache()  # the visitor's text is not cached: a forward pass + trace
        start = time.perf_counter()
        analysis = engine.analyse(text, BUNDLED)
        render("attention", analysis, Selection(), None, None)
        times[("run", n)] = time.perf_counter() - start
        start = time.perf_counter()
        render("heads", analysis, Selection(), None, None)
        times[("heads", n)] = time.perf_counter() - start
    return times


def keep_watching(trainings: Trainings, done: threading.Event) -> None:
    """The training's page, still open: its timer asks every second (trainings.touch)."""
    while not done.wait(1.0):
        trainings.touch(PAGE)


def start_training(trainings: Trainings, seconds: float, settle: float) -> threading.Event:
    """Start a training as the Train tab does, with its page watching, and wait until it trains
    (its first report, about 1 s in) and ``settle`` seconds have passed; the page's closing."""
    trainings.start(PAGE, TASK, MAX_STEPS, seconds=seconds, until_lesson=False)  # all along
    closing = threading.Event()
    threading.Thread(target=keep_watching, args=(trainings, closing), daemon=True).start()
    waited = time.monotonic()
    while trainings.progress(PAGE) is None or time.monotonic() - waited < settle:
        if time.monotonic() - waited > 60:
            raise RuntimeError(f"the training did not report within 60 s: {trainings.status(PAGE)}")
        time.sleep(0.1)
    return closing


def stop_training(trainings: Trainings, closing: threading.Event) -> int:
    """Close the page's training, wait until its thread has ended; the steps it had done."""
    progress = trainings.progress(PAGE)
    if not trainings.working(PAGE):  # it ended inside the round: not beside all of it
        print(f"  warning: the training had ended before the round did: {trainings.status(PAGE)}")
    closing.set()
    trainings.close(PAGE)
    for thread in training_threads():
        thread.join(timeout=60)
    if training_threads():
        raise RuntimeError("the training thread did not stop within 60 s")
    return progress.step if progress is not None else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds of each condition")
    parser.add_argument("--lengths", default="32,512", help="tokens per text, comma-separated")
    parser.add_argument(
        "--settle", type=float, default=1.0, help="s a training runs before a round measures"
    )
    parser.add_argument(
        "--seconds", type=float, default=300.0, help="each training's budget (its longest)"
    )
    args = parser.parse_args()
    assert {"attention", "heads"} <= set(BY_ID), "the Attention and Heads tabs are gone"
    print(
        f"load average (1 / 5 / 15 min) at start: {load()}; {os.cpu_count()} CPUs; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads (the engine sets each "
        "pass's own from serve.cpu; the training runs on 1 in its own process)",
        flush=True,
    )
    engine = Engine(device="cpu")
    engine.model(BUNDLED)  # loaded before timing
    trainings = Trainings(limit=1)  # the server's default: one training at once, fit = train.fit
    texts = {int(n): text_of(int(n)) for n in args.lengths.split(",")}
    measure(engine, texts)  # warm-up (first imports, first drawings), not counted
    samples: dict[str, dict[tuple[str, int], list[float]]] = {"quiet": {}, "training": {}}
    steps: list[int] = []
    order = []
    for pair in range(args.rounds):
        order += ["quiet", "training"] if pair % 2 == 0 else ["training", "quiet"]
    for i, condition in enumerate(order, 1):
        beside = condition == "training"
        if beside:
            closing = start_training(trainings, args.seconds, args.settle)
        times = measure(engine, texts)
        extra = ""
        if beside:
            steps.append(stop_training(trainings, closing))
            extra = f", training steps {steps[-1]:,}"
        for key, value in times.items():
            samples[condition].setdefault(key, []).append(value)
        shown = ", ".join(f"{m} {n}: {t:.2f} s" for (m, n), t in times.items())
        print(f"round {i:2}/{len(order)} {condition:8} {shown}{extra}; load {load()}", flush=True)

    print(f"\nmedians of {args.rounds} rounds each, seconds (bundled BERT, induction training)")
    print("| measure | quiet | beside training | ratio | slowest | budget |")
    print("|---|---|---|---|---|---|")
    verdicts = []
    for n in texts:
        for m in MEASURES:
            quiet = statistics.median(samples["quiet"][(m, n)])
            busy = statistics.median(samples["training"][(m, n)])
            slowest = max(samples["quiet"][(m, n)] + samples["training"][(m, n)])
            ratio = busy / quiet if quiet > 0 else float("nan")
            budget = "—"
            if n == BUDGET_TOKENS:
                ok_view = slowest <= VIEW_BUDGET
                ok_ratio = ratio <= RATIO_BUDGET
                verdicts += [
                    (f"{m} at {n} tokens, slowest view ≤ {VIEW_BUDGET:g} s", ok_view),
                    (f"{m} at {n} tokens, beside training ≤ {RATIO_BUDGET:g} × quiet", ok_ratio),
                ]
                budget = (
                    f"≤ {VIEW_BUDGET:g} s: {'PASS' if ok_view else 'FAIL'}; "
                    f"≤ {RATIO_BUDGET:g}×: {'PASS' if ok_ratio else 'FAIL'}"
                )
            name = "Run + Attention tab" if m == "run" else "Heads tab (cached trace)"
            print(f"| {name}, {n} tokens | {quiet:.3f} | {busy:.3f} | {ratio:.2f} | "
                  f"{slowest:.3f} | {budget} |")  # fmt: skip
    print()
    for what, ok in verdicts:
        print(f"{'PASS' if ok else 'FAIL'}  {what}")
    if BUDGET_TOKENS not in texts:
        print(f"(no budget checked: {BUDGET_TOKENS} tokens not among --lengths)")
    print(
        f"\ntraining steps done per training round: {', '.join(f'{s:,}' for s in steps)} "
        f"(total {sum(steps):,})"
    )
    print(f"torch threads now: {torch.get_num_threads()}; load average at end: {load()}")


if __name__ == "__main__":
    main()
