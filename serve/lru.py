"""A small least-recently-used map that many threads may share.

Gradio runs handlers on a pool of worker threads (the "model" concurrency group admits 12 at
once), so a module-level cache is read and written by several threads at a time. A bare
``OrderedDict`` is not safe for that: ``move_to_end(key)`` raises KeyError when another thread's
``popitem`` evicted ``key`` between the check and the move. ``LockedLRU`` makes each call one step
under its own lock; computing a missing value stays outside the lock (two threads may both
compute it, the later ``put`` wins), so a slow computation never blocks readers of other keys.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LockedLRU(Generic[K, V]):
    """At most ``size`` entries; ``get`` and ``put`` make a key the most recently used, and
    ``put`` drops the least recently used beyond ``size``."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a LockedLRU holds at least one entry")
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, default: V | None = None) -> V | None:
        """The value for ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` as the most recently used; returns ``value``."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def setdefault(self, key: K, default: V) -> V:
        """The value for ``key`` (now the most recently used), or ``default`` kept for it, in one
        step: two threads asking for the same missing key get the same value."""
        with self._lock:
            value = self._items.pop(key, default)
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
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
