"""What the server keeps for its clients, and how many slots one client may hold (issue 10).

Through the real server, over Gradio's own queue protocol (join, then read the event stream), the
way a script that never reads its results, or a page that sends many requests at once, meets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time

import gradio as gr
import httpx
import orjson
import pytest
import starlette.requests
from gradio.server_messages import EstimationMessage, ProcessCompletedMessage

import app
import lang
from engine import Engine
from lang import message_of
from serve.turns import (
    ADDRESS_BUSY,
    MAX_IN_FLIGHT,
    PAGE_BUSY,
    AddressBusy,
    PageBusy,
    Pages,
    client_address,
)
from serve.unread import DROPPED, SMALL, Unread, UnreadQueue, UnreadSessions
from tests.inprocess import serve_demo

LONG = " ".join(["the cat sat on the mat because it was tired"] * 12)  # ~130 tokens


# ---------------------------------------------------------------- the ledger itself


def completed(n_bytes: int) -> ProcessCompletedMessage:
    return ProcessCompletedMessage(output={"data": ["x" * n_bytes]}, success=True)


def test_the_oldest_unread_results_are_dropped_first_and_reading_frees_the_budget():
    ledger = Unread(budget=2_500)
    sessions = UnreadSessions(ledger, max_size=10)
    sessions["a"] = asyncio.Queue()
    sessions["b"] = asyncio.Queue()
    a, b = sessions["a"], sessions["b"]
    assert isinstance(a, UnreadQueue)
    first, second, third = completed(1_000), completed(1_000), completed(1_000)
    a.put_nowait(first)
    b.put_nowait(second)
    assert ledger.total < 2_500 and first.success
    a.put_nowait(third)  # over budget: the oldest unread result gives up its content
    assert first.output == {"error": DROPPED} and not first.success
    assert second.success and third.success
    assert ledger.total <= 2_500
    assert b.get_nowait() is second  # read: no longer counted
    assert ledger.total == SMALL + ledger._entries[id(third)][2]
    del sessions["a"]  # a session Gradio forgets is forgotten here too
    assert ledger.total == 0


def test_small_messages_beyond_the_budget_are_dropped_oldest_first():
    ledger = Unread(budget=4 * SMALL)
    sessions = UnreadSessions(ledger, max_size=2)
    sessions["a"] = asyncio.Queue()
    queue = sessions["a"]
    messages = [EstimationMessage(rank=i, queue_size=i) for i in range(6)]
    for message in messages:
        queue.put_nowait(message)
    assert queue.qsize() == 4 and ledger.total == 4 * SMALL
    assert queue.get_nowait() is messages[2]  # the two oldest went
    sessions["b"] = asyncio.Queue()
    sessions["c"] = asyncio.Queue()  # the LRU drops "a": its messages leave the ledger
    assert "a" not in sessions and ledger.total == 0


# ---------------------------------------------------------------- through the real server


class Client:
    """Gradio's queue protocol, by hand: join as a session, read the stream when asked."""

    def __init__(self, url: str, session: str) -> None:
        self.url, self.session = url, session
        config = httpx.get(url + "config").json()
        dep = next(d for d in config["dependencies"] if d.get("api_name") == "run")
        props = {c["id"]: c.get("props", {}) for c in config["components"]}
        self.fn_index = dep["id"]
        self.inputs = dep["inputs"]
        self.defaults = [props[i].get("value") for i in dep["inputs"]]

    def on_tab(self, demo, tab: str) -> None:
        """Put this client on a tab, as a page's tab click does (Run draws the tab it names)."""
        self.defaults[app.API_NAMES.index("tab")] = tab

    def session_state(self, demo):
        return demo.state_holder[self.session]

    def join(self, **values) -> str:
        data = list(self.defaults)
        for name, value in values.items():
            data[app.API_NAMES.index(name)] = value
        body = {"data": data, "fn_index": self.fn_index, "session_hash": self.session}
        response = httpx.post(self.url + "gradio_api/queue/join", json=body)
        response.raise_for_status()
        return response.json()["event_id"]

    def results(self, n: int, timeout: float = 120) -> list[tuple[float, dict]]:
        """The next ``n`` completed events' messages, each with the time it arrived."""
        done = []
        url = f"{self.url}gradio_api/queue/data?session_hash={self.session}"
        with httpx.stream("GET", url, timeout=timeout) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data: "):
                    continue
                message = json.loads(line[6:])
                if message.get("msg") == "process_completed":
                    done.append((time.monotonic(), message))
                    if len(done) == n:
                        break
        return done


def status_of(message: dict) -> str:
    """The status line a completed Run message carries (its first output)."""
    output = message.get("output", {})
    if "error" in output:
        return output["error"]
    first = output["data"][0]
    return first.get("value", "") if isinstance(first, dict) else str(first)


@pytest.fixture(scope="module")
def served():
    demo = app.build_demo(public=False)
    with serve_demo(demo) as url:
        yield url, demo


def wait_completed(queue, n: int, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if sum(isinstance(m, ProcessCompletedMessage) for m in list(queue._queue)) >= n:
            return
        time.sleep(0.1)
    raise AssertionError("the runs never completed")


def test_results_nobody_reads_stay_within_the_budget_and_say_so_when_read(served):
    url, demo = served
    sessions = demo._queue.pending_messages_per_session
    ledger = sessions.ledger
    ledger.budget = 3 * 2**20  # a few Attention results' worth
    try:
        client = Client(url, "never-reads")
        client.on_tab(demo, "attention")
        for i in range(8):
            client.join(text=f"{LONG} {i}")
        queue = sessions["never-reads"]
        wait_completed(queue, 8)
        kept = sum(len(orjson.dumps(m.model_dump(), default=str)) for m in list(queue._queue))
        assert ledger.total <= ledger.budget
        assert kept <= ledger.budget * 1.1  # the estimate is close to what the stream would send
        messages = [m for _, m in client.results(8)]
        # The newest results arrive whole; the oldest ones say they were dropped.
        assert status_of(messages[-1]).count("tokens") >= 1
        assert status_of(messages[0]) == DROPPED
        assert not messages[0]["success"] and messages[-1]["success"]
        assert ledger.total < SMALL * 4  # read: nothing is kept any more
    finally:
        ledger.budget = 64 * 2**20
    # The next client is served as usual.
    other = Client(url, "reads")
    other.join(text="dogs bark")
    ((_, message),) = other.results(1)
    assert "4 tokens" in status_of(message)


def test_a_session_keeps_no_copy_of_the_figures_it_was_sent(served):
    url, demo = served
    client = Client(url, "keeps-little")
    client.join(text="dogs bark")
    client.results(1)
    state = client.session_state(demo)
    before = len(orjson.dumps(list(state.components), default=str))
    client.on_tab(demo, "attention")
    client.join(text=LONG)
    ((_, message),) = client.results(1)
    assert len(orjson.dumps(message)) > 500_000  # the Attention tab's figures were sent
    assert "122 tokens" in status_of(message)
    after = len(orjson.dumps(list(state.components), default=str))
    assert after < before + 20_000  # component settings may change; no figure is kept


# ---------------------------------------------------------------- one page's share of the slots


def test_a_page_holds_at_most_its_share_of_requests():
    pages = Pages(max_in_flight=2)
    entered, release = threading.Event(), threading.Event()

    def hold():
        with pages.turn("p"):
            entered.set()
            release.wait(10)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for thread in holders:
        thread.start()
    assert entered.wait(5)
    deadline = time.monotonic() + 5
    while pages._entry("p")[1] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(PageBusy), pages.turn("p"):
        pass
    with pages.turn("q"):  # another page is not affected
        pass
    release.set()
    for thread in holders:
        thread.join(5)
    with pages.turn("p"):  # and the page is served again once its requests are done
        pass
    assert pages._entry("p")[1] == 0


def test_fresh_page_ids_from_one_address_share_its_cap():
    """A client inventing a page id per request (or sending none) is capped by its address."""
    pages = Pages(max_in_flight=4, max_per_address=3)
    with contextlib.ExitStack() as held:
        for n in range(3):  # three requests, each with a page id never seen before
            held.enter_context(pages.turn(f"fresh-{n}", "203.0.113.7"))
        assert pages.in_flight("203.0.113.7") == 3
        with pytest.raises(AddressBusy), pages.turn("fresh-3", "203.0.113.7"):
            pass
        with pytest.raises(AddressBusy), pages.turn(None, "203.0.113.7"):  # no page id
            pass
        with pytest.raises(PageBusy), pages.turn("x" * 65, "203.0.113.7"):  # an id too long
            pass
        with pages.turn("fresh-4", "198.51.100.2"):  # another address is still admitted
            assert pages.in_flight() == 4
        with pages.turn("fresh-5"):  # and a caller that says no address, as before
            pass
    assert pages.in_flight() == 0
    with pages.turn(None, "203.0.113.7"):  # served again once its requests are done
        pass


def test_a_page_cap_and_an_address_cap_say_different_sentences():
    with lang.speaking("zh-CN"):
        assert "网络地址" in message_of(AddressBusy(8)) and "8" in message_of(AddressBusy(8))
        assert "此页面" in message_of(PageBusy())
    assert str(PageBusy()) == PAGE_BUSY.format(n=MAX_IN_FLIGHT)  # the English as before
    assert str(AddressBusy(3)) == ADDRESS_BUSY.format(n=3)


def scope_request(peer: str, *forwarded: str) -> gr.Request:
    """A gradio.Request over a Starlette request from ``peer`` with one X-Forwarded-For line per
    ``forwarded`` (what a queued event's handler receives)."""
    headers = [(b"x-forwarded-for", value.encode()) for value in forwarded]
    scope = {"type": "http", "headers": headers, "client": (peer, 40000), "method": "POST"}
    return gr.Request(request=starlette.requests.Request(scope))


@pytest.fixture
def no_proxy_env(monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("TA_TRUST_PROXY", raising=False)
    return monkeypatch


def test_the_address_is_the_peer_unless_a_proxy_is_trusted(no_proxy_env):
    spoofed = scope_request("192.0.2.10", "1.2.3.4")
    assert client_address(spoofed) == "192.0.2.10"  # the header is the client's own words
    assert client_address(None) == ""
    no_proxy_env.setenv("TA_TRUST_PROXY", "0")
    no_proxy_env.setenv("SPACE_ID", "someone/transformer-anatomy")
    assert client_address(spoofed) == "192.0.2.10"  # trusting the proxy can be turned off


@pytest.mark.parametrize("trust", [("SPACE_ID", "someone/anatomy"), ("TA_TRUST_PROXY", "1")])
def test_behind_a_trusted_proxy_only_the_entry_it_appended_counts(no_proxy_env, trust):
    no_proxy_env.setenv(*trust)
    proxy = "10.16.3.80"  # the Space's proxy, as the app sees it connect
    assert client_address(scope_request(proxy, "203.0.113.7")) == "203.0.113.7"
    # The client sent its own X-Forwarded-For: the proxy appends the address it saw, last.
    assert client_address(scope_request(proxy, "1.1.1.1, 2.2.2.2, 203.0.113.7")) == "203.0.113.7"
    assert client_address(scope_request(proxy, "6.6.6.6", "203.0.113.7")) == "203.0.113.7"
    assert client_address(scope_request(proxy)) == proxy  # no header: the peer, not nothing
    # A pickled request (Gradio's kwargs form): headers a dict, client a dict.
    kept = gr.Request(
        client={"host": proxy, "port": 1}, headers={"x-forwarded-for": "9.9.9.9, 203.0.113.7"}
    )
    assert client_address(kept) == "203.0.113.7"


def test_an_ipv6_client_is_its_64_network(no_proxy_env):
    """An IPv6 host may pick any address in its /64: the cap counts the /64."""
    one = client_address(scope_request("2001:db8:1:2::10"))
    other = client_address(scope_request("2001:db8:1:2:ffff::1"))
    assert one == other == "2001:db8:1:2::/64"
    assert client_address(scope_request("2001:db8:1:3::10")) != one
    assert client_address(scope_request("::ffff:192.0.2.10")) == "192.0.2.10"


SLOW_TEXT = "a sentence that takes the server a long time"
SLOW_SECONDS = 3.0


class SlowEngine(Engine):
    def __init__(self) -> None:
        super().__init__(device="cpu")

    def analyse(self, text, *args, **kwargs):
        if text == SLOW_TEXT:
            time.sleep(SLOW_SECONDS)
        return super().analyse(text, *args, **kwargs)


def test_one_page_flooding_the_queue_does_not_hold_up_another_user():
    """A page with many requests at once gets MAX_IN_FLIGHT admitted and one sentence for the
    rest; another user's request is answered while the flooding page's first one still runs."""
    n_flood = app.BOUND["concurrency_limit"] + 4
    with serve_demo(app.build_demo(SlowEngine(), public=False)) as url:
        flood = Client(url, "flooding")
        for _ in range(n_flood):
            flood.join(text=SLOW_TEXT, page="flooding-page")
        time.sleep(0.5)  # all of them are in the queue
        other = Client(url, "other")
        other.join(text="dogs bark", page="other-page")
        other_done = other.results(1)
        flood_done = flood.results(n_flood, timeout=n_flood * SLOW_SECONDS + 60)
    busy = [m for _, m in flood_done if "requests waiting on the server" in status_of(m)]
    ran = [(at, m) for at, m in flood_done if "tokens" in status_of(m)]
    assert len(busy) == n_flood - MAX_IN_FLIGHT
    assert len(ran) == MAX_IN_FLIGHT
    assert "4 tokens" in status_of(other_done[0][1])
    assert other_done[0][0] < min(at for at, _ in ran)  # answered before the flood's first run


def test_an_address_beyond_its_share_is_refused_only_while_another_address_waits():
    """A class behind one address uses every free slot while nobody else needs one; once another
    address waits in the queue, the class keeps at most its share."""
    waiting = {"others": False}
    pages = Pages(max_in_flight=10, max_per_address=2, others_waiting=lambda a: waiting["others"])
    with contextlib.ExitStack() as held:
        for i in range(4):  # nobody else waits: the third and fourth are admitted too
            held.enter_context(pages.turn(f"p{i}", "10.0.0.1"))
        assert pages.in_flight("10.0.0.1") == 4
        waiting["others"] = True
        with pytest.raises(AddressBusy), pages.turn("p9", "10.0.0.1"):
            pass
        with pages.turn("q", "10.0.0.2"):  # the other address is admitted
            assert pages.in_flight("10.0.0.2") == 1
