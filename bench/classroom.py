"""A classroom at once (issue 13): N browsers open the app together and each runs its own text.

Each round starts `--users` Chromium pages at the same moment against one `python app.py`; every
page types its own sentence and clicks Run as soon as the button is there, then waits for its own
figures (the token chips carry the run id of the input they were drawn from). After a settling
time in which any late response would have arrived, it records per round:
  lost     pages whose text box or figures are no longer their own text's,
  crossed  pages showing another user's text or figures,
  p50/p95  seconds from the click to the page's own figures.
`--api-users` adds gradio_client sessions running 128-token texts in a loop during each round, to
keep the server busy. Budgets (issue 13): 0 lost and 0 crossed over 5 rounds of 8 browsers, p95 to
own figures ≤ 5 s.

    .venv/bin/python bench/classroom.py [--users 8] [--rounds 5] [--api-users 4] [--settle 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.apphost import CHROMIUM, CHROMIUM_ARGS, serve_app  # noqa: E402
from tests.test_api_client import connect, run  # noqa: E402
from ui.render import run_id  # noqa: E402

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "paper",
    "music",
    "garden",
    "window",
    "bridge",
    "candle",
]
CHIP_RUN = "() => document.querySelector('#token-chips .ta-run')?.dataset.run"
# Records when each finished result reaches the page (Gradio streams them over one fetch), so the
# click → figures time splits into the server's part (queue and work, until the result arrives)
# and the browser's (parsing and drawing it).
ARRIVALS = """(() => {
  window.__taArrived = [];
  const real = window.fetch;
  window.fetch = async (...args) => {
    const response = await real(...args);
    const url = String(args[0]?.url || args[0]);
    if (!url.includes('/queue/data') || !response.body) return response;
    const [mine, theirs] = response.body.tee();
    (async () => {
      const reader = mine.getReader(), dec = new TextDecoder();
      for (;;) {
        const {done, value} = await reader.read();
        if (done) break;
        const now = performance.now();
        for (const m of dec.decode(value).matchAll(/"msg": ?"(\\w+)"/g))
          window.__taArrived.push([m[1], now]);
      }
    })();
    return new Response(theirs, response);
  };
})()"""


def user_text(round_no: int, user: int) -> str:
    return f"student {user} of round {round_no} likes {WORDS[user % len(WORDS)]}"


def own_run(text: str) -> str:
    return run_id(("bert", (text,), None))


async def one_user(browser, url: str, text: str, start: asyncio.Event, settle: float) -> dict:
    context = await browser.new_context()
    page = await context.new_page()
    await page.add_init_script(ARRIVALS)
    await start.wait()
    await page.goto(url)
    await page.wait_for_selector("#run")
    await page.fill("#text textarea", text)
    clicked = time.perf_counter()
    click_ms = await page.evaluate("() => performance.now()")
    await page.click("#run")
    await page.wait_for_function(f"() => ({CHIP_RUN})() === '{own_run(text)}'", timeout=60_000)
    seconds = time.perf_counter() - clicked
    drawn_ms, arrived = await page.evaluate("() => [performance.now(), window.__taArrived]")
    after = [t for m, t in arrived if t >= click_ms and m == "process_completed"]
    server = (after[0] - click_ms) / 1e3 if after else float("nan")
    browser = (drawn_ms - after[0]) / 1e3 if after else float("nan")
    await asyncio.sleep(settle)  # anything late (a deep link, the page load) would land by now
    shown_text = await page.input_value("#text textarea")
    shown_run = await page.evaluate(CHIP_RUN)
    await context.close()
    return {
        "text": text,
        "seconds": seconds,
        "server": server,
        "browser": browser,
        "shown_text": shown_text,
        "shown_run": shown_run,
    }


def busy_clients(url: str, stop: threading.Event, n: int) -> list[threading.Thread]:
    """n gradio_client sessions running distinct 128-token texts until stopped."""

    def loop(k: int) -> None:
        client = connect(url)
        i = 0
        while not stop.is_set():
            run(client, " ".join(f"w{k}x{i}y{j}" for j in range(40)))
            i += 1
        client.close()

    threads = [threading.Thread(target=loop, args=(k,), daemon=True) for k in range(n)]
    for t in threads:
        t.start()
    return threads


async def classroom(url: str, users: int, rounds: int, api_users: int, settle: float) -> list:
    from playwright.async_api import async_playwright

    results = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for r in range(rounds):
            stop = threading.Event()
            threads = busy_clients(url, stop, api_users)
            start = asyncio.Event()
            texts = [user_text(r, u) for u in range(users)]
            tasks = [asyncio.create_task(one_user(browser, url, t, start, settle)) for t in texts]
            start.set()
            done = await asyncio.gather(*tasks)
            stop.set()
            for t in threads:
                t.join(timeout=60)
            others = {own_run(t) for t in texts}
            lost = sum(
                d["shown_text"] != d["text"] or d["shown_run"] != own_run(d["text"]) for d in done
            )
            crossed = sum(
                d["shown_run"] in others - {own_run(d["text"])}
                or (d["shown_text"] in texts and d["shown_text"] != d["text"])
                for d in done
            )
            for d in done:
                if d["shown_text"] != d["text"] or d["shown_run"] != own_run(d["text"]):
                    print(
                        f"  lost: typed {d['text']!r}, box {d['shown_text']!r}, "
                        f"figures of {d['shown_run']} (own {own_run(d['text'])})",
                        flush=True,
                    )
            secs = sorted(d["seconds"] for d in done)
            p95 = secs[min(len(secs) - 1, round(0.95 * (len(secs) - 1)))]
            results.append((r + 1, lost, crossed, statistics.median(secs), p95))
            server = statistics.median(d["server"] for d in done)
            drawing = statistics.median(d["browser"] for d in done)
            print(
                f"round {r + 1}: lost {lost}/{users}, crossed {crossed}/{users}, "
                f"click→own figures p50 {statistics.median(secs):.2f} s, p95 {p95:.2f} s "
                f"(median click→result arrived {server:.2f} s, arrived→drawn {drawing:.2f} s)",
                flush=True,
            )
        await browser.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--api-users", type=int, default=4)
    parser.add_argument("--settle", type=float, default=8.0)
    args = parser.parse_args()
    with serve_app() as (url, _):
        results = asyncio.run(classroom(url, args.users, args.rounds, args.api_users, args.settle))
    lost = sum(r[1] for r in results)
    crossed = sum(r[2] for r in results)
    worst_p95 = max(r[4] for r in results)
    print(
        f"total: lost {lost}, crossed {crossed} (budget 0, 0); worst p95 {worst_p95:.2f} s (≤ 5 s)"
    )


if __name__ == "__main__":
    main()
