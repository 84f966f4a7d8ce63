"""A lecture hall opens the lecturer's link: N students within a few seconds, each page until its
first figure.

One headless Chromium opens the link first and records every file the page asks for; then N
simulated students (one asyncio loop, raw HTTP, each its own address in ``X-Forwarded-For`` and its
own Gradio session) arrive spread over ``--spread`` seconds. Each asks for the page and every
file Chromium asked for (6 at a time, brotli accepted, as a browser), then opens the linked view
as the page does (the deep-link event through the queue) and waits for its figures. It prints
how long the last student waited from the first arrival (the budget: 200 students within 30 s)
and the students' p50 / p95 / max from their own arrival, and the app's CPU per student.

    .venv/bin/python bench/lecture_link.py [--students 200] [--spread 10]
                                           [--link "?text=...&tab=attention"] [--url URL --pid PID]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.serving_cost import cpu_ns  # noqa: E402
from tests.apphost import CHROMIUM, CHROMIUM_ARGS, serve_app_process  # noqa: E402

LINK = "?text=time%20flies%20like%20an%20arrow&model=bert&tab=attention&layer=2&head=5"


def files_of_a_page(url: str, link: str) -> list[str]:
    """Every GET the page makes in Chromium until its head view is drawn (paths)."""
    from playwright.sync_api import sync_playwright

    asked: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.on("request", lambda r: asked.append(r.url) if r.method == "GET" else None)
        page.goto(url + link)
        page.wait_for_selector("#head-plot .js-plotly-plot .main-svg", timeout=60_000)
        browser.close()
    keep = [u[len(url) - 1 :] for u in asked if u.startswith(url)]
    return [p for p in keep if "/gradio_api/" not in p and not p.startswith("/?")]


class Deeplink:
    """The page's deep-link event as the queue protocol sees it."""

    def __init__(self, config: dict) -> None:
        ids = {c.get("props", {}).get("elem_id"): c["id"] for c in config["components"]}
        self.values = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}
        self.dep = next(
            d
            for d in config["dependencies"]
            if d.get("backend_fn") and [ids["deeplink-go"], "click"] in map(list, d["targets"])
        )
        self.link_at = self.dep["inputs"].index(ids["link-query"])

    def body(self, link: str, session: str, page: str) -> dict:
        data = [self.values.get(i) for i in self.dep["inputs"]]
        data[self.link_at] = link
        data[-3], data[-2], data[-1] = "tokens", "en", page  # the tail: tab, language, page
        return {"data": data, "fn_index": self.dep["id"], "session_hash": session}


async def fetch_all(url: str, paths: list[str], address: str) -> None:
    """GET every path over one kept-alive HTTP/1.1 connection, as a browser's connection does
    (a bare client: httpx costs the simulated students more CPU than the server spends)."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        for path in paths:
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept-Encoding: br, gzip\r\n"
                f"X-Forwarded-For: {address}\r\n\r\n".encode()
            )
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
            if not head.startswith("http/1.1 200"):
                raise RuntimeError(f"{path}: {head.splitlines()[0]}")
            length = int(head.split("content-length:")[1].split("\r\n")[0])
            await reader.readexactly(length)
    finally:
        writer.close()


async def student(n: int, url: str, files: list[str], deep: Deeplink, link: str, delay: float):
    await asyncio.sleep(delay)
    start = time.monotonic()
    address = f"10.{n // 250}.{n % 250}.9"
    await fetch_all(url, ["/" + link], address)
    # A browser asks for a page's files over 6 connections at a time.
    await asyncio.gather(*(fetch_all(url, files[i::6], address) for i in range(6)))
    headers = {"X-Forwarded-For": address}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as http:
        session = uuid.uuid4().hex[:12]
        joined = await http.post(
            "/gradio_api/queue/join", json=deep.body(link, session, f"lecture{n}")
        )
        joined.raise_for_status()
        event = joined.json()["event_id"]
        async with http.stream("GET", f"/gradio_api/queue/data?session_hash={session}") as lines:
            async for line in lines.aiter_lines():
                if line.startswith("data: "):
                    message = json.loads(line[6:])
                    if message.get("msg") == "process_completed" and message["event_id"] == event:
                        if not message.get("success"):
                            raise RuntimeError(str(message.get("output"))[:200])
                        break
    return start, time.monotonic()


async def hall(url: str, files: list[str], deep: Deeplink, args) -> list:
    delays = sorted(random.uniform(0, args.spread) for _ in range(args.students))
    return await asyncio.gather(
        *(student(n, url, files, deep, args.link, d) for n, d in enumerate(delays)),
        return_exceptions=True,
    )


def run(url: str, pid: int | None, args) -> None:
    files = files_of_a_page(url, args.link)
    config = httpx.get(url + "config", timeout=30).json()
    deep = Deeplink(config)
    print(f"a page open asks for {len(files)} files and one deep-link event", flush=True)
    cpu0 = cpu_ns(pid) if pid else 0
    t0, own0 = time.monotonic(), time.process_time()
    results = asyncio.run(hall(url, files, deep, args))
    own = time.process_time() - own0
    failed = [r for r in results if isinstance(r, BaseException)]
    done = [r for r in results if not isinstance(r, BaseException)]
    waits = sorted(end - start for start, end in done)
    last = max(end for _, end in done) - t0 if done else float("nan")
    p95 = waits[min(len(waits) - 1, round(0.95 * (len(waits) - 1)))] if waits else float("nan")
    print(
        f"{len(done)} of {args.students} students saw the linked view; the last {last:.1f} s "
        f"after the first arrived (budget 30 s: {'PASS' if last <= 30 and not failed else 'FAIL'})"
    )
    if waits:
        print(
            f"each from its own arrival: p50 {statistics.median(waits):.2f} s, p95 {p95:.2f} s, "
            f"max {waits[-1]:.2f} s"
        )
    if pid:
        print(f"app CPU per student: {(cpu_ns(pid) - cpu0) / 1e6 / args.students:.1f} core-ms")
    print(f"the simulated students' own CPU on the same cores: {own:.1f} core-s")
    for error in failed[:3]:
        print(f"  failed: {type(error).__name__}: {str(error)[:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--spread", type=float, default=10.0, help="seconds the arrivals span")
    parser.add_argument("--link", default=LINK)
    parser.add_argument("--url")
    parser.add_argument("--pid", type=int)
    args = parser.parse_args()
    if args.url:
        run(args.url.rstrip("/") + "/", args.pid, args)
        return
    with serve_app_process() as (url, _, proc):
        run(url, proc.pid, args)


if __name__ == "__main__":
    main()
