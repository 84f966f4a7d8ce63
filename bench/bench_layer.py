"""The Inside-a-layer tab in the browser: its first draw, and a step switch (issue 29).

Against `python app.py` in headless Debian Chromium, the bundled 6 × 12 BERT, at 128 (and 512)
tokens:
  * first draw: after a Run, a click on the tab -> its figure and every card drawn (the layer's
    steps computed from the cached trace, every step's figure for the token sent once); each
    round another text and another layer, so nothing is served from a cache of drawn views. On a
    page that has drawn a figure before (Plotly loaded: "warm", the budget's case), and on a page
    whose first figure this is ("cold": Gradio loads Plotly's 3.5 MB chunk on the way);
  * bytes the page received for the tab (figure, cards and the step switch's data);
  * step switch: the step slider's input event -> the figure shows the new step, its card is
    marked and the next frame is painted; the requests the page made meanwhile (none expected);
  * the same switch asked of the server (the browser's switch turned off), for comparison.
Budgets (bench/README.md): first draw ≤ 1 s at 128 tokens on the 2-core machine; a step switch
≤ 35 ms at 128 tokens with no request.

    .venv/bin/python bench/bench_layer.py [--rounds 5] [--switches 30] [--lengths 128,512]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_browser import WORDS, ByteCounter, run_and_wait  # noqa: E402
from tests.apphost import CHROMIUM, CHROMIUM_ARGS, serve_app  # noqa: E402

# The tab shows step n: the figure's meta, the marked card, a drawn plot.
SHOWS_JS = """(n) => {
  const gd = document.querySelector('#layer-step-plot .js-plotly-plot');
  const card = document.querySelector('#layer-cards .ta-step-chosen');
  return !!(gd && gd._fullLayout && gd.layout.meta && gd.layout.meta.step === n
    && card && card.dataset.step === String(n) && gd.querySelector('.main-svg'));
}"""
# Move the step slider as a user's click does (an input event on the range input) and time, in
# the page, until the figure and the cards show that step and the next frame is painted.
SWITCH_JS = f"""async (n) => {{
  const shows = {SHOWS_JS};
  const range = document.querySelector('#step input[type=range]');
  const t0 = performance.now();
  range.value = String(n);
  range.dispatchEvent(new Event('input', {{bubbles: true}}));
  await new Promise((resolve) => {{
    const check = () => (shows(n) ? requestAnimationFrame(() => resolve())
                                  : requestAnimationFrame(check));
    check();
  }});
  return performance.now() - t0;
}}"""
SERVER_ONLY = "() => { ta.switches.layer = async () => false; }"


def text_of(n_tokens: int, shift: int) -> str:
    """n_tokens tokens of the bundled tokenizer ([CLS], [SEP] included), another text per shift."""
    return " ".join(WORDS[(i + shift) % len(WORDS)] for i in range(n_tokens - 2))


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def warm(page) -> None:
    """Draw one small figure (the Hidden states tab) so the page has loaded Plotly, then back."""
    page.click("#tab-hidden-button")
    page.wait_for_selector("#tab-hidden .js-plotly-plot .main-svg", timeout=60_000)
    page.click("#tab-tokens-button")
    page.wait_for_timeout(300)


def first_draw(page, counter: ByteCounter, n_tokens: int, shift: int, layer: int):
    """Run a text, set the layer, click the tab: (seconds to drawn, bytes received)."""
    run_and_wait(page, text_of(n_tokens, shift), n_tokens)
    page.fill("#layer input[type=number]", str(layer))
    page.press("#layer input[type=number]", "Enter")
    page.wait_for_timeout(600)  # the layer change lands on the Tokens tab (nothing to draw)
    counter.reset()
    start = time.perf_counter()
    page.click("#tab-layer-button")
    page.wait_for_function(
        f"() => ({SHOWS_JS})(0) && document.querySelector('#layer-cards .ta-layer-head')"
        f".textContent.includes('Layer {layer},')",
        timeout=60_000,
    )
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => r()))")
    return time.perf_counter() - start, counter.reset()


def switches(page, n: int, n_steps: int) -> list[float]:
    order = [(7 * i + 3) % n_steps for i in range(1, n + 1)]
    return [page.evaluate(SWITCH_JS, s) for s in order]


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--switches", type=int, default=30)
    parser.add_argument("--lengths", default="128,512")
    args = parser.parse_args()
    with serve_app() as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for n_tokens in [int(x) for x in args.lengths.split(",")]:
            draws, cold, sizes = [], [], []
            for r in range(2 * args.rounds):
                page = browser.new_page(viewport={"width": 1280, "height": 1000})
                counter = ByteCounter(page)
                page.goto(url)
                page.wait_for_selector("#token-chips .ta-chip")
                if r % 2:
                    warm(page)
                shift = 1 + r + 100 * n_tokens
                seconds, received = first_draw(page, counter, n_tokens, shift, 1 + r % 5)
                (draws if r % 2 else cold).append(seconds)
                sizes.append(received)
                if r < 2 * args.rounds - 1:
                    page.close()
            n_steps = int(page.evaluate("document.querySelector('.ta-steps').dataset.steps"))
            asked: list[str] = []
            page.on("request", lambda q, asked=asked: asked.append(q.url))
            fast = switches(page, args.switches, n_steps)
            requests = len(asked)
            page.evaluate(SERVER_ONLY)
            slow = switches(page, max(5, args.switches // 3), n_steps)
            page.close()
            budget = " (budget 1 s)" if n_tokens == 128 else ""
            print(
                f"{n_tokens} tokens: first draw median {statistics.median(draws):.2f} s "
                f"(max {max(draws):.2f}, n={len(draws)}){budget}; on a cold page "
                f"{statistics.median(cold):.2f} s (max {max(cold):.2f}); tab received "
                f"{statistics.median(sizes) / 1e3:.0f} kB",
                flush=True,
            )
            print(
                f"{n_tokens} tokens: step switch in the browser median "
                f"{statistics.median(fast):.0f} ms (p95 {p95(fast):.0f}, max {max(fast):.0f}, "
                f"n={len(fast)}), {requests} requests; asked of the server median "
                f"{statistics.median(slow):.0f} ms (n={len(slow)})"
                + (" (budget 35 ms, no request)" if n_tokens == 128 else ""),
                flush=True,
            )
        browser.close()


if __name__ == "__main__":
    main()
