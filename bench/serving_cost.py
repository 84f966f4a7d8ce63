"""What one request costs the server: the app process's own CPU time per completed request.

Starts ``python app.py`` (or reads ``--pid`` of one already running at ``--url``) and, one request
at a time, measures the CPU the app process spends (every thread's run time from
``/proc/<pid>/task/*/schedstat``, in nanoseconds, less the process's idle rate over the same wall
time) on:

- **run, kept session**: a short sentence through ``/run`` on the Tokens tab, every Run from the
  same Gradio session and page id, as a page in a browser keeps them;
- **run, fresh session**: the same from a new session each time, as ``bench/capacity.py`` does;
- **tab switch**: after a Run, the visible tab changed (the tab box's event, as a click sends it)
  to each tab that draws on the server, from the page's cached trace;
- **page open**: a new browser context (no cache, no cookies: a new student) opens the page in
  headless Chromium, until the Tokens tab's chips are drawn and one more second has passed (the
  page's own opening events included).

Clients send their own ``X-Forwarded-For`` address, as students on their own connections do.
The budgets (core-ms, the 2-core machine): Run ≤ 50 kept, ≤ 80 fresh; tab switch ≤ 60; page
open ≤ 100; the idle app (nobody connected) ≤ 10 core-ms per second. It prints the load
average, as a busy machine moves every figure (about ±30 %).

    .venv/bin/python bench/serving_cost.py [--runs 30] [--opens 12] [--tabs attention,hidden]
                                           [--url URL --pid PID] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.capacity import sentence  # noqa: E402
from tests.apphost import CHROMIUM, CHROMIUM_ARGS, serve_app_process  # noqa: E402

BUDGETS = {"run_kept": 50, "run_fresh": 80, "tab_switch": 60, "page_open": 100, "idle": 10}
TABS = ["embeddings", "attention", "layer", "masks", "hidden", "heads", "output", "model"]


def cpu_ns(pid: int) -> int:
    """Every thread's CPU time so far (threads that ended are in the process's own stat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended
            total += int((task / "schedstat").read_text().split()[0])
    return total


def idle_rate(pid: int, seconds: float = 3.0) -> float:
    """CPU nanoseconds per wall second the app spends doing nothing asked of it."""
    c0, t0 = cpu_ns(pid), time.perf_counter()
    time.sleep(seconds)
    return (cpu_ns(pid) - c0) / (time.perf_counter() - t0)


class Meter:
    """CPU per request: the process's CPU over the request, less its idle rate over that time."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.idle = idle_rate(pid)

    def __enter__(self):
        self.c0, self.t0 = cpu_ns(self.pid), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self.t0
        self.ms = max(0.0, (cpu_ns(self.pid) - self.c0 - self.idle * wall) / 1e6)
        self.wall = wall


class Client:
    """One Gradio session over raw HTTP (the queue protocol: join, then read the event stream)."""

    def __init__(self, url: str, config: dict, address: str, page: str | None = None) -> None:
        self.url, self.config = url, config
        self.headers = {"X-Forwarded-For": address}
        self.session = uuid.uuid4().hex[:12]
        # a page's stamp: its id and its screen (a 1080p desktop; viz/screen.py lays figures
        # out for it)
        self.page = page or f"bench{uuid.uuid4().hex[:10]}|screen:1856x1920x1080"
        self.http = httpx.Client(timeout=120, headers=self.headers)
        self.values = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
        self.ids = {c.get("props", {}).get("elem_id"): c["id"] for c in config["components"]}

    def dependency(self, api_name: str | None = None, target: tuple[str, str] | None = None):
        for dep in self.config["dependencies"]:
            if api_name and dep.get("api_name") == api_name:
                return dep
            if (
                target
                and dep.get("backend_fn")
                and [self.ids[target[0]], target[1]] in [list(t) for t in dep.get("targets", [])]
            ):
                return dep
        raise LookupError(api_name or target)

    def call(self, dep: dict, **named) -> dict:
        """One event with the component values given by elem_id (the rest as the page has them);
        the tail's tab, page stamp and language as a page sends them."""
        data = []
        for i in dep["inputs"]:
            data.append(self.values.get(i))
        tail = len(data) - 3  # ..., tab box, language, page (ui/events.py TAIL)
        data[tail], data[tail + 1], data[tail + 2] = named.pop("tab", "tokens"), "en", self.page
        for elem_id, value in named.items():
            data[dep["inputs"].index(self.ids[elem_id])] = value
        body = {"data": data, "fn_index": dep["id"], "session_hash": self.session}
        joined = self.http.post(self.url + "gradio_api/queue/join", json=body)
        joined.raise_for_status()
        event = joined.json()["event_id"]
        stream = f"{self.url}gradio_api/queue/data?session_hash={self.session}"
        with self.http.stream("GET", stream) as lines:
            for line in lines.iter_lines():
                if line.startswith("data: "):
                    message = json.loads(line[6:])
                    if message.get("msg") == "process_completed" and message["event_id"] == event:
                        if not message.get("success", True):
                            raise RuntimeError(str(message.get("output"))[:200])
                        return message
        raise RuntimeError("the event stream ended without the result")

    def close(self) -> None:
        self.http.close()


def summary(values: list[float]) -> str:
    p90 = sorted(values)[int(0.9 * (len(values) - 1))]
    return f"median {statistics.median(values):6.1f}, p90 {p90:6.1f}"


def measure_runs(url: str, config: dict, meter: Meter, runs: int) -> dict[str, list[float]]:
    kept = Client(url, config, "10.1.0.1")
    run = kept.dependency(api_name="run")
    kept.call(run, text="Warm up the model first.")
    out: dict[str, list[float]] = {"run_kept": [], "run_fresh": [], "tab_switch": []}
    for turn in range(runs):
        with meter:
            kept.call(run, text=sentence(1, turn))
        out["run_kept"].append(meter.ms)
    for turn in range(runs):
        fresh = Client(url, config, f"10.2.{turn // 250}.{turn % 250}")
        with meter:
            fresh.call(run, text=sentence(2, turn))
        out["run_fresh"].append(meter.ms)
        fresh.close()
    kept.close()
    return out


def measure_tabs(url: str, config: dict, meter: Meter, runs: int, tabs: list[str]):
    page = Client(url, config, "10.3.0.1")
    run, switch = page.dependency(api_name="run"), page.dependency(target=("tab-box", "change"))
    per_tab: dict[str, list[float]] = {t: [] for t in tabs}
    for turn in range(max(5, runs // len(tabs))):
        for tab in tabs:
            page.call(run, text=sentence(3, turn * 100 + len(per_tab[tab])), tab="tokens")
            with meter:
                page.call(switch, **{"tab-box": tab, "tab": tab})
            per_tab[tab].append(meter.ms)
    page.close()
    return per_tab


def measure_opens(url: str, meter: Meter, opens: int) -> list[float]:
    from playwright.sync_api import sync_playwright

    costs = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for n in range(opens + 1):
            context = browser.new_context(
                viewport={"width": 1280, "height": 900},
                extra_http_headers={"X-Forwarded-For": f"10.4.{n // 250}.{n % 250}"},
            )
            page = context.new_page()
            with meter:
                page.goto(url)
                page.wait_for_selector("#token-chips .ta-chip", timeout=60_000)
                page.wait_for_timeout(1000)
            if n:  # the first open warms the server's file caches
                costs.append(meter.ms)
            context.close()
            time.sleep(0.5)
        browser.close()
    return costs


def report(name: str, values: list[float], budget: int | None) -> None:
    verdict = "" if budget is None else ("PASS" if statistics.median(values) <= budget else "FAIL")
    limit = f"budget {budget}" if budget else ""
    print(f"{name:28s} {summary(values)} core-ms over {len(values):3d}  {limit:10s} {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--opens", type=int, default=12)
    parser.add_argument("--tabs", default=",".join(TABS))
    parser.add_argument("--url", help="an app already running (with --pid)")
    parser.add_argument("--pid", type=int)
    parser.add_argument("--device", default=None, help="the started app's --device")
    parser.add_argument("--skip-browser", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at start", flush=True)

    def run_all(url: str, pid: int) -> None:
        config = httpx.get(url + "config", timeout=30).json()
        meter = Meter(pid)
        idle = meter.idle / 1e6
        verdict = "PASS" if idle <= BUDGETS["idle"] else "FAIL"
        print(
            f"idle: {idle:.1f} core-ms per second (subtracted below)  "
            f"budget {BUDGETS['idle']} {verdict}",
            flush=True,
        )
        for name, values in measure_runs(url, config, meter, args.runs).items():
            if values:
                report(name, values, BUDGETS[name])
        tabs = [t for t in args.tabs.split(",") if t]
        per_tab = measure_tabs(url, config, meter, args.runs, tabs)
        every = [v for values in per_tab.values() for v in values]
        report("tab_switch", every, BUDGETS["tab_switch"])
        for tab, values in per_tab.items():
            report(f"  to {tab}", values, None)
        if not args.skip_browser:
            report("page_open", measure_opens(url, meter, args.opens), BUDGETS["page_open"])
        print(f"load average {os.getloadavg()[0]:.2f} at end", flush=True)

    if args.url:
        run_all(args.url.rstrip("/") + "/", args.pid)
        return
    extra = ["--device", args.device] if args.device else []
    with serve_app_process(*extra) as (url, startup, proc):
        print(f"app served in {startup:.1f} s", flush=True)
        run_all(url, proc.pid)


if __name__ == "__main__":
    main()
