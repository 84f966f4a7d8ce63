"""A bystander's wait while one client floods the server with invented page ids.

One client (one network address) sends ``--flood`` requests at once (default 40), each a fresh
Gradio session with a page id of its own and a long text of its own (every one a forward pass),
as a script that invents ids to dodge the per-page cap would. Half a second later a bystander
from another address runs a short sentence; the script prints how long the bystander waited
(join to result), how many flood requests were run and how many were refused by the caps
(serve/turns.py). ``--rounds`` repeats it (default 3) and prints the median.

    .venv/bin/python bench/flood.py [--flood 40] [--rounds 3] [--url http://127.0.0.1:7860/]

Without ``--url`` it starts its own ``python app.py`` (tests/apphost.py). The two addresses are
sent as ``X-Forwarded-For``, which uvicorn takes as the client's address for connections from
127.0.0.1 (docs/caps.md).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.capacity import Endpoint, status_of  # noqa: E402
from tests.apphost import serve_app  # noqa: E402

LONG = "the river remembers every question the old map asked of the quiet town " * 8


async def run(http, endpoint: Endpoint, text: str, address: str, page: str) -> str:
    """One Run as a fresh session with its own page id; its status line."""
    import json

    session = uuid.uuid4().hex[:12]
    body = endpoint.body(text, session)
    body["data"][-1] = page  # the page id, as a page's stamp sends it
    headers = {"X-Forwarded-For": address}
    joined = await http.post(endpoint.url + "gradio_api/queue/join", json=body, headers=headers)
    joined.raise_for_status()
    url = f"{endpoint.url}gradio_api/queue/data?session_hash={session}"
    async with http.stream("GET", url, headers=headers) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                message = json.loads(line[6:])
                if message.get("msg") == "process_completed":
                    return status_of(message)
    raise RuntimeError("the event stream ended without the result")


async def one_round(endpoint: Endpoint, flood: int, round_no: int) -> tuple[float, int, int]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        floods = [
            asyncio.create_task(
                run(http, endpoint, f"{LONG} {round_no} {i}", "10.9.9.9", uuid.uuid4().hex)
            )
            for i in range(flood)
        ]
        await asyncio.sleep(0.5)
        start = time.monotonic()
        said = await run(http, endpoint, f"Dogs bark, round {round_no}.", "10.1.1.1", "bystander")
        waited = time.monotonic() - start
        assert "token" in said, said
        results = await asyncio.gather(*floods)
    refused = sum("was not run" in s for s in results)
    return waited, len(results) - refused, refused


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flood", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", help="an app already running (else one is started)")
    args = parser.parse_args()

    def measure(url: str) -> None:
        endpoint = Endpoint(url)
        waits = []
        for r in range(args.rounds):
            waited, ran, refused = asyncio.run(one_round(endpoint, args.flood, r))
            waits.append(waited)
            print(f"round {r}: bystander waited {waited:.2f} s; flood ran {ran}, refused {refused}")
        print(
            f"median bystander wait with {args.flood} invented page ids: "
            f"{statistics.median(waits):.2f} s"
        )

    if args.url:
        measure(args.url)
    else:
        with serve_app() as (url, _):
            measure(url)


if __name__ == "__main__":
    main()
