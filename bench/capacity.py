"""A classroom's capacity: how many students one server serves while each runs a short sentence.

For each N in ``--clients`` (default 30, 60, 100), N simulated students start within the first
``--think`` seconds; each, for ``--seconds`` (default 60), sends a short sentence of its own
(different every time, so every request is a forward pass) through the ``/run`` endpoint, waits
for the result, then thinks ``--think`` seconds (default 3) and sends the next. Every student is
its own Gradio session driving the queue protocol over raw HTTP (join, then read the event
stream), all on one asyncio loop, so the benchmark itself stays light beside the server.

It prints, per N: completed runs, runs per second, latency p50 / p95 / max (join to result,
queueing included), and how many requests were refused by the server's caps (serve/turns.py:
one sentence instead of a result) or failed.

Each student sends its own ``X-Forwarded-For`` address, as N students on their own connections:
uvicorn takes it as the client's address for connections from 127.0.0.1 (docs/caps.md).
``--one-address`` sends none, as a class behind one NAT address sharing one per-address cap.

    .venv/bin/python bench/capacity.py [--clients 30,60,100] [--seconds 60] [--think 3]
                                       [--one-address] [--url http://127.0.0.1:7860/]

Without ``--url`` it starts its own ``python app.py`` on a free port (tests/apphost.py);
``--max-per-address N`` starts it with TA_MAX_PER_ADDRESS=N.
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
from dataclasses import dataclass, field
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.apphost import serve_app  # noqa: E402

SUBJECTS = ["The cat", "A student", "My teacher", "The river", "Our robot", "The old map"]
VERBS = ["reads", "follows", "draws", "remembers", "crosses", "finds"]
OBJECTS = ["the long road", "a small bird", "the red book", "every question", "the quiet town"]


def sentence(student: int, turn: int) -> str:
    """A short sentence (about ten tokens), different for every student and turn."""
    rng = random.Random(student * 100_003 + turn)
    words = (rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS))
    return f"{words[0]} {words[1]} {words[2]} on day {turn} of week {student}."


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)  # completed runs
    refused: int = 0  # answered with a cap's sentence ("... was not run ...")
    errors: list[str] = field(default_factory=list)


class Endpoint:
    """The ``/run`` endpoint as the queue protocol sees it: its fn_index and default inputs."""

    def __init__(self, url: str) -> None:
        from app import API_NAMES  # the handler's parameter names, in order

        config = httpx.get(url + "config", timeout=30).json()
        dep = next(d for d in config["dependencies"] if d.get("api_name") == "run")
        props = {c["id"]: c.get("props", {}) for c in config["components"]}
        self.url, self.fn_index = url, dep["id"]
        self.defaults = [props[i].get("value") for i in dep["inputs"]]
        self.text_at = API_NAMES.index("text")

    def body(self, text: str, session: str) -> dict:
        data = list(self.defaults)
        data[self.text_at] = text
        return {"data": data, "fn_index": self.fn_index, "session_hash": session}


def status_of(message: dict) -> str:
    """The status line a completed Run carries (its first output), or the error it reports."""
    output = message.get("output") or {}
    if "error" in output or not message.get("success", True):
        return f"error: {output.get('error')}"
    first = output["data"][0]
    return str(first.get("value", "") if isinstance(first, dict) else first)


async def one_run(http: httpx.AsyncClient, endpoint: Endpoint, text: str, headers: dict) -> str:
    """Join the queue with ``text`` as a fresh session and wait for its result's status line."""
    session = uuid.uuid4().hex[:12]
    joined = await http.post(
        endpoint.url + "gradio_api/queue/join", json=endpoint.body(text, session), headers=headers
    )
    joined.raise_for_status()
    event_id = joined.json()["event_id"]
    url = f"{endpoint.url}gradio_api/queue/data?session_hash={session}"
    async with http.stream("GET", url, headers=headers) as stream:
        async for line in stream.aiter_lines():
            if not line.startswith("data: "):
                continue
            message = json.loads(line[6:])
            if message.get("msg") == "process_completed" and message.get("event_id") == event_id:
                return status_of(message)
    raise RuntimeError("the event stream ended without the result")


async def student(n: int, endpoint: Endpoint, args, deadline: float, tally: Tally) -> None:
    """One student: its own connections and cookie jar, as a browser (a balancer with cookie
    affinity keeps each student on its replica)."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(300, connect=30)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as http:
        await keep_running(n, endpoint, http, args, deadline, tally)


async def keep_running(
    n: int, endpoint: Endpoint, http: httpx.AsyncClient, args, deadline: float, tally: Tally
) -> None:
    headers = {} if args.one_address else {"X-Forwarded-For": f"10.{n // 250}.{n % 250}.7"}
    await asyncio.sleep(random.uniform(0, args.think))  # students do not click in lockstep
    turn = 0
    while time.monotonic() < deadline:
        start = time.monotonic()
        try:
            status = await one_run(http, endpoint, sentence(n, turn), headers)
        except Exception as exc:  # a failed request is a finding, not a crash
            tally.errors.append(f"{type(exc).__name__}: {exc}"[:160])
        else:
            if "was not run" in status:
                tally.refused += 1
            elif "token" in status:
                tally.latencies.append(time.monotonic() - start)
            else:
                tally.errors.append(status[:160])
        turn += 1
        await asyncio.sleep(args.think)


async def measure(endpoint: Endpoint, clients: int, args) -> tuple[Tally, float]:
    tally = Tally()
    start = time.monotonic()
    deadline = start + args.seconds
    await asyncio.gather(*(student(n, endpoint, args, deadline, tally) for n in range(clients)))
    return tally, time.monotonic() - start


def report(clients: int, tally: Tally, wall: float) -> None:
    done = tally.latencies
    line = f"N={clients:4d}: {len(done):5d} runs in {wall:5.1f} s = {len(done) / wall:6.2f} runs/s"
    if done:
        p50, p95 = statistics.median(done), percentile(done, 0.95)
        line += f", latency p50 {p50:.2f} s, p95 {p95:.2f} s, max {max(done):.2f} s"
    line += f"; refused {tally.refused}, errors {len(tally.errors)}"
    print(line, flush=True)
    for error in tally.errors[:3]:
        print(f"    {error}")


def run_all(url: str, args) -> None:
    endpoint = Endpoint(url)
    warm = Tally()
    asyncio.run(student_once(endpoint, warm))  # the model loaded before anything is timed
    if warm.errors:
        print(f"warm-up failed: {warm.errors[0]}")
    for clients in args.clients:
        tally, wall = asyncio.run(measure(endpoint, clients, args))
        report(clients, tally, wall)


async def student_once(endpoint: Endpoint, tally: Tally) -> None:
    async with httpx.AsyncClient(timeout=300) as http:
        try:
            await one_run(http, endpoint, "Warm up the model.", {})
        except Exception as exc:  # noqa: BLE001 - reported by the caller
            tally.errors.append(f"{type(exc).__name__}: {exc}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--clients",
        type=lambda text: [int(n) for n in text.split(",") if n.strip()],
        default=[30, 60, 100],
        help="comma-separated numbers of simulated students, one measurement each",
    )
    parser.add_argument("--seconds", type=float, default=60, help="length of each measurement")
    parser.add_argument(
        "--think", type=float, default=3, help="seconds between a result and the next run"
    )
    parser.add_argument(
        "--one-address", action="store_true", help="every student behind one address"
    )
    parser.add_argument("--url", help="an app already running (else one is started)")
    parser.add_argument(
        "--max-per-address", type=int, help="TA_MAX_PER_ADDRESS for the app started"
    )
    args = parser.parse_args()
    print(
        f"{args.seconds:.0f} s per measurement, {args.think:.0f} s thinking between runs, "
        f"{'one address' if args.one_address else 'one address per student'}",
        flush=True,
    )
    if args.url:
        run_all(args.url if args.url.endswith("/") else args.url + "/", args)
        return
    env = {"TA_MAX_PER_ADDRESS": str(args.max_per_address)} if args.max_per_address else {}
    with serve_app(env=env) as (url, startup):
        print(f"app served in {startup:.1f} s at {url}", flush=True)
        run_all(url, args)


if __name__ == "__main__":
    main()
