"""Train one task end to end: build, train, score the saved float16 weights, write the card."""

from __future__ import annotations

import dataclasses
import json
import platform
from pathlib import Path

import torch

from model.trained import TRAINED_DIR, build, load_weights, snapshot_path
from model.transformer import Transformer
from train.loop import train
from train.tasks import TASKS

MACHINE = "2-core CPU shared with other work, torch.set_num_threads(1)"


def loss_curve(losses: list[float], points: int = 50) -> list[list[float]]:
    """[step, mean loss of the window ending there], about `points` of them (for a chart)."""
    every = max(1, len(losses) // points)
    return [
        [end, float(f"{sum(losses[end - every : end]) / every:.4g}")]
        for end in range(every, len(losses) + 1, every)
    ]


def reproduce(
    name: str, out_dir: Path | None = None, steps: int | None = None, progress: bool = True
) -> dict:
    """Train task `name` from its seed and write snapshots + card.json into out_dir.

    Args:
        out_dir: default assets/trained/<name> (what model.load_trained reads).
        steps: train this many steps instead of the recipe's (snapshots: 0 and the last step).
    Returns:
        The card, as written.
    """
    torch.set_num_threads(1)  # leave the other core free; also what the card's wall time means
    task = TASKS[name]
    spec = task.spec
    if steps is not None:
        spec = dataclasses.replace(spec, steps=steps, snapshots=(0, steps))
    out_dir = Path(out_dir) if out_dir is not None else TRAINED_DIR / name
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("step_*.safetensors"):
        old.unlink()
    tok = task.data.tokenizer()
    net = Transformer(task.data.config(tok.vocab_size), tok)
    batches = task.data.batches(tok, spec.batch_size, spec.seed)
    result = train(net, batches, task.data.loss, spec, out_dir, progress, desc=name)
    card = {
        "name": name,
        "task": task.description,
        "task_zh": task.description_zh,
        "architecture": net.config.source,
        "config": net.config.to_dict(),
        "tokenizer": tok.to_dict(),
        "parameters": net.get_num_params(),
        "train": {
            **dataclasses.asdict(spec),
            "optimizer": "AdamW",
            "data": getattr(task.data, "DATA", f"made by train/{name}.py, seeded; no downloads"),
        },
        "steps": spec.steps,
        "wall_time_s": round(result["wall_time_s"], 1),
        "machine": MACHINE,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "final_loss": float(f"{result['final_loss']:.4g}"),
        "loss_curve": loss_curve(result["losses"]),
        "snapshots": result["snapshots"],
        "weights_dtype": "float16",
        "reproduce": f"python -m train {name}",
    }
    # Score what ships: the last float16 snapshot, loaded as load_trained will load it.
    shipped = load_weights(build(card), snapshot_path(out_dir, spec.steps))
    card["scores"] = task.data.evaluate(shipped)
    (out_dir / "card.json").write_text(
        json.dumps(card, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    return card


def rescore(name: str, out_dir: Path | None = None) -> dict:
    """Score the saved last snapshot again and rewrite card["scores"] (after the scoring code
    changed; the weights and the training record stay as they are)."""
    torch.set_num_threads(1)
    out_dir = Path(out_dir) if out_dir is not None else TRAINED_DIR / name
    path = out_dir / "card.json"
    card = json.loads(path.read_text(encoding="utf-8"))
    shipped = load_weights(build(card), snapshot_path(out_dir, card["snapshots"][-1]))
    card["scores"] = TASKS[name].data.evaluate(shipped)
    path.write_text(json.dumps(card, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return card
