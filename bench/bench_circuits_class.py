"""How the heads connect on a class's server: a class asking for new pairs at once, and what it
does to everyone else (issue 43).

Against ``python app.py``, over Gradio's queue protocol as a page speaks it (bench/serving_cost.py's
Client), on the induction model's copy pair ("qzxwv qzxw" against five other letters, answer "v"):

- **cost per visitor**: server CPU (core-ms of the app process, its idle rate subtracted) of the
  tab opened on a pair the server has not measured (its attribution grids and composition scores,
  drawn with the tab), of Find the circuit on it (8-step edge attribution and the faithfulness
  curve, in the patching tab's queue of one), of both again from another page (the pair's caches),
  and of coming back to the tab after a head of the graph was opened on the Attention tab;
- **a class at once**: N pages (default 30) open the page (their Runs over 10 s), then within a
  second each opens the tab on a pair of its own (the worst case: nothing is shared) and presses
  Find the circuit, while S other students (default 10) Run a short sentence every 3 s and switch
  tabs (bench/bench_patching_class.py's students); the students are timed from the first asker
  until the last circuit, and alone before. It prints the askers' waits (the tab's grids, the
  circuit, both), the other students' latency p50 / p95 beside the class (and apart: while the
  tabs drew, then beside the Finds alone) and alone, and the load average.

Budget (bench/README.md): the other students' p95 beside the class ≤ 1.5 s (capacity.py's class
budget).

    .venv/bin/python bench/bench_circuits_class.py [--class-size 30] [--students 10] [--runs 5]
                                                   [--same-pair]

``--same-pair``: the whole class asks for one pair (measured once, the others wait for it and get
it from the caches): what a new pair's own measures add to the class's burst.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_patching_class import at_once, corrupt_of, spread, students  # noqa: E402
from bench.serving_cost import Client, Meter  # noqa: E402
from tests.apphost import serve_app_process  # noqa: E402

CLEAN, MODEL, ANSWER = "qzxwv qzxw", "induction", "v"


class Asker:
    """One page of the class: the clean text run, then its own pair on the tab."""

    def __init__(self, url: str, config: dict, address: str, pair: str) -> None:
        self.page = Client(url, config, address)
        self.run = self.page.dependency(api_name="run")
        self.tab = self.page.dependency(target=("tab-box", "change"))
        self.find = self.page.dependency(target=("circuit-run", "click"))
        self.pick = self.page.dependency(target=("circuit-pick", "change"))
        self.pair = {"pair": pair, "answer": ANSWER}

    def opens(self) -> None:
        self.page.call(self.run, text=CLEAN, model=MODEL, tab="patching", **self.pair)

    def to_tab(self, tab: str = "circuits", **sel) -> dict:
        return self.page.call(self.tab, **{"tab-box": tab, "tab": tab, **self.pair, **sel})

    def finds(self) -> dict:
        return self.page.call(self.find, tab="circuits", **self.pair)

    def opens_head(self) -> None:
        """A head of the graph opened on the Attention tab (ui/js/circuits.js)."""
        self.to_tab("attention")
        self.page.call(self.pick, tab="attention", **{"circuit-pick": "1,1,1", **self.pair})


def cost(url: str, config: dict, meter: Meter, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {k: [] for k in ("tab", "find", "tab_hit", "find_hit", "back")}
    for turn in range(runs):
        pair = corrupt_of(MODEL, 5000 + turn)
        for kind in ("", "_hit"):
            asker = Asker(url, config, f"10.9.{turn}.{1 + len(kind)}", pair)
            asker.opens()
            with meter:
                asker.to_tab()
            out["tab" + kind].append(meter.ms)
            with meter:
                asker.finds()
            out["find" + kind].append(meter.ms)
            if kind:
                asker.opens_head()
                with meter:
                    asker.to_tab(layer=1, head=1)  # the sliders follow the head opened
                out["back"].append(meter.ms)
            asker.page.close()
    return out


def classroom(url: str, config: dict, size: int, n_students: int, same: bool = False) -> None:
    seen: list = []
    stop = threading.Event()
    crowd = threading.Thread(
        target=students, args=(url, config, n_students, stop, seen), daemon=True
    )
    crowd.start()
    time.sleep(20)  # the students alone
    quiet_end = time.perf_counter()
    waits: dict[str, list[float]] = {"tab": [], "find": [], "both": [], "tab_end": []}
    lock = threading.Lock()
    ready = threading.Barrier(size + 1)

    def ask(n: int) -> None:
        time.sleep(random.uniform(0, 10))  # the class opens the page over 10 s
        asker = Asker(url, config, f"10.8.{n}.1", corrupt_of(MODEL, 0 if same else n))
        asker.opens()
        ready.wait()
        time.sleep(random.uniform(0, 1))  # then asks for its pair within a second
        t0 = time.perf_counter()
        asker.to_tab()
        t1 = time.perf_counter()
        asker.finds()
        t2 = time.perf_counter()
        asker.page.close()
        with lock:
            waits["tab"].append(t1 - t0)
            waits["find"].append(t2 - t1)
            waits["both"].append(t2 - t0)
            waits["tab_end"].append(t1)

    askers = [threading.Thread(target=ask, args=(n,)) for n in range(size)]
    asked, class_end, load = at_once(askers, ready, stop, crowd)
    quiet = [s for t, s in seen if t < quiet_end]
    beside = [s for t, s in seen if asked <= t < class_end]
    tabs_end = max(waits["tab_end"])  # the last asker's grids: then only Finds are left
    burst = [s for t, s in seen if asked <= t < tabs_end]
    finds = [s for t, s in seen if tabs_end <= t < class_end]
    which = "one pair" if same else "a new pair each"
    print(
        f"{size} pages ask for {which} within a second: the tab's grids in "
        f"{spread(waits['tab'])}; Find the circuit in {spread(waits['find'])}; both in "
        f"{spread(waits['both'])}. Beside them {n_students} students' Runs and tab switches "
        f"{spread(beside)} — while the tabs drew {spread(burst)}, then beside the Finds "
        f"{spread(finds)}; the same students alone {spread(quiet)}; load {load}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--class-size", type=int, default=30)
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--same-pair", action="store_true", help="the class asks one pair")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()}")
    with serve_app_process() as (url, _, proc):
        config = httpx.get(url + "config", timeout=30).json()
        meter = Meter(proc.pid)
        got = cost(url, config, meter, args.runs)
        print(
            "core-ms, median (max): "
            + "; ".join(
                f"{name} {statistics.median(v):.1f} ({max(v):.1f})" for name, v in got.items()
            )
            + " — tab/find: a new pair; _hit: the same pair from another page; back: the tab "
            "again after a head was opened on the Attention tab"
        )
        classroom(url, config, args.class_size, args.students, args.same_pair)


if __name__ == "__main__":
    main()
