"""One browser page's requests in order (issue 13): a late answer never replaces a newer one.

Gradio runs a page's events concurrently (a tab click, a slider move and a Run may all be in
flight), so an older request can finish after a newer one and overwrite its figures. Every event
carries its page's id (stamped in the browser, see STAMP) and runs under that page's lock, and
view redraws read the page's latest Run from here rather than the state the browser sent with the
event, which may predate a Run still being answered.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

# Prepended to every Python-backed event: the last input becomes this page's id (kept on window,
# so it lives as long as the page), followed by "|fill:<id>" when the page can fill figures' z from
# the head switch data (ui/fill.py; it needs DecompressionStream) and holds the data <id> ("" when
# none yet). gradio_client calls send "" and are not ordered.
STAMP = """(...args) => {
  window.__taPage = window.__taPage ||
    (window.crypto && crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
  const fill = window.__taFill && window.__taFill.ok() ? '|fill:' + window.__taFill.held : '';
  args[args.length - 1] = window.__taPage + fill;
  return args; }"""


@dataclass(frozen=True)
class Client:
    """What the asking page said about itself: whether it fills figures from the head switch data
    (ui/fill.py), and the id of the data it holds. API clients: neither."""

    fills: bool = False
    holds: str = ""

    @classmethod
    def of(cls, page: str | None) -> Client:
        if not isinstance(page, str) or "|fill:" not in page:
            return cls()
        held = page.partition("|fill:")[2]
        return cls(fills=True, holds=held if held.isalnum() and len(held) <= 32 else "")


API = Client()  # an API client, or a page that cannot fill figures: every figure complete


def page_id(page: str | None) -> str | None:
    """The page's id without what the stamp says after it."""
    return page.partition("|")[0] if isinstance(page, str) else page


class Pages:
    """Per-page locks and latest runs, for at most ``max_pages`` pages (least recent dropped)."""

    def __init__(self, max_pages: int = 2_000) -> None:
        self.max_pages = max_pages
        self._pages: OrderedDict[str, tuple[threading.Lock, list]] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, page: str) -> tuple[threading.Lock, list]:
        with self._lock:
            entry = self._pages.pop(page, None) or (threading.Lock(), [None])
            self._pages[page] = entry
            while len(self._pages) > self.max_pages:
                self._pages.popitem(last=False)
            return entry

    @contextlib.contextmanager
    def turn(self, page: str | None) -> Iterator[None]:
        """Run the body alone among this page's requests (no-op without a page id)."""
        page = page_id(page)
        if not isinstance(page, str) or not page or len(page) > 64:
            yield
            return
        lock, _ = self._entry(page)
        with lock:
            yield

    def latest_run(self, page: str | None, fallback):
        """The state of this page's latest Run, or ``fallback`` (what the browser sent)."""
        page = page_id(page)
        if not isinstance(page, str) or not page:
            return fallback
        _, run = self._entry(page)
        return run[0] if run[0] is not None else fallback

    def set_run(self, page: str | None, state) -> None:
        page = page_id(page)
        if isinstance(page, str) and page and len(page) <= 64:
            self._entry(page)[1][0] = state

    def __len__(self) -> int:
        return len(self._pages)
