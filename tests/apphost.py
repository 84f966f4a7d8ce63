"""Start `python app.py` on a free loopback port for a test, and stop it afterwards."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


# Gradio's event stream. The page opens it only after posting a join: an event already asked for.
# A deep link's trailing event (its corpus, chained after the view) is joined before the link's
# figure draws, and its stream may open just after: a request no switch made.
EVENT_STREAM = "/gradio_api/queue/data?"


def record_requests(page) -> list[str]:
    """The addresses `page` asks for from now on, but for Gradio's event stream (EVENT_STREAM). A
    switch drawn in the browser leaves it empty; one that asks the server posts a queue/join."""
    asked: list[str] = []
    page.on("request", lambda r: None if EVENT_STREAM in r.url else asked.append(r.url))
    return asked


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_app(
    *args: str, env: dict | None = None, timeout: float = 180
) -> Iterator[tuple[str, float]]:
    """Yields (url, seconds from process start to the page being served)."""
    with serve_app_process(*args, env=env, timeout=timeout) as (url, seconds, _):
        yield url, seconds


@contextlib.contextmanager
def serve_app_process(
    *args: str, env: dict | None = None, timeout: float = 180, port: int | None = None
) -> Iterator[tuple[str, float, subprocess.Popen]]:
    """Yields (url, seconds to served, the app's process): for benchmarks that read its CPU."""
    port = port or free_port()
    full_env = {
        **os.environ,
        "GRADIO_ANALYTICS_ENABLED": "False",
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    (ROOT / "artifacts").mkdir(exist_ok=True)
    log = open(ROOT / "artifacts" / f"app-{port}.log", "w")  # noqa: SIM115 - closed below
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "app.py"), "--port", str(port), "--host", "127.0.0.1", *args],
        cwd=ROOT,
        env=full_env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"app.py exited with {proc.returncode}; see {log.name}")
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.perf_counter() - start > timeout:
                raise TimeoutError(f"app.py did not serve {url} within {timeout} s")
            time.sleep(0.1)
        yield url, time.perf_counter() - start, proc
        log.flush()
        server_log = Path(log.name).read_text(encoding="utf-8", errors="replace")
        assert "Traceback" not in server_log, f"the app logged an error:\n{server_log[-3000:]}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
