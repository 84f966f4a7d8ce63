"""Activation patching: the whole [L, H] head grid and [L, T] residual grid (issue 36).

Two models with seeded random weights at published shapes (no checkpoint needed: the time does not
depend on the values): a BERT-base shape (encoder, 12 layers x 12 heads, d_model 768, d_ff 3,072,
vocabulary 30,522; metric analysis.cosine_to at the last token) and a GPT-2-small shape (decoder,
the same widths, vocabulary 50,257, tied LM head; metric analysis.logit_diff at the last token).
A pair of --tokens tokens differing in three. Each grid is analysis.patch_heads /
patch_residual as a caller runs it, the clean and corrupt traces included; the figure is the
median of --repeats runs (and the fastest). Budget: <= 5 s per grid on the 2-core CPU. Prints
the load average before and after: on a shared machine it moves every figure.

With ``--device cuda`` the grids run on the GPU, and each is compared with the same grid on the
CPU (the largest difference of a share is printed).

    .venv/bin/python bench/bench_patching.py [--repeats 3] [--tokens 20] [--shapes bert,gpt2]
                                             [--device cpu|cuda]
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

import analysis  # noqa: E402
from model import Transformer, TransformerConfig  # noqa: E402

WIDTHS = {"d_model": 768, "n_heads": 12, "n_layers": 12, "d_ff": 3072, "dropout": 0.0}
SHAPES = {
    "bert": TransformerConfig(
        name="BERT-base shape", arch="encoder", vocab_size=30522, norm="post",
        activation="gelu", positions="learned", type_vocab_size=2, embedding_norm=True,
        layer_norm_eps=1e-12, **WIDTHS),
    "gpt2": TransformerConfig(
        name="GPT-2-small shape", arch="decoder", vocab_size=50257, max_len=1024, norm="pre",
        activation="gelu_tanh", positions="learned", lm_head=True, lm_head_bias=False,
        tie_lm_head=True, **WIDTHS),
}  # fmt: skip
BUDGET_S = 5.0


def pair(config: TransformerConfig, tokens: int) -> tuple[dict, dict]:
    """A clean text of random ids and a corrupt one with three of them changed."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, config.vocab_size, (1, tokens), generator=generator)
    corrupt = ids.clone()
    corrupt[0, 1:4] = torch.randint(1, config.vocab_size, (3,), generator=generator)
    mask = torch.ones_like(ids)
    return {"input_ids": ids, "attention_mask": mask}, {
        "input_ids": corrupt,
        "attention_mask": mask,
    }


def metric_for(net: Transformer, clean: dict, corrupt: dict):
    """cosine_to for an encoder; for a decoder logit_diff of the clean top token against the
    corrupt one."""
    if net.lm_head is None:
        return analysis.cosine_to(net.trace(**clean), position=-1)
    tops = [int(net.trace(**e, with_logits=True).logits[0, -1].argmax()) for e in (clean, corrupt)]
    answer, wrong = tops if tops[0] != tops[1] else (tops[0], (tops[0] + 1) % net.config.vocab_size)
    return analysis.logit_diff(answer, wrong)


def timed(fn, repeats: int, *args) -> tuple[float, float]:
    """(median, fastest) seconds of repeated runs of fn(*args)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--shapes", default="bert,gpt2")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        print(f"device {torch.cuda.get_device_name(device)}")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, load {os.getloadavg()}")
    print(f"{'shape':<20} {'grid':<16} {'median s':>9} {'fastest':>8}  budget {BUDGET_S} s")
    for name in args.shapes.split(","):
        cpu_net = Transformer(SHAPES[name]).eval()
        net = cpu_net if device.type == "cpu" else Transformer(SHAPES[name]).to(device).eval()
        if net is not cpu_net:
            net.load_state_dict(cpu_net.state_dict())
        on_cpu = pair(net.config, args.tokens)
        clean, corrupt = ({k: v.to(device) for k, v in e.items()} for e in on_cpu)
        metric = metric_for(net, clean, corrupt)
        cfg = net.config
        grids = {
            f"heads [{cfg.n_layers}, {cfg.n_heads}]": analysis.patch_heads,
            f"resid [{cfg.n_layers}, {args.tokens}]": analysis.patch_residual,
        }
        for grid, fn in grids.items():
            fn(net, clean, corrupt, metric)  # warm-up
            median, fastest = timed(fn, args.repeats, net, clean, corrupt, metric)
            verdict = "PASS" if median <= BUDGET_S else "OVER"
            line = f"{cfg.name:<20} {grid:<16} {median:>9.2f} {fastest:>8.2f}  {verdict}"
            if net is not cpu_net:  # the same grid on the CPU
                cpu_metric = metric_for(cpu_net, *on_cpu)
                gap = (fn(net, clean, corrupt, metric) - fn(cpu_net, *on_cpu, cpu_metric)).abs()
                line += f"  max |GPU − CPU| {float(gap.max()):.1e}"
            print(line)
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
