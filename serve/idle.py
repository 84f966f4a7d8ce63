"""An idle server that sleeps: Gradio's queue woken by its events instead of polling.

Gradio 6.31's queue checks for work every millisecond while it has none (``start_processing``
sleeps ``sleep_when_free`` = 1 ms), and looks for progress to send every 10 ms while nothing
runs. With nobody connected that cost the app process 71-79 core-ms every second (7-8 % of a
core per replica, ~1.7 cores for the 22 replicas docs/deploy.md sizes for 2,000 students).

``quiet_queue`` keeps Gradio's own loops but lets them wait on an ``asyncio.Event`` that is set
whenever something can start: an event joined the queue (``push``) or a job ended and freed a
worker or a concurrency slot (``process_events`` returns). A joined event therefore starts as soon
as it did before (no poll interval to wait out). The wait still gives up after ``FALLBACK``
seconds, so a state change this module does not know of costs at most that, never a stall.
``bench/serving_cost.py`` prints the idle rate; ``tests/test_idle.py`` holds it and the
start-up delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import types

log = logging.getLogger(__name__)

FALLBACK = 0.5  # seconds: the longest a free queue sleeps without a wake-up
# Costly events (``quiet_queue``'s ``costly``: a tab opened on a pair it measures first) running
# at once; the next waits until one ends, and the other events pass it.
COSTLY_AT_ONCE = 2


class Wake:
    """An ``asyncio.Event`` of whichever loop runs the queue now: a demo closed and launched
    again (as tests do) runs its queue on a new loop, and an event is bound to one loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event = asyncio.Event()

    def _now(self) -> asyncio.Event:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._event = loop, asyncio.Event()
        return self._event

    def set(self) -> None:
        self._now().set()

    async def nap(self, seconds: float = FALLBACK) -> None:
        """Sleep until set (or ``seconds`` pass), then clear it for the next nap."""
        event = self._now()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)
        event.clear()  # the caller re-reads the queue's state after this: no wake-up is lost


def is_costly(queue, event) -> bool:
    """Whether ``event`` is costly (asked once, kept on the event). The queue's loop asks this
    before every start: a ``costly`` that raises is logged and the event taken as light, since
    an error here would end the loop and no page's event would start again."""
    if not hasattr(event, "ta_costly"):
        try:
            event.ta_costly = bool(queue.costly and queue.costly(event))
        except Exception:
            log.exception("the queue's costly() failed on an event; it runs as a light one")
            event.ta_costly = False
    return event.ta_costly


def hold_costly(queue) -> dict:
    """With COSTLY_AT_ONCE costly events running, every group's waiting costly events taken out
    of its line (``{group: [event, …]}``, in order) while the queue picks what starts next:
    the others go first, and a costly one starts only when one of those running ends. A class
    that opens a tab on thirty new pairs within a second then takes two of the group's places,
    not all twelve, and a student's Run or tab switch waits for no more than those two
    (bench/bench_circuits_class.py). ``put_back`` returns them behind the others."""
    held: dict = {}
    if queue.costly is None or queue.costly_running < COSTLY_AT_ONCE:
        return held
    for group in queue.event_queue_per_concurrency_id.values():
        costly = [event for event in group.queue if is_costly(queue, event)]
        if costly:
            group.queue[:] = [event for event in group.queue if not is_costly(queue, event)]
            held[group] = costly
    return held


def put_back(held: dict) -> None:
    for group, costly in held.items():
        group.queue.extend(costly)


async def _start_processing(self) -> None:
    """Gradio's ``Queue.start_processing``, its 1 ms sleeps replaced by a nap until woken, and
    no more than COSTLY_AT_ONCE costly events started at once (``hold_costly``)."""
    try:
        while not self.stopped:
            if len(self) == 0 or None not in self.active_jobs:
                await self.wake.nap()
                continue
            async with self.delete_lock:  # Gradio's own mutex over the lists
                held = hold_costly(self)
                event_batch = self.get_events()
                put_back(held)
            if not event_batch:  # every waiting event's concurrency group is full
                await self.wake.nap()
                continue
            self.start_batch(*event_batch)
    finally:
        self.stopped = True
        self._cancel_asyncio_tasks()


def _start_batch(self, events, batch, concurrency_id) -> None:
    """The body of Gradio 6.31's loop for one batch it took from the queue, unchanged."""
    from gradio.utils import run_coro_in_background, set_task_name

    self.active_jobs[self.active_jobs.index(None)] = events
    if any(is_costly(self, event) for event in events):
        self.costly_running += 1
    event_queue = self.event_queue_per_concurrency_id[concurrency_id]
    event_queue.current_concurrency += 1
    start_time = time.time()
    fn = events[0].fn
    event_queue.start_times_per_fn[fn].add(start_time)
    for event in events:
        if (a := self.event_analytics.get(event._id)) is not None:
            a["status"] = "processing"
    task = run_coro_in_background(self.process_events, events, batch, start_time, fn)
    set_task_name(task, events[0].session_hash, fn._id, events[0]._id, batch)
    self._asyncio_tasks.add(task)
    task.add_done_callback(self._asyncio_tasks.discard)
    self.running.set()
    if self.live_updates:
        self.broadcast_estimations(concurrency_id)


async def _start_progress_updates(self) -> None:
    """Gradio's progress loop (every 10 ms while jobs run), asleep while none does."""
    while not self.stopped:
        events = [evt for job in self.active_jobs if job is not None for evt in job]
        if not events:
            await self.running.nap()
            continue
        for event in events:
            if event.progress_pending and event.progress:
                event.progress_pending = False
                self.send_message(event, event.progress)
        await asyncio.sleep(self.progress_update_sleep_when_free)


def quiet_queue(demo, costly=None) -> None:
    """Make ``demo``'s queue (after ``demo.queue()``, before launch) sleep while it has no work;
    ``costly(event) -> bool`` names the events that wait behind the others while
    COSTLY_AT_ONCE of them run (``hold_costly``)."""
    queue = demo._queue
    queue.wake = Wake()  # something may start: an event joined, or a job ended
    queue.running = Wake()  # a job started: progress may need sending
    queue.costly, queue.costly_running = costly, 0
    push, process_events = queue.push, queue.process_events

    async def woken_push(*args, **kwargs):
        try:
            return await push(*args, **kwargs)
        finally:
            queue.wake.set()

    async def woken_process_events(events, *args, **kwargs):
        try:
            return await process_events(events, *args, **kwargs)
        finally:
            if any(is_costly(queue, event) for event in events):
                queue.costly_running -= 1
            queue.wake.set()  # a worker and a concurrency slot are free again

    queue.push = woken_push
    queue.process_events = woken_process_events
    for name, method in (
        ("start_processing", _start_processing),
        ("start_batch", _start_batch),
        ("start_progress_updates", _start_progress_updates),
    ):
        setattr(queue, name, types.MethodType(method, queue))
