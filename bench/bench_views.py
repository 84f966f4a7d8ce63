"""Every view at 512 tokens on the three model sizes, side by side (issue 11).

For the bundled MiniLM (6×12/384) and BERT-base- and BERT-large-shaped checkpoints (12×12/768,
24×16/1024; seeded random weights made locally by bench/shapes.py), in one process through the
app's own engine and renderer: the forward pass + trace, then each tab drawn from that trace the
first time (what a user waits for after the Run when opening it: computed fields such as Q/K/V
are replayed then) and a second time (from the cache), and the process's RSS after each size.
Budget (bench/README.md): every view ≤ 5 s at 512 tokens.

    .venv/bin/python bench/bench_views.py [--sizes bundled,base,large] [--tokens 512]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_browser import text_of  # noqa: E402
from bench.shapes import make_checkpoint  # noqa: E402
from engine import BUNDLED, CUSTOM_PREFIX, Engine  # noqa: E402
from ui.render import render  # noqa: E402
from ui.state import Selection  # noqa: E402
from ui.tabs import TABS  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="bundled,base,large")
    parser.add_argument("--tokens", type=int, default=512)
    args = parser.parse_args()
    engine = Engine(device="cpu")
    rows: dict[str, dict[str, str]] = {}
    sizes = args.sizes.split(",")
    for size in sizes:
        model = BUNDLED if size == "bundled" else CUSTOM_PREFIX + str(make_checkpoint(size))
        engine.model(model)  # loaded before timing
        text = text_of(args.tokens)
        start = time.perf_counter()
        analysis = engine.analyse(text, model)
        row = {"forward + trace": f"{time.perf_counter() - start:.2f}"}
        for tab in TABS:
            batch = engine.analyse(text, model, second="Dogs bark.") if tab.needs_batch else None
            times = []
            for _ in range(2):
                start = time.perf_counter()
                render(tab.id, analysis, Selection(), batch)
                times.append(time.perf_counter() - start)
            row[tab.id] = f"{times[0]:.2f} / {times[1]:.2f}"
        row["RSS after (MB)"] = f"{rss_mb():,.0f}"
        rows[size] = row
        print(size, row, flush=True)
    print(f"\n| {args.tokens} tokens, seconds (first / again) | " + " | ".join(sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name in rows[sizes[0]]:
        print(f"| {name} | " + " | ".join(rows[s][name] for s in sizes) + " |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the process: {peak:,.0f} MB (budget: every view ≤ 5 s)")


if __name__ == "__main__":
    main()
