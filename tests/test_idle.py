"""An idle server sleeps (serve/idle.py), and a queued event still starts the moment it can."""

from __future__ import annotations

import time
from pathlib import Path

import gradio as gr
import pytest
from gradio_client import Client

from serve.idle import COSTLY_AT_ONCE, FALLBACK, quiet_queue


def thread_cpu_ns(native_id: int) -> int:
    return int(Path(f"/proc/self/task/{native_id}/schedstat").read_text().split()[0])


@pytest.fixture(scope="module")
def served():
    """A one-button app with one worker slot, its queue quieted as app.build_demo does."""
    stamps: list[tuple[float, float]] = []

    def work(x: str) -> str:
        start = time.monotonic()
        time.sleep(0.05)
        stamps.append((start, time.monotonic()))
        return x

    with gr.Blocks() as demo:
        box = gr.Textbox()
        box.submit(work, box, box, api_name="work", concurrency_limit=1)
    demo.queue(default_concurrency_limit=1)
    quiet_queue(demo)
    demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        yield demo, stamps
    finally:
        demo.close()


def test_an_idle_queue_costs_the_server_almost_nothing(served):
    demo, _ = served
    loop_thread = demo.server.thread.native_id  # the server's event loop: Gradio's queue runs there
    time.sleep(0.5)
    c0, t0 = thread_cpu_ns(loop_thread), time.monotonic()
    time.sleep(2.0)
    per_second_ms = (thread_cpu_ns(loop_thread) - c0) / (time.monotonic() - t0) / 1e6
    # Gradio's own loops polled every 1 ms and 10 ms: 40-80 core-ms a second here.
    assert per_second_ms < 5, f"the idle event loop used {per_second_ms:.1f} core-ms a second"


def test_a_queued_event_starts_when_the_one_before_it_ends(served):
    demo, stamps = served
    client = Client(demo.local_url, verbose=False)
    stamps.clear()
    jobs = [client.submit(f"t{i}", api_name="/work") for i in range(4)]
    assert [job.result(timeout=30) for job in jobs] == [f"t{i}" for i in range(4)]
    stamps.sort()
    gaps = [nxt[0] - prev[1] for prev, nxt in zip(stamps, stamps[1:], strict=False)]
    assert len(gaps) == 3
    # A job's end wakes the queue: the next one starts at once, not after the fallback nap.
    assert max(gaps) < FALLBACK / 3, f"gaps between jobs {gaps}"


def test_a_first_event_after_a_long_idle_starts_at_once(served):
    demo, stamps = served
    client = Client(demo.local_url, verbose=False)
    time.sleep(FALLBACK * 1.5)  # the queue is deep in a nap
    stamps.clear()
    asked = time.monotonic()
    assert client.predict("hello", api_name="/work") == "hello"
    assert stamps[0][0] - asked < FALLBACK / 2, "the joined event waited for the nap"


def test_the_loop_serve_idle_copies_is_still_gradios():
    """serve/idle.py copies the body of Gradio 6.31's loop: an upgrade that changes it fails."""
    import inspect

    from gradio.queueing import Queue

    source = inspect.getsource(Queue.start_processing)
    for line in (
        "await asyncio.sleep(self.sleep_when_free)",
        "self.active_jobs[self.active_jobs.index(None)] = events",
        "event_queue.current_concurrency += 1",
        "event_queue.start_times_per_fn[fn].add(start_time)",
        "self.process_events, events, batch, start_time, fn",
    ):
        assert line in source, line


def test_a_demo_closed_and_launched_again_still_serves():
    """A relaunch runs the queue on a new event loop; the wake-ups follow it."""
    with gr.Blocks() as demo:
        box = gr.Textbox()
        box.submit(str.upper, box, box, api_name="up")
    demo.queue()
    quiet_queue(demo)
    for _ in range(2):
        demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
        try:
            assert Client(demo.local_url, verbose=False).predict("a", api_name="/up") == "A"
        finally:
            demo.close()


def test_costly_events_run_two_at_once_and_the_others_pass_them():
    """A class opening a tab on new pairs at once (serve.idle.hold_costly): of six costly events
    queued together, no more than COSTLY_AT_ONCE run at once although the group admits twelve,
    and a light event asked after all six starts before the last costly one."""
    stamps: dict[str, tuple[float, float]] = {}

    def costly(x: str) -> str:
        start = time.monotonic()
        time.sleep(0.3)
        stamps[x] = (start, time.monotonic())
        return x

    def light(x: str) -> str:
        stamps[x] = (time.monotonic(), time.monotonic())
        return x

    with gr.Blocks() as demo:
        box = gr.Textbox()
        box.submit(costly, box, box, api_name="costly", concurrency_id="g", concurrency_limit=12)
        box.blur(light, box, box, api_name="light", concurrency_id="g", concurrency_limit=12)
    demo.queue(default_concurrency_limit=12)
    quiet_queue(demo, costly=lambda event: event.fn.name == "costly")
    demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        client = Client(demo.local_url, verbose=False)
        jobs = [client.submit(f"c{i}", api_name="/costly") for i in range(6)]
        time.sleep(0.1)  # all six queued; two of them running
        assert client.predict("l", api_name="/light") == "l"
        assert sorted(job.result(timeout=30) for job in jobs) == [f"c{i}" for i in range(6)]
    finally:
        demo.close()
    spans = [stamps[f"c{i}"] for i in range(6)]
    at_once = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
    assert at_once == COSTLY_AT_ONCE, spans
    assert stamps["l"][0] < max(s for s, _ in spans), (stamps["l"], spans)
    # the light one waited for no costly event to end beyond the two running when it came
    assert stamps["l"][0] - min(s for s, _ in spans) < 0.3 + 0.2, (stamps["l"], spans)


def test_a_costly_check_that_raises_is_logged_and_the_queue_goes_on(caplog):
    """The queue asks ``costly`` before it starts each event: an error there (as a dict sent in
    the tab's field once raised) is logged once and the event runs as a light one; the queue's
    loop must not end, or no page's event would ever start again."""

    def up(x):
        return str(x).upper()

    def costly(event) -> bool:
        value = event.data.data[0]
        return value in {"patching"}  # a dict or a list raises TypeError here

    with gr.Blocks() as demo:
        box = gr.JSON()
        out = gr.Textbox()
        box.change(up, box, out, api_name="up")
    demo.queue()
    quiet_queue(demo, costly=costly)
    demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        client = Client(demo.local_url, verbose=False)
        assert client.predict({"a": 1}, api_name="/up") == "{'A': 1}"
        assert client.predict("b", api_name="/up") == "B"  # the queue still starts events
    finally:
        demo.close()
    failed = [r for r in caplog.records if "costly() failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info is not None
