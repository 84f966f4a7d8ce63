"""`train.fit`: train a task's model from scratch by steps, reporting as it goes.

The same data and loss as `python -m train NAME`; the same model but for induction's, which is
smaller live (train/live.py holds the recipes). It trains the recipe's steps (or those asked for)
and stops sooner once the held-out score reaches the task's lesson, all under a time cap: on a
server at a load of 6-8 a training by seconds ended at 56 % copy accuracy, below its lesson, and
by steps the same model only comes later. Every second or so `on_progress` gets a Progress: step,
elapsed time, the losses, the latest held-out score against the lesson, and one head's attention
on a fixed probe text. Returning False from it, or setting `stop`, ends training early; the model
trained so far is returned either way, its tokenizer at ``.tokenizer`` and its card at ``.card``
(which says whether it reached its lesson, and why it ended).
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
from train.live import HEAD_SCORES, LIVE, LiveRecipe, time_cap
from train.progress import Progress, pick_head
from train.run import loss_curve
from train.tasks import TASKS

REPORT_EVERY = 1.0  # seconds between reports
FLOOR = 0.05  # a decaying learning rate ends at this share of its peak


def optimizer_for(net: nn.Module, lr: float) -> torch.optim.Optimizer:
    """AdamW as train.loop builds it: no weight decay on biases, norms and embeddings."""
    decay = [p for n, p in net.named_parameters() if p.dim() >= 2 and "emb" not in n]
    no_decay = [p for n, p in net.named_parameters() if p.dim() < 2 or "emb" in n]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)


def lr_now(recipe: LiveRecipe, step: int, steps: int) -> float:
    """Linear warm-up over recipe.warmup steps, then constant or falling to the last step: by
    step, not time, so that a busy server trains the same model as a quiet one."""
    if step <= recipe.warmup:
        return recipe.lr * step / recipe.warmup
    if not recipe.decay:
        return recipe.lr
    return recipe.lr * max(FLOOR, 1.0 - step / steps)


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
    """The card of a live run, as `python -m train` writes one; its score is the shipped card's
    measure on the shipped card's held-out set, and it says whether that reached the lesson."""
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
            "steps": run["steps"],  # asked for; "steps" below: made
            "seconds": run["seconds"],  # the time cap
            "until_lesson": run["until_lesson"],
            "seed": run["seed"],
            "batch_size": recipe.batch_size,
            "lr": recipe.lr,
            "warmup": recipe.warmup,
            "schedule": "linear by step" if recipe.decay else "constant",
            "optimizer": "AdamW",
            "data": f"made by train/{name}.py, seeded; no downloads",
            "positions": run["positions"],  # False: trained blind to order (its PE zeroed)
        },
        "steps": run["step"],
        "ended": run["ended"],  # "lesson", "steps", "time" (the cap) or "stopped"
        "stopped_early": run["ended"] == "stopped",
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
            "reached": run["score"] is not None and run["score"] >= recipe.lesson,
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


def live_model(name: str, seed: int, positions: bool) -> Transformer:
    """The task's model as it trains live: its recipe's shape, fresh from `seed`."""
    recipe = LIVE[name]
    tok = recipe.data.tokenizer()
    config = recipe.data.config(tok.vocab_size).replace(seed=seed, **dict(recipe.shape))
    if recipe.shape:
        shape = ", ".join(f"{k}={v}" for k, v in recipe.shape)
        config = config.replace(source=f"{config.source}; trained live at {shape}")
    net = Transformer(config, tok)
    if not positions:
        without_positions(net)
    return net


def ending(run: dict, start: float, stop: threading.Event | None) -> str:
    """Why training ends before its next step ("" when it goes on): its steps are done, it was
    stopped, or its time cap has run out (a busy server: the card then says so)."""
    if run["step"] >= run["steps"]:
        return "steps"
    if stop is not None and stop.is_set():
        return "stopped"
    if time.perf_counter() - start >= run["seconds"]:
        return "time"
    return ""


def check(name: str, net: Transformer, run: dict) -> bool:
    """Score the model on held-out data; True when it has reached its lesson and should stop.
    The quick score first; where it reaches the lesson, the card's measure must too."""
    recipe = LIVE[name]
    net.eval()
    run["score"] = recipe.score(net)
    if run["until_lesson"] and run["score"] >= recipe.lesson:
        run["score"], run["card_scored_at"] = recipe.card_score(net), run["step"]
    net.train()
    return (
        run["until_lesson"]
        and run.get("card_scored_at") == run["step"]
        and (run["score"] >= recipe.lesson)
    )


def fit(
    name: str,
    seconds: float | None = None,
    seed: int = 0,
    on_progress: Callable[[Progress], bool | None] | None = None,
    *,
    stop: threading.Event | None = None,
    positions: bool = True,
    steps: int | None = None,
    until_lesson: bool = True,
) -> Transformer:
    """Train task `name` ("dates", "induction" or "roles") from scratch for `steps` steps (the
    recipe's by default), sooner done once it reaches its lesson (``until_lesson``), at most
    `seconds` (default: train.live.time_cap, which a busy server still meets).

    Returns the model in eval mode with ``.tokenizer`` and ``.card``. ``on_progress(progress)``
    is called about every second and once at the end; returning False stops training early, as
    does setting ``stop``. ``positions=False`` trains without positional encoding (zeroed and
    frozen): the roles model then cannot tell 我喜欢你 from 你喜欢我, and its score shows it.
    """
    if name not in LIVE:
        raise ValueError(f"No task {name!r} to train; the tasks are {sorted(LIVE)}.")
    recipe = LIVE[name]
    steps = recipe.steps if steps is None else max(1, int(steps))
    seconds = time_cap(recipe, steps) if seconds is None else float(seconds)
    net = live_model(name, seed, positions)
    batches = recipe.data.batches(net.tokenizer, recipe.batch_size, seed)
    optimizer = optimizer_for(net, recipe.lr)
    run = {"seconds": seconds, "seed": seed, "step": 0, "losses": [], "score": None}
    run.update(steps=steps, until_lesson=bool(until_lesson), positions=bool(positions))
    run["ended"] = ""
    start = time.perf_counter()
    last_report = start

    def report(done: bool) -> bool:
        training = net.training
        net.eval()
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
            steps=steps,
            ended=run["ended"] if done else "",
            **shown,
        )
        return on_progress is None or on_progress(progress) is not False

    net.train()
    while not run["ended"]:
        run["ended"] = ending(run, start, stop)
        if run["ended"]:
            break
        run["step"] += 1
        for group in optimizer.param_groups:
            group["lr"] = lr_now(recipe, run["step"], steps)
        loss = recipe.data.loss(net, next(batches))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optimizer.step()
        run["losses"].append(loss.item())
        if run["step"] % recipe.check_every == 0 and check(name, net, run):
            run["ended"] = "lesson"
        elif time.perf_counter() - last_report >= REPORT_EVERY:
            if not report(done=False):
                run["ended"] = "stopped"
            last_report = time.perf_counter()
    net.eval()
    if run.get("card_scored_at") != run["step"]:
        run["score"] = recipe.card_score(net)  # the card's measure, as the shipped cards say it
    run["elapsed"] = time.perf_counter() - start
    tail = run["losses"][-50:]
    run["final_loss"] = sum(tail) / max(len(tail), 1)
    report(done=True)
    net.card = make_card(name, net, run)
    return net
