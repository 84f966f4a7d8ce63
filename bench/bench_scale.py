"""Model sizes (issue 11): bundled MiniLM 6x12/384, BERT-base 12x12/768, BERT-large 24x16/1024.

Per size and length: our forward + trace vs HF BertModel eager with attentions and hidden states
(interleaved runs, medians, ratio; budget <= 1.0), the trace's bytes as stored and with every
computed field asked for, and how long the first access to the computed fields takes. Then, in
a fresh process, the server's RSS while 4 users analyse distinct 512-token texts at once on the
large shape through ``engine.Engine`` (its real trace cache), and what each user waits for when
they come back to their text (budgets: RSS <= 3 GB, every view <= 5 s). The base and large
checkpoints are made locally with random weights (bench/shapes.py). Prints the load average:
on a shared 2-core CPU it moves every figure.

    .venv/bin/python bench/bench_scale.py [--lengths 128,512] [--skip-rss] [--rss-only]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.shapes import bundled_folder, make_checkpoint  # noqa: E402
from model import load_bert  # noqa: E402

REPEATS = {"bundled": {128: 9, 512: 5}, "base": {128: 5, 512: 3}, "large": {128: 3, 512: 3}}
MB = 1e6


def folder_of(size: str) -> Path:
    return bundled_folder() if size == "bundled" else make_checkpoint(size)


def median_pair(ours, theirs, repeats: int) -> tuple[float, float]:
    ours(), theirs()  # warm-up
    a, b = [], []
    for _ in range(repeats):
        for fn, times in ((ours, a), (theirs, b)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return statistics.median(a), statistics.median(b)


def speed_and_bytes(sizes: list[str], lengths: list[int], repeats: int | None) -> None:
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
    head = f"{'model':>8} {'tokens':>6} {'ours s':>8} {'HF s':>8} {'ratio':>6}"
    print(head + f" {'trace MB':>9} {'all MB':>8} {'Q+K s':>6} {'rest s':>6}")
    fields_at = {size: measure(size, lengths, repeats) for size in sizes}
    print(f"\nbytes per field at {max(lengths)} tokens, MB (computed fields once asked for):")
    names = list(dict.fromkeys(k for f in fields_at.values() for k in f))
    print(f"{'field':>14} " + " ".join(f"{s:>8}" for s in fields_at))
    for name in names:
        cells = " ".join(f"{fields_at[s].get(name, 0) / MB:>8.1f}" for s in fields_at)
        print(f"{name:>14} {cells}")


def measure(size: str, lengths: list[int], repeats: int | None) -> dict[str, float]:
    """Print one row per length; return the bytes per field at the longest."""
    from transformers import BertModel

    folder = folder_of(size)
    net, tok = load_bert(None if size == "bundled" else folder, device="cpu")
    hf = BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    per_field: dict[str, float] = {}
    for n in lengths:
        ids = torch.randint(1000, 29000, (1, n))
        ids[0, 0], ids[0, -1] = tok.cls_token_id, tok.sep_token_id
        mask = torch.ones_like(ids)

        def ours(ids=ids, mask=mask):
            return net.trace(ids, attention_mask=mask)

        def theirs(ids=ids, mask=mask):
            with torch.no_grad():
                return hf(
                    input_ids=ids,
                    attention_mask=mask,
                    output_attentions=True,
                    output_hidden_states=True,
                )

        t_ours, t_hf = median_pair(ours, theirs, repeats or REPEATS[size][n])
        tr = ours()
        lean = tr.nbytes()
        stored = field_bytes(tr)
        start = time.perf_counter()
        tr.queries["encoder"], tr.keys["encoder"]  # what the Masks view's score steps read
        t_qk = time.perf_counter() - start
        start = time.perf_counter()
        tr.computed()  # V, attn_out, mlp_out: a whole-layer replay of every layer
        t_rest = time.perf_counter() - start
        print(
            f"{size:>8} {n:>6} {t_ours:>8.3f} {t_hf:>8.3f} {t_ours / t_hf:>6.2f}"
            f" {lean / MB:>9.1f} {tr.nbytes() / MB:>8.1f} {t_qk:>6.2f} {t_rest:>6.2f}",
            flush=True,
        )
        per_field = {**stored, **{k: v for k, v in field_bytes(tr).items() if k not in stored}}
        del tr
        gc.collect()
    return per_field


def field_bytes(tr) -> dict[str, float]:
    """Stored fields, and computed ones already computed (views of the hidden states: 0)."""
    hidden = {t.untyped_storage().data_ptr() for t in tr.hidden_states.values()}

    def size(value) -> int:
        if isinstance(value, torch.Tensor):
            shared = value.untyped_storage().data_ptr() in hidden and value.dim() < 4
            return 0 if shared else value.untyped_storage().nbytes()
        if isinstance(value, dict):
            return sum(size(v) for v in value.values())
        return 0

    found = {
        name: size(getattr(tr, name))
        for name in ("attentions", "hidden_states", "embeddings", "outputs", "masks")
    }
    for name, per_stack in tr._lazy.items():
        found[name] = size(per_stack)
    return found


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def user_text(i: int) -> str:
    """A distinct text of well over 512 tokens (the engine cuts it, as it would a user's)."""
    words = ["attention", "query", "key", "value", "layer", "head", "token", "residual", "norm"]
    return " ".join(f"user{i} {words[(i * 7 + j) % len(words)]} {j}" for j in range(400))


def four_users(users: int, slots: int) -> None:
    """Run in a fresh process: RSS and waits of `users` concurrent analyses on the large shape."""
    from engine import Engine

    model_id = "checkpoint:" + str(make_checkpoint("large"))
    base = rss_mb()
    eng = Engine(device="cpu")
    eng.model(model_id)
    loaded = rss_mb()
    peak = [loaded]
    done = threading.Event()

    def sample():
        while not done.wait(0.02):
            peak[0] = max(peak[0], rss_mb())

    gate = threading.Semaphore(slots or users)

    def visit(i: int, waits: list) -> None:
        start = time.perf_counter()
        with gate:
            eng.analyse(user_text(i), model_id)
        waits[i] = time.perf_counter() - start

    sampler = threading.Thread(target=sample)
    sampler.start()
    for label in ("first analysis (all at once)", "come back to the same text"):
        waits = [0.0] * users
        threads = [threading.Thread(target=visit, args=(i, waits)) for i in range(users)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"{label}: waits {', '.join(f'{w:.1f}' for w in waits)} s", flush=True)
    done.set()
    sampler.join()
    print(f"RSS: {base:.0f} MB at start, {loaded:.0f} MB with the large shape loaded,")
    print(f"     peak {peak[0]:.0f} MB with {users} users (budget 3,000 MB), {rss_mb():.0f} after")
    print(f"cache: {len(eng.cache)} traces, {eng.cache.nbytes() / MB:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--sizes", default="bundled,base,large")
    parser.add_argument("--repeats", type=int, help="runs per row (default: by size)")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument(
        "--slots", type=int, default=0, help="analyses at once (app.py's queue admits 2; 0 = all)"
    )
    parser.add_argument("--skip-rss", action="store_true")
    parser.add_argument("--rss-only", action="store_true", help="(the fresh process's part)")
    args = parser.parse_args()
    if args.rss_only:
        four_users(args.users, args.slots)
        return
    lengths = [int(n) for n in args.lengths.split(",")]
    speed_and_bytes(args.sizes.split(","), lengths, args.repeats)
    if not args.skip_rss:
        for slots in sorted({args.slots, 2}):
            at_once = f"{slots} analyses at a time" if slots else "all at once"
            print(f"\n{args.users} users on the large shape, 512 tokens each, {at_once}:")
            cmd = [sys.executable, __file__, "--rss-only", "--users", str(args.users)]
            subprocess.run([*cmd, "--slots", str(slots)], check=True)
    print(f"load average at the end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
