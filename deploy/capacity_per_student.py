"""bench/capacity.py with one cookie jar per simulated student, for a run through a balancer.

bench/capacity.py drives all its students through one httpx client, so they share one cookie jar:
behind deploy/haproxy.cfg the first response's TA_REPLICA cookie would then send every student to
the same replica. A browser has a jar of its own; so does each student here (its own client).
Everything else is bench/capacity.py's: the same options, the same report.

    .venv/bin/python deploy/capacity_per_student.py --url http://127.0.0.1:7870/ [--clients 30 ...]

deploy/capacity_through_balancer.sh starts the replicas and the balancer and runs this.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import capacity  # noqa: E402


async def measure(endpoint, clients: int, args):
    tally = capacity.Tally()
    timeout = httpx.Timeout(300, connect=30)
    jars = [httpx.AsyncClient(timeout=timeout) for _ in range(clients)]
    try:
        start = time.monotonic()
        deadline = start + args.seconds
        await asyncio.gather(
            *(
                capacity.student(n, endpoint, http, args, deadline, tally)
                for n, http in enumerate(jars)
            )
        )
        return tally, time.monotonic() - start
    finally:
        await asyncio.gather(*(http.aclose() for http in jars))


capacity.measure = measure

if __name__ == "__main__":
    capacity.main()
