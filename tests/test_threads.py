"""Every cache that Gradio's worker threads share stays whole under many threads at once.

Each test hammers one shared cache from 16 threads with thousands of mixed reads and writes over
more keys than it holds, the interpreter switching threads as often as it can, and asserts that
no call raised and that the cache kept its bound. A bare OrderedDict fails the first of these
within a second (``move_to_end`` of a key another thread's ``popitem`` just dropped).
"""

from __future__ import annotations

import random
import sys
import threading
import time
from types import SimpleNamespace

import pytest

import engine as engine_module
import ui.tabs.attention as attention_tab
from serve.lru import LockedLRU
from serve.turns import PageBusy, Pages
from ui.handlers import Sessions

THREADS = 16
CALLS = 3_000


@pytest.fixture(autouse=True)
def switch_often():
    """Threads switch every microsecond (the default 5 ms hides most races)."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def hammer(call, threads: int = THREADS, calls: int = CALLS) -> list[BaseException]:
    """Run ``call(rng)`` ``calls`` times in each of ``threads`` threads started together; the
    exceptions raised (each thread stops at its first)."""
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        try:
            for _ in range(calls):
                call(rng)
        except BaseException as exc:  # noqa: BLE001 - any exception is the finding
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(seed,)) for seed in range(threads)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(60)
    assert not any(thread.is_alive() for thread in workers), "a thread hung"
    return errors


def test_the_locked_lru_keeps_its_bound_under_threads():
    cache: LockedLRU[int, int] = LockedLRU(4)

    def call(rng: random.Random) -> None:
        key = rng.randrange(12)
        if rng.random() < 0.5:
            assert cache.put(key, key * 2) == key * 2
        else:
            found = cache.get(key)
            assert found is None or found == key * 2
        assert len(cache) <= 4

    assert hammer(call) == []
    assert len(cache) <= 4


def test_the_lru_forgets_the_least_recently_used():
    cache: LockedLRU[str, str] = LockedLRU(2)
    cache.put("a", "")
    cache.put("b", "B")
    assert cache.get("a") == ""  # a falsy value is still found; "a" is now the most recent
    cache.put("c", "C")
    assert "b" not in cache and cache.get("a") == "" and cache.get("c") == "C"
    assert cache.get("b", "none") == "none"
    with pytest.raises(ValueError):
        LockedLRU(0)


def test_the_lru_keeps_its_byte_bound_and_always_the_newest():
    """A byte bound (ui.render.DRAWN: 16 MB of drawn views) drops the least recently used while
    the entries together weigh more, but never the entry just kept, however heavy."""
    cache: LockedLRU[str, str] = LockedLRU(8, max_bytes=10, weigh=len)
    cache.put("a", "aaaa")
    cache.put("b", "bbbb")
    assert cache.get("a") == "aaaa"  # "a" is now the most recent: "b" goes first
    cache.put("c", "cccc")  # 12 bytes: one over
    assert "b" not in cache and cache.values() == ["aaaa", "cccc"]
    cache.put("huge", "h" * 50)
    assert cache.values() == ["h" * 50]
    cache.put("a", "aa")  # a key kept again is weighed again
    assert cache.values() == ["aa"]
    with pytest.raises(ValueError):
        LockedLRU(2, max_bytes=10)  # a bound with nothing to weigh by


def test_the_lru_setdefault_gives_every_thread_the_same_value():
    """serve.lru.LockedLRU.setdefault (ui.handlers.Sessions, serve.turns.Pages): a missing key
    gets the value first offered, and every later asker that same value, made most recent."""
    cache: LockedLRU[str, list] = LockedLRU(2)
    first = cache.setdefault("a", [])
    assert cache.setdefault("a", ["other"]) is first
    cache.put("b", [1])
    cache.setdefault("a", [])  # "a" is now the most recent: "b" goes next
    cache.setdefault("c", [])
    assert "b" not in cache and cache.values() == [first, []]
    kept: LockedLRU[int, list] = LockedLRU(4)
    seen: dict[int, set[int]] = {}

    def call(rng: random.Random) -> None:
        key = rng.randrange(3)  # three keys in four places: never evicted
        value = kept.setdefault(key, [key])
        assert value == [key]
        seen.setdefault(key, set()).add(id(value))

    assert hammer(call) == []
    assert all(len(ids) == 1 for ids in seen.values())


def test_the_head_switch_payloads_survive_many_threads(monkeypatch):
    """ui/tabs/attention.py's payload cache, through switch_data itself (the payload faked)."""
    monkeypatch.setattr(attention_tab, "data_key", lambda view, sel: sel.key)
    monkeypatch.setattr(attention_tab, "run_id", str)
    monkeypatch.setattr(
        attention_tab.attention, "head_switch_data", lambda trace, stack, scale: {"s": stack}
    )
    view = SimpleNamespace(analysis=SimpleNamespace(key=("run",)))
    cache = attention_tab._SWITCH_DATA
    cache.clear()

    def call(rng: random.Random) -> None:
        key = rng.randrange(24)
        sel = SimpleNamespace(key=key, stack=f"stack{key}", scale="head")
        payload = attention_tab.switch_data(view, None, sel)
        assert f"stack{key}" in payload
        assert len(cache) <= 8

    try:
        assert hammer(call) == []
        assert 0 < len(cache) <= 8
    finally:
        cache.clear()


def test_the_lru_makes_a_missing_value_once_however_many_threads_ask():
    """LockedLRU.once (a pair a class patches at once, a circuit): one thread makes the value,
    the others asking for that key wait and get it; a make that raises leaves no lock behind."""
    cache: LockedLRU[str, int] = LockedLRU(4)
    made, start = [], threading.Barrier(8)

    def make() -> int:
        made.append(1)
        time.sleep(0.05)  # long enough for every other thread to be waiting
        return 42

    def ask() -> None:
        start.wait()
        assert cache.once("pair", make) == 42

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1 and cache._making == {}

    def refuse() -> int:
        raise ValueError("one answer for both texts")

    for _ in range(2):  # the second ask is not kept waiting on the first one's lock
        with pytest.raises(ValueError):
            cache.once("refused", refuse)
    assert cache._making == {} and "refused" not in cache


def test_the_engine_caches_survive_many_threads(monkeypatch):
    """The decoder continuations and the trace cache (engine.py)."""
    eng = engine_module.Engine(device="cpu")
    eng.cache = engine_module.TraceCache(max_entries=4, max_bytes=10**9)
    monkeypatch.setattr(eng, "_decode", lambda loaded, text, positions: (text.upper(), "note"))
    loaded = SimpleNamespace(model_id="m")
    trace = SimpleNamespace(nbytes=lambda: 1_000)

    def call(rng: random.Random) -> None:
        key = rng.randrange(400)
        assert eng.continuation(loaded, f"t{key}", True) == (f"T{key}", "note")
        if rng.random() < 0.5:
            eng.cache.put(SimpleNamespace(key=(key,), trace=trace))
        else:
            found = eng.cache.get((key,))
            assert found is None or found.key == (key,)
        assert len(eng.cache) <= 4

    assert hammer(call) == []
    assert len(eng._continuations) <= 256 and len(eng.cache) <= 4


def test_page_turns_survive_many_threads():
    """serve/turns.py: page entries (least recent dropped) and the caps' counts; the pages' last
    runs (ui.handlers.Sessions, least recent dropped)."""
    pages = Pages(max_pages=8, max_in_flight=2, max_per_address=3)
    sessions = Sessions(size=8)

    def call(rng: random.Random) -> None:
        page = f"p{rng.randrange(20)}" if rng.random() < 0.9 else None
        address = f"10.0.0.{rng.randrange(3)}"
        try:
            with pages.turn(page, address):
                sessions.of(page).run = rng.random()  # the page's last run (ui.handlers)
        except PageBusy:
            pass
        assert len(pages) <= 8

    assert hammer(call, calls=1_000) == []
    assert len(pages) <= 8
    assert pages.in_flight() == 0  # every admitted request let go of its address
    assert all(entry[1] == 0 for entry in pages._pages.values())  # and of its page
    assert len(sessions) <= 8
