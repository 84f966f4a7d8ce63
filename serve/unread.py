"""What Gradio keeps for a client between requests, bounded (issue 10).

**Results not read yet.** Each session's messages wait in a queue until its client reads the
event stream; a client that submits and never reads (a script, a crashed tab) leaves every
result there — 100 unread Attention results held +233 MiB. ``bound_unread`` gives those queues
one byte budget shared by all sessions: when it is exceeded, the oldest unread results are
replaced by one sentence saying they were dropped (their client still learns that the event
ended), and, beyond that, the oldest small messages are dropped. A browser reads its results
within milliseconds, so only results nobody is reading are ever touched.

(Gradio's per-session copy of every output's last value is dropped by serve/lean.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict

from gradio.server_messages import ProcessCompletedMessage
from gradio.utils import LRUCache
from pydantic import BaseModel

UNREAD_BYTES = 64 * 2**20  # all sessions' unread results together
SMALL = 256  # what a message counts for at least (an id, a type, a few numbers)
DROPPED = (
    "This result was not read in time and was dropped to keep the server's memory bounded; "
    "run it again."
)


def size_of(value, depth: int = 0) -> int:
    """Roughly the bytes a message's content holds (strings dominate: figures are JSON text)."""
    if isinstance(value, str | bytes):
        return len(value)
    if depth > 20:
        return SMALL
    if isinstance(value, BaseModel):
        value = value.__dict__
    if isinstance(value, dict):
        return sum(size_of(v, depth + 1) for v in value.values()) + 16 * len(value)
    if isinstance(value, list | tuple):
        return sum(size_of(v, depth + 1) for v in value) + 8 * len(value)
    return 8


class Unread:
    """The ledger of every session's unread messages, oldest first, and their bytes.

    An ordered dict, not a ``serve.lru.LockedLRU``: nothing here is "used" again (a message is
    added once and forgotten when read), the bound is bytes, not entries, and trimming walks the
    entries oldest first, shrinking some in place and dropping others by their queue.
    """

    def __init__(self, budget: int = UNREAD_BYTES) -> None:
        self.budget = budget
        self.total = 0
        self._entries: OrderedDict[int, tuple[object, UnreadQueue, int]] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, message, queue: UnreadQueue) -> None:
        size = max(SMALL, size_of(getattr(message, "output", None)))
        with self._lock:
            self._entries[id(message)] = (message, queue, size)
            self.total += size
            self._trim()

    def forget(self, message) -> None:
        with self._lock:
            entry = self._entries.pop(id(message), None)  # entries hold their message: ids
            if entry is not None:  # cannot be reused while listed
                self.total -= entry[2]

    def forget_queue(self, queue: UnreadQueue) -> None:
        with self._lock:
            for key, (_, owner, size) in list(self._entries.items()):
                if owner is queue:
                    del self._entries[key]
                    self.total -= size

    def _trim(self) -> None:
        """Oldest first: drop results' content; if still over budget, drop messages."""
        if self.total <= self.budget:
            return
        for key, (message, queue, size) in list(self._entries.items()):
            if self.total <= self.budget:
                return
            if isinstance(message, ProcessCompletedMessage) and size > SMALL:
                message.output = {"error": DROPPED}
                message.success = False
                message.title = "Dropped"
                self._entries[key] = (message, queue, SMALL)
                self.total -= size - SMALL
        for key, (message, queue, size) in list(self._entries.items()):
            if self.total <= self.budget:
                return
            queue.discard(message)
            del self._entries[key]
            self.total -= size


class UnreadQueue(asyncio.Queue):
    """One session's message queue, accounted in its ledger."""

    def __init__(self, ledger: Unread) -> None:
        super().__init__()
        self.ledger = ledger

    def put_nowait(self, item) -> None:
        super().put_nowait(item)  # first: the ledger may trim this very message
        self.ledger.add(item, self)

    def get_nowait(self):
        item = super().get_nowait()  # asyncio.Queue.get() ends here too
        self.ledger.forget(item)
        return item

    def discard(self, item) -> None:
        with contextlib.suppress(ValueError):  # read meanwhile
            self._queue.remove(item)


class UnreadSessions(LRUCache):
    """Gradio's per-session message queues, each one accounted (and forgotten when dropped)."""

    def __init__(self, ledger: Unread, max_size: int = 2000) -> None:
        super().__init__(max_size)
        self.ledger = ledger

    def __setitem__(self, key, value) -> None:
        if type(value) is asyncio.Queue:  # Gradio makes a fresh, empty one per session
            value = UnreadQueue(self.ledger)
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        queue = self.get(key)
        super().__delitem__(key)
        if isinstance(queue, UnreadQueue):
            self.ledger.forget_queue(queue)

    def popitem(self, last: bool = True):
        key, queue = super().popitem(last=last)
        if isinstance(queue, UnreadQueue):
            self.ledger.forget_queue(queue)
        return key, queue


def bound_unread(demo, budget: int = UNREAD_BYTES) -> Unread:
    """Give ``demo``'s queue (after ``demo.queue()``) one byte budget for unread messages."""
    ledger = Unread(budget)
    queue = demo._queue
    old = queue.pending_messages_per_session
    sessions = UnreadSessions(ledger, old.max_size)
    for key, value in old.items():  # none yet when called from build
        sessions[key] = value
    queue.pending_messages_per_session = sessions
    return ledger
