"""A small least-recently-used map that many threads may share.

Gradio runs handlers on a pool of worker threads (the "model" concurrency group admits 12 at
once), so a module-level cache is read and written by several threads at a time. A bare
``OrderedDict`` is not safe for that: ``move_to_end(key)`` raises KeyError when another thread's
``popitem`` evicted ``key`` between the check and the move. ``LockedLRU`` makes each call one step
under its own lock; computing a missing value stays outside the lock (two threads may both
compute it, the later ``put`` wins), so a slow computation never blocks readers of other keys.
``once`` computes a missing value in one thread while the others asking for that key wait (a
pair a class patches at once is measured once).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LockedLRU(Generic[K, V]):
    """At most ``size`` entries; ``get`` and ``put`` make a key the most recently used, and
    ``put`` drops the least recently used beyond ``size``. With ``max_bytes``, also while the
    entries together weigh more than that (``weigh(value)``, in bytes), keeping the newest."""

    def __init__(
        self, size: int, max_bytes: int | None = None, weigh: Callable[[V], int] | None = None
    ) -> None:
        if size < 1:
            raise ValueError("a LockedLRU holds at least one entry")
        if (max_bytes is None) != (weigh is None):
            raise ValueError("a byte bound needs a weigh function, and one only a byte bound")
        self.size, self.max_bytes, self.weigh = size, max_bytes, weigh
        self._items: OrderedDict[K, V] = OrderedDict()
        self._weights: dict[K, int] = {}
        self._making: dict[K, threading.Lock] = {}  # once(): the keys being made, a lock each
        self._lock = threading.Lock()

    def _evict(self) -> None:
        """Under the lock: drop the least recently used beyond the bounds (never the newest)."""
        while len(self._items) > self.size or (
            self.max_bytes is not None
            and len(self._items) > 1
            and sum(self._weights.values()) > self.max_bytes
        ):
            key, _ = self._items.popitem(last=False)
            self._weights.pop(key, None)

    def _weighed(self, key: K, value: V) -> None:
        if self.weigh is not None:
            self._weights[key] = self.weigh(value)

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value for ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def once(self, key: K, make: Callable[[], V]) -> V:
        """The value for ``key``, made by ``make()`` in one thread while any other asking for the
        same key waits for it; other keys are not held up. A ``make`` that raises leaves no lock
        behind (the next one asking makes it again)."""
        found = self.get(key)
        if found is not None:
            return found
        with self._lock:
            lock = self._making.setdefault(key, threading.Lock())
        try:
            with lock:
                found = self.get(key)
                if found is None:
                    found = self.put(key, make())
        finally:
            with self._lock:
                self._making.pop(key, None)
        return found

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` as the most recently used; returns ``value``."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            self._weighed(key, value)
            self._evict()
        return value

    def setdefault(self, key: K, default: V) -> V:
        """The value for ``key`` (now the most recently used), or ``default`` kept for it, in one
        step: two threads asking for the same missing key get the same value."""
        with self._lock:
            value = self._items.pop(key, default)
            self._items[key] = value
            self._weighed(key, value)
            self._evict()
            return value

    def values(self) -> list[V]:
        """The values now, least recently used first (a copy)."""
        with self._lock:
            return list(self._items.values())

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weights.clear()
