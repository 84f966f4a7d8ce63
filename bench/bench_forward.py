"""Forward + full trace (ours) vs Hugging Face BertModel eager with attentions and hidden states;
and our forward pass without a trace vs BertModel with its fused attention (attn_implementation
"sdpa"), which is what a patched run, a circuit's run or a continuation costs.

Same bundled weights, same inputs, runs interleaved (ours, HF, ours, HF, ...) so both see the same
machine state; prints the load average, the median of each and the ratio ours / HF. Budget: ratio
<= 1.0 in both tables; the plain forward's outputs equal HF's within 1e-5.

    .venv/bin/python bench/bench_forward.py [--repeats 15] [--device cpu|cuda] [--shape large]
        [--lengths 16,128,512] [--only trace|forward] [--threads N]
"""

from __future__ import annotations

import argparse
import os
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


def interleaved(ours, theirs, repeats: int, sync) -> tuple[float, float]:
    """Median milliseconds of ours and theirs, run in turn after 3 warm-ups each."""
    for _ in range(3):
        ours()
        theirs()
    a, b = [], []
    for _ in range(repeats):
        a.append(timed(ours, sync))
        b.append(timed(theirs, sync))
    return statistics.median(a) * 1e3, statistics.median(b) * 1e3


# table -> (HF's attention implementation, title)
TABLES = {
    "trace": ("eager", "forward + full trace vs HF eager with attentions and hidden states"),
    "forward": ("sdpa", "forward without a trace vs HF sdpa (last hidden state)"),
}


def passes(kind: str, net, hf, ids: torch.Tensor, mask: torch.Tensor):
    """(ours, theirs) for one table, each returning the last hidden state [1, T, d_model]."""

    def ours():
        if kind == "trace":
            return net.trace(ids, attention_mask=mask).hidden_states["encoder"][:, -1]
        with torch.no_grad():
            return net(ids, attention_mask=mask)

    def theirs():
        with torch.no_grad():
            out = hf(
                input_ids=ids,
                attention_mask=mask,
                output_attentions=kind == "trace",
                output_hidden_states=kind == "trace",
            )
        return out.last_hidden_state

    return ours, theirs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lengths", default="16,128,512")
    parser.add_argument("--only", choices=("trace", "forward"), default=None)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's own)")
    parser.add_argument(
        "--shape", default="bundled", help="bundled, or base / large (random weights, shapes.py)"
    )
    args = parser.parse_args()
    if args.threads:  # on a crowded machine one thread each is steadier than two contending
        torch.set_num_threads(args.threads)

    from transformers import BertModel

    from bench.shapes import bundled_folder, make_checkpoint

    device = torch.device(args.device)
    folder = bundled_folder() if args.shape == "bundled" else make_checkpoint(args.shape)
    net, tok = load_bert(None if args.shape == "bundled" else folder, device=str(device))
    print(f"shape {args.shape}: {net.config.n_layers} layers x {net.config.n_heads} heads")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device {device}")
    print("load average at start: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    lengths = [int(x) for x in args.lengths.split(",")]
    texts = {}
    for n in lengths:
        ids = torch.randint(1000, 29000, (1, n), device=device)
        ids[0, 0], ids[0, -1] = tok.cls_token_id, tok.sep_token_id
        texts[n] = ids, torch.ones_like(ids)
    for kind, (implementation, title) in TABLES.items():
        if args.only not in (None, kind):
            continue
        hf = BertModel.from_pretrained(str(folder), attn_implementation=implementation)
        hf = hf.to(device).eval()
        print(f"\n{title}")
        print(f"{'tokens':>6} {'ours ms':>9} {'HF ms':>9} {'ratio':>6} {'max |diff|':>10}")
        for n, (ids, mask) in texts.items():
            ours, theirs = passes(kind, net, hf, ids, mask)
            diff = float((ours() - theirs()).abs().max())
            ma, mb = interleaved(ours, theirs, args.repeats, sync)
            print(f"{n:>6} {ma:>9.2f} {mb:>9.2f} {ma / mb:>6.2f} {diff:>10.1e}")
    print("load average at end: " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
