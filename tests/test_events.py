"""Every event of the real page answers, through the real queue (the app-layer rebuild).

The page's own configuration lists its events; each Python-backed one is sent through Gradio's
queue protocol (join, then read the event stream) as the page would send it — for an encoder
(BERT), a decoder (the induction model) and an encoder-decoder (the dates model), on every tab —
and then with hostile values in every field. Each must come back complete (one value per output)
and successful, the server must log no traceback, and the session must still work afterwards.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlencode

import httpx
import pytest

from engine import Engine
from tests.inprocess import serve_demo
from ui.tabs import TAB_IDS

PAGES_AT_ONCE = 6  # within the per-address cap (serve.turns: 8)
MODELS = {"bert": "time flies like an arrow", "induction": "qzvkdmqzv", "dates": "2026年11月22日"}
HOSTILE = [
    "../../etc|1",
    "__proto__",
    None,
    -1e308,
    1e308,
    "NaN",
    {"a": 1},
    [1, [2]],
    "x" * 30_000,
    '"><img src=x onerror="window.__pwned=1">',
]
ROW = {"index": [0, 0], "value": "0", "row_value": [0, 1, 0.5]}


class Page:
    """One page's events by hand: its id, its tab, and Gradio's queue protocol."""

    def __init__(self, url: str, config: dict, name: str) -> None:
        self.url, self.name = url, name
        self.elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
        self.defaults = {c["id"]: c.get("props", {}).get("value") for c in config["components"]}

    def data(self, dep: dict, tab: str, **by_elem) -> list:
        values = []
        for i in dep["inputs"]:
            elem = self.elem[i]
            value = self.defaults[i]
            if elem == "tab-box":
                value = tab
            elif elem == "page":
                value = self.name
            elif elem == "lang":
                value = "en"
            values.append(by_elem.get(elem, value))
        return values

    def send(self, dep: dict, data: list) -> dict:
        body = {
            "data": data,
            "fn_index": dep["id"],
            "session_hash": self.name,
            "event_data": ROW,
        }
        httpx.post(self.url + "gradio_api/queue/join", json=body, timeout=30).raise_for_status()
        url = f"{self.url}gradio_api/queue/data?session_hash={self.name}"
        with httpx.stream("GET", url, timeout=120) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    message = json.loads(line[6:])
                    if message.get("msg") == "process_completed":
                        return message
        raise AssertionError("the event never completed")


def answered(dep: dict, message: dict) -> str | None:
    """Why this answer is not a well-formed one (None when it is)."""
    if not message.get("success"):
        return f"failed: {json.dumps(message.get('output'))[:300]}"
    data = message.get("output", {}).get("data", [])
    if len(data) != len(dep["outputs"]):
        return f"{len(data)} values for {len(dep['outputs'])} outputs"
    return None


@pytest.fixture(scope="module")
def served():
    import app

    demo = app.build_demo(Engine(device="cpu"), public=False)
    # The Train tab's events start real trainings: here a stand-in that ends at once (the
    # training itself is tested in tests/test_serve_training.py and tests/test_train_tab.py).
    demo.views.trainings._fit = lambda name, seconds, seed, on_progress, **asked: None
    with serve_demo(demo) as url:
        config = httpx.get(url + "config").json()
        python = [d for d in config["dependencies"] if d["backend_fn"]]
        run = next(d for d in python if d.get("api_name") == "run")
        yield url, config, python, run, demo


def status_text(page: Page, dep: dict, message: dict) -> str:
    index = [page.elem[o] for o in dep["outputs"]].index("status")
    value = message["output"]["data"][index]
    return value.get("value", "") if isinstance(value, dict) else str(value)


def stray_names(caplog) -> list[str]:
    """What ui.events logged about names a handler answered that its event has no output for."""
    return [r.getMessage() for r in caplog.records if r.name == "ui.events"]


def test_a_name_that_is_no_output_of_the_event_is_logged(caplog):
    """Issue 27: ui.events.Wiring.answer used to drop such a name silently (a misspelt output
    did nothing and said nothing); it still answers, and logs the handler and the name."""
    from serve.turns import Pages
    from ui.events import Wiring
    from ui.state import SELECTION_FIELDS, Selection

    def misspelt(ask):
        return {"status": "fine", "head_stats_tabel": 1}

    fn = Wiring(None, Pages()).answer(misspelt, [], ["status", "head_stats_table"], False, True)
    tail = [getattr(Selection(), name) for name in SELECTION_FIELDS] + ["heads", "en", "p1"]
    with caplog.at_level("ERROR", logger="ui.events"):
        answer = fn(*tail, None)
    assert answer[0] == "fine"
    [message] = stray_names(caplog)
    assert "misspelt" in message and "'head_stats_tabel'" in message
    caplog.clear()
    fn = Wiring(None, Pages()).answer(misspelt, [], ["status", "head_stats_tabel"], False, True)
    fn(*tail, None)
    assert not stray_names(caplog)


@pytest.mark.slow
def test_every_event_answers_for_every_model_on_every_tab(served, capfd, caplog):
    url, config, python, run, demo = served

    def one_page(model: str, text: str, tab: str) -> tuple[list, int]:
        """A page that runs the model, then sends every event of the page on that tab."""
        failures, sent = [], 0
        page = Page(url, config, f"matrix-{model}-{tab}")
        message = page.send(run, page.data(run, tab, text=text, model=model))
        assert answered(run, message) is None, (model, tab, answered(run, message))
        assert "tokens" in status_text(page, run, message), (model, tab)
        for dep in python:
            message = page.send(dep, page.data(dep, tab))
            sent += 1
            if why := answered(dep, message):
                failures.append((model, tab, dep["id"], why))
        return failures, sent

    # Pages at once, as a classroom sends them (each page's events in order, in its turn).
    cases = [(model, text, tab) for model, text in MODELS.items() for tab in TAB_IDS]
    with ThreadPoolExecutor(PAGES_AT_ONCE) as pool:
        results = list(pool.map(lambda case: one_page(*case), cases))
    failures = [f for found, _ in results for f in found]
    sent = sum(n for _, n in results)
    assert not failures, failures[:10]
    assert sent == 3 * len(TAB_IDS) * len(python) and len(python) >= 25  # each, 27 times
    assert "Traceback" not in capfd.readouterr().err
    assert not stray_names(caplog)


@pytest.mark.slow
def test_hostile_values_in_every_field_of_every_event_get_an_answer(served, capfd, caplog):
    url, config, python, run, demo = served

    def one_event(dep: dict) -> list:
        page, failures = Page(url, config, f"hostile-{dep['id']}"), []
        for k, value in enumerate(HOSTILE):  # every field at once, then one field at a time
            data = [value] * len(dep["inputs"])
            message = page.send(dep, data)
            if why := answered(dep, message):
                failures.append((dep["id"], "all", repr(value)[:30], why))
            for i in range(len(dep["inputs"])):
                if (i + k) % len(HOSTILE):  # each field meets each value across the events
                    continue
                data = page.data(dep, "attention")
                data[i] = value
                message = page.send(dep, data)
                if why := answered(dep, message):
                    failures.append((dep["id"], page.elem[dep["inputs"][i]], repr(value)[:30], why))
        return failures

    with ThreadPoolExecutor(PAGES_AT_ONCE) as pool:
        failures = [f for found in pool.map(one_event, python) for f in found]
    assert not failures, failures[:10]
    page = Page(url, config, "hostile")
    # ... and the session is still usable.
    message = page.send(run, page.data(run, "attention", text="dogs bark"))
    assert answered(run, message) is None and "4 tokens" in status_text(page, run, message)
    assert "Traceback" not in capfd.readouterr().err
    assert not stray_names(caplog)


def test_a_hostile_tab_is_refused_with_a_sentence_and_not_kept(served):
    url, config, python, run, demo = served
    page = Page(url, config, "bad-tab")
    tab_event = next(d for d in python if [page.elem[i] for i in d["inputs"]][0] == "tab-box")
    message = page.send(tab_event, page.data(tab_event, "../../etc|1"))
    assert answered(tab_event, message) is None
    assert "no tab" in status_text(page, tab_event, message)
    message = page.send(run, page.data(run, "heads", text="dogs bark"))
    assert "4 tokens" in status_text(page, run, message)


def test_a_link_with_too_many_parameters_or_a_hostile_language_opens_with_a_sentence(served):
    url, config, python, run, demo = served
    page = Page(url, config, "long-link")
    deep = next(d for d in python if [page.elem[i] for i in d["inputs"]][0] == "link-query")
    query = "?" + urlencode({"text": "dogs bark", **{f"p{i}": i for i in range(80)}})
    message = page.send(deep, page.data(deep, "tokens", **{"link-query": query}))
    assert answered(deep, message) is None
    notes = [page.elem[o] for o in deep["outputs"]].index("link-notes")
    said = message["output"]["data"][notes]
    said = said.get("value", "") if isinstance(said, dict) else str(said)
    assert "more than 64 parameters" in said
    assert "4 tokens" in status_text(page, deep, message)
    query = "?" + urlencode({"text": "dogs bark", "lang": "__proto__"})
    message = page.send(
        deep, page.data(deep, "tokens", **{"link-query": query, "lang": "__proto__"})
    )
    assert answered(deep, message) is None and "4 tokens" in status_text(page, deep, message)


def longest_text(value, depth: int = 0) -> int:
    """The longest string anywhere inside ``value`` (dicts, sequences, objects' attributes)."""
    if isinstance(value, str):
        return len(value)
    if depth > 12 or isinstance(value, bytes | int | float | bool | type(None)):
        return 0
    if isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, list | tuple | set):
        items = list(value)
    else:
        items = list(getattr(value, "__dict__", {}).values())
    return max((longest_text(v, depth + 1) for v in items), default=0)


def test_a_huge_paste_is_cut_before_anything_keeps_it(served):
    """A 20 MB paste: the page's session keeps its first MAX_CHARS characters, and Gradio's own
    per-session state keeps nothing of that size."""
    from engine import MAX_CHARS

    url, config, python, run, demo = served
    page = Page(url, config, "huge-paste")
    message = page.send(run, page.data(run, "tokens", text="dogs bark " * 2_000_000))
    assert answered(run, message) is None
    assert "only the first 20,000 were read" in status_text(page, run, message)
    kept = demo.state_holder.session_data.get("huge-paste")
    if kept is not None:  # what Gradio keeps per session: its values (no config copy: serve.lean)
        assert longest_text([kept.state_data, kept.config_values]) < MAX_CHARS
    session = demo.views.sessions.of("huge-paste")  # the page id the page sent
    assert session.run is not None and len(session.run.text) == MAX_CHARS


def test_only_a_switch_to_a_tab_that_measures_a_pair_is_costly_in_the_queue(served):
    """serve.idle holds back a class's tab switches to Which heads matter and How the heads
    connect beyond two at once (they run the pair and its grids first): the queue's ``costly``
    names those and no other event — a switch to any other tab, a Run."""
    from types import SimpleNamespace

    *_, demo = served
    costly = demo._queue.costly

    def event(fn, tab: str):
        data = [tab if getattr(b, "elem_id", None) == "tab-box" else None for b in fn.inputs]
        return SimpleNamespace(fn=fn, data=SimpleNamespace(data=data))

    fns = list(demo.fns.values())
    switch = next(f for f in fns if any(t[1] == "change" for t in f.targets) and f.name == "tab")
    assert {tab for tab in TAB_IDS if costly(event(switch, tab))} == {"patching", "circuits"}
    others = [f for f in fns if f is not switch and f.fn is not None]
    assert others and not any(costly(event(f, "circuits")) for f in others)
    # Any JSON may come in the tab's field: no value is costly, and none raises (the queue asks
    # before every start; an error there stopped it and every page waited for ever).
    assert not any(costly(event(switch, value)) for value in HOSTILE)
