"""What serving a class costs the server, guarded by counts (not times), and the head switch's
look after the address changes (issue 26).

Times move with the machine's load; these count what the server does: the Python calls a Run and
a tab switch make, the components Gradio builds for an event, the copies a new session makes, and
what a page open still asks of Gradio once its files are kept. Their budgets
in core-milliseconds are measured by bench/serving_cost.py (bench/README.md). A feature that
doubles a Run's work fails here, whatever the machine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest

from tests.apphost import CHROMIUM, record_requests

# Python calls of one event (this thread and the handler's worker thread), measured on
# 2026-11-27 for the bundled BERT and a short sentence: a Run 17.7k (116k before serve.lean:
# Gradio rebuilt every output the Run left as it was); a switch to the Attention tab 117k (232k
# before its figures were built in fewer steps), Masks 102k (225k), Heads 96k (124k). The
# guards leave room for ordinary growth, not for a doubling.
RUN_CALLS = 30_000
TAB_CALLS = 200_000  # the Attention tab: four figures and every head's switch data
COMPONENTS_PER_RUN = 16  # components Gradio builds for a Run: the updates it sends (12 today)


@pytest.fixture(scope="module")
def demo():
    import app

    return app.build_demo(public=False)


class Calls:
    """Counts the Python function calls made in this thread and in the event's worker thread
    (Gradio runs a handler in a thread of its own): the same input makes the same count."""

    def __init__(self) -> None:
        self.n = 0

    def profile(self, frame, event, arg) -> None:
        if event == "call":
            self.n += 1

    def around(self, fn):
        def counted(*args, **kwargs):
            sys.setprofile(self.profile)
            try:
                return fn(*args, **kwargs)
            finally:
                sys.setprofile(None)

        return counted

    def run(self, coroutine):
        sys.setprofile(self.profile)
        try:
            return run_now(coroutine)
        finally:
            sys.setprofile(None)


def run_now(coroutine):
    """asyncio.run, also where this thread already runs a loop (Playwright's sync API does while
    a browser fixture is open): then on a thread of its own, waited for."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def dependency(demo, api_name=None, target=None):
    """The BlockFunction of an event: by its API name, or by (elem_id, event name)."""
    ids = {getattr(b, "elem_id", None): i for i, b in demo.blocks.items()}
    for fn in demo.fns.values():
        if api_name and fn.api_name == api_name:
            return fn
        if (
            target
            and fn.fn
            and (ids[target[0]], target[1])
            in [(getattr(t[0], "_id", t[0]), t[1]) for t in fn.targets]
        ):
            return fn
    raise LookupError(api_name or target)


def inputs_for(demo, fn, tab: str, page: str, **named) -> list:
    """The event's inputs as a page sends them: the components' values, the tail stamped."""
    data = [getattr(block, "value", None) for block in fn.inputs]
    data[-3], data[-2], data[-1] = tab, "en", page  # ..., tab box, language, page (TAIL)
    for elem_id, value in named.items():
        at = [getattr(block, "elem_id", None) for block in fn.inputs].index(elem_id)
        data[at] = value
    return data


def event_calls(demo, fn, data, state) -> tuple[int, dict]:
    """(Python calls, the answer) of one event through Gradio's own processing."""
    calls = Calls()
    original = fn.fn
    fn.fn = calls.around(original)
    try:
        answer = calls.run(demo.process_api(block_fn=fn, inputs=data, state=state))
    finally:
        fn.fn = original
    return calls.n, answer


def components_built(monkeypatch) -> list:
    """Every component Gradio constructs from now on (Gradio builds one for each update)."""
    from gradio.components.base import Component

    built: list = []
    init = Component.__init__

    def counting(self, *args, **kwargs):
        built.append(type(self).__name__)
        init(self, *args, **kwargs)

    monkeypatch.setattr(Component, "__init__", counting)
    return built


def test_a_run_costs_what_it_draws(demo, monkeypatch):
    """A Run of a short sentence on the Tokens tab: Python calls within RUN_CALLS, and Gradio
    builds components only for the outputs the Run changes (not the ~100 it leaves alone)."""
    from gradio.state_holder import SessionState

    run = dependency(demo, api_name="run")
    state = SessionState(demo)
    warm = inputs_for(demo, run, "tokens", "guard-run", text="A warm first sentence.")
    event_calls(demo, run, warm, state)
    built = components_built(monkeypatch)
    data = inputs_for(demo, run, "tokens", "guard-run", text="The cat reads the red book.")
    calls, answer = event_calls(demo, run, data, state)
    changed = [v for v in answer["data"] if v != {"__type__": "update"}]
    assert "7 tokens" in str(answer["data"][0]) or "tokens" in str(answer["data"][0])
    assert len(run.outputs) > 40 and len(changed) < 30, (len(run.outputs), len(changed))
    assert len(built) <= COMPONENTS_PER_RUN, built
    assert calls <= RUN_CALLS, f"a Run made {calls:,} Python calls (guard {RUN_CALLS:,})"


@pytest.mark.parametrize("tab", ["attention", "heads", "masks"])
def test_a_tab_switch_costs_what_its_figures_cost(demo, tab):
    """Opening the dearest tabs after a Run: Python calls within TAB_CALLS each."""
    from gradio.state_holder import SessionState

    run = dependency(demo, api_name="run")
    switch = dependency(demo, target=("tab-box", "change"))
    state = SessionState(demo)
    for n, text in enumerate(["A warm first sentence.", "The cat reads the red book."]):
        event_calls(demo, run, inputs_for(demo, run, "tokens", "guard-tab", text=text), state)
        data = inputs_for(demo, switch, tab, "guard-tab", **{"tab-box": tab})
        calls, answer = event_calls(demo, switch, data, state)
        if n:  # the first switch also warms Plotly's validators
            assert calls <= TAB_CALLS, f"{tab}: a switch made {calls:,} calls (guard {TAB_CALLS:,})"
    assert any("Layer" in str(v) or "layer" in str(v) for v in answer["data"])


def test_numpy_blas_runs_on_one_thread_beside_torch():
    """numpy's BLAS threads and PyTorch's spin waiting for each other: a 72 × 72 eigen-
    decomposition of the Heads tab cost up to 150 ms of CPU instead of 0.3 (serve/cpu.py)."""
    from threadpoolctl import threadpool_info

    from engine import Engine

    Engine()
    blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas), blas


def test_a_new_session_copies_no_component(demo, monkeypatch):
    """Every page open and API client is a new session: it keeps its gr.State values only,
    not a copy of each of the page's components' configs (Gradio's own default)."""
    from gradio.blocks import BlocksConfig
    from gradio.state_holder import SessionState

    configs: list = []
    config_for_block = BlocksConfig.config_for_block
    monkeypatch.setattr(
        BlocksConfig,
        "config_for_block",
        staticmethod(lambda *a, **k: configs.append(a[0]) or config_for_block(*a, **k)),
    )
    state = SessionState(demo)
    run = dependency(demo, api_name="run")
    event_calls(demo, run, inputs_for(demo, run, "tokens", "guard-s", text="Hi there."), state)
    assert configs == [] and state.config_values == {}


def page_files(app):
    """The PageFiles middleware inside a running app's middleware stack."""
    from serve.static import PageFiles

    layer = app.middleware_stack
    while layer is not None and not isinstance(layer, PageFiles):
        layer = getattr(layer, "app", None)
    assert layer is not None, "the app serves its files through Gradio alone"
    return layer


def test_a_page_open_is_served_from_memory(demo):
    """The page and every file it loads, asked by a second visitor: each answered from memory
    (nothing asked of Gradio's routes), compressed, the frontend's files marked immutable."""
    import re

    from tests.inprocess import serve_demo

    headers = {"accept-encoding": "gzip, deflate, br, zstd"}
    with serve_demo(demo) as url, httpx.Client(base_url=url, headers=headers) as http:

        def open_page():
            page = http.get("/")
            names = sorted(set(re.findall(r'(?:src|href)="\.?/?(assets/[^"]+)"', page.text)))
            return page, [http.get("/" + name) for name in names]

        page1, files1 = open_page()
        files = page_files(demo.app)
        asked: list[str] = []
        inner = files.app

        async def counting(scope, receive, send):
            asked.append(scope["path"])
            return await inner(scope, receive, send)

        files.app = counting
        try:
            page2, files2 = open_page()
            again = http.get(
                "/assets/" + files2[0].url.path.rsplit("/", 1)[-1],
                headers={"if-none-match": files2[0].headers["etag"]},
            )
        finally:
            files.app = inner
    assert page2.status_code == 200 and page2.text == page1.text
    assert page2.headers["content-encoding"] == "br" and page2.headers["etag"]
    assert "no-cache" in page2.headers["cache-control"]
    assert files2 and all(f.status_code == 200 for f in files2)
    assert all("immutable" in f.headers["cache-control"] for f in files2)
    assert [f.content for f in files2] == [f.content for f in files1]
    assert again.status_code == 304
    assert asked == [], f"asked of Gradio again: {asked}"


def test_the_page_names_gradios_plotly_chunk_for_the_browser_to_fetch_at_once():
    """Gradio's frontend build has one Plotly chunk; the kept page names it once, in its head,
    by the relative address Gradio's own files use (a renamed chunk after a Gradio upgrade fails
    here, not silently in the browser)."""
    from serve.static import plotly_chunk, with_preload

    name = plotly_chunk()
    assert name.startswith("PlotlyPlot-") and name.endswith(".js")
    page = b"<html><head><title>t</title></head><body></body></html>"
    once = with_preload(page)
    assert once.count(b'rel="modulepreload"') == 1
    assert f'href="./assets/{name}"'.encode() in once.split(b"</head>")[0]
    assert with_preload(b"<html>no head</html>") == b"<html>no head</html>"


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_a_new_visitors_first_figure_waits_for_no_plotly_chunk(demo, page):
    """A new visitor's page fetches Gradio's Plotly chunk once, as it opens, and has it running
    before any figure is asked for: the first figure's draw asks the network for no script."""
    from serve.static import plotly_chunk
    from tests.inprocess import serve_demo
    from tests.test_e2e_browser import run_of, run_text, wait_tab

    scripts: list[tuple[str, bool]] = []  # (file, asked after the page had opened)
    opened = []
    page.on("request", lambda r: scripts.append((r.url.rsplit("/", 1)[-1], bool(opened))))
    text = "a student opens the page and looks at the attention heads"
    with serve_demo(demo) as url:
        page.goto(url)
        page.wait_for_function("() => window.ta && ta.ready && ta._plotly")
        page.evaluate("() => ta._plotly")  # the chunk has run
        opened.append(True)
        page.click("#tab-attention-button")
        run_text(page, text)
        wait_tab(page, "attention", run=run_of(text))
    chunks = [(name, late) for name, late in scripts if name.startswith("PlotlyPlot-")]
    assert chunks == [(plotly_chunk(), False)], chunks
    late_scripts = [name for name, late in scripts if late and name.endswith(".js")]
    assert late_scripts == [], f"the first figure waited for {late_scripts}"


GRADIENT_REFS_JS = """
() => {
  const here = location.href.split('#')[0];
  const refs = [];
  for (const el of document.querySelectorAll('.js-plotly-plot *')) {
    for (const name of ['fill', 'clip-path', 'stroke', 'style']) {
      const value = el.getAttribute(name) || '';
      for (const m of value.matchAll(/url\\(['"]?([^'")]*)#([^'")]+)['"]?\\)/g)) {
        refs.push({base: m[1], id: m[2], found: !!document.getElementById(m[2]), here});
      }
    }
  }
  return refs;
}
"""


@pytest.mark.browser
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium")
def test_head_switches_ask_nothing_and_every_colour_bar_keeps_its_gradient(demo, page):
    """Layer and head switches on the Attention tab (and presentation mode) are drawn in the
    browser: the address follows the view, no request of any kind leaves the page, and every
    gradient and clip path of every figure still resolves in this document (they named the old
    address: each switch fetched the whole page again, and the colour bars went blank)."""
    from tests.inprocess import serve_demo
    from tests.test_classroom import set_slider
    from tests.test_e2e_browser import run_of, wait_tab

    text = "the lecturer switches heads while the class watches the colour bars"
    with serve_demo(demo) as url:
        page.goto(url + "?" + urlencode({"text": text, "tab": "attention", "present": 1}))
        wait_tab(page, "attention", run=run_of(text))
        page.wait_for_function("() => location.search.includes('tab=attention')")
        requests = record_requests(page)
        gd = "document.querySelector('#head-plot .js-plotly-plot')"
        for layer, head in ((1, 3), (3, 3), (3, 7), (5, 0)):
            set_slider(page, "layer", layer)
            set_slider(page, "head", head)
            page.wait_for_function(
                f"() => {gd}.layout.title.text.startsWith('Layer {layer}, head {head} ')"
            )
            page.wait_for_function(  # the address follows the view (after its 150 ms pause)
                f"() => location.search.includes('layer={layer}&head={head}')"
            )
        page.wait_for_timeout(500)
        refs = page.evaluate(GRADIENT_REFS_JS)
    assert requests == [], f"a head switch asked the network: {requests[:5]}"
    gradients = [r for r in refs if "-cb" in r["id"]]  # Plotly names a colour bar g<id>-cb<id>
    assert gradients, "no colour bar gradient found on the Attention tab"
    broken = [r for r in refs if not r["found"] or (r["base"] and r["base"] != r["here"])]
    assert broken == [], f"references to another document or a missing id: {broken[:3]}"


def test_a_big_draw_hands_its_memory_back_and_a_short_one_does_not(demo, monkeypatch):
    """A 512-token view frees hundreds of MB of temporaries: they go back to the OS as the draw
    ends (bench/unread_links.py: +705 MiB left without, +520 with), not at the next trace."""
    from gradio.state_holder import SessionState

    import ui.handlers

    trims = []
    monkeypatch.setattr(ui.handlers, "release_freed_memory", lambda: trims.append(1))
    run = dependency(demo, api_name="run")
    short = inputs_for(demo, run, "attention", "guard-trim", text="A short sentence.")
    event_calls(demo, run, short, SessionState(demo))
    assert not trims
    long_text = " ".join(f"word{n}" for n in range(300))
    big = inputs_for(demo, run, "attention", "guard-trim", text=long_text)
    event_calls(demo, run, big, SessionState(demo))
    assert trims
