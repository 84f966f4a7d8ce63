"""A tab switch on a phone: from the tap on a tab to its figures painted, at 128 tokens (issue 34).

Against `python app.py` in headless Debian Chromium on a phone's screen (390 × 844, touch,
device scale 2), the bundled BERT. Each round runs a new 128-token text on the Tokens tab (so no
drawn view is reused: each tab is drawn from the cached trace, as a tab switch is), then taps
each tab with figures in turn. Timed in the page: from the tap's pointerdown on the tab button
until every figure of the tab shows that run's data, and the frame after is painted (the next
requestAnimationFrame); also when the tab's first figure was drawn (the server's answer has
arrived by then: the rest is the page drawing the others). A warm-up round is not counted (the
page's first figures). Prints each tab's median and range over the rounds and the load average
at start and end. Budget (bench/README.md): every tab ≤ 1 s (median) at 128 tokens.
--desktop times the same at 1280 × 1000 with a mouse, to tell a phone's own cost.

    .venv/bin/python bench/bench_phone_tabs.py [--rounds 5] [--tokens 128] [--lang en|zh-CN]
                                               [--desktop]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.first_draw import text_of  # noqa: E402
from tests.apphost import CHROMIUM, CHROMIUM_ARGS, serve_app  # noqa: E402

# Each tab with figures, and the figures its switch waits for (the Output tab of an encoder
# draws none: it is left out).
TABS = {
    "embeddings": ["embedding-plot", "position-table-plot", "position-curves-plot"],
    "attention": ["head-plot", "overview-plot", "compare-plot", "block-plot"],
    "layer": ["layer-step-plot"],
    "heads": ["distance-plot", "rollout-plot", "flow-plot"],
    "masks": ["padding-mask-plot", "causal-mask-plot", "score-steps-plot"],
    "hidden": ["norms-heatmap", "norms-lines"],
}
BUDGET_S = 1.0

# Armed before the tap: the tap's time (pointerdown on a tab button, in capture), and a promise
# of the milliseconds from it until every named figure shows `run` drawn, one frame later.
ARM_JS = """([ids, run]) => {
  window.__tapAt = null;
  document.addEventListener('pointerdown', (e) => {
    if (e.target.closest('#tabs [role=tab]')) window.__tapAt = performance.now();
  }, {capture: true, once: true});
  const one = (id) => {
    const el = document.querySelector(`#${id} .js-plotly-plot`);
    return el && el.offsetParent && el._fullLayout && el.layout?.meta?.run === run
      && el.querySelector('.main-svg');
  };
  let first = null;  /* the first figure of the tab drawn: the answer has arrived */
  window.__drawn = new Promise((resolve) => {
    const check = () => {
      if (window.__tapAt !== null && first === null && ids.some(one)) {
        first = performance.now() - window.__tapAt;
      }
      if (window.__tapAt !== null && ids.length && ids.every(one)) {
        requestAnimationFrame(() => resolve([performance.now() - window.__tapAt, first]));
      } else {
        requestAnimationFrame(check);
      }
    };
    check();
  });
}"""


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def tap(page, selector: str, touch: bool) -> None:
    """A finger's tap on a phone (a touch's pointerdown), a mouse click on a desktop."""
    target = page.locator(selector)
    target.tap() if touch else target.click()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--lang", default="en")
    parser.add_argument(
        "--desktop", action="store_true", help="1280x1000 and a mouse click instead (to compare)"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from tests.test_e2e_browser import run_of

    print(f"load at start: {load()}", flush=True)
    times: dict[str, list[float]] = {tab: [] for tab in TABS}
    firsts: dict[str, list[float]] = {tab: [] for tab in TABS}
    with serve_app() as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        phone = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True,
                 "device_scale_factor": 2}  # fmt: skip
        context = browser.new_context(
            **({"viewport": {"width": 1280, "height": 1000}} if args.desktop else phone)
        )
        page = context.new_page()
        page.goto(f"{url}?lang={args.lang}")
        page.wait_for_function("() => window.ta?.ready === true && !window.ta.opening")
        page.wait_for_selector("#token-chips .ta-chip", timeout=60_000)
        for r in range(args.rounds + 1):  # round 0 warms up
            text = text_of(1000 + r, args.tokens)
            tap(page, "#tabs [role=tab][data-tab-id=tokens]", not args.desktop)
            page.fill("#text textarea", text)
            tap(page, "#run", not args.desktop)
            run = run_of(text)
            page.wait_for_selector(
                f'#token-chips .ta-run[data-run="{run}"]', state="attached", timeout=60_000
            )
            said = page.inner_text("#status")
            assert f"{args.tokens} tokens" in said or f"{args.tokens} 个词元" in said, said
            for tab, ids in TABS.items():
                page.evaluate(ARM_JS, [ids, run])
                tap(page, f"#tabs [role=tab][data-tab-id={tab}]", not args.desktop)
                ms, first = page.evaluate("() => window.__drawn")
                if r:
                    times[tab].append(ms / 1e3)
                    firsts[tab].append(first / 1e3)
            print(f"round {r}{' (warm-up)' if not r else ''}: load {load()}", flush=True)
        browser.close()
    print(
        f"\n{args.tokens} tokens, {'1280x1000 mouse' if args.desktop else '390x844 touch'}, "
        f"{args.lang}, {args.rounds} rounds: tap -> painted"
    )
    worst = 0.0
    for tab, xs in times.items():
        med = statistics.median(xs)
        worst = max(worst, med)
        print(
            f"  {tab:<11} median {med:.3f} s  (range {min(xs):.3f}-{max(xs):.3f})  "
            f"{'PASS' if med <= BUDGET_S else 'FAIL'} (budget {BUDGET_S:.1f} s); its first "
            f"figure drawn at {statistics.median(firsts[tab]):.3f} s"
        )
    print(f"slowest median {worst:.3f} s; load at end: {load()}")


if __name__ == "__main__":
    main()
