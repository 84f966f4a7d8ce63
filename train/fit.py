"""`train.fit`: train a task's model from scratch for a few seconds, reporting as it goes.

The same data and loss as `python -m train NAME`, under a time budget instead of a step count;
the same model but for induction's, which is smaller live (train/live.py holds the recipes).
Every second or so `on_progress` gets a Progress: step, elapsed time, the losses, the latest
held-out score, and one head's attention on a fixed probe text. Returning False from it, or
setting `stop`, ends training early; the model trained so far is returned either way, its
tokenizer at ``.tokenizer`` and its card at ``.card``.
"""

from __future__ import annotations

import platform
import threading
import time
from collections.abc import Callable

import torch
from torch import nn

from model.embeddings import LearnedPositionalEmbedding, SinusoidalPositionalEncoding
from model.transformer import Transformer
from train.live import HEAD_SCORES, LIVE, LiveRecipe
from train.progress import Progress, pick_head
from train.run import loss_curve
from train.tasks import TASKS

REPORT_EVERY = 1.0  # seconds between reports
SCORE_EVERY = 5.0  # seconds between held-out scores (a score costs a forward pass or decoding)
FLOOR = 0.05  # a decaying learning rate ends at this share of its peak


def optimizer_for(net: nn.Module, lr: float) -> torch.optim.Optimizer:
    """AdamW as train.loop builds it: no weight decay on biases, norms and embeddings."""
    decay = [p for n, p in net.named_parameters() if p.dim() >= 2 and "emb" not in n]
    no_decay = [p for n, p in net.named_parameters() if p.dim() < 2 or "emb" in n]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)


def lr_now(recipe: LiveRecipe, step: int, elapsed: float, seconds: float) -> float:
    """Linear warm-up over recipe.warmup steps, then constant or falling with the time left."""
    if step <= recipe.warmup:
        return recipe.lr * step / recipe.warmup
    if not recipe.decay:
        return recipe.lr
    return recipe.lr * max(FLOOR, 1.0 - elapsed / seconds)


def probe_map(name: str, net: Transformer) -> dict:
    """The probe text's tokens and the chosen head's weights on it (one small traced pass)."""
    probe = LIVE[name].probe(net)
    trace = net.trace(*probe["args"], **probe["kw"])
    attn = trace.attentions[probe["stack"]][0]  # (L, H, T_q, T_k)
    score = HEAD_SCORES[name](attn, probe) if name in HEAD_SCORES else None
    layer, head = pick_head(attn, score)
    queries, keys = trace.tokens_for(probe["stack"])
    return {
        "stack": probe["stack"],
        "layer": layer,
        "head": head,
        "queries": queries[0],
        "keys": keys[0],
        "attention": attn[layer, head].clone(),
    }


def make_card(name: str, net: Transformer, run: dict) -> dict:
    """The card of a live run, as `python -m train` writes one; its score is the quick held-out
    one (the task's full evaluation, e.g. train.roles.evaluate(net), takes longer)."""
    recipe, task = LIVE[name], TASKS[name]
    return {
        "name": name,
        "task": task.description,
        "task_zh": task.description_zh,
        "architecture": net.config.source,
        "config": net.config.to_dict(),
        "tokenizer": net.tokenizer.to_dict(),
        "parameters": net.get_num_params(),
        "train": {
            "live": True,
            "seconds": run["seconds"],
            "seed": run["seed"],
            "batch_size": recipe.batch_size,
            "lr": recipe.lr,
            "warmup": recipe.warmup,
            "schedule": "linear by time" if recipe.decay else "constant",
            "optimizer": "AdamW",
            "data": f"made by train/{name}.py, seeded; no downloads",
            "positions": run["positions"],  # False: trained blind to order (its PE zeroed)
        },
        "steps": run["step"],
        "stopped_early": run["stopped"],
        "wall_time_s": round(run["elapsed"], 1),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "final_loss": float(f"{run['final_loss']:.4g}") if run["losses"] else None,
        "loss_curve": loss_curve(run["losses"]),
        "snapshots": [run["step"]],
        "weights_dtype": "float32",
        "scores": {
            "held_out": run["score"],
            "measures": recipe.score_name,
            "lesson": recipe.lesson,  # the score at which it teaches its lesson
        },
    }


def without_positions(net: Transformer) -> None:
    """Zero the model's positional encodings and keep them zero (frozen): trained so, the model
    never sees word order, in training and in every later use of its weights."""
    for module in net.modules():
        if isinstance(module, (LearnedPositionalEmbedding, SinusoidalPositionalEncoding)):
            for tensor in [*module.parameters(), *module.buffers()]:
                tensor.data.zero_()
                tensor.requires_grad_(False)


def fit(
    name: str,
    seconds: float = 60.0,
    seed: int = 0,
    on_progress: Callable[[Progress], bool | None] | None = None,
    *,
    stop: threading.Event | None = None,
    positions: bool = True,
) -> Transformer:
    """Train task `name` ("dates", "induction" or "roles") from scratch for `seconds`.

    Returns the model in eval mode with ``.tokenizer`` and ``.card``. ``on_progress(progress)``
    is called about every second and once at the end; returning False stops training early, as
    does setting ``stop``. ``positions=False`` trains without positional encoding (zeroed and
    frozen): the roles model then cannot tell 我喜欢你 from 你喜欢我, and its score shows it.
    """
    if name not in LIVE:
        raise ValueError(f"No task {name!r} to train; the tasks are {sorted(LIVE)}.")
    recipe = LIVE[name]
    tok = recipe.data.tokenizer()
    config = recipe.data.config(tok.vocab_size).replace(seed=seed, **dict(recipe.shape))
    if recipe.shape:
        shape = ", ".join(f"{k}={v}" for k, v in recipe.shape)
        config = config.replace(source=f"{config.source}; trained live at {shape}")
    net = Transformer(config, tok)
    if not positions:
        without_positions(net)
    batches = recipe.data.batches(tok, recipe.batch_size, seed)
    optimizer = optimizer_for(net, recipe.lr)
    run = {"seconds": seconds, "seed": seed, "step": 0, "losses": [], "score": None}
    run["positions"] = bool(positions)
    run["stopped"] = False
    start = time.perf_counter()
    last_report, last_score = start, start - SCORE_EVERY  # the first report scores

    def report(done: bool) -> bool:
        training = net.training
        net.eval()
        if done or time.perf_counter() - last_score >= SCORE_EVERY:
            run["score"] = recipe.score(net)
        shown = probe_map(name, net)
        net.train(training)
        progress = Progress(
            name=name,
            step=run["step"],
            elapsed=time.perf_counter() - start,
            seconds=seconds,
            losses=list(run["losses"]),
            score=run["score"],
            score_name=recipe.score_name,
            done=done,
            positions=bool(positions),
            lesson=recipe.lesson,
            **shown,
        )
        return on_progress is None or on_progress(progress) is not False

    net.train()
    while time.perf_counter() - start < seconds:
        if stop is not None and stop.is_set():
            run["stopped"] = True
            break
        run["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = lr_now(recipe, run["step"], time.perf_counter() - start, seconds)
        loss = recipe.data.loss(net, next(batches))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        run["losses"].append(loss.item())
        now = time.perf_counter()
        if now - last_report >= REPORT_EVERY:
            scored = now - last_score >= SCORE_EVERY
            if not report(done=False):
                run["stopped"] = True
                break
            last_report = time.perf_counter()
            last_score = last_report if scored else last_score
    run["elapsed"] = time.perf_counter() - start
    net.eval()
    tail = run["losses"][-50:]
    run["final_loss"] = sum(tail) / max(len(tail), 1)
    report(done=True)
    net.card = make_card(name, net, run)
    return net
