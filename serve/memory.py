"""Memory the server hands back to the operating system (glibc's allocator; elsewhere nothing).

A trace is tens of MB of tensors made and freed by whichever worker thread ran it, and glibc
keeps what is freed in per-thread heap arenas: the engine trims after each new trace, the views
after a big draw and once more when a burst settles, and blocks of 1 MiB or more are mapped
apart so they go back the moment they are freed (bench/README.md measures each).
"""

from __future__ import annotations

import contextlib
import ctypes
import threading


def _malloc_trim():
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to trim
        return None


_TRIM = _malloc_trim()


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 1 << 20


def return_big_blocks() -> None:
    """Every block of 1 MiB or more (a trace's tensors, a 512-token view's temporaries) is its
    own mapping, given back to the OS the moment it is freed.

    glibc raises its mapping threshold after each large free, up to 32 MB, so without a fixed
    threshold a 512-token pass's 4-32 MB tensors come from the heap arenas of whichever worker
    thread ran it, and stay there: one session joining 108 unread 512-token deep links on the
    Attention tab left the server 1.5 GB above where it started, 0.8 GB with this
    (bench/unread_links.py). Setting the threshold also stops glibc from raising it.
    """
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its own allocator's rules
        ctypes.CDLL("libc.so.6").mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def release_freed_memory() -> None:
    """Hand freed heap memory back to the OS.

    A trace is tens of MB of tensors made and freed by whichever worker thread ran it; glibc keeps
    freed blocks in per-thread arenas, so without this the server's RSS creeps up under load
    (bench/README.md: +2 to +29 % per round of 50 sessions, with it +1.5 %). ~1 ms at 128 tokens,
    and only when a new trace enters the cache.
    """
    if _TRIM is not None:
        _TRIM(0)


SETTLE_S = 2.0  # seconds without a big draw before the heap is trimmed once more
_settle: list[threading.Timer] = []
_settle_lock = threading.Lock()


def release_when_settled(delay: float = SETTLE_S) -> None:
    """Trim once more ``delay`` seconds after the last call. A burst of big draws frees more
    after its last trim: the results its pages never read dropped from their budget, views
    evicted from the shared ones. Those frees sat in the heap arenas until the next trace;
    one session's 300 unread 512-token links left ~40 MiB more held (bench/unread_links.py)."""
    if _TRIM is None:
        return
    with _settle_lock:
        for timer in _settle:
            timer.cancel()
        timer = threading.Timer(delay, release_freed_memory)
        timer.daemon = True
        _settle[:] = [timer]
        timer.start()
