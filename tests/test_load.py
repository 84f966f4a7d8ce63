"""Many users at once against one `python app.py`: no errors, no cross-talk, bounded memory.

Every request carries a distinct text and must get back exactly its own tokens (as the bundled
WordPiece tokenizer cuts them): a trace cached under the wrong key, a hook recording into the shared
model or a session reading another's state would show up here as someone else's tokens. Memory is
the app process's resident set (VmRSS) after rounds of fresh sessions, each with a new ~128-token
text. bench/load.py runs the same functions with more rounds and options.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from tests.apphost import serve_app
from tests.test_api_client import REQUEST_TIMEOUT, connect, run, table_column
from ui.state import LINK_TEXT_CHARS

pytestmark = pytest.mark.slow

SENTENCE = (
    "attention lets every token look at every other token and decide how much of its value to "
    "borrow while positions tell the model where each token sits in the sentence"
)
WORDS = SENTENCE.split(" ")
MAX_RSS = 1.5 * 1024**3  # bytes, after 2 x 50 sessions at 128 tokens
MAX_SECOND_ROUND_GROWTH = 0.15  # a second round of sessions may add at most 15 % to the RSS


# ---- the app process --------------------------------------------------------------------------
def app_pid(url: str) -> int:
    """The pid of the `python app.py --port N` that serves url (serve_app keeps its Popen)."""
    port = str(urlparse(url).port).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:  # the process ended while we looked
            continue
        is_app = any(a.endswith(b"app.py") for a in argv) and b"--port" in argv
        if is_app and argv[argv.index(b"--port") + 1] == port:
            return int(proc.name)
    raise LookupError(f"no app.py process serves {url}")


def rss_bytes(pid: int) -> int:
    """Resident set size of one process, from /proc/<pid>/status (VmRSS, in kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise LookupError(f"no VmRSS for pid {pid}")


def mib(n_bytes: float) -> str:
    return f"{n_bytes / 1024**2:,.0f} MiB"


# ---- one request, checked against its own text --------------------------------------------------
def expected_tokens(tok, text: str) -> list[str]:
    return ["[CLS]", *tok.tokenize(text), "[SEP]"]


def crosstalk(out: dict, text: str, tok) -> str | None:
    """Why this response is not the answer to `text`, or None when it is."""
    want = expected_tokens(tok, text)
    got = table_column(out["token-table"], "token")
    if got != want:
        return f"asked {want[:8]}..., got {got[:8]}..."
    link = out["status"].rsplit("(?", 1)[-1].rstrip(")")
    linked = parse_qs(link).get("text", [""])[0]
    if linked != text[:LINK_TEXT_CHARS] or f"· {len(want)} tokens ·" not in out["status"]:
        return f"status belongs to another request: {out['status'][:120]!r}"
    return None


def request_text(client: int, request: int, n_words: int = 12) -> str:
    """A text no other (client, request) pair sends; the numbers become tokens of their own."""
    words = [WORDS[(client * 7 + request * 3 + k) % len(WORDS)] for k in range(n_words)]
    return f"client {client} request {request}: " + " ".join(words)


def text_of_tokens(tok, n_tokens: int, tag: str) -> str:
    """A text the bundled tokenizer cuts into n_tokens tokens ([CLS]/[SEP] included), led by tag."""
    words = tag.split()
    k = 0
    while len(tok.tokenize(" ".join(words))) + 2 < n_tokens:
        words.append(WORDS[(k * 5 + len(tag)) % len(WORDS)])
        k += 1
    return " ".join(words)


# ---- concurrency ------------------------------------------------------------------------------
@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)  # seconds, one per request
    errors: list[str] = field(default_factory=list)
    crosstalk: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0

    def summary(self) -> str:
        n = len(self.latencies)
        return (
            f"{n} requests in {self.seconds:.1f} s ({n / max(self.seconds, 1e-9):.1f}/s): "
            f"{len(self.errors)} errors, {len(self.crosstalk)} cross-talk, "
            f"latency p50 {self.percentile(0.5):.2f} s, p95 {self.percentile(0.95):.2f} s, "
            f"max {max(self.latencies, default=0):.2f} s"
        )


def one_client(url: str, index: int, n_requests: int, tok, deadline: float) -> LoadResult:
    """One session sending n_requests distinct texts in turn."""
    result = LoadResult()
    try:
        client = connect(url)
    except Exception as exc:  # noqa: BLE001 - every failure is a finding, reported below
        result.errors.append(f"client {index}: connect: {exc!r}")
        return result
    try:
        for j in range(n_requests):
            if time.monotonic() > deadline:
                result.errors.append(f"client {index}: out of time before request {j}")
                break
            text = request_text(index, j)
            start = time.perf_counter()
            try:
                out = run(client, text)
            except Exception as exc:  # noqa: BLE001
                result.errors.append(f"client {index} request {j}: {exc!r}")
                continue
            result.latencies.append(time.perf_counter() - start)
            problem = crosstalk(out, text, tok)
            if problem:
                result.crosstalk.append(f"client {index} request {j}: {problem}")
    finally:
        client.close()
    return result


def hammer(url: str, n_clients: int, n_requests: int, tok, budget_s: float = 240) -> LoadResult:
    """n_clients sessions at once, each sending n_requests requests back to back.

    Bounded: no request starts after budget_s, each waits at most REQUEST_TIMEOUT, and a client
    still busy after that is reported as an error rather than waited for.
    """
    deadline = time.monotonic() + budget_s
    start = time.perf_counter()
    pool = ThreadPoolExecutor(n_clients)
    total = LoadResult()
    try:
        parts = [
            pool.submit(one_client, url, i, n_requests, tok, deadline) for i in range(n_clients)
        ]
        for i, part in enumerate(parts):
            try:
                r = part.result(timeout=max(1.0, deadline - time.monotonic()) + REQUEST_TIMEOUT)
            except TimeoutError:
                total.errors.append(f"client {i}: still busy {budget_s:.0f} s + time-out later")
                continue
            total.latencies += r.latencies
            total.errors += r.errors
            total.crosstalk += r.crosstalk
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    total.seconds = time.perf_counter() - start
    return total


# ---- memory -----------------------------------------------------------------------------------
def memory_round(url: str, pid: int, tok, n_sessions: int, round_no: int, n_tokens: int = 128):
    """n_sessions fresh sessions, one distinct n_tokens text each; returns (RSS before, after).

    Sessions stay open until the RSS is read, so whatever Gradio keeps per session is counted.
    """
    before = rss_bytes(pid)
    clients, problems = [], []
    try:
        for i in range(n_sessions):
            client = connect(url)
            clients.append(client)
            text = text_of_tokens(tok, n_tokens, f"round {round_no} session {i}:")
            problem = crosstalk(run(client, text), text, tok)
            if problem:
                problems.append(f"session {i}: {problem}")
        after = rss_bytes(pid)
    finally:
        for client in clients:
            client.close()
    assert not problems, problems[:3]
    return before, after


# ---- tests ------------------------------------------------------------------------------------
def test_queue_is_explicit_even_on_zerogpu(monkeypatch):
    # On ZeroGPU Spaces Gradio turns queue(max_size=None) into max_size=1: one visitor at a time.
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    import app

    demo = app.build_demo()
    queue = demo._queue
    assert queue.max_size is not None and queue.max_size >= 32, queue.max_size
    # A class of 200 opening one link within a second queues ~100 (bench/lecture_link.py --spread 1)
    assert queue.max_size == app.QUEUE_WAITING >= 128
    assert isinstance(queue.default_concurrency_limit, int)
    assert queue.default_concurrency_limit >= 2, queue.default_concurrency_limit
    run_fn = next(fn for fn in demo.fns.values() if fn.api_name == "run")
    assert run_fn.concurrency_limit in ("default", None) or run_fn.concurrency_limit >= 2


@pytest.fixture(scope="module")
def app_url():
    with serve_app() as (url, _):
        yield url


def test_32_clients_x_10_requests_each_get_their_own_tokens(app_url, bert):
    _, tok = bert
    warm = connect(app_url)
    run(warm, "warm up")  # load the model before the clock starts
    warm.close()
    result = hammer(app_url, n_clients=32, n_requests=10, tok=tok, budget_s=200)
    print(f"\nconcurrency 32 x 10: {result.summary()}")
    assert result.errors == [], result.errors[:5]
    assert result.crosstalk == [], result.crosstalk[:5]
    assert len(result.latencies) == 32 * 10


def test_memory_stays_bounded_over_two_rounds_of_50_sessions(app_url, bert):
    _, tok = bert
    pid = app_pid(app_url)
    rounds = [memory_round(app_url, pid, tok, 50, round_no) for round_no in (1, 2)]
    for n, (before, after) in enumerate(rounds, 1):
        print(f"\nround {n}: RSS {mib(before)} -> {mib(after)}")
    (_, after_1), (_, after_2) = rounds
    assert after_2 <= MAX_RSS, mib(after_2)
    growth = (after_2 - after_1) / after_1
    assert growth < MAX_SECOND_ROUND_GROWTH, f"second round grew the RSS by {growth:.0%}"
