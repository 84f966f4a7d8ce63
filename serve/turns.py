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

The page id is the browser's own invention, so a client that sends a fresh one each time (or
none) would dodge that cap. A second cap counts what a client cannot choose freely, its network
address (``client_address``): at most ``MAX_PER_ADDRESS`` requests admitted at once per address,
whatever page ids they carry (``AddressBusy`` beyond), fewer than the concurrency group's 12 slots
so another address always finds one. docs/caps.md says what identifies a client behind a proxy
and what this means for a classroom behind one NAT address.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import threading
from collections.abc import Callable, Iterator

from lang import Msg
from serve.lru import LockedLRU

MAX_IN_FLIGHT = 4


def env_count(name: str, default: int) -> int:
    """A positive whole number from the environment, ``default`` when unset or not one."""
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


# Requests admitted at once from one network address (8 of the group's 12 slots).
MAX_PER_ADDRESS = env_count("TA_MAX_PER_ADDRESS", 8)


def page_id(page: str | None) -> str | None:
    """The page's id without what the stamp says after it."""
    return page.partition("|")[0] if isinstance(page, str) else page


PAGE_BUSY = (
    "This page already has {n} requests waiting on the server, so this one was not run; wait "
    "for them to finish, then try again."
)


ADDRESS_BUSY = (
    "Too many requests from your network address: {n} are already waiting on the server, so "
    "this one was not run; wait for them to finish, then try again."
)


class PageBusy(Exception):
    """A page already has its cap of requests admitted; ``message`` says so (a lang.Msg, so
    ``lang.message_of(exc)`` says it in the page's language)."""

    def __init__(self, n: int = MAX_IN_FLIGHT) -> None:
        self.message = Msg(PAGE_BUSY, n=n)
        super().__init__(self.message)


class AddressBusy(PageBusy):
    """A network address already has its cap of requests admitted, whatever their pages."""

    def __init__(self, n: int = MAX_PER_ADDRESS) -> None:
        self.message = Msg(ADDRESS_BUSY, n=n)
        Exception.__init__(self, self.message)


# Entries the proxy appends to X-Forwarded-For that we trust (counted from the right): 1 on a
# Hugging Face Space (SPACE_ID is set there), else 0 unless TA_TRUST_PROXY says how many.
def trusted_hops() -> int:
    value = os.environ.get("TA_TRUST_PROXY", "").strip()
    if value:
        try:
            return max(0, int(value))
        except ValueError:
            return 0
    return 1 if os.environ.get("SPACE_ID") else 0


def address_key(host: str) -> str:
    """The cap's key for an address: an IPv4 address as it is, an IPv6 address's /64 network (one
    household or phone gets a whole /64 and may pick any address in it); other text as sent."""
    host = host.strip()
    try:
        address = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return host[:64]
    if address.version == 6:
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


def forwarded_for(headers) -> list[str]:
    """The X-Forwarded-For entries, in order, over every such header line (a dict from a pickled
    gradio.Request, Starlette's Headers otherwise)."""
    if headers is None:
        return []
    if hasattr(headers, "getlist"):
        lines = headers.getlist("x-forwarded-for")
    else:
        lines = [v for k, v in dict(headers).items() if str(k).lower() == "x-forwarded-for"]
    return [entry.strip() for line in lines for entry in str(line).split(",") if entry.strip()]


def client_address(request) -> str:
    """The network address a gradio.Request came from ("" without one), as ``address_key``.

    The connecting peer's address, except behind a trusted reverse proxy (``trusted_hops``): then
    the entry the proxy appended to X-Forwarded-For, the last one (the entries before it are
    whatever the client sent and are never trusted). uvicorn has already replaced the peer by
    X-Forwarded-For's last entry for connections from 127.0.0.1 (its FORWARDED_ALLOW_IPS).
    """
    if request is None:
        return ""
    try:
        client = request.client
        peer = (getattr(client, "host", None) or "") if client is not None else ""
    except AttributeError:
        peer = ""
    hops = trusted_hops()
    if hops:
        try:
            entries = forwarded_for(request.headers)
        except AttributeError:
            entries = []
        if len(entries) >= hops:
            return address_key(entries[-hops])
    return address_key(str(peer)) if peer else ""


class Pages:
    """Per-page locks and requests in flight, for at most ``max_pages`` pages (least recent
    dropped), and requests in flight per network address.

    ``others_waiting(address)`` says whether requests from other addresses wait in the queue:
    an address beyond ``max_per_address`` is refused only then (a fair share, not a hard cap: a
    class behind one address uses every free slot while nobody else needs one; ``share_queue``
    reads Gradio's queue for it). By default it says yes: a hard cap.
    """

    def __init__(
        self,
        max_pages: int = 2_000,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_per_address: int = MAX_PER_ADDRESS,
        others_waiting: Callable[[str], bool] | None = None,
    ) -> None:
        self.max_pages = max_pages
        self.max_in_flight = max_in_flight
        self.max_per_address = max_per_address
        self.others_waiting = others_waiting or (lambda address: True)
        # page -> [its lock, its requests in flight]
        self._pages: LockedLRU[str, list] = LockedLRU(max_pages)
        # address -> its requests in flight (an address leaves when it has none)
        self._addresses: dict[str, int] = {}
        self._lock = threading.Lock()

    def _entry(self, page: str) -> list:
        return self._pages.setdefault(page, [threading.Lock(), 0])

    @contextlib.contextmanager
    def turn(self, page: str | None, address: str | None = None) -> Iterator[None]:
        """Run the body alone among this page's requests (in no page's turn without a page id).

        Raises PageBusy when the page already has ``max_in_flight`` requests admitted, and
        AddressBusy (a PageBusy) when ``address`` (``client_address(request)``) already has
        ``max_per_address``, whatever their page ids; no address ("" or None), no such cap.
        """
        page = page_id(page)
        entry = None
        if isinstance(page, str) and page and len(page) <= 64:
            entry = self._entry(page)
        address = address or None
        with self._lock:
            if entry is not None and entry[1] >= self.max_in_flight:
                raise PageBusy(self.max_in_flight)
            held = self._addresses.get(address, 0) if address is not None else 0
            if held >= self.max_per_address and self.others_waiting(address):
                raise AddressBusy(self.max_per_address)
            if entry is not None:
                entry[1] += 1
            if address is not None:
                self._addresses[address] = self._addresses.get(address, 0) + 1
        try:
            with entry[0] if entry is not None else contextlib.nullcontext():
                yield
        finally:
            with self._lock:
                if entry is not None:
                    entry[1] -= 1
                if address is not None:
                    left = self._addresses.pop(address) - 1
                    if left:
                        self._addresses[address] = left

    def in_flight(self, address: str | None = None) -> int:
        """Requests admitted now from ``address``, or from every address together."""
        with self._lock:
            if address is not None:
                return self._addresses.get(address, 0)
            return sum(self._addresses.values())

    def __len__(self) -> int:
        return len(self._pages)


def share_queue(demo, concurrency_id: str = "model") -> Callable[[str], bool]:
    """``Pages.others_waiting`` for ``demo``: whether Gradio's queue for the group holds a request
    from another address (each queued event keeps its request)."""

    def others_waiting(address: str) -> bool:
        group = getattr(demo._queue, "event_queue_per_concurrency_id", {}).get(concurrency_id)
        for event in list(getattr(group, "queue", []) or []):
            if client_address(getattr(event, "request", None)) != address:
                return True
        return False

    return others_waiting
