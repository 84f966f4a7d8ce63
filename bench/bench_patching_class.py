"""Which heads matter on a class's server: what a Patch costs each visitor, and what a class
pressing it at once does to everyone else.

Against ``python app.py``, over Gradio's queue protocol as a page speaks it (bench/serving_cost.py's
Client), on the bundled BERT's Winograd pair and the induction model's copy pair:

- **cost per visitor**: server CPU (core-ms of the app process, its idle rate subtracted) of the
  Run that opens the tab, of a Patch the server has not measured yet (a new pair each time) and
  of the same Patch asked by another page (answered from the cache);
- **a class at once**: N pages (default 30) open the tab (their Runs over 10 s), then press Patch
  within a second, each on a pair of its own (the worst case: nothing is shared), while S other
  students (default 10) Run a short sentence every 3 s and switch tabs; the students are timed
  from the presses until the last grid, and alone before. It prints the
  class's seconds to its grid (p50, p95, max), the other students' latency p50 / p95 in both
  periods, and the load average.

With ``--lm``, the same on a GPT-2-small-shaped language model (12 layers × 12 heads, d 768, 50,257
tokens; seeded random weights, bench/bench_lm.py's folder) opened as a custom checkpoint: the
server CPU of a Run of 20 tokens (session kept), of patching the indirect-object pair, and a
class of N students each running a 20-token text every 3 s on it (runs per second, latency p50 /
p95, the app's core-ms per Run while they do) — what docs/deploy.md sizes a class on. With
``--real``, the same on the real language models the page lists (model/registry.py), each opened
by its model-list name (with ``--models ""`` for those alone).

Budgets (bench/README.md): a cached Patch ≤ 60 core-ms (a tab switch's budget); the others'
p95 beside the class ≤ 1.5 s (capacity.py's class budget) and within 1.5 × their quiet p95.

    .venv/bin/python bench/bench_patching_class.py [--class-size 30] [--students 10] [--runs 5]
                                                  [--models induction,bert] [--lm] [--lm-only]
                                                  [--real smollm2-135m,gemma-3-270m]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import string
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.capacity import percentile, sentence  # noqa: E402
from bench.serving_cost import Client, Meter  # noqa: E402
from tests.apphost import serve_app_process  # noqa: E402

PAIRS = {
    "bert": (
        "The trophy didn't fit in the suitcase because it was too big.",
        "The {noun} didn't fit in the suitcase because it was too {word}.",
        ["small", "large", "heavy", "light", "tall", "short", "wide", "thin"],
    ),
    "induction": ("qzxwv qzxw", "{word} qzxw", None),
}


def corrupt_of(model: str, n: int) -> str:
    """A pair of its own for page n: another word of one token, or other letters to copy."""
    clean, pattern, words = PAIRS[model]
    if words:  # 8 words × 6 nouns of one token each: 48 pairs, none alike
        nouns = ["trophy", "ball", "box", "chair", "lamp", "bag"]
        return pattern.format(word=words[n % len(words)], noun=nouns[n // len(words) % 6])
    rng = random.Random(n)
    return pattern.format(word="".join(rng.choice(string.ascii_lowercase) for _ in range(5)))


def patch_call(url: str, config: dict, model: str, corrupt: str, address: str, ready=None):
    """One page: Run the clean text on the tab, wait for the class (``ready``, a barrier), then
    Patch; the seconds from pressing Patch to its grid."""
    page = Client(url, config, address)
    run, patch = page.dependency(api_name="run"), page.dependency(api_name="patch")
    page.call(run, text=PAIRS[model][0], model=model, tab="patching")
    if ready is not None:
        ready.wait()
        time.sleep(random.uniform(0, 1))  # the class presses within a second
    start = time.perf_counter()
    page.call(patch, pair=corrupt, tab="patching")
    page.close()
    return time.perf_counter() - start


def cost(url: str, config: dict, meter: Meter, model: str, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"open": [], "miss": [], "hit": []}
    for turn in range(runs):
        for kind in ("miss", "hit"):
            page = Client(url, config, f"10.9.{turn}.{1 if kind == 'miss' else 2}")
            run, patch = page.dependency(api_name="run"), page.dependency(api_name="patch")
            with meter:
                page.call(run, text=PAIRS[model][0], model=model, tab="patching")
            out["open"].append(meter.ms)
            with meter:
                page.call(patch, pair=corrupt_of(model, 1000 + turn), tab="patching")
            out[kind].append(meter.ms)
            page.close()
    return out


def students(url: str, config: dict, n: int, stop: threading.Event, seen: list) -> None:
    """n students: a Run every 3 s and a tab switch between, each its own page; the latency of
    every request (start time, seconds) into ``seen``."""

    def one(i: int) -> None:
        page = Client(url, config, f"10.7.{i}.1")
        run, switch = page.dependency(api_name="run"), page.dependency(target=("tab-box", "change"))
        turn = 0
        time.sleep(random.uniform(0, 3))
        while not stop.is_set():
            for dep, named in (
                (run, {"text": sentence(i, turn), "tab": "attention"}),
                (switch, {"tab-box": ("heads", "attention")[turn % 2], "tab": "heads"}),
            ):
                start = time.perf_counter()
                try:
                    page.call(dep, **named)
                except Exception:  # a failed request counts as the slowest
                    seen.append((start, float("inf")))
                else:
                    seen.append((start, time.perf_counter() - start))
                stop.wait(1.5)
            turn += 1
        page.close()

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    stop.wait()
    for thread in threads:
        thread.join(timeout=60)


LM_TEXTS = [  # 20 tokens or so each in the GPT-2-shaped folder's byte-level BPE
    "When Mary and John went to the store, John gave a drink to",
    "The students in the lecture hall opened the page and ran the model on a sentence",
    "Attention is all you need, said the paper, and the heads began to copy the tokens",
]


def lm_class(
    url: str, config: dict, meter: Meter, custom: dict, name: str, students: int, runs: int
):
    """A language model as a class uses it: Runs of ~20 tokens, a Patch, a class. ``custom``: the
    page's model boxes ({"model": "custom", "checkpoint": folder}, or {"model": "smollm2-135m"})."""
    from bench.serving_cost import cpu_ns

    page = Client(url, config, "10.6.0.1")
    run, patch = page.dependency(api_name="run"), page.dependency(api_name="patch")
    page.call(run, text=LM_TEXTS[0], tab="attention", **custom)  # loads the model once
    kept = []
    for turn in range(runs):
        with meter:
            page.call(run, text=f"{LM_TEXTS[turn % 3]} {turn}", tab="attention", **custom)
        kept.append(meter.ms)
    page.call(run, text=LM_TEXTS[0], tab="patching", **custom)
    corrupt = LM_TEXTS[0].replace("John gave", "Mary gave")
    start = time.perf_counter()
    with meter:
        page.call(patch, pair=corrupt, tab="patching")
    patched, patch_s = meter.ms, time.perf_counter() - start
    page.close()
    print(
        f"{name}: a Run of ~20 tokens, session kept: median "
        f"{statistics.median(kept):.1f} core-ms (max {max(kept):.1f}); patching the "
        f"indirect-object pair: {patched:.0f} core-ms, {patch_s:.1f} s"
    )
    latencies: list[float] = []
    stop = threading.Event()

    def student(i: int) -> None:
        me = Client(url, config, f"10.5.{i}.1")
        turn = 0
        time.sleep(random.uniform(0, 3))
        while not stop.is_set():
            start = time.perf_counter()
            try:
                me.call(run, text=f"{LM_TEXTS[(i + turn) % 3]} {i} {turn}", **custom)
            except Exception:
                latencies.append(float("inf"))
            else:
                latencies.append(time.perf_counter() - start)
            turn += 1
            stop.wait(3.0)
        me.close()

    threads = [threading.Thread(target=student, args=(i,), daemon=True) for i in range(students)]
    c0, t0 = cpu_ns(meter.pid), time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(45)
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    wall, used = time.perf_counter() - t0, (cpu_ns(meter.pid) - c0) / 1e6
    done = [x for x in latencies if x != float("inf")]
    print(
        f"{name}, {students} students each running ~20 tokens every 3 s: "
        f"{len(done) / wall:.2f} runs/s, latency {spread(done)}, failed "
        f"{len(latencies) - len(done)}; the app used {used / max(1, len(done)):.0f} core-ms "
        f"per Run meanwhile; load {os.getloadavg()}"
    )


def at_once(workers: list, ready, stop: threading.Event, crowd: threading.Thread) -> tuple:
    """The class's threads started; (when all were ready, when the last was done, the load
    average then), the students beside them stopped after."""
    for worker in workers:
        worker.start()
    ready.wait()
    start = time.perf_counter()
    for worker in workers:
        worker.join()
    end, load = time.perf_counter(), os.getloadavg()
    stop.set()
    crowd.join(timeout=120)
    return start, end, load


def spread(values: list[float]) -> str:
    if not values:
        return "none"
    return (
        f"p50 {statistics.median(values):.2f} s, p95 {percentile(values, 0.95):.2f} s, "
        f"max {max(values):.2f} s (n={len(values)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class-size", type=int, default=30)
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--models", default="induction,bert")
    parser.add_argument("--lm", action="store_true", help="also a GPT-2-small-shaped model")
    parser.add_argument("--lm-only", action="store_true")
    parser.add_argument(
        "--real", default="", help="registered real LMs, e.g. smollm2-135m,gemma-3-270m"
    )
    args = parser.parse_args()
    if args.lm_only:
        args.lm, args.models = True, ""
    print(f"load before: {os.getloadavg()}")
    with serve_app_process() as (url, _, proc):
        config = httpx.get(url + "config", timeout=30).json()
        meter = Meter(proc.pid)
        if args.lm:
            from bench.bench_lm import make_lm_checkpoint

            custom = {"model": "custom", "checkpoint": str(make_lm_checkpoint("gpt2"))}
            lm_class(url, config, meter, custom, "GPT-2-small shape", args.class_size, args.runs)
        for name in filter(None, args.real.split(",")):
            lm_class(url, config, meter, {"model": name}, name, args.class_size, args.runs)
        for model in filter(None, args.models.split(",")):
            got = cost(url, config, meter, model, args.runs)
            print(
                f"{model}: core-ms, median (max) — the Run that opens the tab "
                f"{statistics.median(got['open']):.1f} ({max(got['open']):.1f}), a new pair "
                f"{statistics.median(got['miss']):.1f} ({max(got['miss']):.1f}), the same pair "
                f"from another page {statistics.median(got['hit']):.1f} ({max(got['hit']):.1f})"
            )
        for model in filter(None, args.models.split(",")):
            seen: list = []
            stop = threading.Event()
            crowd = threading.Thread(
                target=students, args=(url, config, args.students, stop, seen), daemon=True
            )
            crowd.start()
            time.sleep(20)  # the students alone
            quiet_end = time.perf_counter()
            waits: list[float] = []
            lock = threading.Lock()

            # The class opens the tab (its Runs spread over 10 s, as a class follows along),
            # then presses Patch within one second: the students beside it are timed from then.
            ready = threading.Barrier(args.class_size + 1)

            def press(n: int, model=model, waits=waits, lock=lock, ready=ready) -> None:
                time.sleep(random.uniform(0, 10))
                pair = corrupt_of(model, n)
                took = patch_call(url, config, model, pair, f"10.8.{n}.1", ready)
                with lock:
                    waits.append(took)

            pressers = [threading.Thread(target=press, args=(n,)) for n in range(args.class_size)]
            pressed, class_end, load = at_once(pressers, ready, stop, crowd)
            quiet = [s for t, s in seen if t < quiet_end]
            beside = [s for t, s in seen if pressed <= t < class_end]
            print(
                f"{model}: {args.class_size} pages press Patch within a second, each its own "
                f"pair: their grids in {spread(waits)}; beside them {args.students} students' "
                f"Runs and tab switches {spread(beside)}; the same students alone "
                f"{spread(quiet)}; load {load}"
            )


if __name__ == "__main__":
    main()
