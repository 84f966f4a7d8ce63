"""Two app trees served at once, their requests alternated: what one request costs each server.

For a before/after of the server's CPU per request (bench/serving_cost.py's measure: the app
process's CPU over the request, less its idle rate) where one run after the other would meet
another load: both apps start, then each round runs, for each of them in turn (the order flips
every round), a Run of a short sentence on the Tokens tab from a kept page and a switch to each
named tab. The other tree is typically a ``git worktree`` of an older commit with ``.venv``
linked in; each app runs from its own tree with its own modules. ``--settle`` keeps each
measurement going that long after the answer, so that work a server does after answering is
counted with the request that caused it, not lost between rounds.

    .venv/bin/python bench/serving_pair.py OLD_TREE [NEW_TREE (default: this one)] [--rounds 30]
                                           [--tabs layer,masks] [--settle 0.4]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.capacity import sentence  # noqa: E402
from bench.serving_cost import Client, Meter  # noqa: E402
from tests.apphost import free_port  # noqa: E402


@contextlib.contextmanager
def serve(tree: Path):
    """python app.py of ``tree``, from that tree (its .venv if it has one); yields (url, pid)."""
    port = free_port()
    python = tree / ".venv" / "bin" / "python"
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    (ROOT / "artifacts").mkdir(exist_ok=True)
    log = open(ROOT / "artifacts" / f"pair-app-{port}.log", "w")  # noqa: SIM115 - closed below
    command = [str(python if python.exists() else sys.executable), str(tree / "app.py")]
    command += ["--port", str(port), "--host", "127.0.0.1"]
    proc = subprocess.Popen(command, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                raise RuntimeError(f"{tree}/app.py exited; see {log.name}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path, nargs="?", default=ROOT)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--tabs", default="layer,masks")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds each measurement goes on after the answer (work the server does later)",
    )
    args = parser.parse_args()
    tabs = [t for t in args.tabs.split(",") if t]
    with contextlib.ExitStack() as stack:
        sides = []
        for tree in (args.old.resolve(), args.new.resolve()):
            url, pid = stack.enter_context(serve(tree))
            config = httpx.get(url + "config", timeout=30).json()
            page = Client(url, config, "10.3.0.1")
            run = page.dependency(api_name="run")
            switch = page.dependency(target=("tab-box", "change"))
            page.call(run, text="Warm up the model first.", tab="tokens")
            for tab in tabs:  # each tab drawn once: Plotly's validators and imports warmed
                page.call(switch, **{"tab-box": tab, "tab": tab})
            meter = Meter(pid)
            print(f"{tree}: idle {meter.idle / 1e6:.1f} core-ms per second", flush=True)
            found: dict[str, list[float]] = {name: [] for name in ("run_kept", *tabs)}
            sides.append((tree.name, meter, page, run, switch, found))
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
        for n in range(args.rounds):
            for t, tab in enumerate(tabs):
                for _name, meter, page, run, switch, found in sides[:: 1 if n % 2 == 0 else -1]:
                    with meter:
                        page.call(run, text=sentence(3, 2000 + n * 10 + t), tab="tokens")
                        time.sleep(args.settle)
                    found["run_kept"].append(meter.ms)
                    with meter:
                        page.call(switch, **{"tab-box": tab, "tab": tab})
                        time.sleep(args.settle)
                    found[tab].append(meter.ms)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at end")
        for what in ("run_kept", *tabs):
            cells = []
            for name, *_, found in sides:
                v = sorted(found[what])
                q1, q3 = v[len(v) // 4], v[3 * len(v) // 4]
                cells.append(f"{name} {statistics.median(v):6.1f} ({q1:.1f}–{q3:.1f})")
            print(f"{what:10s} core-ms median (p25–p75): " + " | ".join(cells))
        for *_, page, _run, _switch, _found in sides:
            page.close()


if __name__ == "__main__":
    main()
