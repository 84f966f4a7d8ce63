"""A layer/head switch on the Attention tab: drawn in the browser vs asked of the server (issue 11).

Against `python app.py` in headless Debian Chromium, at 128 and 512 tokens of the bundled 6 × 12
BERT (with --sizes, also of BERT-base- and BERT-large-shaped checkpoints, chosen in the page as
"Custom BERT checkpoint"), side by side in one page:
  * keyboard (issue 34): a key press (→ or ←) on the focused Head slider -> the head figure shows
    the new head, from the keydown's own timestamp, three ways: until the next frame begins after
    the one that shows it (this bench's measure since issue 11), until the main thread has
    painted that frame, and the browser's own Event Timing of the keydown (to the paint after it,
    in 8 ms steps); beside them this machine's forward pass + trace of the same text
    (bench_forward.py's measure, in this process, before and after the key presses), their
    ratios (budget ≤ 1.0, and ≤ 35 ms at 128 tokens), and the floor of the three measures: the
    same key press on a page that only writes the slider's value in a line of text (the frame
    clock: at 60 frames a second, the next frame begins 8 ms after a key on average, and the one
    after it 17 ms later);
  * browser: the head slider's input event -> the head figure shows the new head, next frame
    painted (the switch data is already in the page: it came with the tab);
  * server: the same, with the browser's switch disabled (no DecompressionStream), so every switch
    is a request, as before issue 11;
  * bytes the page received for the Attention tab (figures + every head's switch data), and per
    output (a page that holds the switch data gets the head and compare figures without z).
Then the switch data's size, and how long the page takes to decode it (what the figures sent
without numbers wait for once per run), for the same text on BERT-base- and BERT-large-shaped
checkpoints (seeded random weights, bench/shapes.py; random weights attend nearly uniformly,
which compresses differently from trained ones). Budget (bench/README.md): switch ≤ 35 ms at 128
tokens, ≤ 150 ms at 512; a run's bytes ≤ 1 MB at 128 tokens.

    .venv/bin/python bench/bench_switch.py [--switches 12] [--sizes bundled,base,large]
                                           [--forward 15] [--no-shapes | --shapes-only]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_browser import SWITCH_JS, ByteCounter, run_and_wait, text_of  # noqa: E402
from engine import CUSTOM_PREFIX  # noqa: E402
from tests.apphost import CHROMIUM, CHROMIUM_ARGS, serve_app  # noqa: E402
from tests.test_e2e_browser import run_of, wait_tab  # noqa: E402

# Keeps the text of Gradio's event stream while window.__rxKeep is set (see per_output).
KEEP_STREAM_JS = """
(() => {
  window.__rxText = [];
  const dec = new TextDecoder();
  const read = ReadableStreamDefaultReader.prototype.read;
  ReadableStreamDefaultReader.prototype.read = function () {
    return read.call(this).then((r) => {
      if (window.__rxKeep && r && r.value != null) {
        window.__rxText.push(typeof r.value === 'string' ? r.value
                                                         : dec.decode(r.value, {stream: true}));
      }
      return r;
    });
  };
})();
"""
SERVER_ONLY = "() => { delete window.DecompressionStream; window.ta.fill = undefined; }"

# Armed before a key press on a focused slider: the keydown's time (the event's own timestamp,
# in performance.now()'s clock), and a promise of the milliseconds from it until READY holds in a
# frame's animation callbacks and then (raf) the next frame begins: the measure of this bench
# since issue 11; (paint) the main thread has laid out and painted that frame (a message posted
# from its animation callback runs after its rendering). The browser's own Event Timing entry of
# the keydown (duration: to the paint after it, in 8 ms steps) is kept by EVENT_TIMING_JS.
ARM_JS = """(h) => {
  window.__keyAt = null;
  document.addEventListener('keydown', (e) => { window.__keyAt = e.timeStamp; },
                            {capture: true, once: true});
  window.__painted = new Promise((resolve) => {
    const check = () => {
      if (window.__keyAt !== null && (READY)) {
        let paint = null;
        const channel = new MessageChannel();
        channel.port1.onmessage = () => { paint = performance.now() - window.__keyAt; };
        channel.port2.postMessage(0);
        requestAnimationFrame(() => resolve(
          {raf: performance.now() - window.__keyAt, paint, at: window.__keyAt}));
      } else {
        requestAnimationFrame(check);
      }
    };
    check();
  });
}"""
# The head figure shows head `h` (its title, and its cells' image).
KEY_ARM_JS = ARM_JS.replace(
    "READY",
    """(() => {
      const el = document.querySelector('#head-plot .js-plotly-plot');
      const title = el && el._fullLayout && el._fullLayout.title && el._fullLayout.title.text;
      return title && title.includes(`head ${h} `) && el.querySelector('.main-svg image');
    })()""",
)
EVENT_TIMING_JS = """() => {
  window.__events = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.name === 'keydown') window.__events.push({at: e.startTime, ms: e.duration});
    }
  }).observe({type: 'event', durationThreshold: 16});
}"""
# The floor of these measures in this browser: a page whose slider's input event writes its value
# in a line of text, nothing else.
FLOOR_HTML = """<input id=in type=range min=0 max=11 value=0><div id=out>0</div><script>
document.querySelector('#in').addEventListener('input', (e) => {
  document.querySelector('#out').textContent = e.target.value; });</script>"""
FLOOR_ARM_JS = ARM_JS.replace("READY", "document.querySelector('#out').textContent === String(h)")


def key_switches(
    page, n: int, direct: bool = True, slider: str = "#head input[type=range]", arm=KEY_ARM_JS
) -> list[dict]:
    """n switches by the keyboard: → on the focused slider (← back from the last head), each
    timed from its keydown (ARM_JS: raf, paint, and the browser's event timing, ms: None when its
    entry is below Event Timing's 16 ms threshold). direct=False leaves the draw to Gradio's event
    for the slider (ta.gate), as before the slider's own input event drew it
    (ui/js/head_switch.js, ta.directSwitch)."""
    page.evaluate(f"() => {{ window.ta && (window.ta.directSwitch = {str(direct).lower()}); }}")
    if page.evaluate("() => window.__events === undefined"):
        page.evaluate(EVENT_TIMING_JS)
    page.focus(slider)
    head, step, out = int(page.input_value(slider)), 1, []
    for i in range(n):
        if not 0 <= head + step <= 11:
            step = -step
        head += step
        page.evaluate(arm, head)
        page.keyboard.press("ArrowRight" if step > 0 else "ArrowLeft")
        out.append(page.evaluate("() => window.__painted"))
        page.wait_for_timeout(40 + 7 * (i % 5))  # keys at no fixed phase of the frame clock
    page.wait_for_timeout(200)  # the last entries are reported after their paint
    events = page.evaluate("() => window.__events.splice(0)")
    for key in out:
        near = [e["ms"] for e in events if abs(e["at"] - key["at"]) < 1]
        key["event"] = near[0] if near else None
    return out


def floor_switches(browser, n: int) -> list[dict]:
    """The same measures on FLOOR_HTML: what a key press costs a page that does nothing."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.set_content(FLOOR_HTML)
    try:
        return key_switches(page, n, slider="#in", arm=FLOOR_ARM_JS)
    finally:
        page.close()


def summary(keys: list[dict]) -> str:
    """The three measures of key_switches' switches: medians (p95)."""
    raf, paint = [k["raf"] for k in keys], [k["paint"] for k in keys if k["paint"] is not None]
    return (
        f"next frame begun {statistics.median(raf):.1f} ms (p95 {p95(raf):.0f}), frame painted "
        f"{statistics.median(paint):.1f} ms (p95 {p95(paint):.0f}), the browser's Event Timing "
        f"{event_median(keys)} (8 ms steps)"
    )


def event_median(keys: list[dict]) -> str:
    """The median Event Timing duration; an entry under its 16 ms threshold is not reported and
    counts as the shortest."""
    order = sorted(keys, key=lambda k: -1 if k["event"] is None else k["event"])
    middle = order[len(order) // 2]["event"]
    under = sum(k["event"] is None for k in keys)
    return f"{'< 16' if middle is None else f'{middle:.0f}'} ms ({under} of {len(keys)} under 16)"


@functools.cache
def bundled():
    from model import load_bert

    return load_bert(device="cpu")


def forward_ms(text: str, repeats: int, threads: int | None = None) -> list[float]:
    """This machine's forward pass + trace of the same text (bench_forward.py's measure), in
    this process: the bundled BERT on torch's default threads, as the app runs it (or on
    `threads`: on a loaded machine two threads wait for each other, one does not)."""
    import torch

    from bench.bench_forward import trace_ms

    net, tok = bundled()
    enc = tok([text], return_tensors="pt")
    default = torch.get_num_threads()
    torch.set_num_threads(threads or default)
    try:
        return trace_ms(net, enc["input_ids"], enc["attention_mask"], repeats)
    finally:
        torch.set_num_threads(default)


def load() -> str:
    import os

    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def output_name(value) -> str | None:
    """Which Attention output a streamed value is (by its content), or None."""
    if isinstance(value, dict) and isinstance(value.get("plot"), str):
        layout = json.loads(value["plot"])["layout"]
        title = layout.get("title", {}).get("text", "")
        meta = layout.get("meta") or {}
        how = "without z" if "fill" in meta else "packed" if "packed" in meta else "complete"
        for start, name in (
            ("Layer", "head figure"),
            ("All", "overview"),
            ("Two", "compare"),
            ("Attention block", "attention block"),
            ("Mixing ratio", "attention block"),
        ):
            if title.startswith(start):
                return f"{name} ({how})"
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    if isinstance(value, str) and value.startswith('{"layers"'):
        return "switch data"
    return None


def per_output(page) -> dict[str, int]:
    """Bytes of each Attention output in the stream kept since __rxKeep was set (its JSON)."""
    text = "".join(page.evaluate("() => window.__rxText.splice(0)"))
    sizes: dict[str, int] = {}
    decoder, at = json.JSONDecoder(), 0
    while (at := text.find("data:", at)) >= 0:  # "data: {…}" messages, not always on own lines
        try:
            msg, at = decoder.raw_decode(text, at + 5 + (text[at + 5 : at + 6] == " "))
        except json.JSONDecodeError:
            at += 5
            continue
        for value in (msg.get("output") or {}).get("data") or []:
            name = output_name(value)
            if name:
                sizes[name] = sizes.get(name, 0) + len(json.dumps(value).encode("utf-8"))
    return sizes


def switches(page, n: int, start: int) -> list[float]:
    return [page.evaluate(SWITCH_JS, (start + i) % 12) for i in range(n)]


def pick_checkpoint(page, folder: str) -> None:
    """Choose "Custom BERT checkpoint" in the model list and name the folder (as a user does)."""
    page.click("#model input")
    page.wait_for_selector("#model ul li")
    page.locator("#model ul li", has_text="Custom BERT checkpoint").click()
    page.fill("#checkpoint textarea, #checkpoint input", folder)


def browser_part(n_switches: int, sizes: list[str], forward_repeats: int = 15) -> None:
    from playwright.sync_api import sync_playwright

    folders: dict[str, str | None] = dict.fromkeys(sizes)
    if set(sizes) - {"bundled"}:
        from bench.shapes import make_checkpoint

        folders |= {size: str(make_checkpoint(size)) for size in sizes if size != "bundled"}
    with serve_app() as (url, _), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for size, n in ((size, n) for size in sizes for n in (128, 512)):
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            counter = ByteCounter(page)
            page.add_init_script(KEEP_STREAM_JS)
            page.goto(url)
            page.wait_for_selector("#token-chips .ta-chip")
            model = "bert"
            if folders[size]:
                pick_checkpoint(page, folders[size])
                model = CUSTOM_PREFIX + folders[size]
            text = text_of(n)
            run_and_wait(page, text, n)
            counter.reset()
            page.evaluate("() => { window.__rxKeep = true; window.__rxText = []; }")
            page.click("#tab-attention-button")
            wait_tab(page, "attention", timeout=60_000, run=run_of(text, model))
            page.wait_for_timeout(2500)  # the switch data is decoded once, after the figures
            received = counter.reset()
            page.evaluate("() => { window.__rxKeep = false; }")
            parts = ", ".join(f"{k} {v / 1e3:.0f} KB" for k, v in sorted(per_output(page).items()))
            print(f"{size}, {n} tokens, per output: {parts}", flush=True)
            before = forward_ms(text, forward_repeats) if size == "bundled" else []
            keys, gate_only = [], []  # blocks of each, interleaved: the same machine state
            for block in range(0, n_switches, 10):
                count = min(10, n_switches - block)
                keys += key_switches(page, count, direct=True)
                gate_only += key_switches(page, count, direct=False)
            after = forward_ms(text, forward_repeats) if size == "bundled" else []
            one = forward_ms(text, forward_repeats, threads=1) if size == "bundled" else []
            floor = floor_switches(browser, n_switches) if (size, n) == ("bundled", 128) else []
            fast = switches(page, n_switches, 1)
            page.evaluate(SERVER_ONLY)
            slow = switches(page, n_switches, 1)
            raf = [k["raf"] for k in keys]
            print(
                f"{size}, {n} tokens: Attention tab received {received / 1e6:.2f} MB; head switch "
                f"by the keyboard, from the keydown: {summary(keys)}; drawn by Gradio's event "
                f"alone, as before issue 34: {summary(gate_only)}; by the slider's input event "
                f"browser median {statistics.median(fast):.0f} ms (p95 {p95(fast):.0f}, max "
                f"{max(fast):.0f}) vs server median {statistics.median(slow):.0f} ms (p95 "
                f"{p95(slow):.0f}): {statistics.median(slow) / statistics.median(fast):.1f}× "
                f"faster; budget {35 if n == 128 else 150} ms (next frame begun); load {load()}",
                flush=True,
            )
            if floor:
                print(
                    f"the floor: the same key press on a page that only writes the slider's "
                    f"value in a line of text: {summary(floor)}",
                    flush=True,
                )
            if before:
                passes = statistics.median(before + after)
                paint = statistics.median(k["paint"] for k in keys if k["paint"] is not None)
                print(
                    f"{size}, {n} tokens: this machine's forward pass + trace of the same text "
                    f"(bench_forward.py's measure, {len(before + after)} passes around the "
                    f"switches) median {passes:.1f} ms (before {statistics.median(before):.1f}, "
                    f"after {statistics.median(after):.1f}); key switch / forward pass = "
                    f"{statistics.median(raf) / passes:.2f} to the next frame begun, "
                    f"{paint / passes:.2f} to the frame painted (budget ≤ 1.0"
                    f"{', and ≤ 35 ms' if n == 128 else ''}); on one thread the pass takes "
                    f"{statistics.median(one):.1f} ms",
                    flush=True,
                )
            page.close()
        browser.close()


# In a blank page with ui/js/fill.js's decoder: how long one payload takes to decode (what the head
# and compare figures sent without numbers wait for once per run). Each try gets a fresh id.
DECODE_JS = """async ([data, tries]) => {
  const times = [];
  for (let i = 0; i < tries; i++) {
    const d = JSON.parse(data); d.id = `${d.id}-${i}`;
    const t0 = performance.now();
    await window.ta.fill.add(JSON.stringify(d));
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(tries / 2)];
}"""


def decode_ms(payloads: list[str], tries: int = 5) -> list[float]:
    """Median milliseconds headless Chromium takes to decode each payload (ui/js/fill.js)."""
    from playwright.sync_api import sync_playwright

    from ui.js import source

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto("about:blank")
        page.add_script_tag(content=source("fill.js"))
        times = [page.evaluate(DECODE_JS, [data, tries]) for data in payloads]
        browser.close()
    return times


def payload_sizes() -> None:
    """The switch data per model shape at 128 and 512 tokens (computed here, as the server does)
    and how long the page takes to decode it."""
    from model import load_bert
    from viz.attention import head_switch_data

    shapes = {"bundled 6×12": None}
    try:
        from bench.shapes import make_checkpoint

        shapes.update({"BERT-base 12×12": "base", "BERT-large 24×16": "large"})
    except ImportError:
        make_checkpoint = None
    for label, shape in shapes.items():
        net, tok = load_bert(make_checkpoint(shape)) if shape else load_bert()
        payloads = []
        for n in (128, 512):
            enc = tok([text_of(n)], return_tensors="pt")
            trace = net.trace(enc["input_ids"], attention_mask=enc["attention_mask"])
            data = {**head_switch_data(trace, "encoder"), "id": label, "run": "r"}
            payloads.append(json.dumps(data))
            del trace
        del net
        sizes = [len(data) / 1e6 for data in payloads]
        ms = decode_ms(payloads)
        print(
            f"switch data, {label}: {sizes[0]:.2f} MB at 128 tokens (decoded in {ms[0]:.0f} ms), "
            f"{sizes[1]:.2f} MB at 512 ({ms[1]:.0f} ms)",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--switches", type=int, default=12)
    parser.add_argument(
        "--forward", type=int, default=15, help="forward passes timed before and after the keys"
    )
    parser.add_argument("--no-shapes", action="store_true", help="skip the switch-data sizes")
    parser.add_argument("--shapes-only", action="store_true", help="only the switch-data sizes")
    parser.add_argument(
        "--sizes", default="bundled", help="models to switch heads of: bundled,base,large"
    )
    args = parser.parse_args()
    if not args.shapes_only:
        print(f"load at start: {load()}", flush=True)
        browser_part(args.switches, args.sizes.split(","), args.forward)
    if not args.no_shapes:
        payload_sizes()


if __name__ == "__main__":
    main()
