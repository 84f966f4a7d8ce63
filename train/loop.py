"""The training loop of every task: seeded AdamW, a warm-up schedule, a progress bar, snapshots.

Warm-up follows the paper (Vaswani et al. 2017, §5.3) and seed 004's note that post-norm models
need it to train: the learning rate rises linearly for `warmup` steps, then decays.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from model.trained import save_weights

Batch = dict[str, torch.Tensor]


@dataclass(frozen=True)
class TrainSpec:
    """How one model is trained; recorded on its card."""

    steps: int
    batch_size: int
    lr: float  # peak learning rate, reached at the end of warm-up
    warmup: int
    schedule: str = "noam"  # after warm-up: "noam" ∝ 1/√step, "linear" -> 0, "constant"
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)  # the paper's β2 = 0.98
    clip: float = 1.0  # gradient-norm clipping
    snapshots: tuple[int, ...] = ()  # steps whose weights are saved (0 = the random start)
    seed: int = 0


def lr_factor(step: int, spec: TrainSpec) -> float:
    """Multiplier of spec.lr at a 1-based step; both schedules peak at 1.0 when step = warmup.

    "noam" is the paper's d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), rescaled so that its
    peak is spec.lr; "linear" decays linearly to zero at the last step; "constant" stays at the
    peak (for induction heads, whose sudden forming needs a learning rate that has not decayed).
    """
    if step <= spec.warmup:
        return step / max(spec.warmup, 1)
    if spec.schedule == "noam":
        return math.sqrt(spec.warmup / step)
    if spec.schedule == "constant":
        return 1.0
    return max(0.0, (spec.steps - step) / max(spec.steps - spec.warmup, 1))


def train(
    net: nn.Module,
    batches: Iterable[Batch],
    loss_fn: Callable[[nn.Module, Batch], torch.Tensor],
    spec: TrainSpec,
    out_dir: Path | None = None,
    progress: bool = True,
    desc: str = "train",
) -> dict:
    """Train net in place for spec.steps batches; save snapshots as float16 safetensors in out_dir.

    Returns {"losses": per-step losses, "wall_time_s": seconds spent (snapshots excluded),
    "final_loss": mean loss of the last 50 steps, "snapshots": steps saved}.
    """
    if spec.schedule not in ("noam", "linear", "constant"):
        raise ValueError(f"schedule must be 'noam', 'linear' or 'constant', not {spec.schedule!r}.")
    torch.manual_seed(spec.seed)
    decay = [p for n, p in net.named_parameters() if p.dim() >= 2 and "emb" not in n]
    no_decay = [p for n, p in net.named_parameters() if p.dim() < 2 or "emb" in n]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay}],
        lr=spec.lr,
        betas=spec.betas,
        weight_decay=0.0,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: lr_factor(i + 1, spec)
    )  # LambdaLR counts from 0; our steps count from 1
    saved: list[int] = []

    def snapshot(step: int) -> None:
        if out_dir is not None and step in spec.snapshots:
            save_weights(net, Path(out_dir) / f"step_{step:05d}.safetensors")
            saved.append(step)

    losses: list[float] = []
    snapshot(0)
    net.train()
    start = time.perf_counter()
    bar = tqdm(total=spec.steps, desc=desc, disable=not progress, mininterval=1.0)
    for step, batch in zip(range(1, spec.steps + 1), batches, strict=False):
        loss = loss_fn(net, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), spec.clip)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        bar.update(1)
        if step % 50 == 0 or step == spec.steps:
            bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.4f}")
        if step in spec.snapshots:
            paused = time.perf_counter()
            net.eval()
            snapshot(step)
            net.train()
            start += time.perf_counter() - paused  # saving is not training time
    bar.close()
    wall = time.perf_counter() - start
    net.eval()
    tail = losses[-50:]
    return {
        "losses": losses,
        "wall_time_s": wall,
        "final_loss": sum(tail) / max(len(tail), 1),
        "snapshots": saved,
    }
