"""The registry's real language models (SmolLM2-135M, Gemma 3 270M) against issue 51's budgets.

Measured, each several times, with the load average printed beside them:

- cold load: ``load_lm(name)`` in a fresh Python process from the prepared checkpoint folder
  (imports included, as a server's first request for the model pays them). Budget ≤ 10 s.
- a 20-token Run on the page: the app's engine analyses a new text (no cache hit) and draws the
  Attention tab (``ui.render.render``), in process, a new text each round. Budget ≤ 1 s.
- a trace of a ~128-token paragraph: its bytes (``Trace.nbytes``). Budget < 300 MB.
- ``analysis.edge_attribution(steps=8)`` on each model's shipped indirect-object pair (SmolLM2's
  English one, 15 tokens, budget ≤ 3 s; Gemma 3's Chinese one, 15 tokens, whose heads each write
  their part of the norm after the attention) and one ``analysis.circuit`` of its 200 strongest
  edges (budget ≤ 3 s).

Forward + trace against transformers' eager model is bench/bench_lm.py ``--shape
smollm2-135m | gemma-3-270m``.

    .venv/bin/python bench/bench_real_lm.py [--models smollm2-135m,gemma-3-270m] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARAGRAPH = (
    "The Transformer reads every word of a sentence at once. Each layer lets every token look at "
    "every other token through attention, and each head learns its own pattern: some look at "
    "the previous word, some at the same word earlier, some at the start of the text. "
) * 2
WORDS = ["river", "stone", "cloud", "garden", "lamp", "window", "bridge", "paper", "candle"]


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cold_load(name: str, rounds: int) -> list[float]:
    """Seconds of a fresh process's import + load_lm(name), from the prepared folder."""
    code = (
        "import time; t = time.perf_counter(); from model import load_lm; "
        f"load_lm({name!r}); print(time.perf_counter() - t)"
    )
    found = []
    for _ in range(rounds):
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
        )
        found.append(float(out.stdout.strip().splitlines()[-1]))
    return found


def page_runs(eng, name: str, rounds: int) -> list[float]:
    """Seconds of a 20-token Run: a new text analysed and the Attention tab drawn."""
    from ui.render import render
    from ui.state import Selection

    found = []
    for i in range(rounds):
        words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(6))
        text = f"When Mary and John saw the {words}, John gave it to"
        start = time.perf_counter()
        run = eng.analyse(text, name)
        render("attention", run, Selection())
        found.append(time.perf_counter() - start)
    return found


def circuits(name: str, net, tok, rounds: int) -> tuple[list[float], list[float], int]:
    """Seconds of edge_attribution(steps=8) and of one circuit on the model's shipped pair."""
    import analysis
    from ui.patching_measures import PAIRS_BY_ID

    pair_id = {"smollm2-135m": "ioi-smollm2", "gemma-3-270m": "ioi-zh-gemma"}[name]
    shipped = PAIRS_BY_ID[pair_id]

    def pair(text):
        enc = tok(text, return_tensors="pt")
        return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}

    clean, corrupt = pair(shipped.clean), pair(shipped.corrupt)
    words = (shipped.answer, shipped.wrong)
    ids = [tok(w, add_special_tokens=False)["input_ids"][-1] for w in words]
    metric = analysis.logit_diff(*ids)
    edges_s, circuit_s, n = [], [], 0
    for _ in range(rounds):
        start = time.perf_counter()
        scores = analysis.edge_attribution(net, clean, corrupt, metric, steps=8)
        edges_s.append(time.perf_counter() - start)
        n = len(scores)
        keep = list(
            scores.reindex(scores["score"].abs().sort_values(ascending=False).index)
            .head(200)[["source", "target"]]
            .itertuples(index=False, name=None)
        )
        start = time.perf_counter()
        analysis.circuit(net, clean, corrupt, metric, keep)
        circuit_s.append(time.perf_counter() - start)
    return edges_s, circuit_s, n


def said(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} s (range {min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="smollm2-135m,gemma-3-270m")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from transformers.utils import logging

    logging.disable_progress_bar()
    from engine import Engine

    eng = Engine(device="cpu")
    for name in args.models.split(","):
        print(f"== {name}  (load average {load_average()})", flush=True)
        print(f"cold load in a fresh process: {said(cold_load(name, 3))}", flush=True)
        loaded = eng.model(name)
        eng.analyse("warm up the model and the page", name)
        runs = page_runs(eng, name, args.rounds)
        print(f"20-token Run + Attention tab: {said(runs)}", flush=True)
        run = eng.analyse(PARAGRAPH, name)
        tokens = run.trace.input_ids.shape[1]
        print(f"trace of {tokens} tokens: {run.trace.nbytes() / 2**20:.1f} MiB", flush=True)
        edges, circuit, n = circuits(name, loaded.net, loaded.tokenizer, 3)
        print(f"edge_attribution(steps=8), {n:,} edges: {said(edges)}", flush=True)
        print(f"circuit of the 200 strongest edges: {said(circuit)}", flush=True)
        print(f"load average at end: {load_average()}", flush=True)


if __name__ == "__main__":
    main()
