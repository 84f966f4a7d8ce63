"""Forward + full trace (ours) vs Hugging Face BertModel eager with attentions and hidden states.

Same bundled weights, same inputs, runs interleaved (ours, HF, ours, HF, ...) so both see the same
machine state; prints the median of each and the ratio ours / HF. Budget: ratio <= 1.0.

    .venv/bin/python bench/bench_forward.py [--repeats 15] [--device cpu|cuda] [--shape large]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model import load_bert  # noqa: E402


def timed(fn, sync) -> float:
    sync()
    start = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - start


def trace_ms(net, ids, mask, repeats: int = 15, sync=lambda: None) -> list[float]:
    """Milliseconds of each of `repeats` forward passes + full traces (after 3 warm-ups): what a
    Run costs the model, the machine's speed that other figures are read against."""
    for _ in range(3):
        net.trace(ids, attention_mask=mask)
    return [timed(lambda: net.trace(ids, attention_mask=mask), sync) * 1e3 for _ in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lengths", default="16,128,512")
    parser.add_argument(
        "--shape", default="bundled", help="bundled, or base / large (random weights, shapes.py)"
    )
    args = parser.parse_args()

    from transformers import BertModel

    from bench.shapes import bundled_folder, make_checkpoint

    device = torch.device(args.device)
    folder = bundled_folder() if args.shape == "bundled" else make_checkpoint(args.shape)
    net, tok = load_bert(None if args.shape == "bundled" else folder, device=str(device))
    hf = BertModel.from_pretrained(str(folder), attn_implementation="eager").to(device).eval()
    print(f"shape {args.shape}: {net.config.n_layers} layers x {net.config.n_heads} heads")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {device}")
    print(f"{'tokens':>6} {'ours ms':>9} {'HF ms':>9} {'ratio':>6}")
    for n in (int(x) for x in args.lengths.split(",")):
        ids = torch.randint(1000, 29000, (1, n), device=device)
        ids[0, 0], ids[0, -1] = tok.cls_token_id, tok.sep_token_id
        mask = torch.ones_like(ids)

        def ours(ids=ids, mask=mask):
            net.trace(ids, attention_mask=mask)

        def theirs(ids=ids, mask=mask):
            with torch.no_grad():
                hf(
                    input_ids=ids,
                    attention_mask=mask,
                    output_attentions=True,
                    output_hidden_states=True,
                )

        for _ in range(3):  # warm-up
            ours()
            theirs()
        a, b = [], []
        for _ in range(args.repeats):
            a.append(timed(ours, sync))
            b.append(timed(theirs, sync))
        ma, mb = statistics.median(a) * 1e3, statistics.median(b) * 1e3
        print(f"{n:>6} {ma:>9.2f} {mb:>9.2f} {ma / mb:>6.2f}")


if __name__ == "__main__":
    main()
