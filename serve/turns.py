"""One browser page's requests in order (issue 13): a late answer never replaces a newer one.

Gradio runs a page's events concurrently (a tab click, a slider move and a Run may all be in
flight), so an older request can finish after a newer one and overwrite its figures. Every event
carries its page's id (stamped in the browser: ta.stamp, ui/js/core.js) and runs under that
page's lock, and view redraws read the page's latest Run from here rather than the state the
browser sent with the event, which may predate a Run still being answered.

A request waiting for its page's turn holds one of the queue's slots, so a page may have at most
``MAX_IN_FLIGHT`` requests admitted at once (one running, the rest waiting): beyond that a request
is answered at once with one sentence (``PageBusy``) and its slot goes to other users. Gradio's
own trigger modes keep a real page at two or three; only a crafted client reaches the cap.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator

from lang import Msg

MAX_IN_FLIGHT = 4


def page_id(page: str | None) -> str | None:
    """The page's id without what the stamp says after it."""
    return page.partition("|")[0] if isinstance(page, str) else page


PAGE_BUSY = (
    "This page already has {n} requests waiting on the server, so this one was not run; wait "
    "for them to finish, then try again."
)


class PageBusy(Exception):
    """A page already has MAX_IN_FLIGHT requests admitted."""

    def __init__(self) -> None:
        super().__init__(PAGE_BUSY.format(n=MAX_IN_FLIGHT))
        self.said = Msg(PAGE_BUSY, n=MAX_IN_FLIGHT)  # in the asking page's language


def client_address(request) -> str | None:
    """The asking client's network address (the connecting peer), None when unknown."""
    client = getattr(request, "client", None)
    return getattr(client, "host", None)


class Pages:
    """Per-page locks, requests in flight and latest runs, for at most ``max_pages`` pages
    (least recent dropped)."""

    def __init__(self, max_pages: int = 2_000, max_in_flight: int = MAX_IN_FLIGHT) -> None:
        self.max_pages = max_pages
        self.max_in_flight = max_in_flight
        # page -> [its lock, its latest run, its requests in flight]
        self._pages: OrderedDict[str, list] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, page: str) -> list:
        with self._lock:
            entry = self._pages.pop(page, None) or [threading.Lock(), None, 0]
            self._pages[page] = entry
            while len(self._pages) > self.max_pages:
                self._pages.popitem(last=False)
            return entry

    @contextlib.contextmanager
    def turn(self, page: str | None, address: str | None = None) -> Iterator[None]:
        """Run the body alone among this page's requests (no-op without a page id); raises
        PageBusy when the page already has ``max_in_flight`` requests admitted."""
        page = page_id(page)
        if not isinstance(page, str) or not page or len(page) > 64:
            yield
            return
        entry = self._entry(page)
        with self._lock:
            if entry[2] >= self.max_in_flight:
                raise PageBusy()
            entry[2] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[2] -= 1

    def latest_run(self, page: str | None, fallback):
        """The state of this page's latest Run, or ``fallback`` (what the browser sent)."""
        page = page_id(page)
        if not isinstance(page, str) or not page:
            return fallback
        run = self._entry(page)[1]
        return run if run is not None else fallback

    def set_run(self, page: str | None, state) -> None:
        page = page_id(page)
        if isinstance(page, str) and page and len(page) <= 64:
            self._entry(page)[1] = state

    def __len__(self) -> int:
        return len(self._pages)
