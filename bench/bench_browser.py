"""What a user waits for and downloads, in headless Debian Chromium against `python app.py`.

Prints medians over --repeats runs of:
  * startup: `python app.py` -> page served (seconds)
  * bytes received by the browser for a full analysis (Run click -> Tokens tab drawn) and for each
    tab visit, at 32 and 128 tokens (Chrome DevTools Network.loadingFinished/dataReceived);
  * click -> every figure of the visible tab drawn, per tab, at 32, 128 and 512 tokens;
  * layer/head switch at 128 tokens -> head figure redrawn.
Budgets (bench/README.md): full analysis <= 1 MB at 128 tokens; tab drawn <= 1.0 s at 32 tokens,
<= 2.0 s at 128; every view <= 5 s at 512; startup <= 10 s. The switch's budget (<= 50 ms at 128
tokens) is bench_switch.py's (it times the switch more finely).

    .venv/bin/python bench/bench_browser.py [--repeats 3] [--lengths 16,32,128,512] [--skip-startup]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.apphost import CHROMIUM, CHROMIUM_ARGS, serve_app  # noqa: E402
from tests.test_e2e_browser import TAB_PLOTS, run_of, wait_status, wait_tab  # noqa: E402

SENTENCE = (
    "attention lets every token look at every other token and decide how much of its value to "
    "borrow while positions tell the model where each token sits in the sentence"
)
WORDS = SENTENCE.split(" ")


def text_of(n_tokens: int) -> str:
    """A text the bundled WordPiece tokenizer cuts into exactly n_tokens tokens, [CLS]/[SEP] too."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(n_tokens - 2))


# Gradio streams every result over one fetch() body (server-sent events) read with a stream reader;
# count what the page's code reads from it, so each byte lands in the step that asked for it.
COUNT_STREAM_JS = """
(() => {
  window.__rx = 0;
  const enc = new TextEncoder();
  const read = ReadableStreamDefaultReader.prototype.read;
  ReadableStreamDefaultReader.prototype.read = function () {
    return read.call(this).then((r) => {
      if (r && r.value != null) {
        window.__rx += typeof r.value === 'string' ? enc.encode(r.value).length
                                                   : (r.value.byteLength || 0);
      }
      return r;
    });
  };
})();
"""


class ByteCounter:
    """Bytes of results the page reads from Gradio's event stream since the last reset()."""

    def __init__(self, page) -> None:
        self.page = page
        page.add_init_script(COUNT_STREAM_JS)

    def reset(self) -> int:
        self.page.wait_for_timeout(100)
        return self.page.evaluate("() => { const n = window.__rx; window.__rx = 0; return n; }")


class PageLoadBytes:
    """Bytes over the network for the first page load (HTML, JS, CSS, fonts), via DevTools."""

    def __init__(self, page) -> None:
        self.total = 0
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
        cdp.on("Network.loadingFinished", lambda e: self._add(e.get("encodedDataLength", 0)))

    def _add(self, n: float) -> None:
        self.total += int(n)


def run_and_wait(page, text: str, n_tokens: int) -> float:
    page.fill("#text textarea", text)
    start = time.perf_counter()
    page.click("#run")
    wait_status(page, f"{n_tokens} tokens", timeout=60_000)
    return time.perf_counter() - start


# Move the head slider as a user's click does (an input event on the range input) and time, in the
# page, until the head figure shows the new head and the next frame has been painted.
SWITCH_JS = """
async (h) => {
  const range = document.querySelector('#head input[type=range]');
  const t0 = performance.now();
  range.value = String(h);
  range.dispatchEvent(new Event('input', {bubbles: true}));
  await new Promise((resolve) => {
    const check = () => {
      const el = document.querySelector('#head-plot .js-plotly-plot');
      const title = el && el._fullLayout && el._fullLayout.title && el._fullLayout.title.text;
      if (title && title.includes(`head ${h} `) && el.querySelector('.main-svg image')) {
        requestAnimationFrame(() => resolve());
      } else {
        requestAnimationFrame(check);
      }
    };
    check();
  });
  return performance.now() - t0;
}
"""


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lengths", default="16,32,128,512", help="token counts, comma-separated")
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    startups = []
    for _ in range(0 if args.skip_startup else args.repeats):
        with serve_app() as (_, seconds):
            startups.append(seconds)
    if startups:
        print(
            f"startup (python app.py -> page served): median {median(startups):.2f} s; budget 10 s"
        )

    with serve_app() as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        counter = ByteCounter(page)
        load = PageLoadBytes(page)
        page.goto(url)
        wait_status(page, "tokens")
        wait_tab(page, "tokens")
        page.wait_for_timeout(500)
        print(f"first page load (HTML, JS, CSS, default analysis): {load.total / 1e6:.2f} MB")

        for n in (int(x) for x in args.lengths.split(",")):
            draws: dict[str, list[float]] = {tab: [] for tab in TAB_PLOTS}
            sizes: dict[str, list[int]] = {tab: [] for tab in TAB_PLOTS}
            full = []
            for r in range(args.repeats):
                page.click("#tab-tokens-button")
                wait_tab(page, "tokens")
                counter.reset()
                # a distinct text each repeat, so the server cache does not answer
                text = text_of(n - 1) + f" {WORDS[r % len(WORDS)]}"
                run_and_wait(page, text, n)
                wait_tab(page, "tokens", run=run_of(text))
                full.append(counter.reset())
                for tab in TAB_PLOTS:
                    if tab == "tokens":
                        continue
                    counter.reset()
                    start = time.perf_counter()
                    page.click(f"#tab-{tab}-button")
                    wait_tab(page, tab, timeout=60_000, run=run_of(text))
                    draws[tab].append(time.perf_counter() - start)
                    sizes[tab].append(counter.reset())
            print(
                f"\n{n} tokens: full analysis (Run -> Tokens tab drawn) received "
                f"{median(full) / 1e6:.3f} MB" + ("  budget 1 MB" if n == 128 else "")
            )
            budget = 1.0 if n <= 32 else 2.0 if n <= 128 else 5.0
            for tab in TAB_PLOTS:
                if tab == "tokens":
                    continue
                print(
                    f"  {tab:<11} click -> drawn {median(draws[tab]) * 1e3:7.0f} ms "
                    f"(budget {budget:.1f} s)  received {median(sizes[tab]) / 1e6:.3f} MB"
                )

        # layer/head switch at 128 tokens: slider input -> head figure shows the new head
        run_and_wait(page, text_of(128), 128)
        page.click("#tab-attention-button")
        wait_tab(page, "attention", run=run_of(text_of(128)))
        switches = []
        for i in range(1, 2 + 4 * args.repeats):
            switches.append(page.evaluate(SWITCH_JS, i % 12) / 1e3)
        print(
            f"\nhead switch at 128 tokens: median {median(switches) * 1e3:.0f} ms "
            f"(max {max(switches) * 1e3:.0f} ms, n={len(switches)})  budget 50 ms"
        )
        browser.close()


if __name__ == "__main__":
    main()
