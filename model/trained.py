"""The trained models shipped in assets/trained/<name>/: cards, weights, snapshots (issue 7).

Each folder holds card.json (task, config, tokenizer alphabet, training recipe, scores, the
command that reproduces it) and step_NNNNN.safetensors snapshots in float16; the last snapshot is
the trained model. `python -m train <name>` writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from model.config import TransformerConfig
from model.tokenizers import VocabTokenizer
from model.transformer import Transformer

TRAINED_DIR = Path(__file__).resolve().parent.parent / "assets" / "trained"
OTHER = "other"  # the token label of words that play no role (spaces, punctuation)


def read_cards(root: Path = TRAINED_DIR) -> dict[str, dict]:
    """name -> card, for every assets/trained/<name>/card.json."""
    cards = {}
    for path in sorted(root.glob("*/card.json")):
        cards[path.parent.name] = json.loads(path.read_text(encoding="utf-8"))
    return cards


TRAINED: dict[str, dict] = read_cards()


def snapshot_path(folder: Path, step: int) -> Path:
    return folder / f"step_{step:05d}.safetensors"


def save_weights(net: nn.Module, path: Path) -> None:
    """The state dict as float16 safetensors (the sinusoidal table is a buffer, not saved)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        k: v.detach().to(torch.float16).contiguous().cpu() for k, v in net.state_dict().items()
    }
    save_file(state, str(path), metadata={"format": "pt"})
    path.chmod(0o644)  # safetensors writes 0600; shipped files are read by whoever serves them


def load_weights(net: Transformer, path: Path) -> Transformer:
    """Fill net from a snapshot (float16 on disk -> the model's float32), strictly; eval mode."""
    net.load_state_dict(load_file(str(path)), strict=True)
    return net.eval()


def build(card: dict) -> Transformer:
    """The card's architecture with its tokenizer, random weights (config.seed)."""
    tokenizer = VocabTokenizer(**card["tokenizer"])
    config = TransformerConfig(**card["config"])
    if config.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"{card['name']}: config has {config.vocab_size} tokens, its tokenizer "
            f"{tokenizer.vocab_size}."
        )
    return Transformer(config, tokenizer)


def load_trained(name: str, step: int | None = None) -> Transformer:
    """A shipped trained model in eval mode, its tokenizer at ``net.tokenizer``.

    Args:
        name: "dates", "induction" or "roles" (the keys of model.TRAINED).
        step: a training snapshot (card["snapshots"]); None = the trained model (the last one).
    """
    if name not in TRAINED:
        raise ValueError(f"No trained model {name!r}; the trained models are {sorted(TRAINED)}.")
    card = TRAINED[name]
    steps = card["snapshots"]
    step = steps[-1] if step is None else step
    if step not in steps:
        raise ValueError(f"{name} has snapshots at steps {steps}, not at step {step}.")
    return load_weights(build(card), snapshot_path(TRAINED_DIR / name, step))


def predict_roles(net: Transformer, text: str, positions: bool = True) -> dict:
    """Who did what to whom, read from a token tagger: {"agent", "action", "patient": text, ...}.

    Also returns "tokens", "labels" (one per character) and "confidence" (each token's top
    probability), so a view can colour the sentence. positions=False asks the same weights
    without positional encoding.
    """
    labels = net.config.token_labels
    if not labels:
        raise ValueError(f"{net.config.name} has no token classifier: it cannot tag roles.")
    enc = net.tokenizer([text])
    with torch.no_grad():
        logits = net(enc["input_ids"], enc["attention_mask"], positions=positions)  # (1, T, n)
    probs = torch.softmax(logits[0].float(), dim=-1)  # (T, n_labels)
    confidence, best = probs.max(dim=-1)
    tokens = net.tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    tags = [labels[i] for i in best.tolist()]
    answer: dict = {}
    for label in labels:
        if label == OTHER:
            continue
        runs, run = [], ""
        for token, tag in zip(tokens, tags, strict=True):
            if tag == label:
                run += token
            elif run:
                runs.append(run.strip())
                run = ""
        if run:
            runs.append(run.strip())
        answer[label] = " ".join(runs)
    answer.update(tokens=tokens, labels=tags, confidence=confidence.tolist())
    return answer
